"""The report's *Trials not counted* section: errored, diverged and unfinished trials,
with their last value and error."""

from __future__ import annotations

import pandas as pd

from analysis.folder_task import TASK_SPEC
from analysis.primary_metric import ACCURACY, Metric, PrimaryMetricError, trial_metric
from analysis.reading.loading import Results
from analysis.reading.summary import excluded_trials
from analysis.stats.trial_statistic import final_values


def trials_not_counted_section(results: Results) -> list[str]:
    """The trials left out of every mean, with their last value (accuracy; a score
    trial's primary metric, named)."""
    left_out = excluded_trials(results.trials)
    lines = ["## Trials not counted", ""]
    if left_out.empty:
        return [*lines, "None: every trial completed.", ""]
    metrics = [
        _metric(task, primary)
        for task, primary in zip(
            left_out.get(TASK_SPEC, pd.Series(None, index=left_out.index)),
            left_out.get("primary_metric", pd.Series(None, index=left_out.index)),
        )
    ]
    one = len(set(metrics)) == 1
    last = f"last {metrics[0].name}{metrics[0].unit}" if one else "last value (primary metric)"
    lines += [
        f"| sweep | trial | status | rounds run / planned | {last} | error |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    for (_, t), metric in zip(left_out.iterrows(), metrics):
        error = str(t["error"]).replace("|", "\\|") if isinstance(t["error"], str) else ""
        planned = t.get("rounds")
        if planned is None or pd.isna(planned):
            planned = "?"  # its params.json is damaged
        elif isinstance(planned, float) and planned.is_integer():
            planned = int(planned)  # the column is float once a damaged trial's NaN is in it
        (final,) = final_values(left_out.loc[[t.name]], results.rounds, metric)
        value = metric.show(final)
        if not one:
            value = f"{metric.stem} {value}{'%' if metric.percent else ''}"
        lines.append(
            f"| `{t['sweep']}` | `{t['trial']}` | {t['status']} | "
            f"{t['last_round']} / {planned} | {value} | {error} |"
        )
    return [*lines, ""]


def _metric(task: object, primary: object) -> Metric:
    """A left-out trial's primary metric (a damaged trial's task is unknown: accuracy,
    as rows that name no task)."""
    try:
        return trial_metric(task if task is None or hasattr(task, "metrics") else None, primary)
    except PrimaryMetricError:
        return ACCURACY
