"""Semantic segmentation: a class per pixel, pixel cross-entropy, IoU from a confusion matrix.

Targets are masks (:mod:`federated.tasks.segmentation.targets`): held as uint8 ``(N, H, W)``, a
batch's taken as int64 ``(B, H, W)`` (:meth:`Segmentation.take_targets`), each value a
class index or 255 (unlabelled: no loss, no metric).  The model is a segmentation
network (:mod:`federated.tasks.segmentation.models`) scoring every class at every pixel,
``(B, C, H, W)``.

**Loss**: pixel cross-entropy with ignore index 255.  One image's loss is the mean over
its labelled pixels (:meth:`Segmentation.per_sample_loss`, ``(B,)``); a batch's is the
mean over its images that hold a labelled pixel (an image without one adds nothing), the
supervised part of every method's objective and the row's ``train_loss``; an
evaluation's ``loss`` is the same mean over the split's images.

**Metrics**, all from one confusion matrix per evaluation (``(C, C)`` pixel counts, truth
by prediction, labelled pixels only; one matrix per party for a per-party evaluation, on
the device, read back once), **dataset-level** as VOC and Cityscapes count them (the
split's pixels summed first, then divided; not a mean of per-image scores):

* ``miou`` (the primary): per class ``IoU = TP / (TP + FP + FN)``, then the mean over the
  classes; every class of the data counts, the background too where the data name it a
  class, and a class absent from both truth and prediction in the split (``TP + FP + FN
  = 0``) is left out of the mean (its IoU is undefined, not 0 or 1);
* ``dice``: per class ``2 TP / (2 TP + FP + FN)``, the mean over classes by the same rule;
* ``pixel_acc``: correctly classified labelled pixels over labelled pixels;
* ``iou/<class>``: each class's IoU (NaN where undefined), pooled evaluations only.

Per party (federated validation, local test splits) a party's values are those of its
own images' matrix; the pooled values are those of the summed matrix (not a mean of the
parties' mIoU).  Recorded as fractions, shown as percentages.

Masks have no class per image: partitions group every image as one (natural parties by
a field, IID and quantity partitions apply; Dirichlet and k-label partitions are
refused), and per-party outcomes come from the parties' local test splits.  Random
crops, flips and rotations would move the pixels without their masks: segmentation data
carry none (refused in one line), and a rotating feature skew is refused.  Parties train
one at a time: packed execution unfolds ``(B, features)`` outputs, not per-pixel maps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from federated.contract.metrics import LOSS
from federated.params import MethodParams
from federated.tasks.base import Scores, Task, per_party_mean
from federated.tasks.segmentation.spec import SEGMENTATION, SPEC
from federated.tasks.segmentation.targets import (
    IGNORE_INDEX,
    class_pixel_counts,
    pixel_moving_augmentation,
    take_masks,
)

if TYPE_CHECKING:
    from federated.data import DatasetSpec, ImageData

NAN = float("nan")
#: the per-class columns' stem: ``test_iou/<class name>``
CLASS_IOU = "iou"


class Segmentation(Task):
    name = SEGMENTATION
    targets = SEGMENTATION
    contract = SPEC
    metrics = SPEC.metrics
    targets_in_pixels = True
    model_family = "federated.tasks.segmentation.models:SEGMENTERS"
    folder_reader = "federated.tasks.segmentation.reader:READER"

    def __init__(self, params: MethodParams, spec: DatasetSpec) -> None:
        super().__init__(params, spec)
        reason = pixel_moving_augmentation(spec)
        if reason is not None:
            raise ValueError(reason)
        self.class_names = tuple(spec.class_names) or tuple(map(str, range(spec.n_classes)))

    @classmethod
    def head_size(cls, spec: DatasetSpec) -> int:
        """One score per class at every pixel."""
        return spec.n_classes

    @classmethod
    def party_class_counts(cls, data: ImageData, parts: list[np.ndarray]) -> np.ndarray:
        """Each party's labelled pixels of each class (its declaration counts pixels)."""
        n_classes = cls.head_size(data.spec)
        return np.stack(
            [
                class_pixel_counts(
                    data.train_y[torch.as_tensor(p, dtype=torch.long)], n_classes
                ).numpy()
                for p in parts
            ]
        )

    def take_targets(self, targets: torch.Tensor, index: torch.Tensor | slice) -> torch.Tensor:
        """The masks of images ``index``, int64 (B, H, W)."""
        return take_masks(targets, index)

    def packing_obstacle(self) -> str | None:
        return (
            "segmentation trains one party at a time (packed execution unfolds (B, features) "
            "outputs, not per-pixel score maps)"
        )

    def per_sample_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each image's cross-entropy, the mean over its labelled pixels (0 for an image
        without one), (B,)."""
        return _per_image_loss(outputs, targets)[0]

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean of :meth:`per_sample_loss` over the images holding a labelled pixel."""
        per_image, labelled = _per_image_loss(outputs, targets)
        return per_image.sum() / labelled.sum().clamp(min=1)

    def accumulator(self, n_parties: int | None = None) -> ConfusionAccumulator:
        return ConfusionAccumulator(self.class_names, n_parties)

    def class_stems(self) -> tuple[str, ...]:
        """The per-class IoU stems, ``iou/<class name>``."""
        return tuple(f"{CLASS_IOU}/{name}" for name in self.class_names)

    def no_scores(self) -> dict[str, float]:
        return dict.fromkeys((*self.recorded_stems(), *self.class_stems()), NAN)


