"""Object detectors as fedsweep models: torchvision's detectors and a small FCOS.

:class:`DetectionModel` wraps one torchvision detector (``detector``) so that the engine
sees what it sees of every model, a :class:`~federated.models.fedcon.ModelOutput`:

* ``logits``: in training mode (given targets) the detector's own loss components, a
  1-D tensor in the order of their names (Faster R-CNN: ``loss_box_reg``,
  ``loss_classifier``, ``loss_objectness``, ``loss_rpn_box_reg``); the detection task's
  loss is their sum.  In evaluation mode, the detections: one ``{"boxes", "labels",
  "scores"}`` dict per image, boxes in the input's pixels, labels 0..C-1;
* ``features``: the backbone's top feature map (its last level: FPN's ``pool``, the
  small FCOS's stride-16 map), global-average-pooled, (B, F);
* ``projection``: ``features`` through MOON's projection head (Linear(F, F), ReLU,
  Linear(F, out_dim), as :class:`~federated.models.fedcon.FedConModel`'s), the
  representation MOON's contrastive term and l2rep read; ``features`` itself without
  the head.

The wrapper speaks the data's class indices 0..C-1; torchvision's detectors reserve
class 0 for the background, so it adds 1 to the targets' labels and takes 1 from the
detections'.  Images arrive normalised by the run's augmenter (the data set's mean and
std); the detector's own transform is set not to normalise again (mean 0, std 1) and, for
the detectors that resize, to keep the data's size (``min_size``/``max_size`` from the
image's sides); SSDlite resizes to its 320 pixels.

Every detector is built with ``weights=None, weights_backbone=None``: torchvision's
builders otherwise download ImageNet weights.  A pretrained start is the run's ``init``
(:mod:`federated.models.pretrained_start`): a state-dict file of the same detector, a
shipped start, or torchvision's COCO or backbone weights from the torch cache
(:mod:`federated.tasks.detection.weights`), copied into this same architecture.
Without backbone weights torchvision's detectors use trainable ``BatchNorm2d`` (running
statistics and a ``num_batches_tracked`` counter are buffers of the state).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from federated.data.catalog import DatasetSpec
from federated.models.family import ModelFamily
from federated.models.fedcon import ModelOutput, projection_head_of
from federated.models.import_path import ModelError
from federated.tasks.detection.start import DETECTOR_START
from federated.tasks.detection.weights import TORCHVISION_DETECTORS

# the small FCOS: channels of its two feature levels (GroupNorm in FCOS's head needs a
# multiple of 32) and its levels' strides in pixels
TINY_CHANNELS = 32
TINY_STRIDES = (8, 16)
# COCO practice: keep low-scoring detections, so AP sees the whole precision-recall curve
SCORE_THRESHOLD = 0.05


class TinyBackbone(nn.Module):
    """Four 3x3 stride-2 convolutions (C -> 16 -> 32 -> 32 -> 32, BatchNorm, ReLU); the
    third and fourth outputs are the feature levels at strides 8 and 16."""

    out_channels = TINY_CHANNELS

    def __init__(self, in_channels: int) -> None:
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
            )

        self.stem = nn.Sequential(block(in_channels, 16), block(16, TINY_CHANNELS))
        self.level8 = block(TINY_CHANNELS, TINY_CHANNELS)
        self.level16 = block(TINY_CHANNELS, TINY_CHANNELS)

    def forward(self, x: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        p8 = self.level8(self.stem(x))
        return OrderedDict([("0", p8), ("1", self.level16(p8))])


def _sizes(spec: DatasetSpec) -> dict[str, Any]:
    """The transform's settings that keep the data's size and normalisation."""
    return {
        "min_size": min(spec.height, spec.width),
        "max_size": max(spec.height, spec.width),
        "image_mean": [0.0] * spec.channels,
        "image_std": [1.0] * spec.channels,
    }


def _fcos_tiny(spec: DatasetSpec, classes: int) -> nn.Module:
    from torchvision.models.detection import FCOS
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.fcos import FCOSHead

    anchors = AnchorGenerator(
        sizes=tuple((s,) for s in TINY_STRIDES), aspect_ratios=((1.0,),) * len(TINY_STRIDES)
    )
    return FCOS(
        TinyBackbone(spec.channels),
        classes,
        anchor_generator=anchors,
        head=FCOSHead(TINY_CHANNELS, 1, classes, num_convs=1),
        score_thresh=SCORE_THRESHOLD,
        **_sizes(spec),
    )


def _rgb(spec: DatasetSpec, name: str) -> None:
    if spec.channels != 3:
        raise ModelError(name, f"needs RGB images (3 channels); {spec.name} has {spec.channels}")


def _torchvision(builder: str, resizes: bool = True) -> Callable[[DatasetSpec, int], nn.Module]:
    """A builder of torchvision's detector ``builder`` without any downloaded weights."""

    def build(spec: DatasetSpec, classes: int) -> nn.Module:
        import torchvision.models.detection as detection

        _rgb(spec, builder)
        settings = _sizes(spec)
        if not resizes:  # SSD's transform has a fixed size
            settings = {k: settings[k] for k in ("image_mean", "image_std")}
        return getattr(detection, builder)(
            weights=None, weights_backbone=None, num_classes=classes, **settings
        )

    return build


