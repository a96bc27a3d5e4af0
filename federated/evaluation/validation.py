"""Federated evaluation: a model scored on the parties' held-out samples.

With validation on (``val_fraction`` > 0, federated/evaluation/holdout.py) each scored
round the global model is evaluated on the validation samples of a seeded share of the
parties (``eval_fraction``, drawn from the run's ``evaluation`` stream; Flower's
``fraction_evaluate``), or on the server's slice (``val_split="server"``).  The row's
``val_<metric>`` columns are the task's per-party accumulator's pooled values
(:mod:`federated.tasks`): size-weighted sums over the evaluating parties' samples for
accuracy and loss, and (score tasks) the correlations and errors over their samples
together; each party's own values go to ``parties.csv``.  The same machinery scores each
party on its local test split (``party_test_fraction``): its own images, so the
per-party outcomes see input shift.

One forward pass over the chosen parties' rows (:func:`federated.evaluation.scoring.evaluate`);
per-party sums are one ``index_add`` each on the device, read with one host transfer.
"""

from __future__ import annotations

import numpy as np
import torch

from federated.data import Augmenter
from federated.evaluation.holdout import PartySplit
from federated.evaluation.scoring import evaluate
from federated.runtime.precision import FLOAT32, Precision
from federated.tasks.base import Scores, Task

NAN = float("nan")


class SplitEvaluator:
    """Scores models on one :class:`PartySplit` each time it is asked to.

    ``fraction``: the share of the split's parties (those holding samples) evaluated
    each time, ``max(1, round(k * fraction))`` of the k, drawn from ``rng`` (None: all
    of them, no draw)."""

    def __init__(
        self,
        split: PartySplit,
        task: Task,
        fraction: float = 1.0,
        rng: np.random.Generator | None = None,
        precision: Precision = FLOAT32,
    ) -> None:
        self.split = split
        self.precision = precision  # the run's: its forward passes' autocast
        self.task = task
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
    ) -> Scores:
        """``model`` on the split's rows of ``parties`` (default: :meth:`chosen_parties`)."""
        if parties is None:
            parties = self.chosen_parties()
        split = self.split
        x, y, owner = split.x, split.y, split.owner
        if len(parties) < len(self.holding):
            chosen = torch.zeros(len(split.sizes), dtype=torch.bool)
            chosen[torch.from_numpy(np.asarray(parties, dtype=np.int64))] = True
            rows = chosen.to(owner.device)[owner]
            x, y, owner = x[rows], self.task.take_targets(y, rows), owner[rows]
        accumulator = self.task.accumulator(len(split.sizes))
        return evaluate(
            model, x, y, augmenter, batch_size, accumulator, owner, precision=self.precision
        )


def combined_scores(parts: dict[int, Scores], sizes: list[int], names: tuple[str, ...]) -> Scores:
    """One :class:`Scores` of the metrics ``names`` from parties scored one at a time (a
    personal model each): every metric size-weighted over ``parts``' parties, ``sizes``
    their split sizes (one pooled correlation over several models would mix them)."""
    n = len(sizes)
    party_values = {k: np.full(n, NAN) for k in names}
    for party, scores in parts.items():
        for k in names:
            party_values[k][party] = scores.party_values[k][party]
    weights = np.array([sizes[p] for p in parts], dtype=np.float64)
    total = weights.sum()
    if not total:
        return Scores(dict.fromkeys(names, NAN), party_values, 0)
    chosen = list(parts)

    def weighted(values: np.ndarray) -> float:
        return float((values[chosen] * weights).sum() / total)

    return Scores({k: weighted(v) for k, v in party_values.items()}, party_values, len(chosen))
