"""Communication efficiency (the paper's Table 2): rounds to reach the baseline's accuracy.

Definitions (the paper: "the number of rounds of different approaches to achieve the
same accuracy as running FedAvg for 100 rounds"; "the speedup of an approach is
computed against FedAvg"):

- ``target``: the baseline's final test accuracy (at its last round).  By default per
  seed (``target="per-seed"``): a method's run with seed s is compared with the
  baseline's run with seed s, which shares its partition and initial weights, so the
  comparison is paired.  A seed the baseline does not have falls back to the mean
  target.  With ``target="mean"`` every run is compared with the baseline's mean final
  accuracy over seeds.
- ``rounds_to_reach(curve, target)``: the first round (1-based, the ``round`` column)
  whose test accuracy is >= target (reaching it exactly counts); ``None`` if no round
  does ("not reached").
- The baseline's rounds are the rounds it ran (the paper's "running FedAvg for 100
  rounds" gives FedAvg 100 and 1×), not the first round its curve touches its own
  final value.
- ``speedup = baseline rounds / method rounds``; not reached is shown as the paper
  does, ``<1×``.
- Summary over seeds: a method counts as reaching the target only if it does so for
  every seed; then its rounds are the mean over seeds (± std) and its speed-up is the
  baseline's rounds over that mean, shown with the std of the per-seed speed-ups
  (``speedup_std``).  Otherwise the table says in how many seeds it was reached and
  shows ``<1×``.
- A speed-up means something only when the baseline has learned: the table
  (:func:`analysis.tables.table.communication_table`) gives rounds and speed-ups for a column
  only when every target there is at least chance (1/classes) plus
  :data:`analysis.stats.comparisons.LEARNED_MARGIN` (10 accuracy points); otherwise each of its
  cells says why instead of a number (reaching a chance-level accuracy first is luck).
- A run whose test column was not scored every round (a personalised method's own models
  on the pooled test set, every ``personal_test_every`` rounds) is left out: the first
  scored round at or above the target only bounds the round that reached it.  The table
  names such rows in a note (:func:`sparsely_scored`).
- A score task's table (:mod:`analysis.primary_metric`) counts on its metric instead of
  accuracy: the target is the baseline's final value of it (``test_srcc``, ``test_mae``
  ...), and a round reaches it at least as high, or, for an error (MAE, RMSE), at most as
  high.  No chance level applies there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.primary_metric import ACCURACY, Metric
from analysis.reading.loading import COMPLETED
from analysis.stats.trial_statistic import final_values

TARGETS = ("per-seed", "mean")
NOT_REACHED = "<1×"
#: :func:`communication_frame`'s columns after the column group's and the row's
FRAME_COLUMNS = (
    "seed",
    "target",
    "target_source",
    "baseline_rounds",
    "rounds_needed",
    "reached",
    "speedup",
    "at_most",
)


def rounds_to_reach(
    rounds: Sequence[int],
    accuracies: Sequence[float],
    target: float,
    higher_is_better: bool = True,
) -> int | None:
    """The first round whose accuracy is >= ``target`` (an error, ``higher_is_better``
    False: <= ``target``), or None if none is.

    ``rounds`` are round numbers (1-based), ``accuracies`` the metric as recorded
    (fractions in [0, 1] for accuracy), in any order (they are sorted by round).  NaN
    values (a diverged round) never reach.
    """
    if target is None or math.isnan(target):
        raise ValueError("rounds_to_reach: the target accuracy is NaN")
    for round_number, accuracy in sorted(zip(rounds, accuracies)):
        reached = accuracy >= target if higher_is_better else accuracy <= target
        if reached:  # False for NaN
            return int(round_number)
    return None


def speedup(baseline_rounds: float, method_rounds: float | None) -> float | None:
    """``baseline_rounds / method_rounds``; None when the method never reached."""
    if method_rounds is None or (isinstance(method_rounds, float) and math.isnan(method_rounds)):
        return None
    return float(baseline_rounds) / float(method_rounds)


def format_speedup(value: float | None) -> str:
    """``3.7×``; not reached: ``<1×`` (the paper's notation)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOT_REACHED
    return f"{value:.1f}×"


def baseline_rows(trials: pd.DataFrame, row: str, baseline: str, baseline_column: str) -> object:
    """The value of ``row`` that denotes the baseline (``baseline_column == baseline``)."""
    values = trials.loc[trials[baseline_column] == baseline, row].drop_duplicates().tolist()
    if len(values) != 1:
        raise ValueError(
            f"baseline {baseline!r} must be exactly one row of {row!r}, found {values or 'none'}"
        )
    return values[0]


def communication_frame(
    rounds: pd.DataFrame,
    trials: pd.DataFrame,
    *,
    row: str,
    columns: Sequence[str] = ("dataset",),
    baseline: str = "fedavg",
    baseline_column: str = "algorithm",
    target: str = "per-seed",
    metric: Metric = ACCURACY,
) -> pd.DataFrame:
    """Per (column group, row, seed): the target, the rounds to reach it, the speed-up.

    ``trials`` and ``rounds`` are :class:`~analysis.reading.loading.Results` frames; only
    completed trials are used.  Column groups without a completed baseline trial are
    left out.  ``metric``: what is reached (its test column; an error is reached from
    above).  Returns columns ``*columns, row, seed, target`` (the metric as recorded)
    ``, target_source, baseline_rounds, rounds_needed`` (NaN: not reached) ``, reached,
    speedup, at_most`` (True: a trial scored every k-th round, ``personal_test_every``:
    its first scored round that reached the target, so it reached it at most then and
    its speed-up is at least the one given).
    """
    if target not in TARGETS:
        raise ValueError(f"target={target!r} (allowed: {', '.join(TARGETS)})")
    columns = list(columns)
    curves = _test_curves(rounds, metric)
    done = _completed_with_value(trials, rounds, metric)
    gaps = _with_gaps(curves, done)
    out = []
    groups = done.groupby(columns, dropna=False, sort=False) if columns else [((), done)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        base = group[group[baseline_column] == baseline]
        if base.empty:
            continue
        base_value = baseline_rows(group, row, baseline, baseline_column)
        targets = _BaselineTargets.of(base)
        for _, trial in group.iterrows():
            seed = trial["seed"]
            paired = target == "per-seed" and seed in targets.by_seed
            goal = targets.by_seed[seed] if paired else targets.mean
            r_base = targets.rounds[seed] if paired else targets.mean_rounds
            # a trial scored every k-th round (personal_test_every) reached the target
            # at most at its first scored round that reaches it: counted, as a bound
            bounded = (trial["sweep"], trial["trial"]) in gaps and trial[row] != base_value
            if trial[row] == base_value:
                needed: float | None = float(trial["last_round"])  # by definition (see above)
            else:
                needed = _rounds_needed(curves, trial, goal, metric)
            out.append(
                {
                    **dict(zip(columns, key)),
                    row: trial[row],
                    "seed": seed,
                    "target": goal,
                    "target_source": "same seed" if paired else "mean over seeds",
                    "baseline_rounds": r_base,
                    "rounds_needed": math.nan if needed is None else needed,
                    "reached": needed is not None,
                    "speedup": speedup(r_base, needed),
                    "at_most": bounded and needed is not None,
                }
            )
    return pd.DataFrame(out, columns=[*columns, row, *FRAME_COLUMNS])


def sparsely_scored(
    rounds: pd.DataFrame, trials: pd.DataFrame, metric: Metric = ACCURACY
) -> pd.DataFrame:
    """The completed trials (rows of ``trials``) whose test ``metric`` was not scored
    every round: rounds without a value before a last round with one (a personalised
    method's ``personal_test_every`` > 1)."""
    done = _completed_with_value(trials, rounds, metric)
    gaps = _with_gaps(_test_curves(rounds, metric), done)
    return done[[key in gaps for key in zip(done["sweep"], done["trial"])]]


def _completed_with_value(
    trials: pd.DataFrame, rounds: pd.DataFrame, metric: Metric
) -> pd.DataFrame:
    """The completed trials with a final value of ``metric`` (``final_value`` added)."""
    done = trials.assign(final_value=final_values(trials, rounds, metric))
    return done[(done["status"] == COMPLETED) & done["final_value"].notna()]


def _with_gaps(
    curves: dict[tuple[str, str], tuple[list[int], list[float]]], done: pd.DataFrame
) -> set[tuple[str, str]]:
    """(sweep, trial) of ``done``'s trials (completed, a final value) whose curve has a
    round without a value: only a trial scored every k rounds has one."""
    keys = zip(done["sweep"], done["trial"])
    return {k for k in keys if any(math.isnan(v) for v in curves.get(k, ([], []))[1])}


def _test_curves(
    rounds: pd.DataFrame, metric: Metric
) -> dict[tuple[str, str], tuple[list[int], list[float]]]:
    """Per (sweep, trial): its rounds and its test values of ``metric`` (NaN where the
    column is missing or a value is not a number)."""
    return {
        key: (
            group["round"].astype(int).tolist(),
            pd.to_numeric(group[metric.column], errors="coerce").astype(float).tolist()
            if metric.column in group
            else [math.nan] * len(group),
        )
        for key, group in rounds.groupby(["sweep", "trial"], sort=False)
    }


@dataclass(frozen=True)
class _BaselineTargets:
    """A column group's baseline: per seed its final value (the target) and the rounds it
    ran, and the means over seeds (for seeds the baseline lacks, or ``target="mean"``)."""

    by_seed: dict[Any, float]
    rounds: dict[Any, int]
    mean: float
    mean_rounds: float

    @classmethod
    def of(cls, base: pd.DataFrame) -> _BaselineTargets:
        by_seed = dict(zip(base["seed"], base["final_value"].astype(float)))
        rounds = dict(zip(base["seed"], base["last_round"].astype(int)))
        return cls(
            by_seed,
            rounds,
            float(np.mean(list(by_seed.values()))),
            float(np.mean(list(rounds.values()))),
        )


def _rounds_needed(
    curves: dict[tuple[str, str], tuple[list[int], list[float]]],
    trial: pd.Series,
    goal: float,
    metric: Metric,
) -> float | None:
    """The first round whose test value reaches ``goal``; None if none does."""
    curve_rounds, curve_acc = curves.get((trial["sweep"], trial["trial"]), ([], []))
    reached_at = rounds_to_reach(curve_rounds, curve_acc, goal, metric.higher_is_better)
    return None if reached_at is None else float(reached_at)


def summarise_communication(
    frame: pd.DataFrame, *, row: str, columns: Sequence[str] = ("dataset",)
) -> pd.DataFrame:
    """Per (column group, row): seeds, seeds reached, mean ± std rounds, speed-up.

    ``speedup`` is the mean baseline rounds over the mean rounds when every seed
    reached the target, else None; ``speedup_std`` the sample std of the per-seed
    speed-ups then (NaN with one seed).  Where some seeds but not all reached it,
    ``rounds_mean_reached`` and ``speedup_reached`` are those seeds' alone (NaN / None
    otherwise): the table names them as such, and ``<1×`` means no seed reached it.
    """
    columns = list(columns)
    rows = []
    if frame.empty:
        return pd.DataFrame(
            columns=[
                *columns,
                row,
                "n",
                "n_reached",
                "rounds_mean",
                "rounds_std",
                "speedup",
                "speedup_std",
                "rounds_mean_reached",
                "speedup_reached",
                "at_most",
            ]
        )
    for key, group in frame.groupby([*columns, row], dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        n, n_reached = len(group), int(group["reached"].sum())
        needed = group["rounds_needed"].to_numpy(dtype=float)
        all_reached = n_reached == n
        rounds_mean = float(np.mean(needed)) if all_reached else math.nan
        rounds_std = float(np.std(needed, ddof=1)) if all_reached and n > 1 else math.nan
        base_rounds = float(group["baseline_rounds"].mean())
        per_seed = group["speedup"].to_numpy(dtype=float)
        spread = float(np.std(per_seed, ddof=1)) if all_reached and n > 1 else math.nan
        # some seeds reached it: their rounds and speed-up, said to be theirs alone
        reached = group["reached"].to_numpy(dtype=bool)
        some = 0 < n_reached < n
        reached_rounds = float(np.mean(needed[reached])) if some else math.nan
        reached_base = float(group["baseline_rounds"][reached].mean()) if some else math.nan
        rows.append(
            {
                **dict(zip([*columns, row], key)),
                "n": n,
                "n_reached": n_reached,
                "rounds_mean": rounds_mean,
                "rounds_std": rounds_std,
                "baseline_rounds": base_rounds,
                "speedup": speedup(base_rounds, rounds_mean) if all_reached else None,
                "speedup_std": spread,
                "rounds_mean_reached": reached_rounds,
                "speedup_reached": speedup(reached_base, reached_rounds) if some else None,
                "at_most": bool(group["at_most"].any()) if "at_most" in group else False,
            }
        )
    return pd.DataFrame(rows)
