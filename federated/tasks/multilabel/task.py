"""Multi-label classification as a task: multi-hot targets, binary cross-entropy on the
logits, mAP and F1 (:mod:`.spec`, :mod:`.scores`).

The head gives one logit per label (``(B, L)``); an image's loss is the mean over its
labels of binary cross-entropy on the logits (:func:`torch.nn.functional.
binary_cross_entropy_with_logits`), a batch's the mean over its images (every image has
all L labels, so it is the mean over the batch's B x L entries): the supervised part of
every method's objective and the row's ``train_loss``; ``test_loss`` and ``val_loss``
are the same mean over the split's images.

An image carries a set of labels, not a class: partitions group every image as one
(natural parties by a field, IID and quantity partitions apply; Dirichlet and k-label
partitions, which draw by a class per image, are refused in one line by the config's
task-needs check, as is the representation probe that colours images by class), and
per-party outcomes come from the parties' own local test splits
(``party_test_fraction``).  A partition counts, per party, the images carrying each
label (an image once for each of its labels).  The encoder-and-head models train it
(the default family), packed execution included: its outputs are ``(B, L)`` like a
classifier's; crops, flips and rotations move no label.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from federated.params import MethodParams
from federated.tasks.base import Task
from federated.tasks.multilabel.accumulator import MultiLabelAccumulator, per_image_loss
from federated.tasks.multilabel.scores import NAN
from federated.tasks.multilabel.spec import LABEL_AP, MULTILABEL, SPEC
from federated.tasks.multilabel.targets import images_per_label

if TYPE_CHECKING:
    from federated.data import DatasetSpec, ImageData


class MultiLabel(Task):
    name = MULTILABEL
    targets = MULTILABEL
    contract = SPEC
    metrics = SPEC.metrics
    folder_reader = "federated.tasks.multilabel.reader:READER"
    hub_column = "federated.tasks.multilabel.hub_column:HUB_COLUMN"

    def __init__(self, params: MethodParams, spec: DatasetSpec) -> None:
        super().__init__(params, spec)
        self.label_names = tuple(spec.class_names) or tuple(map(str, range(spec.n_classes)))

    @classmethod
    def head_size(cls, spec: DatasetSpec) -> int:
        """One logit per label."""
        return spec.n_classes

    @classmethod
    def party_class_counts(cls, data: ImageData, parts: list[np.ndarray]) -> np.ndarray:
        """Each party's images carrying each label (its declaration's ``counted``)."""
        return images_per_label(data.train_y, parts)

    def per_sample_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each image's binary cross-entropy, the mean over its labels, (B,)."""
        return per_image_loss(outputs, targets)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean over the batch's B x L entries (module docstring)."""
        return F.binary_cross_entropy_with_logits(outputs.float(), targets.float())

    def accumulator(self, n_parties: int | None = None) -> MultiLabelAccumulator:
        """A fresh accumulator: pooled, or summing per party (``n_parties``)."""
        return MultiLabelAccumulator(self.label_names, n_parties)

    def label_stems(self) -> tuple[str, ...]:
        """The per-label AP stems, ``ap/<label name>``."""
        return tuple(f"{LABEL_AP}/{name}" for name in self.label_names)

    def no_scores(self) -> dict[str, float]:
        """Every recorded stem and every label's AP stem as NaN."""
        return dict.fromkeys((*self.recorded_stems(), *self.label_stems()), NAN)
