"""The report's *Trials not counted* section: errored, diverged and unfinished trials,
with their last value and error."""

from __future__ import annotations

import pandas as pd

from analysis.naming import percent
from analysis.primary_metric import ACCURACY, trial_metric
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
        trial_metric(task, primary)
        for task, primary in zip(
            left_out.get("task", pd.Series(None, index=left_out.index)),
            left_out.get("primary_metric", pd.Series(None, index=left_out.index)),
        )
    ]
    plain = all(m == ACCURACY for m in metrics)
    last = "last accuracy (%)" if plain else "last value (primary metric)"
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
        value = percent(t["final_acc"])
        if not plain:
            (final,) = final_values(left_out.loc[[t.name]], results.rounds, metric)
            value = f"{metric.stem} {metric.show(final)}{'%' if metric.percent else ''}"
        lines.append(
            f"| `{t['sweep']}` | `{t['trial']}` | {t['status']} | "
            f"{t['last_round']} / {planned} | {value} | {error} |"
        )
    return [*lines, ""]
