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
- One rule for every row, the baseline's included: ``#rounds`` is the first round whose
  test value reaches the target.  The baseline reaches its own final value at its last
  round at the latest, and earlier where its curve touched it before (a curve that
  plateaus); a method whose curve equals the baseline's in every round and seed has the
  same rounds and a speed-up of 1.0×.  A row that never reaches the target is censored
  at the rounds it ran: "not reached", never a number of rounds.
- ``speedup = baseline rounds / method rounds`` only for a seed where **both** reached
  the target (under ``target="mean"`` a baseline seed may not reach the mean); a method
  that never reached it, against a baseline that did, is shown as the paper does,
  ``<1×`` (it ran at least as many rounds as the baseline needed).
- Summary over seeds: a method counts as reaching the target only if it and the
  baseline do so for every seed; then its rounds are the mean over seeds (± std) and its
  speed-up is the baseline's mean rounds over that mean, shown with the std of the
  per-seed speed-ups (``speedup_std``).  Otherwise the table says in how many seeds
  both reached it and gives those seeds' rounds and speed-up alone.
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
    "baseline_reached",
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


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def speedup(baseline_rounds: float | None, method_rounds: float | None) -> float | None:
    """``baseline_rounds / method_rounds``; None unless both reached the target."""
    if _missing(method_rounds) or _missing(baseline_rounds):
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
    ``, target_source, baseline_rounds`` (the paired baseline's first round at the
    target, NaN: not reached) ``, baseline_reached, rounds_needed`` (the row's first
    round at the target, the baseline's rows too; NaN: not reached) ``, reached,
    speedup`` (None unless both reached) ``, at_most`` (True: a trial scored every k-th
    round, ``personal_test_every``: its first scored round that reached the target, so
    it reached it at most then).
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
        baseline_rows(group, row, baseline, baseline_column)  # exactly one baseline row
        targets = _BaselineTargets.of(base, curves, metric)
        for _, trial in group.iterrows():
            seed = trial["seed"]
            paired = target == "per-seed" and seed in targets.by_seed
            goal = targets.by_seed[seed] if paired else targets.mean
            r_base = targets.own_rounds[seed] if paired else targets.rounds_to_mean(seed)
            needed = _rounds_needed(curves, trial, goal, metric)
            # a trial scored every k-th round (personal_test_every) reached the target
            # at most at its first scored round that reaches it: counted, as a bound
            bounded = (trial["sweep"], trial["trial"]) in gaps
            out.append(
                {
                    **dict(zip(columns, key)),
                    row: trial[row],
                    "seed": seed,
                    "target": goal,
                    "target_source": "same seed" if paired else "mean over seeds",
                    "baseline_rounds": math.nan if r_base is None else r_base,
                    "baseline_reached": r_base is not None,
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
    """A column group's baseline: per seed its final value (the target), the first round
    its curve reached it (``own_rounds``) and the first round it reached the mean over
    seeds (``mean_rounds``, None: never), and that mean (for seeds the baseline lacks, or
    ``target="mean"``)."""

    by_seed: dict[Any, float]
    own_rounds: dict[Any, float | None]
    mean: float
    mean_rounds: dict[Any, float | None]

    @classmethod
    def of(
        cls,
        base: pd.DataFrame,
        curves: dict[tuple[str, str], tuple[list[int], list[float]]],
        metric: Metric,
    ) -> _BaselineTargets:
        by_seed = dict(zip(base["seed"], base["final_value"].astype(float)))
        mean = float(np.mean(list(by_seed.values())))
        own, to_mean = {}, {}
        for _, trial in base.iterrows():
            own[trial["seed"]] = _rounds_needed(curves, trial, by_seed[trial["seed"]], metric)
            to_mean[trial["seed"]] = _rounds_needed(curves, trial, mean, metric)
        return cls(by_seed, own, mean, to_mean)

    def rounds_to_mean(self, seed: Any) -> float | None:
        """The baseline's rounds to the mean target for ``seed``: its own seed's, or, for
        a seed it lacks, the mean over its seeds that reached it (None: none did)."""
        if seed in self.mean_rounds:
            return self.mean_rounds[seed]
        reached = [r for r in self.mean_rounds.values() if r is not None]
        return float(np.mean(reached)) if reached else None


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

    A seed counts as reached where the row and its paired baseline both reached the
    target.  ``speedup`` is the mean baseline rounds over the mean rounds when every
    seed reached it, else None; ``speedup_std`` the sample std of the per-seed
    speed-ups then (NaN with one seed).  Where some seeds but not all reached it,
    ``rounds_mean_reached`` and ``speedup_reached`` are those seeds' alone (NaN / None
    otherwise): the table names them as such, and ``<1×`` means no seed reached it;
    ``baseline_missed`` counts the seeds whose baseline never reached the target.
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
                "baseline_missed",
            ]
        )
    for key, group in frame.groupby([*columns, row], dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        # a seed counts as reached where the row and its paired baseline both reached
        both = group["reached"].to_numpy(dtype=bool) & group["baseline_reached"].to_numpy(
            dtype=bool
        )
        n, n_reached = len(group), int(both.sum())
        needed = group["rounds_needed"].to_numpy(dtype=float)
        base = group["baseline_rounds"].to_numpy(dtype=float)
        all_reached = n_reached == n
        rounds_mean = float(np.mean(needed)) if all_reached else math.nan
        rounds_std = float(np.std(needed, ddof=1)) if all_reached and n > 1 else math.nan
        base_rounds = float(np.mean(base)) if all_reached else math.nan
        per_seed = group["speedup"].to_numpy(dtype=float)
        spread = float(np.std(per_seed, ddof=1)) if all_reached and n > 1 else math.nan
        # some seeds reached it: their rounds and speed-up, said to be theirs alone
        some = 0 < n_reached < n
        reached_rounds = float(np.mean(needed[both])) if some else math.nan
        reached_base = float(np.mean(base[both])) if some else math.nan
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
                "at_most": bool((group["at_most"].to_numpy(dtype=bool) & both).any()),
                "baseline_missed": int((~group["baseline_reached"].to_numpy(dtype=bool)).sum()),
            }
        )
    return pd.DataFrame(rows)
