"""The report's opening lines: its title, the command that wrote it, and what a trial's
accuracy (or a score task's primary metric) is."""

from __future__ import annotations

import time
from collections.abc import Sequence

from analysis.primary_metric import ACCURACY, Metric, table_metrics
from analysis.stats.trial_statistic import DEFAULT_STATISTIC, Statistic


def opening_section(
    sources: Sequence[str], statistic: Statistic | None, primaries: Sequence[Metric]
) -> list[str]:
    """The title and the line naming the command and the reported statistic."""
    return [
        "# fedsweep report",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} by `python -m analysis.report "
        f"{' '.join(sources)}`. {statistic_words(statistic, primaries)}.",
        "",
    ]


def statistic_words(statistic: Statistic | None, primaries: Sequence[Metric] = ()) -> str:
    """The report's opening line on what a trial's accuracy is (``Accuracy: ...``); with
    a score task among ``primaries`` (each group's primary metric), ``Reported: ...`` and
    each primary metric's words, and the tables' other metric."""
    metrics = list(dict.fromkeys(primaries)) or [ACCURACY]
    if metrics == [ACCURACY]:
        return f"Accuracy: {_one_statistic(statistic, ACCURACY)}"
    parts = []
    for metric in metrics:
        words = _one_statistic(statistic, metric)
        also = [m.noun for m in table_metrics(metric)[1:]]
        parts.append(words + (f" (tables again on {' and '.join(also)})" if also else ""))
    return "Reported: " + "; ".join(parts)


def _one_statistic(statistic: Statistic | None, metric: Metric) -> str:
    """The words of ``statistic`` on ``metric``, or the default's when none is chosen."""
    if statistic is not None:
        return statistic.text(metric=metric)
    return (
        f"each study's [report] statistic, else {DEFAULT_STATISTIC.text(metric=metric)} (the "
        "default; each table's title names its own)"
    )
