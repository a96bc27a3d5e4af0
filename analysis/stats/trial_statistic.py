"""What one trial's accuracy is: the reported statistic, a stated choice.

Every table, Δ, interval and resolvable difference of the report is computed on the
statistic chosen here, and every table's caption names it.  Below, "test accuracy" reads
as the table's metric (:mod:`analysis.primary_metric`): top-1 accuracy for classification,
a score task's primary metric (``test_srcc``, ``test_mae`` ...) for score tasks, with
"highest" read in the metric's direction (the lowest MAE is the best).  The choices (the
text a user writes after ``--statistic`` or as ``[report] statistic`` in a study file):

``final``
    test accuracy at the last round run (the MOON paper's "final accuracy").
``last:K``
    the mean test accuracy of the last ``K`` rounds (``K`` ≥ 1; ``last:1`` is ``final``).
    A trial that ran fewer than ``K`` rounds is averaged over all of its rounds, and the
    caption says so.  A trial whose test set was scored every few rounds (a personalised
    method's own models, ``personal_test_every``) averages the scored rounds among its
    last ``K`` (with ``K`` = 3 and every 5th round scored: its last round alone).
``val``
    the test accuracy at the round whose validation accuracy (``val_acc``, measured on a
    held-out part of the training data) is highest, the earliest such round on ties:
    select on validation, report on test.  Only rounds where validation was measured are
    candidates (a row's ``val_round`` says which round its ``val_acc`` is from; runs
    validate on their scored rounds, ``party_scores_every``, and always the last).
    Trials run without a validation set (``val_fraction`` = 0) have no ``val_acc``: the
    report refuses ``val`` for them.
    ``val`` and ``best`` choose among the rounds that have a test value.
``best``
    the highest test accuracy over rounds (chosen on the test set itself: optimistic;
    the report's older ``--metric best``).

The default, :data:`DEFAULT_STATISTIC` (``last:3``), was chosen on real runs: on
Fashion-MNIST's non-IID curves the mean of the last 3 rounds has a much smaller
seed-to-seed spread of the paired differences than the final round alone
(docs/reported-statistic.md has the measurements).

Units: accuracies stay fractions in [0, 1] here (as in the rows); the tables turn them
into percentages.  Along with the value, each trial gets its *climb*: the rise of a
least-squares line through its test accuracy over the last :data:`CLIMB_WINDOW` rounds up
to the reported round (a fraction; :mod:`analysis.stats.convergence` judges it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.primary_metric import ACCURACY, Metric

# The trial columns the statistic adds (see :func:`with_statistic`).
REPORTED = "reported_acc"
# Rounds the climb's line is fitted over (fewer when a trial ran fewer): five rounds see
# past one round's oscillation of a non-IID curve and are short next to any real run.
CLIMB_WINDOW = 5
KINDS = ("final", "last", "val", "best")
ALLOWED = "final, last:K (K a whole number >= 1), val, best"
VALIDATION_FIX = "run with val_fraction > 0"


class StatisticError(ValueError):
    """A statistic that cannot be used: one line naming what is wrong and what is allowed."""


@dataclass(frozen=True)
class Statistic:
    """One choice of what a trial's accuracy is.

    Attributes:
        kind: ``final``, ``last``, ``val`` or ``best``.
        k: the rounds averaged (``last`` only; 1 otherwise).
    """

    kind: str
    k: int = 1

    def __str__(self) -> str:
        return f"last:{self.k}" if self.kind == "last" else self.kind

    @property
    def needs_validation(self) -> bool:
        return self.kind == "val"

    def text(self, shortest: int | None = None, metric: Metric = ACCURACY) -> str:
        """The words a caption names the statistic on ``metric`` with.  ``shortest``: the
        fewest rounds a counted trial ran, when known (``last:K`` says where a trial had
        fewer than K)."""
        if self.kind == "final" or (self.kind == "last" and self.k == 1):
            return f"final-round {metric.words}"
        if self.kind == "best":
            lowest = "" if metric.higher_is_better else " (the lowest)"
            return f"best {metric.noun} over rounds{metric.unit}{lowest}"
        if self.kind == "val":
            return f"{metric.words} at the round of best validation {metric.name}"
        words = f"{metric.words}, mean of the last {self.k} rounds"
        if shortest is not None and shortest < self.k:
            words += " (or of all rounds, where a trial ran fewer)"
        return words

    def upto_words(self, until: str, metric: Metric = ACCURACY) -> str:
        """How the statistic reads at a given round (Table 3's columns): ``""`` for
        ``final``, else e.g. `` (mean of the last 3 rounds up to the round)``."""
        if self.kind == "final" or (self.kind == "last" and self.k == 1):
            return ""
        if self.kind == "best":
            return f" (best up to {until})"
        if self.kind == "val":
            return f" (at the round of best validation {metric.name} up to {until})"
        return f" (mean of the last {self.k} rounds up to {until})"


FINAL = Statistic("final")
BEST = Statistic("best")
DEFAULT_STATISTIC = Statistic("last", 3)


def parse_statistic(text: Any, where: str = "--statistic") -> Statistic:
    """``"final"``, ``"last:3"``, ``"val"`` or ``"best"`` -> :class:`Statistic`.

    Raises :class:`StatisticError` naming ``where`` and the allowed forms."""
    if isinstance(text, str):
        spec = text.strip().lower()
        if spec in ("final", "val", "best"):
            return Statistic(spec)
        found = re.fullmatch(r"last:(\d+)", spec)
        if found and int(found.group(1)) >= 1:
            return Statistic("last", int(found.group(1)))
    raise StatisticError(f"{where}={text!r} (allowed: {ALLOWED})")


def study_statistic(report: Mapping[str, Any]) -> Statistic | None:
    """The statistic a study file's ``[report]`` names (``statistic = "last:3"``), if any."""
    value = report.get("statistic")
    return None if value is None else parse_statistic(value, "[report] statistic")


def resolve_statistic(chosen: Statistic | None, report: Mapping[str, Any]) -> Statistic:
    """What a table reports: the user's choice, else its study file's, else the default."""
    return chosen or study_statistic(report) or DEFAULT_STATISTIC


# -------------------------------------------------------------------------- values
def _climb(rounds: np.ndarray, accuracies: np.ndarray) -> float:
    """The rise of the least-squares line through (round, accuracy) from its first round
    to its last (a fraction); NaN for fewer than two rounds."""
    if rounds.size < 2:
        return math.nan
    slope = np.polyfit(rounds.astype(float), accuracies, 1)[0]
    return float(slope * (rounds[-1] - rounds[0]))


def _first_within(numbers: np.ndarray, at: int, rounds: int) -> int:
    """The index of the first of the sorted round ``numbers`` within the ``rounds``
    rounds that end at ``numbers[at]``."""
    return int(np.searchsorted(numbers, numbers[at] - rounds + 1))


def _one_trial(
    rows: pd.DataFrame, statistic: Statistic, upto: int | None, metric: Metric
) -> dict[str, float]:
    """The statistic on ``metric`` of one trial's rows (sorted by round), at ``upto``
    (default: its last)."""
    if upto is not None:
        rows = rows[rows["round"] <= upto]
    rows = rows[rows[metric.column].notna()] if metric.column in rows else rows.iloc[0:0]
    if rows.empty:
        return {"value": math.nan, "std": math.nan, "round": math.nan, "climb": math.nan}
    test = rows[metric.column].to_numpy(dtype=float)
    numbers = rows["round"].to_numpy(dtype=int)
    party_std = f"{metric.column}_std"
    spread = (
        rows[party_std].to_numpy(dtype=float) if party_std in rows else np.full(len(rows), math.nan)
    )
    at = len(rows) - 1  # index of the reported round
    if statistic.kind == "best":
        at = int(np.argmax(metric.sign * test))  # earliest of the best
    elif statistic.kind == "val":
        column = metric.val_column
        val = rows[column].to_numpy(dtype=float) if column in rows else np.array([])
        if val.size and "val_round" in rows:
            # a row repeats the latest validation between validated rounds: only the
            # round it was measured at is a candidate
            measured = pd.to_numeric(rows["val_round"], errors="coerce").to_numpy() == numbers
            val = np.where(measured, val, math.nan)
        if val.size == 0 or np.isnan(val).all():
            return {"value": math.nan, "std": math.nan, "round": math.nan, "climb": math.nan}
        at = int(np.nanargmax(metric.sign * val))  # earliest of the best
    # windows are counted in rounds, not rows: a trial whose test set was scored every
    # few rounds (personal_test_every) averages the scored rounds among its last k
    window = (
        slice(_first_within(numbers, at, statistic.k), at + 1)
        if statistic.kind == "last"
        else slice(at, at + 1)
    )
    value = float(np.mean(test[window]))
    std = float(np.sqrt(np.mean(spread[window] ** 2))) if statistic.kind != "best" else math.nan
    fit = slice(_first_within(numbers, at, CLIMB_WINDOW), at + 1)
    return {
        "value": value,
        "std": std,
        "round": float(numbers[at]),
        "climb": _climb(numbers[fit], test[fit]),
    }


def trial_values(
    rounds: pd.DataFrame,
    statistic: Statistic,
    upto: int | None = None,
    metric: Metric = ACCURACY,
) -> pd.DataFrame:
    """Per trial, indexed by (sweep, trial): ``value`` (the statistic of ``metric``, as
    recorded: a fraction for accuracy), ``std`` (SOLO's spread over parties at the
    reported round(s), as a root mean square; NaN without ``test_<metric>_std`` or for
    ``best``), ``round`` (the reported round: the last, or the round chosen) and
    ``climb`` (see the module docstring).

    ``upto``: compute it as if the trials had stopped at that round (Table 3's half-way
    column)."""
    columns = ["value", "std", "round", "climb"]
    if rounds.empty:
        return pd.DataFrame(
            columns=columns, index=pd.MultiIndex.from_tuples([], names=["sweep", "trial"])
        )
    frame = rounds.copy()
    for column in (metric.column, f"{metric.column}_std", metric.val_column):
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame = frame.sort_values(["sweep", "trial", "round"], kind="stable")
    out = {
        key: _one_trial(rows, statistic, upto, metric)
        for key, rows in frame.groupby(["sweep", "trial"], sort=False)
    }
    index = pd.MultiIndex.from_tuples(list(out), names=["sweep", "trial"])
    return pd.DataFrame(list(out.values()), index=index, columns=columns)


def with_statistic(
    trials: pd.DataFrame, rounds: pd.DataFrame, statistic: Statistic, metric: Metric = ACCURACY
) -> pd.DataFrame:
    """``trials`` with the statistic's columns on ``metric``: :data:`REPORTED` (as
    recorded: a fraction for accuracy), ``reported_acc_std`` (SOLO's spread over parties,
    where rows record it), ``reported_acc_climb`` and ``reported_acc_round`` (the
    reported round).  The names stay ``reported_acc*`` whatever the metric."""
    values = trial_values(rounds, statistic, metric=metric)
    keys = list(zip(trials["sweep"], trials["trial"]))

    def column(name: str) -> list[float]:
        return [values[name].get(key, math.nan) for key in keys]

    out = trials.copy()
    out[REPORTED] = column("value")
    if f"{metric.column}_std" in rounds and statistic.kind != "best":
        out[f"{REPORTED}_std"] = column("std")
    out[f"{REPORTED}_climb"] = column("climb")
    out[f"{REPORTED}_round"] = column("round")
    return out


def final_values(
    trials: pd.DataFrame, rounds: pd.DataFrame, metric: Metric = ACCURACY
) -> list[float]:
    """Each trial's test value of ``metric`` at its last round, in ``trials``' order (as
    recorded; NaN where it has none): the last round's ``test_<stem>`` in ``rounds``
    (what loading's ``final_<stem>`` holds for the trial's own primary metric)."""
    return last_values(trials, rounds, metric.column)


def last_values(trials: pd.DataFrame, rounds: pd.DataFrame, column: str) -> list[float]:
    """Each trial's ``column`` at its last round, in ``trials``' order (NaN where it has
    none): a selecting sweep's ``val_<metric>``, carried to the last row."""
    if column not in rounds or rounds.empty:
        return [math.nan] * len(trials)
    last = rounds.sort_values("round", kind="stable").groupby(["sweep", "trial"]).tail(1)
    values = pd.to_numeric(last[column], errors="coerce").astype(float)
    lookup = dict(zip(zip(last["sweep"], last["trial"]), values))
    return [lookup.get(key, math.nan) for key in zip(trials["sweep"], trials["trial"])]


def shortest_rounds(trials: pd.DataFrame, statuses: tuple[str, ...] = ("completed",)) -> int | None:
    """The fewest rounds a counted trial ran (None when none is counted)."""
    counted = trials[trials["status"].isin(statuses)]
    if counted.empty or "last_round" not in counted:
        return None
    return int(counted["last_round"].min())


def missing_validation(
    rounds: pd.DataFrame,
    trials: pd.DataFrame,
    statuses: tuple[str, ...] = ("completed",),
    metric: Metric = ACCURACY,
) -> list[str]:
    """The counted trials (``sweep/trial``) whose rows hold no validation value of
    ``metric`` (``val_acc``, ``val_srcc`` ...)."""
    counted = trials[trials["status"].isin(statuses)]
    if counted.empty:
        return []
    if metric.val_column not in rounds:
        return [f"{s}/{t}" for s, t in zip(counted["sweep"], counted["trial"])]
    has = pd.to_numeric(rounds[metric.val_column], errors="coerce").notna()
    with_val = set(zip(rounds.loc[has, "sweep"], rounds.loc[has, "trial"]))
    return [
        f"{s}/{t}" for s, t in zip(counted["sweep"], counted["trial"]) if (s, t) not in with_val
    ]


def check_validation(
    rounds: pd.DataFrame,
    trials: pd.DataFrame,
    where: str = "--statistic",
    metric: Metric = ACCURACY,
) -> None:
    """Refuse ``val`` for trials run without a validation set (one line, the fix named)."""
    missing = missing_validation(rounds, trials, metric=metric)
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise StatisticError(
            f"{where}=val: trial {missing[0]}{more} recorded no {metric.val_column} "
            f"({VALIDATION_FIX}, "
            f"or choose final or last:K)"
        )
