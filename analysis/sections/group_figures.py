"""A grid study group's figures: accuracy curves, sensitivity to the varied parameter and
the heatmap over two numeric axes (the group's primary metric, reported statistic)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.figures.figure_layout import layout_for
from analysis.naming import dataset_name, parameter_name
from analysis.reading.grouping import StudyGroup
from analysis.reading.loading import COMPLETED
from analysis.sections.markdown import figure_block, unique_stem
from analysis.stats.trial_statistic import REPORTED
from analysis.tables.study_tables import TableOptions, metric_text, primary_of, reported_group


def figure_section(
    group: StudyGroup, options: TableOptions, out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    """A grid group's curves, its sensitivity plot (when the layout's x axis varies) and its
    heatmap (two numeric axes)."""
    from analysis.figures import plots as figures

    lines: list[str] = []
    metric = primary_of(group)
    group, statistic = reported_group(group, options)
    words = metric_text(group, statistic, metric)
    layout = layout_for(group.report.get("figure", {}), group.axes)
    done = group.trials[group.trials["status"] == COMPLETED]
    study = group.study or "runs"
    where = ", ".join(dataset_name(d, metric.task_spec) for d in group.datasets)
    test = f"test {metric.name}"
    if not done.empty and group.search != "optuna":
        name = unique_stem(f"fig_{study}_curves{group.suffix}", used)
        figure = figures.accuracy_curves(
            group.rounds, group.trials, layout, title=f"{study}: {test} per round", metric=metric
        )
        paths = figures.save_figure(figure, out / "figures" / name, formats)
        seeds = done["seed"].nunique()
        caption = (
            f"{layout.figure + ': ' if layout.figure else ''}{test} vs round on {where}; "
            f"line = mean over {seeds} seed(s), band = ±1 std over seeds (cut at the "
            "metric's range)"
        )
        lines += figure_block(paths, out, caption)
        x = layout.x
        if x and x in done and done[x].astype(str).nunique() > 1:
            name = unique_stem(f"fig_{study}_sensitivity{group.suffix}", used)
            figure = figures.sensitivity_plot(
                group.trials,
                layout,
                value=REPORTED,
                title=f"{study}: {metric.name} vs {parameter_name(x)}",
                metric=metric,
            )
            paths = figures.save_figure(figure, out / "figures" / name, formats)
            caption = (
                f"{layout.x_figure + ': ' if layout.x_figure else ''}"
                f"{words} vs {parameter_name(x)} on {where}; "
                "point = mean over seeds, bar = ±1 std (cut at the metric's range)"
            )
            lines += figure_block(paths, out, caption)
        numeric = _numeric_axes(done, group.axes)
        if len(numeric) >= 2:
            y, x = numeric[:2]
            name = unique_stem(f"fig_{study}_heatmap{group.suffix}", used)
            figure = figures.accuracy_heatmap(
                done, x, y, value=REPORTED, title=f"{study}: {words}", metric=metric
            )
            paths = figures.save_figure(figure, out / "figures" / name, formats)
            caption = (
                f"{words} over {parameter_name(y)} × {parameter_name(x)} "
                f"on {where}; cell = mean over seeds"
            )
            lines += figure_block(paths, out, caption)
    return lines


def _numeric_axes(trials: pd.DataFrame, axes: Sequence[str]) -> list[str]:
    """Axes whose values are all numbers (not booleans) and that take several values."""
    found = []
    for axis in axes:
        if axis not in trials or trials[axis].nunique() < 2:
            continue
        values = trials[axis].dropna()
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            found.append(axis)
    return found
