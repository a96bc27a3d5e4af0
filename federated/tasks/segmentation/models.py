"""Segmentation networks: a class score per pixel, and MOON's representation beside it.

Every segmentation model is a :class:`SegmentationModel`, so the engine sees what it sees
of every model, a :class:`~federated.models.fedcon.ModelOutput`:

* ``logits``: per-pixel class scores ``(B, C, H, W)`` at the input's size (a network that
  predicts at a coarser stride is upsampled bilinearly, as torchvision's own forward does);
* ``features``: the encoder's deepest feature map, global-average-pooled, ``(B, F)``;
* ``projection``: ``features`` through MOON's projection head (Linear(F, F), ReLU,
  Linear(F, out_dim), as :class:`~federated.models.fedcon.FedConModel`'s): the
  representation MOON's contrastive term and l2rep compare; ``features`` itself without
  the head.

Its parts carry fedsweep's stage names, so the rules written in them apply unchanged:
``encoder.*`` the body (images to feature maps), ``classifier.*`` the dense head (feature
maps to per-pixel scores: the decoder), ``head.*`` MOON's projection head.  FedPer's
default ``personal_layers=head,classifier`` keeps the decoder at each party, LG-FedAvg's
``encoder`` the body; a pretrained start (``init``) is a state-dict file of the same
model, whose ``classifier`` may have another class count (it then stays fresh).

The models (:data:`SEGMENTATION_MODELS`):

* ``unet-tiny``: a three-level U-Net for laptop speed on 2 CPU cores: 3x3 convolutions
  with BatchNorm and ReLU, C -> 16 (full size) -> 32 (1/2) -> 64 (1/4), then two
  upsampling steps, each concatenating the encoder's map of that size (16 + 32 + 64 + 32 +
  16 channels), and a 1x1 convolution to the classes; 58 k parameters (+ 21 k of MOON's
  head at the default ``out_dim`` 256);
* ``lraspp-mobilenet-v3``, ``deeplabv3-mobilenet-v3``, ``fcn-resnet50``: torchvision's
  ``lraspp_mobilenet_v3_large``, ``deeplabv3_mobilenet_v3_large`` and ``fcn_resnet50``
  (RGB images only), built with ``weights=None, weights_backbone=None`` (their builders
  would otherwise download ImageNet or COCO weights; nothing is downloaded) and without
  the auxiliary head.  Their BatchNorm layers are trainable (``batchnorm`` rule: averaged
  or kept local, FedBN); DeepLabV3's image-pooling branch needs at least 2 images per
  training batch (a BatchNorm over one value per channel).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from federated.data.catalog import DatasetSpec
from federated.models.family import ModelFamily
from federated.models.fedcon import ModelOutput, projection_head_of
from federated.models.import_path import ModelError

# the small U-Net's channels per level (full size, 1/2, 1/4)
TINY_LEVELS = (16, 32, 64)


def _conv_block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


def _upsampled(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``x`` resized (bilinear) to ``like``'s height and width."""
    return F.interpolate(x, size=like.shape[-2:], mode="bilinear", align_corners=False)


