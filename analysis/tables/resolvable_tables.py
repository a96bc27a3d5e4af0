"""What a results folder's tables resolve now: the sweep's stopping rule reads it.

``python -m study.sweep ... --seeds until:T`` adds seeds until every table's resolvable
difference (the half-width of a Δ's 95% interval for the table's spread and seeds,
:mod:`analysis.stats.comparisons`) is at most ``T`` points.  The tables are the report's own
(:func:`analysis.tables.study_tables.study_tables`, the same statistic), so the sweep stops on
exactly what the report will print.  Stopping on the width, which does not depend on
the differences observed, keeps the intervals honest (:mod:`analysis.stats.seed_plan`).

T is in accuracy points; a score task's tables (SRCC, MAE ...) resolve in their metric's
units, counted here in hundredths of its scale (0.02 SRCC reads 2), the same reading
``--resolve-target`` has (:meth:`analysis.primary_metric.Metric.target`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from analysis.primary_metric import table_metrics
from analysis.reading.grouping import study_groups
from analysis.reading.loading import Results, load_results
from analysis.stats.trial_statistic import Statistic, check_validation, resolve_statistic
from analysis.tables.study_tables import TableOptions, primary_of, study_tables


def resolvable_differences(
    source: str | Path | Iterable[str | Path] | Results,
    statistic: Statistic | None = None,
) -> dict[str, float]:
    """``{table name: resolvable difference in accuracy points}`` (a score metric's in
    hundredths of its scale) of every table of the
    results (a sweep folder, a folder of them, several, or loaded :class:`Results`) that
    compares cells, as the report builds them with ``statistic`` (default: each study's
    own, else the report's default).  NaN for a table that cannot say yet (one seed, or
    no completed trial).
    Tables of the same name in two groups are told apart as the report does (``_2``).

    Raises :class:`~analysis.reading.loading.NoResultsError` when a path holds no sweep, and
    :class:`~analysis.stats.trial_statistic.StatisticError` for ``val`` on trials without
    validation accuracy, :class:`~analysis.primary_metric.PrimaryMetricError` for a group
    whose trials record different primary metrics."""
    results = source if isinstance(source, Results) else load_results(source)
    out: dict[str, float] = {}
    for group in study_groups(results):
        if resolve_statistic(statistic, group.report).needs_validation:
            for metric in table_metrics(primary_of(group)):
                check_validation(group.rounds, group.trials, metric=metric)
        for table in study_tables(group, TableOptions(statistic=statistic)):
            if table.resolvable is None:
                continue  # compares nothing: rounds to reach, time per round
            name, k = table.name, 2
            while name in out:
                name, k = f"{table.name}_{k}", k + 1
            out[name] = float(table.metric.points(table.resolvable))
    return out


def tables_above(resolvable: Mapping[str, float], target: float) -> dict[str, float]:
    """The tables of ``resolvable`` that do not resolve ``target`` points yet (NaN: no
    interval yet counts as not resolving)."""
    return {
        name: value
        for name, value in resolvable.items()
        if not (math.isfinite(value) and value <= target)
    }
