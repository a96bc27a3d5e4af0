"""Optuna sweeps: the search history and which parameters mattered.

An Optuna sweep's trials are samples of a search (TPE over the study's ranges), often
early-stopped by ASHA, so they are not summarised as mean ± std over seeds:

- :func:`search_history`: the trials in the order the searcher proposed them (Tune's
  creation order), each with its parameters and its accuracy, and the best accuracy
  so far.  A trial ASHA stopped is shown with the accuracy it had when stopped but
  never counts as the best so far: it trained fewer rounds.
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
from analysis.reading.loading import COMPLETED, STOPPED, is_number_column

MIN_FANOVA = 5
MIN_PED_ANOVA = 20


def search_history(
    trials: pd.DataFrame,
    params: Sequence[str],
    value: str = "final_acc",
    metric: Metric = ACCURACY,
) -> pd.DataFrame:
    """One row per trial in proposal order: ``number`` (1-based), ``trial``, ``status``,
    the ``params``, ``value`` (accuracy fraction at its last round; a score sweep's
    ``metric`` as recorded) and ``best_so_far`` (over completed trials up to this one, in
    ``metric``'s direction; NaN before the first)."""
    ordered = trials.sort_values(["sweep_started", "order"], kind="stable")
    frame = ordered[["trial", "status", *params, value, "last_round"]].copy()
    frame = frame.rename(columns={value: "value"}).reset_index(drop=True)
    frame.insert(0, "number", np.arange(1, len(frame) + 1))
    completed = frame["value"].where(frame["status"] == COMPLETED)
    # cummax leaves NaN on stopped rows
    frame["best_so_far"] = ((metric.sign * completed).cummax() * metric.sign).ffill()
    return frame


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
    """Importance of each searched parameter for the completed trials' accuracy.

    ``history`` is :func:`search_history`'s frame.  Returns ({param: importance,
    summing to 1, highest first}, the method used, in words).
    """
    frame = history[(history["status"] == COMPLETED) & history["value"].notna()]
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
    """Statuses the search history shows (ASHA's stopped trials are part of a search)."""
    return (COMPLETED, STOPPED)
