"""Federated evaluation: the global model scored on the parties' held-out samples.

With validation on (``val_fraction`` > 0, federated/holdout.py) each scored round the
global model is evaluated on the validation samples of a seeded share of the parties
(``eval_fraction``, drawn from the run's ``evaluation`` stream; Flower's
``fraction_evaluate``), or on the server's slice (``val_split="server"``).  The row's
``val_acc`` / ``val_loss`` are size-weighted over the evaluating parties — summed correct
predictions and cross-entropy over their samples, divided by their samples — and each
party's own values go to ``parties.csv``.  The same machinery scores each party on its
local test split (``party_test_fraction``): its own images, so the per-party outcomes see
input shift.

One forward pass over the chosen parties' rows; per-party sums are one ``index_add``
each on the device, read with one host transfer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from federated.data import Augmenter
from federated.party_data import PartySplit

NAN = float("nan")


@dataclass(frozen=True)
class SplitScores:
    """A model on one split: size-weighted ``acc`` (fraction) and ``loss`` (mean
    cross-entropy) over the evaluated parties; per party (N,) ``party_acc``,
    ``party_loss`` (NaN for parties not evaluated or holding no sample); ``parties``:
    how many were evaluated."""

    acc: float
    loss: float
    party_acc: np.ndarray
    party_loss: np.ndarray
    parties: int


@torch.no_grad()
def per_party_sums(
    model: torch.nn.Module,
    split: PartySplit,
    rows: torch.Tensor | None,
    augmenter: Augmenter,
    batch_size: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per party of ``split``: (correct predictions, summed cross-entropy, samples) of
    ``model`` over the split's rows ``rows`` (a boolean mask; None: all)."""
    x, y, owner = split.x, split.y, split.owner
    if rows is not None:
        x, y, owner = x[rows], y[rows], owner[rows]
    n = len(split.sizes)
    correct = torch.zeros(n, dtype=torch.float64, device=y.device)
    loss = torch.zeros(n, dtype=torch.float64, device=y.device)
    was_training = model.training
    model.eval()
    for start in range(0, y.shape[0], batch_size):
        stop = start + batch_size
        logits = model(augmenter.normalize(x[start:stop])).logits
        batch_y, batch_owner = y[start:stop], owner[start:stop]
        per_sample = F.cross_entropy(logits, batch_y, reduction="none").double()
        loss.index_add_(0, batch_owner, per_sample)
        correct.index_add_(0, batch_owner, (logits.argmax(dim=1) == batch_y).double())
    model.train(was_training)
    samples = torch.bincount(owner, minlength=n).double()
    sums = torch.stack([correct, loss, samples]).cpu().numpy()  # one host transfer
    return sums[0], sums[1], sums[2]


class SplitEvaluator:
    """Scores models on one :class:`PartySplit` each round it is asked to.

    ``fraction``: the share of the split's parties (those holding samples) evaluated
    each time, ``max(1, round(k * fraction))`` of the k, drawn from ``rng`` (None: all
    of them, no draw)."""

    def __init__(
        self, split: PartySplit, fraction: float = 1.0, rng: np.random.Generator | None = None
    ) -> None:
        self.split = split
        self.fraction = fraction
        self.rng = rng
        self.holding = np.flatnonzero(np.asarray(split.sizes) > 0)

    def chosen_parties(self) -> np.ndarray:
        """The parties evaluated this time (sorted); draws from ``rng`` when the
        fraction is below 1."""
        if self.fraction >= 1.0 or self.rng is None:
            return self.holding
        k = max(1, round(len(self.holding) * self.fraction))
        return np.sort(self.rng.choice(self.holding, size=k, replace=False))

    def score(
        self,
        model: torch.nn.Module,
        augmenter: Augmenter,
        batch_size: int,
        parties: np.ndarray | None = None,
    ) -> SplitScores:
        """``model`` on the split's rows of ``parties`` (default: :meth:`chosen_parties`)."""
        if parties is None:
            parties = self.chosen_parties()
        rows = None
        if len(parties) < len(self.holding):
            chosen = torch.zeros(len(self.split.sizes), dtype=torch.bool)
            chosen[torch.from_numpy(np.asarray(parties, dtype=np.int64))] = True
            rows = chosen.to(self.split.owner.device)[self.split.owner]
        correct, loss, samples = per_party_sums(model, self.split, rows, augmenter, batch_size)
        evaluated = samples > 0
        party_acc = np.divide(correct, samples, out=np.full_like(correct, NAN), where=evaluated)
        party_loss = np.divide(loss, samples, out=np.full_like(loss, NAN), where=evaluated)
        total = samples.sum()
        return SplitScores(
            acc=float(correct.sum() / total),
            loss=float(loss.sum() / total),
            party_acc=party_acc,
            party_loss=party_loss,
            parties=int(evaluated.sum()),
        )


def combined_scores(parts: dict[int, SplitScores], sizes: list[int]) -> SplitScores:
    """One :class:`SplitScores` from parties scored one at a time (SOLO: each with its
    own model): size-weighted over ``parts``' parties, ``sizes`` their split sizes."""
    party_acc = np.full(len(sizes), NAN)
    party_loss = np.full(len(sizes), NAN)
    for party, scores in parts.items():
        party_acc[party] = scores.party_acc[party]
        party_loss[party] = scores.party_loss[party]
    weights = np.array([sizes[p] for p in parts], dtype=np.float64)
    total = weights.sum()
    if not total:
        return SplitScores(NAN, NAN, party_acc, party_loss, 0)
    chosen = list(parts)
    return SplitScores(
        acc=float((party_acc[chosen] * weights).sum() / total),
        loss=float((party_loss[chosen] * weights).sum() / total),
        party_acc=party_acc,
        party_loss=party_loss,
        parties=len(chosen),
    )
