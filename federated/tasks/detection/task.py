"""Object detection: boxes per image, the detector's own loss, COCO's average precision.

Targets are :class:`~federated.tasks.detection.targets.BoxTargets` (ragged: any number of boxes
per image, none included), taken for a batch by index (:meth:`Detection.take_targets`).
The model is a detector (:mod:`federated.tasks.detection.models`): in training it is given the
batch's boxes and returns its own loss components (Faster R-CNN's classifier, box
regression, objectness and RPN box terms; FCOS's classification, box and centre-ness
terms), and the loss is their sum, the supervised part of every method's objective.

Metrics (:mod:`federated.tasks.detection.average_precision`, pycocotools): ``map50``, mAP at IoU
0.5 (the primary metric: the Street paper's), ``map``, COCO's mAP@[.5:.95], and per
class AP at IoU 0.5 (``ap50/<class>`` columns of the test set and of validation), all
with COCO's 101-point interpolation.  A detector computes its loss only from training
mode (Faster R-CNN samples proposals at random there), so an evaluation records no loss:
``test_loss`` and ``val_loss`` are NaN, and a run diverges on its training loss (or a
non-finite detection).  Per party (federated validation, local test splits) mAP is each
party's own images' mAP; the pooled value is the mAP of all evaluated images together.

Detection has no class labels per image: partitions group every image as one (natural
parties, e.g. the camera, IID and quantity partitions apply; Dirichlet and k-label
partitions are refused), and per-party outcomes come from the parties' local test
splits.  Random crops, flips and rotations would move the boxes: detection data carry
none, and a rotating feature skew is refused.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from federated.models.fedcon import ModelOutput
from federated.params import MethodParams
from federated.tasks.base import Scores, Task
from federated.tasks.detection.average_precision import ImageBoxes, average_precision
from federated.tasks.detection.spec import SPEC
from federated.tasks.detection.targets import BoxTargets

if TYPE_CHECKING:
    from federated.data import DatasetSpec, ImageData

NAN = float("nan")
#: the per-class columns' stem: ``test_ap50/<class name>``
CLASS_AP = "ap50"


class Detection(Task):
    name = "detection"
    targets = "detection"
    contract = SPEC
    metrics = SPEC.metrics
    targets_in_pixels = True
    evaluates_loss = False
    model_family = "federated.tasks.detection.models:DETECTOR_FAMILY"
    folder_reader = "federated.tasks.detection.reader:READER"

    def __init__(self, params: MethodParams, spec: DatasetSpec) -> None:
        super().__init__(params, spec)
        if spec.crop_flip or spec.rotate_degrees:
            raise ValueError(
                f"detection data {spec.name}: random crops, flips and rotations would move "
                "the boxes (allowed: none)"
            )
        self.class_names = tuple(spec.target_names) or tuple(spec.class_names)

    @classmethod
    def head_size(cls, spec: DatasetSpec) -> int:
        """The object classes (the detector adds its background class)."""
        return len(spec.target_names) or spec.n_classes

    @classmethod
    def party_class_counts(cls, data: ImageData, parts: list[np.ndarray]) -> np.ndarray:
        """Each party's boxes of each object class (its declaration counts boxes)."""
        targets: BoxTargets = data.train_y
        n_classes = cls.head_size(data.spec)
        per_image = np.diff(targets.offsets.cpu().numpy())
        image_of_box = np.repeat(np.arange(len(per_image)), per_image)
        labels = targets.labels.cpu().numpy()
        owner = np.full(len(per_image), -1, dtype=np.int64)
        for party, part in enumerate(parts):
            owner[np.asarray(part, dtype=np.int64)] = party
        box_owner = owner[image_of_box]
        counts = np.zeros((len(parts), n_classes), dtype=np.int64)
        held = box_owner >= 0
        np.add.at(counts, (box_owner[held], labels[held]), 1)
        return counts

    def take_targets(self, targets: BoxTargets, index: torch.Tensor | slice) -> BoxTargets:
        return targets[index]

    def packing_obstacle(self) -> str | None:
        return "detection trains one party at a time (a detector's boxes and loss do not pack)"

    def forward(self, model: torch.nn.Module, x: torch.Tensor, targets: BoxTargets) -> ModelOutput:
        """The detector on batch ``x`` given its boxes (training: its loss components)."""
        return model(x, targets.to_dicts(x.device))

    def per_sample_loss(self, outputs: torch.Tensor, targets: BoxTargets) -> torch.Tensor:
        raise NotImplementedError(
            "a detector's loss is one value per batch (torchvision sums over the batch's boxes)"
        )

    def loss(self, outputs: torch.Tensor, targets: BoxTargets) -> torch.Tensor:
        """The sum of the detector's loss components (``outputs``, 1-D)."""
        return outputs.sum()

    def diverged(self, scores: Scores) -> bool:
        """A non-finite detection (the accumulator's mAP is then NaN); a set without any
        true box has NaN mAP too, and is never evaluated (the readers refuse it)."""
        return not math.isfinite(scores.values.get("map50", NAN))

    def accumulator(self, n_parties: int | None = None):
        return DetectionAccumulator(len(self.class_names), self.class_names, n_parties)

    def class_stems(self) -> tuple[str, ...]:
        """The per-class AP stems, ``ap50/<class name>``."""
        return tuple(f"{CLASS_AP}/{name}" for name in self.class_names)

    def no_scores(self) -> dict[str, float]:
        return dict.fromkeys((*self.recorded_stems(), *self.class_stems()), NAN)


