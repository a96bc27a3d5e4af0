"""Per-party outcomes: the global model scored on every party's own distribution.

Definition (README, "Per-party outcomes").  From the one test-set evaluation a round
already does, per-class accuracy ``a_c`` (correct / test samples of class c); party
i's accuracy is the test set re-weighted by its training class mix:

    acc_i = sum_c s_ic * a_c,    s_ic = n_ic / sum_c' n_ic'   (n_ic: party i's training
                                                              samples of class c)

summed over the classes the evaluated test set holds (a class with no test sample has no
accuracy; the shares are renormalised over the others, and a party holding none of them
scores NaN).  This costs one ``bincount`` per evaluation batch and an (N × C) · C product
per round: no extra forward pass.  Under SOLO (personal models) each party's own model is
scored on its own distribution the same way.

What it captures: label skew (Dirichlet, labels, quantity partitions), exactly in
expectation over the test set.  What it does not: a shift in the inputs themselves —
natural parties (one camera, hospital or writer per folder) or ``feature_skew`` — whose
images look unlike the pooled test set; class re-weighting scores such a party on other
parties' images of its classes.

Summary over all N parties (fractions in [0, 1]; the row keys of
:mod:`federated.engine.round_row`): mean, std (population, ddof 0, as SOLO's ``test_acc_std``),
minimum, and the worst decile: the mean of the ``ceil(N / 10)`` lowest accuracies (at
least one party).  ``party_scores_every`` (RunConfig) bounds the cost: 0 turns scoring
off, k scores every k-th round and always the last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from federated.contract.metrics import party_summary_keys
from federated.contract.task_needs import CLASS_PER_SAMPLE, TaskNeed
from federated.tasks.base import Scores

NAN = float("nan")
# Row keys, in this order (federated/engine/round_row.py documents them), of
# classification's accuracy; a task's per-party metric <stem> names its own
# (party_<stem>_mean ...: a score task's party_bin_acc_mean)
SUMMARY_KEYS = party_summary_keys("acc")
#: what re-weighting the test set by a party's class mix needs of the task: a task
#: that does not meet it has per-party outcomes only from the parties' own local test
#: splits (``party_test_fraction``), or none
REWEIGHTING_NEEDS: tuple[TaskNeed, ...] = (CLASS_PER_SAMPLE,)


def class_shares(class_counts: np.ndarray) -> np.ndarray:
    """(N, C) training class shares ``s_ic`` of each party (rows sum to 1; an empty
    party's row is zeros)."""
    counts = np.asarray(class_counts, dtype=np.float64)
    totals = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)


def party_accuracies(
    shares: np.ndarray, class_correct: Sequence[float], class_total: Sequence[float]
) -> np.ndarray:
    """Each party's accuracy (fraction) from per-class correct counts and test samples.

    Classes without a test sample are left out and the shares renormalised over the
    rest; a party with no share on any tested class gets NaN."""
    correct = np.asarray(class_correct, dtype=np.float64)
    total = np.asarray(class_total, dtype=np.float64)
    tested = total > 0
    per_class = np.divide(correct, total, out=np.zeros_like(correct), where=tested)
    weights = np.asarray(shares, dtype=np.float64) * tested
    mass = weights.sum(axis=1)
    scored = weights @ per_class
    return np.divide(scored, mass, out=np.full_like(scored, NAN), where=mass > 0)


def worst_decile(accuracies: Sequence[float]) -> float:
    """Mean of the ``ceil(n / 10)`` lowest of the finite accuracies (NaN when none)."""
    values = np.sort(np.asarray(accuracies, dtype=np.float64))
    values = values[np.isfinite(values)]
    if values.size == 0:
        return NAN
    return float(values[: math.ceil(values.size / 10)].mean())


def summary(accuracies: Sequence[float], stem: str = "acc") -> dict[str, float]:
    """The row's per-party columns of the per-party metric ``stem`` (mean, std, min,
    worst decile: ``party_acc_mean`` ..., :func:`party_summary_keys`) over the finite
    values."""
    values = np.asarray(accuracies, dtype=np.float64)
    values = values[np.isfinite(values)]
    keys = party_summary_keys(stem)
    if values.size == 0:
        return dict.fromkeys(keys, NAN)
    return dict(
        zip(
            keys,
            (float(values.mean()), float(values.std()), float(values.min()), worst_decile(values)),
        )
    )


def scoring_due(round_number: int, every: int, rounds: int) -> bool:
    """Whether 1-based ``round_number`` is scored: every ``every``-th round and the last
    one; never when ``every`` is 0."""
    return every > 0 and (round_number % every == 0 or round_number == rounds)


class PartyScorer:
    """Scores models per party for one run (its class counts, test set and option).

    ``last`` holds the latest scored round's per-party accuracies (N,), ``last_round``
    its 1-based number; ``personal`` collects SOLO's own-model scores of a round.
    """

    def __init__(
        self,
        class_counts: np.ndarray,
        n_classes: int,
        every: int,
        rounds: int,
        stem: str = "acc",
    ):
        self.shares = class_shares(class_counts)
        #: the per-party metric the row's summaries name (``party_<stem>_mean`` ...)
        self.stem = stem
        self.n_classes = n_classes
        self.every = every
        self.rounds = rounds
        self.last: np.ndarray | None = None
        self.last_round = 0
        self._personal: dict[int, float] = {}

    def due(self, round_number: int) -> bool:
        return scoring_due(round_number, self.every, self.rounds)

    def record(self, round_number: int, scores: Scores, party: int | None = None) -> None:
        """On a due round, the per-party outcomes from a pooled test evaluation's class
        counts (a task without classes has none: nothing is recorded): every party's
        with the global model (``party=None``), or party ``party``'s with its own."""
        if not self.due(round_number) or scores.class_correct is None:
            return
        if party is None:
            self.last = party_accuracies(self.shares, scores.class_correct, scores.class_total)
            self.last_round = round_number
        else:
            own = party_accuracies(
                self.shares[party : party + 1], scores.class_correct, scores.class_total
            )
            self._personal[party] = float(own[0])

    def use_own_scores(self, round_number: int, accuracies: np.ndarray) -> None:
        """Replace this round's class re-weighted scores by the parties' scores on their
        own local test splits (``party_test_fraction``): the global model's (N,), or,
        under SOLO, one party's own model as a length-1 array in :meth:`own_score`."""
        self.last = np.asarray(accuracies, dtype=np.float64)
        self.last_round = round_number

    def own_score(self, party: int, accuracy: float) -> None:
        """SOLO with local test splits: party ``party``'s own model on its own split."""
        self._personal[party] = float(accuracy)

    def columns(self, round_number: int) -> dict[str, float]:
        """The row's per-party columns for this round (NaN when not scored); SOLO's own
        scores collected this round become ``last``.  Nothing when scoring is off."""
        if self.every == 0:
            return {}
        if self._personal:
            scores = np.full(len(self.shares), NAN)
            for party, value in self._personal.items():
                scores[party] = value
            self.last, self.last_round = scores, round_number
            self._personal = {}
        if not self.due(round_number) or self.last_round != round_number:
            return dict.fromkeys(party_summary_keys(self.stem), NAN)
        return summary(self.last, self.stem)
