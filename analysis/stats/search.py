"""Optuna sweeps: the search history and which parameters mattered.

An Optuna sweep's trials are samples of a search (TPE over the study's ranges), often
early-stopped by ASHA, so they are not summarised as mean ± std over seeds:

- :func:`search_history`: the trials in the order the searcher proposed them (Tune's
  creation order), each with its parameters and its accuracy, and the best accuracy
  so far.  The best so far compares like with like (:func:`best_exclusions`): only
  completed trials that ran all their config's rounds, with a finite value.  A trial
  ASHA stopped is shown with the accuracy it had when stopped, a diverged one with its
  last value, but neither ever counts as the best so far (the first trained fewer
  rounds, the second has no trained model); :func:`left_out_of_best` says how many
  were left out and why, for the caption.
- :func:`parameter_importance`: how much each searched parameter explains the final
  accuracy of the completed trials.  Optuna's own evaluators are used on an in-memory
  study built from the trials: fANOVA (Optuna's default) when scikit-learn is
  installed, else PED-ANOVA when there are at least :data:`MIN_PED_ANOVA` trials (it
  compares the top 10 % with the rest, so it needs a few in the top 10 %).  With fewer
  trials either would be noise, and a simple fallback is used instead: |Spearman rank
  correlation| with accuracy for numeric parameters, the correlation ratio η for
  categorical ones, normalised to sum to 1.  The method used is returned and reported.
  With a single searched parameter the importance is 1 by construction.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.primary_metric import ACCURACY, Metric
from analysis.reading.loading import COMPLETED, DIVERGED, STOPPED, is_number_column

MIN_FANOVA = 5
MIN_PED_ANOVA = 20


def ran_all_rounds(trials: pd.DataFrame) -> pd.Series:
    """Per trial, whether its last round reached its config's ``rounds``: the engine's
    rule (``study.selection.ran_all_rounds``, restated over the tidy frame so the report
    imports nothing of the sweep's) — a trial whose last round is below its planned
    rounds was stopped early; one that records neither counts as complete."""
    if "rounds" not in trials or "last_round" not in trials:
        return pd.Series(True, index=trials.index)
    planned = pd.to_numeric(trials["rounds"], errors="coerce")
    last = pd.to_numeric(trials["last_round"], errors="coerce")
    unknown = planned.isna() | (planned <= 0) | last.isna()
    return unknown | (last >= planned)


def best_exclusions(frame: pd.DataFrame) -> pd.Series:
    """Per row of a history frame (``status``, ``value`` and, where known,
    ``last_round`` and ``rounds``): why it may not be a best-so-far value, or ``""``
    when it may — ``diverged`` (no trained model), ``stopped early`` (ASHA: fewer rounds
    than its config's, so its value is from an earlier round than the others'), another
    status word, or ``no value`` (completed, but its value is missing or not finite)."""
    finite = pd.to_numeric(frame["value"], errors="coerce").map(lambda v: bool(np.isfinite(v)))
    complete = ran_all_rounds(frame)
    reasons = []
    for status, full, has_value in zip(frame["status"], complete, finite):
        if status == DIVERGED:
            reasons.append("diverged")
        elif status == STOPPED or (status == COMPLETED and not full):
            reasons.append("stopped early")
        elif status != COMPLETED:
            reasons.append(str(status))
        else:
            reasons.append("" if has_value else "no value")
    return pd.Series(reasons, index=frame.index, dtype=object)


def search_history(
    trials: pd.DataFrame,
    params: Sequence[str],
    value: str = "final_acc",
    metric: Metric = ACCURACY,
    ranked: str | None = None,
    higher_ranks: bool = True,
) -> pd.DataFrame:
    """One row per trial in proposal order: ``number`` (1-based), ``trial``, ``status``,
    the ``params``, ``value`` (accuracy fraction at its last round; a score sweep's
    ``metric`` as recorded), ``ranked_value`` (what the search ranks by: the column
    ``ranked`` of ``trials``, its validation metric at the last round; ``value`` itself
    where None), ``last_round``, ``left_out_why`` (:func:`best_exclusions`' reason,
    ``""`` when counted), ``counted_in_best``, ``best_so_far_ranked`` (the best ranked
    value over the counted trials up to this one, larger is better where
    ``higher_ranks``; NaN before the first) and ``best_so_far`` (that trial's
    ``value``: the test value of the trial the search would choose so far) — so the
    history's best and the selection's best are one trial, chosen on one metric."""
    ordered = trials.sort_values(["sweep_started", "order"], kind="stable")
    planned = ["rounds"] if "rounds" in ordered and "rounds" not in params else []
    ranking = [ranked] if ranked and ranked != value else []
    frame = ordered[["trial", "status", *params, value, *ranking, "last_round", *planned]].copy()
    frame = frame.rename(columns={value: "value"}).reset_index(drop=True)
    if ranking:
        frame = frame.rename(columns={ranked: "ranked_value"})
        sign = 1.0 if higher_ranks else -1.0
    else:
        frame["ranked_value"] = frame["value"]
        sign = metric.sign
    frame.insert(0, "number", np.arange(1, len(frame) + 1))
    frame["left_out_why"] = best_exclusions(frame)
    ranked_values = pd.to_numeric(frame["ranked_value"], errors="coerce").astype(float)
    finite = ranked_values.map(lambda v: bool(np.isfinite(v)))
    unranked = (frame["left_out_why"] == "") & ~finite
    frame.loc[unranked, "left_out_why"] = "no value"
    frame["counted_in_best"] = frame["left_out_why"] == ""
    if planned:
        frame = frame.drop(columns=planned)  # the history shows rounds run, not planned
    best_ranked, best_value = [], []
    chosen: int | None = None
    for i in range(len(frame)):
        if frame["counted_in_best"].iat[i] and (
            chosen is None or sign * ranked_values.iat[i] > sign * ranked_values.iat[chosen]
        ):
            chosen = i  # the earliest on a tie, as the searcher keeps its first best
        best_ranked.append(math.nan if chosen is None else ranked_values.iat[chosen])
        best_value.append(math.nan if chosen is None else float(frame["value"].iat[chosen]))
    frame["best_so_far_ranked"] = best_ranked
    frame["best_so_far"] = best_value
    return frame


def left_out_of_best(history: pd.DataFrame) -> dict[str, int]:
    """``{reason: trials}`` of a :func:`search_history` frame's rows not counted in the
    best so far (:func:`best_exclusions`' words), most common first."""
    reasons = history["left_out_why"]
    counts = reasons[reasons != ""].value_counts()
    return {str(reason): int(n) for reason, n in counts.items()}


def _spearman(x: pd.Series, y: pd.Series) -> float:
    rx, ry = x.rank().to_numpy(dtype=float), y.rank().to_numpy(dtype=float)
    if np.std(rx) == 0 or np.std(ry) == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def _correlation_ratio(groups: pd.Series, y: pd.Series) -> float:
    """η: the share of y's spread explained by the group means (0..1)."""
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0:
        return 0.0
    between = sum(len(g) * (g.mean() - y.mean()) ** 2 for _, g in y.groupby(groups.astype(str)))
    return math.sqrt(between / total)


def _fallback_importance(frame: pd.DataFrame, params: Sequence[str]) -> dict[str, float]:
    y = frame["value"].astype(float)
    raw = {}
    for p in params:
        column = frame[p]
        if is_number_column(column):
            raw[p] = abs(_spearman(column.astype(float), y))
        else:
            raw[p] = _correlation_ratio(column, y)
    total = sum(raw.values())
    if total == 0:
        return {p: 1.0 / len(params) for p in params}
    return dict(sorted(((p, v / total) for p, v in raw.items()), key=lambda t: -t[1]))


def _distribution(values: pd.Series) -> Any:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    if not is_number_column(values):
        return CategoricalDistribution(sorted(set(values.astype(str))))
    low, high = float(values.min()), float(values.max())
    if low == high:
        high = low + 1.0
    if all(float(v).is_integer() for v in values):
        return IntDistribution(int(low), int(high))
    return FloatDistribution(low, high, log=low > 0 and high / low > 10)


def _optuna_importance(
    frame: pd.DataFrame, params: Sequence[str], evaluator_name: str
) -> dict[str, float]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = {p: _distribution(frame[p]) for p in params}
    study = optuna.create_study(direction="maximize")
    for _, row in frame.iterrows():
        values = {}
        for p in params:
            d = distributions[p]
            if isinstance(d, optuna.distributions.CategoricalDistribution):
                values[p] = str(row[p])
            elif isinstance(d, optuna.distributions.IntDistribution):
                values[p] = int(row[p])
            else:
                values[p] = float(row[p])
        study.add_trial(
            optuna.trial.create_trial(
                params=values, distributions=distributions, value=float(row["value"])
            )
        )
    if evaluator_name == "fANOVA":
        evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
    else:
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    result = optuna.importance.get_param_importances(study, evaluator=evaluator)
    return {p: float(v) for p, v in result.items()}


def parameter_importance(
    history: pd.DataFrame, params: Sequence[str]
) -> tuple[dict[str, float], str]:
    """Importance of each searched parameter for the accuracy of the trials the best so
    far counts (completed, every round run, a finite value).

    ``history`` is :func:`search_history`'s frame (or any with ``status`` and
    ``value``: the trials :func:`best_exclusions` keeps are used).  Returns ({param: importance,
    summing to 1, highest first}, the method used, in words).
    """
    frame = history[best_exclusions(history) == ""]
    params = [p for p in params if p in frame and frame[p].astype(str).nunique() > 1]
    if not params:
        return {}, "no parameter varied among completed trials"
    if len(params) == 1:
        return {params[0]: 1.0}, "single searched parameter (importance 1 by construction)"
    n = len(frame)
    if n >= MIN_FANOVA and importlib.util.find_spec("sklearn") is not None:
        return _optuna_importance(frame, params, "fANOVA"), f"Optuna fANOVA ({n} trials)"
    if n >= MIN_PED_ANOVA:
        return _optuna_importance(frame, params, "PED-ANOVA"), f"Optuna PED-ANOVA ({n} trials)"
    return (
        _fallback_importance(frame, params),
        f"fallback: |Spearman ρ| (numeric) or η (categorical), normalised; only {n} completed "
        f"trials (Optuna's evaluators need ≥ {MIN_FANOVA} with scikit-learn for fANOVA, "
        f"≥ {MIN_PED_ANOVA} for PED-ANOVA)",
    )


def counted_in_history() -> tuple[str, ...]:
    """Statuses the search history shows: the searcher proposed each of them (ASHA's
    stopped trials and diverged ones are part of a search, though never its best)."""
    return (COMPLETED, STOPPED, DIVERGED)