class SegmentationModel(nn.Module, ABC):
    """An encoder, a dense head (``classifier``) and MOON's projection head (module
    docstring); subclasses say which encoder map is the deepest and how the head reads
    the encoder's maps."""

    def __init__(
        self,
        encoder: nn.Module,
        classifier: nn.Module,
        feature_dim: int,
        out_dim: int,
        projection_head: bool,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.classifier = classifier
        self.head = projection_head_of(feature_dim, out_dim, projection_head)

    @abstractmethod
    def top(self, levels: Any) -> torch.Tensor:
        """The deepest of the encoder's maps ``levels``, (B, F, h, w)."""

    @abstractmethod
    def decode(self, levels: Any) -> torch.Tensor:
        """Per-pixel class scores (B, classes, h, w) from the encoder's maps, at the
        dense head's own stride."""

    def pooled(self, levels: Any) -> torch.Tensor:
        """``features``: the deepest map, global-average-pooled, (B, F)."""
        return F.adaptive_avg_pool2d(self.top(levels), 1).flatten(1)

    def forward(self, x: torch.Tensor) -> ModelOutput:
        """``x``: normalised images (B, C, H, W) -> features (B, F), projection
        (B, out_dim), logits (B, classes, H, W)."""
        levels = self.encoder(x)
        h = self.pooled(levels)
        z = self.head(h)
        logits = self.decode(levels)
        if logits.shape[-2:] != x.shape[-2:]:
            logits = _upsampled(logits, x)
        if self.training:
            # 0·z: the projection head reaches the objective, so every parameter has a
            # gradient (zero when the method does not read z); FedProx, FedDyn and
            # SCAFFOLD add their terms to every parameter's gradient
            logits = logits + 0.0 * z.sum()
        return ModelOutput(h, z, logits)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """z only (MOON's frozen global and previous models): the encoder alone, no
        decoder, then the pooled deepest map through the projection head."""
        return self.head(self.pooled(self.encoder(x)))


class TinyEncoder(nn.Module):
    """Three levels: full size, 1/2 (a stride-2 convolution), 1/4."""

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        c1, c2, c3 = TINY_LEVELS
        self.level1 = _conv_block(in_channels, c1)
        self.level2 = _conv_block(c1, c2, stride=2)
        self.level3 = _conv_block(c2, c3, stride=2)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        f1 = self.level1(x)
        f2 = self.level2(f1)
        return [f1, f2, self.level3(f2)]


class TinyDecoder(nn.Module):
    """Upsample, concatenate the encoder's map of that size, convolve; twice; then a 1x1
    convolution to one score per class."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        c1, c2, c3 = TINY_LEVELS
        self.up2 = _conv_block(c3 + c2, c2)
        self.up1 = _conv_block(c2 + c1, c1)
        self.out = nn.Conv2d(c1, classes, 1)

    def forward(self, levels: Sequence[torch.Tensor]) -> torch.Tensor:
        f1, f2, f3 = levels
        x = self.up2(torch.cat([_upsampled(f3, f2), f2], dim=1))
        x = self.up1(torch.cat([_upsampled(x, f1), f1], dim=1))
        return self.out(x)


class TinyUNet(SegmentationModel):
    """``unet-tiny`` (module docstring)."""

    def __init__(
        self, spec: DatasetSpec, classes: int, out_dim: int, projection_head: bool
    ) -> None:
        super().__init__(
            TinyEncoder(spec.channels), TinyDecoder(classes), TINY_LEVELS[-1], out_dim,
            projection_head,
        )  # fmt: skip

    def top(self, levels: Sequence[torch.Tensor]) -> torch.Tensor:
        return levels[-1]

    def decode(self, levels: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.classifier(levels)


class TorchvisionSegmenter(SegmentationModel):
    """One of torchvision's segmentation networks, its ``backbone`` as the encoder and
    its ``classifier`` as the dense head; the forward is torchvision's own (the head on
    the backbone's maps, upsampled to the input)."""

    def __init__(
        self,
        net: nn.Module,
        spec: DatasetSpec,
        top_key: str,
        whole_levels: bool,
        out_dim: int,
        projection_head: bool,
    ) -> None:
        feature_dim = self._feature_dim(net.backbone, spec, top_key)
        super().__init__(net.backbone, net.classifier, feature_dim, out_dim, projection_head)
        self.top_key = top_key
        # LR-ASPP's head reads two maps ("low", "high"); DeepLabV3's and FCN's one ("out")
        self.whole_levels = whole_levels

    @staticmethod
    def _feature_dim(backbone: nn.Module, spec: DatasetSpec, top_key: str) -> int:
        """Channels of the backbone's deepest map, measured on one blank image (eval
        mode, no gradients: it draws no random numbers and changes no statistics)."""
        was_training = backbone.training
        backbone.eval()
        with torch.no_grad():
            levels = backbone(torch.zeros(1, *spec.shape))
        backbone.train(was_training)
        return int(levels[top_key].shape[1])

    def top(self, levels: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return levels[self.top_key]

    def decode(self, levels: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.classifier(levels if self.whole_levels else levels["out"])


def _torchvision(
    builder: str, top_key: str, whole_levels: bool
) -> Callable[[DatasetSpec, int, int, bool], SegmentationModel]:
    """A builder of torchvision's segmentation network ``builder`` without downloaded
    weights (module docstring)."""

    def build(
        spec: DatasetSpec, classes: int, out_dim: int, projection_head: bool
    ) -> SegmentationModel:
        import torchvision.models.segmentation as segmentation

        if spec.channels != 3:
            raise ModelError(
                builder, f"needs RGB images (3 channels); {spec.name} has {spec.channels}"
            )
        net = getattr(segmentation, builder)(
            weights=None, weights_backbone=None, num_classes=classes, aux_loss=False
        )
        return TorchvisionSegmenter(net, spec, top_key, whole_levels, out_dim, projection_head)

    return build


#: name -> builder(spec, classes, out_dim, projection_head) of a segmentation network
SEGMENTATION_MODELS: dict[str, Callable[[DatasetSpec, int, int, bool], SegmentationModel]] = {
    # the default for segmentation data: trains at laptop speed on 2 CPU cores
    "unet-tiny": TinyUNet,
    "lraspp-mobilenet-v3": _torchvision("lraspp_mobilenet_v3_large", "high", True),
    "deeplabv3-mobilenet-v3": _torchvision("deeplabv3_mobilenet_v3_large", "out", False),
    "fcn-resnet50": _torchvision("fcn_resnet50", "out", False),
}


def build_segmenter(
    name: str, spec: DatasetSpec, classes: int, out_dim: int, projection_head: bool
) -> SegmentationModel:
    """A freshly initialised segmentation network ``name`` (:data:`SEGMENTATION_MODELS`)
    scoring ``classes`` classes per pixel of images of ``spec`` (uses torch's RNG)."""
    return SEGMENTATION_MODELS[name](spec, classes, out_dim, projection_head)


#: segmentation's family (:attr:`federated.tasks.segmentation.task.Segmentation.model_family`)
SEGMENTERS = ModelFamily("a segmentation network", SEGMENTATION_MODELS, build_segmenter)