class DetectionAccumulator:
    """Every evaluated image's detections and true boxes (on the CPU) and, per party,
    its owner; AP is computed once, at the end (pycocotools)."""

    def __init__(self, n_classes: int, class_names: tuple[str, ...], n_parties: int | None) -> None:
        self.n_classes = n_classes
        self.class_names = class_names
        self.n = n_parties
        self.predicted: list[ImageBoxes] = []
        self.truth: list[ImageBoxes] = []
        self.owners: list[np.ndarray] = []
        self.non_finite = 0

    def update(
        self, outputs: list[dict[str, torch.Tensor]], targets: BoxTargets, owner: Any
    ) -> None:
        for found in outputs:
            boxes, scores = found["boxes"].float().cpu(), found["scores"].float().cpu()
            keep = torch.isfinite(boxes).all(dim=1) & torch.isfinite(scores)
            self.non_finite += int((~keep).sum())
            labels = found["labels"].cpu()[keep]
            self.predicted.append(
                ImageBoxes(boxes[keep].numpy(), labels.numpy(), scores[keep].numpy())
            )
        for i in range(len(targets)):
            boxes, labels = targets.image(i)
            self.truth.append(ImageBoxes(boxes.cpu().numpy(), labels.cpu().numpy()))
        if owner is not None:
            self.owners.append(owner.cpu().numpy())

    def _values(self, chosen: np.ndarray | None) -> dict[str, float]:
        predicted, truth = self.predicted, self.truth
        if chosen is not None:
            predicted = [predicted[i] for i in chosen]
            truth = [truth[i] for i in chosen]
        ap = average_precision(predicted, truth, self.n_classes)
        values = {"map50": ap.map50, "loss": NAN, "map": ap.map}
        if chosen is None:
            values.update(
                {f"{CLASS_AP}/{name}": float(v) for name, v in zip(self.class_names, ap.ap50)}
            )
        return values

    def compute(self) -> Scores:
        pooled = self._values(None)
        if self.non_finite:  # a detector that gives NaN boxes has diverged
            pooled = dict.fromkeys(pooled, NAN)
        if self.n is None:
            return Scores(pooled)
        owner = np.concatenate(self.owners) if self.owners else np.zeros(0, np.int64)
        party = {k: np.full(self.n, NAN) for k in ("map50", "loss", "map")}
        for p in np.unique(owner):
            own = self._values(np.flatnonzero(owner == p))
            for k in party:
                party[k][p] = own[k]
        return Scores(pooled, party, parties=len(np.unique(owner)))
