"""One multi-label evaluation's sums on the device, read back once.

Per party (one pseudo-party for a pooled evaluation) the accumulator sums, on the
outputs' device, each label's true positives, false positives and false negatives at
probability 0.5 (logit >= 0), each image's loss (the mean over labels of binary
cross-entropy on the logits, float64) and the images.  Average precision ranks every
score of a split, so the logits and truths are kept too (``N x L`` values, on the
device); :meth:`MultiLabelAccumulator.compute` reads everything back in one transfer.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from federated.contract.metrics import LOSS
from federated.tasks.base import Scores, per_party_mean
from federated.tasks.multilabel.scores import NAN, label_average_precision, split_scores
from federated.tasks.multilabel.spec import F1_MACRO, F1_MICRO, LABEL_AP, MEAN_AP

#: a row's metrics, in the rows' order (the primary, the loss, the others)
STEMS = (MEAN_AP, LOSS, F1_MICRO, F1_MACRO)


def per_image_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Each image's binary cross-entropy on the logits, the mean over its labels, (B,)."""
    elements = F.binary_cross_entropy_with_logits(
        outputs.float(), targets.float(), reduction="none"
    )
    return elements.mean(dim=1)


class MultiLabelAccumulator:
    """Counts, losses and images per party, and the scores AP needs (module docstring)."""

    def __init__(self, label_names: tuple[str, ...], n_parties: int | None) -> None:
        self.label_names = label_names
        self.labels = len(label_names)
        self.n = n_parties
        self.logits: list[torch.Tensor] = []  # (B, L) float32 per batch
        self.truth: list[torch.Tensor] = []  # (B, L) bool per batch
        self.owners: list[torch.Tensor] = []  # (B,) int64 per batch
        self.counts: torch.Tensor | None = None  # (P, 3, L) int64: TP, FP, FN
        self.loss: torch.Tensor | None = None  # (P,) float64: summed per-image losses
        self.images: torch.Tensor | None = None  # (P,) float64

    def update(
        self, outputs: torch.Tensor, targets: torch.Tensor, owner: torch.Tensor | None
    ) -> None:
        """Add a batch: logits (B, L), multi-hot targets (B, L) and (per-party
        evaluations) each image's party."""
        parties = self.n or 1
        device = outputs.device
        if self.counts is None:
            self.counts = torch.zeros(parties, 3, self.labels, dtype=torch.int64, device=device)
            self.loss = torch.zeros(parties, dtype=torch.float64, device=device)
            self.images = torch.zeros_like(self.loss)
        targets = targets.to(device)
        party = (
            owner
            if owner is not None
            else torch.zeros(len(targets), dtype=torch.int64, device=device)
        )
        self.loss.index_add_(0, party, per_image_loss(outputs, targets).double())
        self.images += torch.bincount(party, minlength=parties).double()
        predicted, actual = outputs >= 0, targets > 0.5
        outcome = torch.stack([predicted & actual, predicted & ~actual, ~predicted & actual], 1)
        self.counts.index_add_(0, party, outcome.to(torch.int64))
        self.logits.append(outputs.detach().float())
        self.truth.append(actual)
        self.owners.append(party)

    def _read_back(self) -> tuple[np.ndarray, ...]:
        """(logits (N, L), truth (N, L), owners (N,), counts (P, 3, L), loss (P,),
        images (P,)) as float64 numpy arrays, from one host transfer (counts below
        2**53 are exact in float64)."""
        parties = self.n or 1
        parts = [
            torch.cat(self.logits).double(),
            torch.cat(self.truth).double(),
            torch.cat(self.owners).double()[:, None],
        ]
        flat = torch.cat(
            [p.flatten() for p in parts] + [self.counts.double().flatten(), self.loss, self.images]
        )
        flat = flat.cpu().numpy()
        n, width = parts[0].shape
        sizes = [n * width, n * width, n, parties * 3 * self.labels, parties, parties]
        logits, truth, owners, counts, loss, images = np.split(flat, np.cumsum(sizes)[:-1])
        return (
            logits.reshape(n, width),
            truth.reshape(n, width),
            owners.astype(np.int64),
            counts.reshape(parties, 3, self.labels),
            loss,
            images,
        )

    def compute(self) -> Scores:
        """The split's scores (fractions; the loss in nats per label and image): pooled,
        with each label's AP, or per party with the pooled values beside them."""
        if self.counts is None:
            return self._nothing()
        logits, truth, owners, counts, loss, images = self._read_back()
        total = images.sum()
        pooled = split_scores(logits, truth, tuple(counts.sum(axis=0)))
        values = {
            MEAN_AP: pooled[MEAN_AP],
            LOSS: float(loss.sum() / total),
            F1_MICRO: pooled[F1_MICRO],
            F1_MACRO: pooled[F1_MACRO],
        }
        if self.n is None:
            ap = label_average_precision(logits, truth)
            per_label = {f"{LABEL_AP}/{name}": float(v) for name, v in zip(self.label_names, ap)}
            return Scores(values | per_label)
        party_values = {k: np.full(self.n, NAN) for k in (MEAN_AP, F1_MICRO, F1_MACRO)}
        for p in np.flatnonzero(images > 0):
            mine = owners == p
            own = split_scores(logits[mine], truth[mine], tuple(counts[p]))
            for k in party_values:
                party_values[k][p] = own[k]
        party_values[LOSS] = per_party_mean(loss, images)
        return Scores(values, party_values, parties=int((images > 0).sum()))

    def _nothing(self) -> Scores:
        """No batch at all: every value NaN."""
        values = dict.fromkeys(STEMS, NAN)
        if self.n is None:
            return Scores(values | {f"{LABEL_AP}/{name}": NAN for name in self.label_names})
        return Scores(values, {k: np.full(self.n, NAN) for k in STEMS})
