"""Federated evaluation: the global model scored on the parties' held-out samples.

With validation on (``val_fraction`` > 0, federated/evaluation/holdout.py) each scored round the
global model is evaluated on the validation samples of a seeded share of the parties
(``eval_fraction``, drawn from the run's ``evaluation`` stream; Flower's
``fraction_evaluate``), or on the server's slice (``val_split="server"``).  The row's
``val_acc`` / ``val_loss`` are size-weighted over the evaluating parties — summed correct
predictions and cross-entropy over their samples, divided by their samples — and each
party's own values go to ``parties.csv``.  On a score task (federated/tasks/objective.py)
``acc`` is the binary accuracy at the threshold and ``loss`` the score loss, both
size-weighted the same way; the pooled ``mae``, ``rmse``, ``srcc`` and ``plcc`` are
computed over the evaluated parties' samples together, and each party's own MAE and
SRCC go to ``parties.csv``.  The same machinery scores each party on its
local test split (``party_test_fraction``): its own images, so the per-party outcomes see
input shift.

One forward pass over the chosen parties' rows; per-party sums are one ``index_add``
each on the device, read with one host transfer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F

from federated.data import Augmenter
from federated.evaluation.holdout import PartySplit
from federated.tasks.objective import (
    SCORE_METRICS,
    agreement,
    is_score_target,
    per_sample_loss,
    score_metrics,
)

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
    # score tasks: the pooled mae, rmse, srcc, plcc, and the same per party, each (N,)
    # (NaN where not evaluated); empty for classification
    metrics: dict[str, float] = field(default_factory=dict)
    party_metrics: dict[str, np.ndarray] = field(default_factory=dict)


@torch.no_grad()
def per_party_sums(
    model: torch.nn.Module,
    split: PartySplit,
    rows: torch.Tensor | None,
    augmenter: Augmenter,
    batch_size: int,
    score_loss: str = "mse",
    threshold: float = 0.5,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per party of ``split``: (correct predictions, summed cross-entropy, samples) of
    ``model`` over the split's rows ``rows`` (a boolean mask; None: all).  On score
    targets "correct" is the binary agreement at ``threshold`` and the loss the
    ``score_loss`` (:func:`score_predictions` gives the predictions themselves)."""
    x, y, owner = split.x, split.y, split.owner
    if rows is not None:
        x, y, owner = x[rows], y[rows], owner[rows]
    n = len(split.sizes)
    correct = torch.zeros(n, dtype=torch.float64, device=y.device)
    loss = torch.zeros(n, dtype=torch.float64, device=y.device)
    scored = is_score_target(y)
    was_training = model.training
    model.eval()
    for start in range(0, y.shape[0], batch_size):
        stop = start + batch_size
        logits = model(augmenter.normalize(x[start:stop])).logits
        batch_y, batch_owner = y[start:stop], owner[start:stop]
        if scored:
            per_sample = per_sample_loss(logits, batch_y, score_loss).double()
            hits = agreement(logits[:, 0], batch_y[:, 0], threshold)
        else:
            per_sample = F.cross_entropy(logits, batch_y, reduction="none").double()
            hits = (logits.argmax(dim=1) == batch_y).double()
        loss.index_add_(0, batch_owner, per_sample)
        correct.index_add_(0, batch_owner, hits)
    model.train(was_training)
    samples = torch.bincount(owner, minlength=n).double()
    sums = torch.stack([correct, loss, samples]).cpu().numpy()  # one host transfer
    return sums[0], sums[1], sums[2]


