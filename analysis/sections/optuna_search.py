"""An Optuna study group's search: the trials in proposal order with the best so far, the
search figures and the parameter importance."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.naming import format_value, parameter_name
from analysis.primary_metric import Metric, higher_is_better
from analysis.reading.grouping import StudyGroup
from analysis.sections.markdown import figure_block, unique_stem
from analysis.stats.search import (
    counted_in_history,
    left_out_of_best,
    parameter_importance,
    search_history,
)
from analysis.stats.trial_statistic import final_values, last_values
from analysis.tables.study_tables import primary_of


def optuna_section(
    group: StudyGroup, out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    """The search history table and CSV, its figures and the parameter importance."""
    params = [a for a in group.axes if a in group.trials] or ["point"]
    shown = group.trials[group.trials["status"].isin(counted_in_history())]
    if shown.empty:
        return ["No completed, stopped or diverged trial yet.", ""]
    metric = primary_of(group)
    shown = shown.assign(final_value=final_values(shown, group.rounds, metric))
    ranked = ranking_metric(group)
    validated = ranked is not None and ranked.startswith("val_")
    if validated:
        shown = shown.assign(ranked_value=last_values(shown, group.rounds, ranked))
    history = search_history(
        shown,
        params,
        "final_value",
        metric,
        ranked="ranked_value" if validated else None,
        higher_ranks=higher_is_better(ranked, metric) if validated else metric.higher_is_better,
    )
    by = f"validation `{ranked}`" if validated else f"test {metric.name}"
    best_words = best_so_far_words(history, metric.name, by)
    lines = history_table(history, params, metric, ranked if validated else None, best_words)
    lines += history_files(
        group, history, params, metric, ranked if validated else None, out, used, formats
    )
    return lines + importance_part(group, history, params, out, used, formats)


def history_table(
    history: pd.DataFrame,
    params: list[str],
    metric: Metric,
    ranked: str | None,
    best_words: str,
) -> list[str]:
    """The search history as a markdown table, with its lead line; ``ranked``: the
    validation column the search ranked by (None: it ranked by test)."""
    what = metric.name
    lines = [
        f"Trials in the order Optuna proposed them; {what} at each trial's last round. "
        f"{best_words[0].upper()}{best_words[1:]}.",
        "",
        "| # | "
        + " | ".join(parameter_name(p) for p in params)
        + " | status | rounds | "
        + (f"{_ranked_header(metric, ranked)} | " if ranked else "")
        + f"test {what}{metric.unit} | best so far by {ranked or 'test'}: "
        f"its test {what}{metric.unit} |",
        "| ---: | "
        + " | ".join("---:" for _ in params)
        + " | --- | ---: | "
        + ("---: | " if ranked else "")
        + "---: | ---: |",
    ]
    digits = metric.digits + 1
    for _, row in history.iterrows():
        values = " | ".join(format_value(row[p]) for p in params)
        val = f"{_shown(metric, ranked, row['ranked_value'])} | " if ranked else ""
        lines.append(
            f"| {row['number']} | {values} | {row['status']} | {row['last_round']} | {val}"
            f"{metric.show(row['value'], digits)} | {metric.show(row['best_so_far'], digits)} |"
        )
    return lines


def history_files(
    group: StudyGroup,
    history: pd.DataFrame,
    params: list[str],
    metric: Metric,
    ranked: str | None,
    out: Path,
    used: set[str],
    formats: Sequence[str],
) -> list[str]:
    """The history's CSV, the search-history figure and the parameters figure."""
    from analysis.figures import plots as figures

    study, what = group.study or "runs", metric.name
    name = unique_stem(f"search_history_{study}{group.suffix}", used)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    csv = out / "tables" / f"{name}.csv"
    history.to_csv(csv, index=False)
    lines = ["", f"Files: [csv]({csv.relative_to(out).as_posix()})", ""]
    figure = figures.search_history_plot(
        history, title=f"{study}: Optuna search history", metric=metric, ranked_by=ranked or ""
    )
    paths = figures.save_figure(figure, out / "figures" / f"fig_{name}", formats)
    by = f"validation `{ranked}`" if ranked else f"test {what}"
    caption = f"Optuna search history: {what} per trial; {best_so_far_words(history, what, by)}"
    lines += figure_block(paths, out, caption)
    if all(p in history for p in params):
        name = unique_stem(f"fig_search_parameters_{study}{group.suffix}", used)
        figure = figures.search_parameter_plot(
            history, params, title=f"{study}: {what} vs searched parameters", metric=metric
        )
        paths = figures.save_figure(figure, out / "figures" / name, formats)
        lines += figure_block(paths, out, f"{what} of each trial vs its searched parameters")
    return lines


def importance_part(
    group: StudyGroup,
    history: pd.DataFrame,
    params: list[str],
    out: Path,
    used: set[str],
    formats: Sequence[str],
) -> list[str]:
    """The parameters' importance (its line and figure), or why it was not computed."""
    from analysis.figures import plots as figures

    study = group.study or "runs"
    importance, method = parameter_importance(history, params)
    if not importance:
        return [f"Parameter importance: not computed ({method}).", ""]
    lines = [
        "Parameter importance ("
        + method
        + "): "
        + ", ".join(f"{parameter_name(p)} {v:.2f}" for p, v in importance.items()),
        "",
    ]
    name = unique_stem(f"fig_importance_{study}{group.suffix}", used)
    figure = figures.importance_plot(importance, method, title=f"{study}: parameter importance")
    paths = figures.save_figure(figure, out / "figures" / name, formats)
    return lines + figure_block(paths, out, f"parameter importance ({method})")


def ranking_metric(group: StudyGroup) -> str | None:
    """The column the group's search ranked its trials by (its sweeps' manifests'
    ``metric``: ``val_map50``), or None where none names one (older sweeps ranked by
    test)."""
    named = [s.manifest.get("metric") for s in group.sweeps if s.manifest.get("search") == "optuna"]
    return next((m for m in named if isinstance(m, str) and m), None)


def _ranked_header(metric: Metric, column: str) -> str:
    """The ranked column's header: ``validation accuracy (%)``, else the column's name."""
    return f"validation {metric.name}{metric.unit}" if column == metric.val_column else column


def _shown(metric: Metric, column: str, value: float) -> str:
    """A ranked (validation) value: as the test value beside it where it is the same
    metric's (``val_acc`` in %), else as recorded with four decimals; ``–`` if missing."""
    if column == metric.val_column:
        return metric.show(value, metric.digits + 1)
    return "–" if value != value else f"{value:.4f}"


def best_so_far_words(history: pd.DataFrame, what: str, by: str = "") -> str:
    """What the best so far compared and what it left out, for the table's lead line
    and the figure's caption: ``best so far (by `val_acc` ...) over the 4 completed
    trials that ran all their rounds (like with like); left out: 2 stopped early (...),
    1 diverged (...)``; ``by``: what ranks it (the search's validation metric, or the
    test value of an older sweep)."""
    counted = int(history["counted_in_best"].sum())
    ranked = (
        f" (the trial best so far by {by}, what the search ranked by and the selection "
        f"chooses on; shown by its test {what})"
        if by
        else ""
    )
    words = (
        f"best so far{ranked} over the {counted} completed "
        f"trial{'s' if counted != 1 else ''} that ran all their rounds (like with like)"
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
