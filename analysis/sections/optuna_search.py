"""An Optuna study group's search: the trials in proposal order with the best so far, the
search figures and the parameter importance."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.naming import format_value, parameter_name
from analysis.reading.grouping import StudyGroup
from analysis.sections.markdown import figure_block, unique_stem
from analysis.stats.search import (
    counted_in_history,
    left_out_of_best,
    parameter_importance,
    search_history,
)
from analysis.stats.trial_statistic import final_values
from analysis.tables.study_tables import primary_of


def optuna_section(
    group: StudyGroup, out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    """The search history table and CSV, its figures and the parameter importance."""
    from analysis.figures import plots as figures

    params = [a for a in group.axes if a in group.trials] or ["point"]
    shown = group.trials[group.trials["status"].isin(counted_in_history())]
    if shown.empty:
        return ["No completed, stopped or diverged trial yet.", ""]
    metric = primary_of(group)
    shown = shown.assign(final_value=final_values(shown, group.rounds, metric))
    history = search_history(shown, params, "final_value", metric)
    study = group.study or "runs"
    what = metric.name
    best_words = best_so_far_words(history, what)
    lines = [
        f"Trials in the order Optuna proposed them; {what} at each trial's last round. "
        f"{best_words[0].upper()}{best_words[1:]}.",
        "",
        "| # | "
        + " | ".join(parameter_name(p) for p in params)
        + f" | status | rounds | {what}{metric.unit} | best so far{metric.unit} |",
        "| ---: | " + " | ".join("---:" for _ in params) + " | --- | ---: | ---: | ---: |",
    ]
    digits = metric.digits + 1
    for _, row in history.iterrows():
        values = " | ".join(format_value(row[p]) for p in params)
        lines.append(
            f"| {row['number']} | {values} | {row['status']} | {row['last_round']} | "
            f"{metric.show(row['value'], digits)} | {metric.show(row['best_so_far'], digits)} |"
        )
    name = unique_stem(f"search_history_{study}{group.suffix}", used)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    csv = out / "tables" / f"{name}.csv"
    history.to_csv(csv, index=False)
    lines += ["", f"Files: [csv]({csv.relative_to(out).as_posix()})", ""]
    figure = figures.search_history_plot(
        history, title=f"{study}: Optuna search history", metric=metric
    )
    paths = figures.save_figure(figure, out / "figures" / f"fig_{name}", formats)
    caption = f"Optuna search history: {what} per trial; {best_words}"
    lines += figure_block(paths, out, caption)
    if all(p in history for p in params):
        name = unique_stem(f"fig_search_parameters_{study}{group.suffix}", used)
        figure = figures.search_parameter_plot(
            history, params, title=f"{study}: {what} vs searched parameters", metric=metric
        )
        paths = figures.save_figure(figure, out / "figures" / name, formats)
        lines += figure_block(paths, out, f"{what} of each trial vs its searched parameters")
    importance, method = parameter_importance(history, params)
    if importance:
        lines.append(
            "Parameter importance ("
            + method
            + "): "
            + ", ".join(f"{parameter_name(p)} {v:.2f}" for p, v in importance.items())
        )
        lines.append("")
        name = unique_stem(f"fig_importance_{study}{group.suffix}", used)
        figure = figures.importance_plot(importance, method, title=f"{study}: parameter importance")
        paths = figures.save_figure(figure, out / "figures" / name, formats)
        lines += figure_block(paths, out, f"parameter importance ({method})")
    else:
        lines += [f"Parameter importance: not computed ({method}).", ""]
    return lines


def best_so_far_words(history: pd.DataFrame, what: str) -> str:
    """What the best so far compared and what it left out, for the table's lead line
    and the figure's caption: ``best so far over the 4 completed trials that ran all
    their rounds (like with like); left out: 2 stopped early (...), 1 diverged (...)``."""
    counted = int(history["counted_in_best"].sum())
    words = (
        f"best so far over the {counted} completed trial{'s' if counted != 1 else ''} "
        f"that ran all their rounds (like with like)"
    )
    left = left_out_of_best(history)
    if not left:
        return words
    meaning = {
        "stopped early": "stopped early (ASHA: fewer rounds, an earlier round's " + what + ")",
        "diverged": "diverged (no trained model)",
        "no value": "without a finite value",
    }
    parts = [f"{n} {meaning.get(reason, reason)}" for reason, n in left.items()]
    return f"{words}; left out: {', '.join(parts)}"