@torch.no_grad()
def score_predictions(
    model: torch.nn.Module,
    split: PartySplit,
    rows: torch.Tensor | None,
    augmenter: Augmenter,
    batch_size: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A score task's (predicted score, true score, owner) over the split's ``rows``."""
    x, y, owner = split.x, split.y, split.owner
    if rows is not None:
        x, y, owner = x[rows], y[rows], owner[rows]
    was_training = model.training
    model.eval()
    predicted = [
        model(augmenter.normalize(x[start : start + batch_size])).logits[:, 0].float()
        for start in range(0, y.shape[0], batch_size)
    ]
    model.train(was_training)
    scores = torch.cat(predicted).cpu().numpy() if predicted else np.zeros(0)
    return scores, y[:, 0].cpu().numpy(), owner.cpu().numpy()


class SplitEvaluator:
    """Scores models on one :class:`PartySplit` each round it is asked to.

    ``fraction``: the share of the split's parties (those holding samples) evaluated
    each time, ``max(1, round(k * fraction))`` of the k, drawn from ``rng`` (None: all
    of them, no draw).  ``score_loss`` and ``threshold``: a score task's loss and binary
    accuracy threshold (unused on class labels)."""

    def __init__(
        self,
        split: PartySplit,
        fraction: float = 1.0,
        rng: np.random.Generator | None = None,
        score_loss: str = "mse",
        threshold: float = 0.5,
    ) -> None:
        self.split = split
        self.fraction = fraction
        self.rng = rng
        self.score_loss = score_loss
        self.threshold = threshold
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
        correct, loss, samples = per_party_sums(
            model, self.split, rows, augmenter, batch_size, self.score_loss, self.threshold
        )
        evaluated = samples > 0
        party_acc = np.divide(correct, samples, out=np.full_like(correct, NAN), where=evaluated)
        party_loss = np.divide(loss, samples, out=np.full_like(loss, NAN), where=evaluated)
        total = samples.sum()
        scores = SplitScores(
            acc=float(correct.sum() / total),
            loss=float(loss.sum() / total),
            party_acc=party_acc,
            party_loss=party_loss,
            parties=int(evaluated.sum()),
        )
        if not is_score_target(self.split.y):
            return scores
        return self._with_score_metrics(scores, model, rows, augmenter, batch_size)

    def _with_score_metrics(
        self,
        scores: SplitScores,
        model: torch.nn.Module,
        rows: torch.Tensor | None,
        augmenter: Augmenter,
        batch_size: int,
    ) -> SplitScores:
        predicted, truth, owner = score_predictions(model, self.split, rows, augmenter, batch_size)
        pooled = score_metrics(predicted, truth, 0.0, self.threshold)
        n = len(self.split.sizes)
        party_metrics = {k: np.full(n, NAN) for k in SCORE_METRICS}
        for party in np.unique(owner):
            mine = owner == party
            own = score_metrics(predicted[mine], truth[mine], 0.0, self.threshold)
            for k in SCORE_METRICS:
                party_metrics[k][party] = own[k]
        return replace(
            scores, metrics={k: pooled[k] for k in SCORE_METRICS}, party_metrics=party_metrics
        )


def combined_scores(parts: dict[int, SplitScores], sizes: list[int]) -> SplitScores:
    """One :class:`SplitScores` from parties scored one at a time (SOLO: each with its
    own model): size-weighted over ``parts``' parties, ``sizes`` their split sizes."""
    party_acc = np.full(len(sizes), NAN)
    party_loss = np.full(len(sizes), NAN)
    names = {k for scores in parts.values() for k in scores.party_metrics}
    party_metrics = {k: np.full(len(sizes), NAN) for k in sorted(names)}
    for party, scores in parts.items():
        party_acc[party] = scores.party_acc[party]
        party_loss[party] = scores.party_loss[party]
        for k in names:
            party_metrics[k][party] = scores.party_metrics[k][party]
    weights = np.array([sizes[p] for p in parts], dtype=np.float64)
    total = weights.sum()
    if not total:
        return SplitScores(NAN, NAN, party_acc, party_loss, 0, {}, party_metrics)
    chosen = list(parts)

    def weighted(values: np.ndarray) -> float:
        return float((values[chosen] * weights).sum() / total)

    # each party scored by its own model: a score task's metrics are the parties'
    # own, size-weighted (one pooled correlation over several models would mix them)
    return SplitScores(
        acc=weighted(party_acc),
        loss=weighted(party_loss),
        party_acc=party_acc,
        party_loss=party_loss,
        parties=len(chosen),
        metrics={k: weighted(v) for k, v in party_metrics.items()},
        party_metrics=party_metrics,
    )