# torchvision detectors whose transform has a fixed image size (SSDlite: 320 px)
FIXED_SIZE = frozenset({"ssdlite320"})

#: name -> builder(spec, classes incl. background) of the detector
DETECTORS: dict[str, Callable[[DatasetSpec, int], nn.Module]] = {
    # the default for detection data: trains at laptop speed on 2 CPU cores
    "fcos-tiny": _fcos_tiny,
    **{
        name: _torchvision(builder, resizes=name not in FIXED_SIZE)
        for name, builder in TORCHVISION_DETECTORS.items()
    },
}


def is_detector(name: str) -> bool:
    """Whether ``name`` is one of fedsweep's detectors (:data:`DETECTORS`)."""
    return name in DETECTORS


class DetectionModel(nn.Module):
    """A torchvision detector with MOON's projection head (module docstring)."""

    def __init__(
        self, detector: nn.Module, spec: DatasetSpec, out_dim: int, projection_head: bool
    ) -> None:
        super().__init__()
        self.detector = detector
        self._top: torch.Tensor | None = None
        # the backbone's output is kept as it passes (one backbone pass per batch)
        detector.backbone.register_forward_hook(self._keep_top)
        feature_dim = self._feature_dim(spec)
        self.head = projection_head_of(feature_dim, out_dim, projection_head)

    def _keep_top(self, module: nn.Module, inputs: Any, output: Any) -> None:
        levels = list(output.values()) if isinstance(output, dict) else [output]
        self._top = levels[-1]

    @torch.no_grad()
    def _feature_dim(self, spec: DatasetSpec) -> int:
        """Channels of the backbone's top level, measured on one blank image."""
        was_training = self.detector.training
        self.detector.eval()
        self._pooled([torch.zeros(spec.shape)])
        self.detector.train(was_training)
        return int(self._take_top().shape[1])

    def _pooled(self, images: list[torch.Tensor]) -> None:
        batch, _ = self.detector.transform(images)
        self.detector.backbone(batch.tensors)

    def _take_top(self) -> torch.Tensor:
        top, self._top = self._top, None
        if top is None:
            raise RuntimeError("the detector's backbone did not run")
        return F.adaptive_avg_pool2d(top, 1).flatten(1)

    def forward(
        self, x: torch.Tensor, targets: list[dict[str, torch.Tensor]] | None = None
    ) -> ModelOutput:
        """``x``: normalised images (B, C, H, W); ``targets`` (training): one
        ``{"boxes" float32 (K, 4) xyxy pixels, "labels" int64 (K,) 0..C-1}`` per image."""
        images = list(x.unbind(0))
        if self.training:
            if targets is None:
                raise ValueError("a detector in training mode needs the batch's targets")
            shifted = [{"boxes": t["boxes"], "labels": t["labels"] + 1} for t in targets]
            losses = self.detector(images, shifted)
            h = self._take_top()
            z = self.head(h)
            # 0·z: the head reaches the objective, so every parameter has a gradient
            # (zero when the method does not read z); FedProx, FedDyn and SCAFFOLD add
            # their terms to every parameter's gradient
            logits = torch.stack([losses[k] for k in sorted(losses)]) + 0.0 * z.sum()
            return ModelOutput(h, z, logits)
        found = self.detector(images)
        h = self._take_top()
        detections = [
            {"boxes": d["boxes"], "labels": d["labels"] - 1, "scores": d["scores"]} for d in found
        ]
        return ModelOutput(h, self.head(h), detections)  # type: ignore[arg-type]

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """z only (MOON's frozen global and previous models): the backbone's pooled top
        level through the projection head."""
        self._pooled(list(x.unbind(0)))
        return self.head(self._take_top())


def build_detector(
    name: str, spec: DatasetSpec, n_classes: int, out_dim: int, projection_head: bool
) -> DetectionModel:
    """A freshly initialised detector ``name`` (:data:`DETECTORS`) for ``n_classes``
    object classes of images of ``spec`` (uses torch's RNG)."""
    detector = DETECTORS[name](spec, n_classes + 1)  # + torchvision's background class
    return DetectionModel(detector, spec, out_dim, projection_head)


#: detection's family (:attr:`federated.tasks.detection.task.Detection.model_family`)
DETECTOR_FAMILY = ModelFamily("a detector", DETECTORS, build_detector, start=DETECTOR_START)
