"""Classification: integer class labels, cross-entropy, top-1 accuracy.

The metric is top-1 accuracy (``acc``, a fraction); the loss cross-entropy.  A pooled
evaluation (the test set) also counts correct predictions per class: the class
re-weighted per-party outcomes' input (:mod:`federated.evaluation.party_scores`).

The sums are those the engine always made: a pooled evaluation adds each batch's
summed cross-entropy (float32, then float64); a per-party one adds each sample's
cross-entropy in float64 into its party's sum, so the numbers equal earlier runs' to
the last bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from federated.tasks.base import Scores, Task, per_party_mean
from federated.tasks.classification.spec import SPEC

if TYPE_CHECKING:
    from federated.data import DatasetSpec, ImageData


class Classification(Task):
    name = "classification"
    contract = SPEC
    metrics = SPEC.metrics
    has_classes = True
    folder_reader = "federated.tasks.classification.reader:READER"
    hub_column = "federated.tasks.classification.hub_column:HUB_COLUMN"

    @classmethod
    def head_size(cls, spec: DatasetSpec) -> int:
        return spec.n_classes

    @classmethod
    def target_groups(cls, targets: torch.Tensor) -> np.ndarray:
        """The class labels: a hold-out is stratified by class."""
        return targets.numpy()

    @classmethod
    def partition_groups(cls, data: ImageData) -> tuple[np.ndarray, int]:
        """The class labels: every partition (Dirichlet, k labels ...) applies."""
        return cls.target_groups(data.train_y), data.spec.n_classes

    def per_sample_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs, targets, reduction="none")

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # exactly F.cross_entropy's mean (not per_sample_loss().mean(): another sum order)
        return F.cross_entropy(outputs, targets)

    def accumulator(self, n_parties: int | None = None):
        if n_parties is None:
            return PooledAccuracy(self.spec.n_classes)
        return PartyAccuracy(n_parties)


class PooledAccuracy:
    """Top-1 accuracy and mean cross-entropy over all samples, and per class the correct
    predictions and samples; sums stay on the device (no host sync per batch)."""

    def __init__(self, n_classes: int) -> None:
        self.n_classes = n_classes
        self.samples = 0
        self.correct: torch.Tensor | int = 0
        self.loss_sum: torch.Tensor | float = 0.0
        self.by_class: torch.Tensor | int = 0
        self.class_total: torch.Tensor | int = 0

    def update(self, outputs: torch.Tensor, targets: torch.Tensor, owner=None) -> None:
        self.loss_sum = self.loss_sum + F.cross_entropy(outputs, targets, reduction="sum").double()
        hit = outputs.argmax(dim=1) == targets
        self.correct = self.correct + hit.sum()
        self.by_class = self.by_class + torch.bincount(targets[hit], minlength=self.n_classes)
        self.class_total = self.class_total + torch.bincount(targets, minlength=self.n_classes)
        self.samples += targets.shape[0]

    def compute(self) -> Scores:
        n = self.samples
        if not n:
            return Scores({"acc": float("nan"), "loss": float("nan")})
        return Scores(
            {"acc": int(self.correct) / n, "loss": float(self.loss_sum) / n},
            class_correct=np.asarray(torch.as_tensor(self.by_class).cpu()),
            class_total=np.asarray(torch.as_tensor(self.class_total).cpu()),
        )


class PartyAccuracy:
    """Per party: correct predictions, summed cross-entropy (float64) and samples."""

    def __init__(self, n_parties: int) -> None:
        self.n = n_parties
        self.correct: torch.Tensor | None = None
        self.loss: torch.Tensor | None = None
        self.samples: torch.Tensor | None = None

    def update(self, outputs: torch.Tensor, targets: torch.Tensor, owner: torch.Tensor) -> None:
        if self.correct is None:
            zeros = torch.zeros(self.n, dtype=torch.float64, device=targets.device)
            self.correct, self.loss, self.samples = zeros, zeros.clone(), zeros.clone()
        per_sample = F.cross_entropy(outputs, targets, reduction="none").double()
        hits = (outputs.argmax(dim=1) == targets).double()
        self.loss.index_add_(0, owner, per_sample)
        self.correct.index_add_(0, owner, hits)
        self.samples += torch.bincount(owner, minlength=self.n).double()

    def compute(self) -> Scores:
        if self.correct is None:
            nan = np.full(self.n, float("nan"))
            return Scores({"acc": float("nan"), "loss": float("nan")}, {"acc": nan, "loss": nan})
        sums = torch.stack([self.correct, self.loss, self.samples]).cpu().numpy()
        correct, loss, samples = sums  # one host transfer
        total = samples.sum()
        return Scores(
            {"acc": float(correct.sum() / total), "loss": float(loss.sum() / total)},
            {
                "acc": per_party_mean(correct, samples),
                "loss": per_party_mean(loss, samples),
            },
            parties=int((samples > 0).sum()),
        )