def _per_image_loss(
    outputs: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each image's mean cross-entropy over its labelled pixels (B,) and whether it has
    one (B,) (float, 0 or 1)."""
    targets = targets.long()
    pixels = F.cross_entropy(outputs, targets, ignore_index=IGNORE_INDEX, reduction="none")
    counted = (targets != IGNORE_INDEX).sum(dim=(1, 2))
    per_image = pixels.sum(dim=(1, 2)) / counted.clamp(min=1)
    return per_image, (counted > 0).to(per_image.dtype)


def confusion_scores(matrix: np.ndarray) -> dict[str, float | np.ndarray]:
    """mIoU, mean Dice and pixel accuracy of a ``(C, C)`` confusion matrix (truth by
    prediction, pixel counts), and each class's IoU (C,) (NaN where a class is absent
    from both truth and prediction: left out of the means; module docstring)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    tp = np.diag(matrix)
    fp = matrix.sum(axis=0) - tp
    fn = matrix.sum(axis=1) - tp
    union = tp + fp + fn
    iou = np.divide(tp, union, out=np.full_like(tp, NAN), where=union > 0)
    dice = np.divide(2 * tp, 2 * tp + fp + fn, out=np.full_like(tp, NAN), where=union > 0)
    total = matrix.sum()
    present = union > 0
    return {
        "miou": float(iou[present].mean()) if present.any() else NAN,
        "dice": float(dice[present].mean()) if present.any() else NAN,
        "pixel_acc": float(tp.sum() / total) if total else NAN,
        "iou": iou,
    }


class ConfusionAccumulator:
    """One evaluation's confusion matrices (per party, or one pooled), each image's loss
    summed per party, and the images per party; all on the device until
    :meth:`compute` reads them back in one transfer."""

    def __init__(self, class_names: tuple[str, ...], n_parties: int | None) -> None:
        self.class_names = class_names
        self.c = len(class_names)
        self.n = n_parties
        self.matrix: torch.Tensor | None = None  # (P, C, C) int64, truth by prediction
        self.loss: torch.Tensor | None = None  # (P,) float64: summed per-image losses
        self.labelled: torch.Tensor | None = None  # (P,) float64: images with a label
        self.images: torch.Tensor | None = None  # (P,) float64: images evaluated

    def update(
        self, outputs: torch.Tensor, targets: torch.Tensor, owner: torch.Tensor | None
    ) -> None:
        """Add a batch: scores (B, C, H, W), masks (B, H, W) (any integer dtype) and each
        image's party (per-party evaluations)."""
        parties = self.n or 1
        device = outputs.device
        if self.matrix is None:
            self.matrix = torch.zeros(parties * self.c * self.c, dtype=torch.int64, device=device)
            zeros = torch.zeros(parties, dtype=torch.float64, device=device)
            self.loss, self.labelled, self.images = zeros, zeros.clone(), zeros.clone()
        targets = targets.to(device).long()
        party = owner if owner is not None else torch.zeros_like(targets[:, 0, 0])
        per_image, labelled = _per_image_loss(outputs.float(), targets)
        self.loss.index_add_(0, party, per_image.double())
        self.labelled.index_add_(0, party, labelled.double())
        self.images += torch.bincount(party, minlength=parties).double()
        valid = targets != IGNORE_INDEX
        # one flat index per labelled pixel: (party, truth, prediction)
        cell = (party[:, None, None] * self.c + targets) * self.c + outputs.argmax(dim=1)
        self.matrix += torch.bincount(cell[valid], minlength=self.matrix.numel())

    def compute(self) -> Scores:
        parties = self.n or 1
        if self.matrix is None:
            values = {"miou": NAN, LOSS: NAN, "dice": NAN, "pixel_acc": NAN}
            if self.n is None:
                return Scores(values | {f"{CLASS_IOU}/{n}": NAN for n in self.class_names})
            nan = np.full(self.n, NAN)
            return Scores(values, {k: nan.copy() for k in values})
        # one host transfer: counts below 2**53 are exact in float64
        flat = torch.cat([self.matrix.double(), self.loss, self.labelled, self.images]).cpu()
        flat = flat.numpy()
        size = parties * self.c * self.c
        matrix = flat[:size].reshape(parties, self.c, self.c)
        loss, labelled, images = flat[size:].reshape(3, parties)
        pooled = confusion_scores(matrix.sum(axis=0))
        total = labelled.sum()
        values = {
            "miou": pooled["miou"],
            LOSS: float(loss.sum() / total) if total else NAN,
            "dice": pooled["dice"],
            "pixel_acc": pooled["pixel_acc"],
        }
        if self.n is None:
            per_class = {
                f"{CLASS_IOU}/{name}": float(v) for name, v in zip(self.class_names, pooled["iou"])
            }
            return Scores(values | per_class)
        party_values = {k: np.full(self.n, NAN) for k in ("miou", "dice", "pixel_acc")}
        for p in np.flatnonzero(images > 0):
            own = confusion_scores(matrix[p])
            for k in party_values:
                party_values[k][p] = own[k]
        party_values[LOSS] = per_party_mean(loss, labelled)
        return Scores(values, party_values, parties=int((images > 0).sum()))
