"""``python -m analysis.report RESULTS_DIR... [--out DIR]``: the paper's tables and figures.

    python -m analysis.report results/moon_mu-fmnist-laptop-20261121-181954
    python -m analysis.report results --out report            # every sweep in ./results
    python -m analysis.report results --baseline fedprox --target mean --statistic best
    python -m analysis.report results --statistic last:5 --resolve-target 1

RESULTS_DIR is a sweep directory (it holds ``fedsweep_sweep.json``) or a folder of them;
several may be given and their sweeps combine (two datasets of the same study become
two columns).  A sweep that is still running is read as far as it is complete.

Writes into ``--out`` (default ``./report``)::

    report.md        every table and figure, the runs (datasets, budgets, seeds), the
                     trials not counted (errors, divergences, unfinished), the files
                     not counted (damaged: path, reason, what was left out) and what of
                     the paper this reproduces
    tables/          <name>.md, <name>.tex, <name>.csv per table
    figures/         <name>.png and <name>.pdf per figure
    data/            rounds.csv (one row per trial and round), trials.csv (one per trial)

A score task's sweeps (image assessment) report their primary metric (``test_srcc`` by
default) where classification reports accuracy, and their tables once more on the rest
of SRCC and MAE (:mod:`analysis.primary_metric`; docs/reports.md).  Sweeps whose trials
record different primary metrics in one table are refused in one line (exit status 2).

The report is written into a fresh folder beside ``--out`` and moved in only when
complete: a report that fails leaves ``--out`` as it was (exit status 1, one line).
Exit status 2, with one line on stderr, for a path without a sweep or a bad option.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.figure_layout import layout_for
from analysis.formats import to_markdown, write_table
from analysis.grouping import StudyGroup, study_groups
from analysis.loading import (
    COMPLETED,
    NoResultsError,
    Results,
    Sweep,
    load_results,
    status_counts,
)
from analysis.naming import dataset_name, format_value, parameter_name, percent, value_label
from analysis.primary_metric import (
    ACCURACY,
    SCORE,
    Metric,
    PrimaryMetricError,
    sweep_metric,
    table_metrics,
    trial_metric,
)
from analysis.report_markdown import figure_block, unique_stem
from analysis.study_spec import shipped_reports
from analysis.study_tables import (
    TableOptions,
    metric_text,
    primary_of,
    reported_group,
    study_tables,
)
from analysis.summary import excluded_trials
from analysis.tables import Table
from analysis.tracker_upload import TrackerUploadError, check_report_trackers, upload_report
from analysis.trial_statistic import (
    DEFAULT_STATISTIC,
    REPORTED,
    Statistic,
    StatisticError,
    check_validation,
    final_values,
    parse_statistic,
    resolve_statistic,
)
from federated.cli.input_checks import InputError, OneLineParser, UsageError, check_output_folder

METRIC_CHOICES = ("final", "best")  # --metric: the older spelling of --statistic final|best
TARGET_CHOICES = ("per-seed", "mean")
MAX_PARTITION_FIGURES = 6

SCORE_WORDS = (
    " Score tasks (image assessment) report their primary metric as recorded, three "
    "decimals: SRCC and PLCC (correlations in [-1, 1], higher is better), MAE and RMSE (in "
    "the score's own units, lower is better); their Δ and resolvable differences are in the "
    'metric\'s units (docs/reports.md, "Score tasks: the primary metric").'
)
NOT_REPRODUCED = [
    "Figs. 1, 3, 4 (diagrams); Fig. 2 (t-SNE of representations) only for sweeps run with "
    "representations_at (--set representations_at=ROUND)",
    "Table 6 (dataset statistics: a property of the data, not of runs)",
]


@dataclass
class Section:
    """The report's part for one study group: tables, figures and their files."""

    heading: str
    text: list[str] = field(default_factory=list)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="python -m analysis.report",
        description="Tables and figures (the MOON paper's) from study.sweep results.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", nargs="+", metavar="RESULTS_DIR", help="sweep dir or folder of them")
    p.add_argument("--out", default="report", help="output folder (default ./report)")
    p.add_argument(
        "--statistic",
        default=None,
        help="what a trial's accuracy is: final (the last round), last:K (mean of the last K "
        "rounds), val (test accuracy at the round of best validation accuracy) or best "
        "(over rounds, chosen on test); default: the study file's [report] statistic, else "
        f"{DEFAULT_STATISTIC} (docs/reported-statistic.md)",
    )
    p.add_argument(
        "--metric",
        default=None,
        help="final or best: the older spelling of --statistic final|best",
    )
    p.add_argument(
        "--resolve-target",
        default="2",
        metavar="POINTS",
        help="the difference (accuracy points) the notes say how many seeds would resolve "
        "(default 2; on a score metric POINTS hundredths of its scale: 2 -> 0.02 SRCC)",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help="the communication table's baseline method (default fedavg)",
    )
    p.add_argument(
        "--target",
        default="per-seed",
        help="rounds-to-reach target: per-seed (the same seed's baseline, default) or mean",
    )
    p.add_argument(
        "--column",
        default=None,
        help="the comparison table's columns: any config column (default dataset)",
    )
    p.add_argument("--no-pdf", action="store_true", help="PNG figures only")
    p.add_argument("--quiet", action="store_true", help="print only the report's path")
    p.add_argument(
        "--track",
        action="append",
        default=[],
        metavar="TRACKER",
        help="also log the tables and figures to the sweeps' mlflow or wandb (repeatable)",
    )
    return p


def check_options(args: argparse.Namespace, results: Results) -> TableOptions:
    """Validate the options against what was loaded; raise :class:`UsageError`."""
    statistic = _chosen_statistic(args)
    resolve_target = _resolve_target(args.resolve_target)
    _check_primary_metrics(results)
    _check_validation_data(statistic, results)
    if args.target not in TARGET_CHOICES:
        raise UsageError(f"--target={args.target!r} (allowed: {', '.join(TARGET_CHOICES)})")
    # (nothing to check against before the first trial has started)
    known = results.config_columns
    if args.column is not None and known and args.column not in known:
        allowed = ", ".join(sorted(known))
        raise UsageError(f"--column={args.column!r} is not a config column (allowed: {allowed})")
    methods = (
        sorted(set(results.trials["algorithm"].dropna())) if "algorithm" in results.trials else []
    )
    if args.baseline is not None and methods and args.baseline not in methods:
        raise UsageError(
            f"unknown --baseline {args.baseline!r} (methods in these results: "
            f"{', '.join(methods) or 'none'})"
        )
    return TableOptions(
        statistic=statistic,
        column=args.column or "dataset",
        baseline=args.baseline or "fedavg",
        target=args.target,
        resolve_target=resolve_target,
    )


def _chosen_statistic(args: argparse.Namespace) -> Statistic | None:
    """``--statistic`` (or its older spelling ``--metric``); None when neither is given."""
    if args.metric is not None and args.metric not in METRIC_CHOICES:
        raise UsageError(f"--metric={args.metric!r} (allowed: {', '.join(METRIC_CHOICES)})")
    try:
        statistic = None if args.statistic is None else parse_statistic(args.statistic)
    except StatisticError as err:
        raise UsageError(str(err)) from None
    if args.metric is None:
        return statistic
    if statistic is not None and str(statistic) != args.metric:
        raise UsageError(
            f"--metric={args.metric!r} and --statistic={args.statistic!r} disagree "
            "(give --statistic only)"
        )
    return parse_statistic(args.metric, "--metric")


def _resolve_target(text: str) -> float:
    """``--resolve-target``: accuracy points, a finite number > 0."""
    try:
        points = float(text)
    except ValueError:
        points = float("nan")
    if not (points > 0 and points != float("inf")):
        raise UsageError(f"--resolve-target={text!r} (allowed: accuracy points, a number > 0)")
    return points


def _check_primary_metrics(results: Results) -> None:
    """Every sweep and every table group must rank by one primary metric (one line)."""
    try:
        for sweep in results.sweeps:
            sweep_metric(results.trials[results.trials["sweep"] == sweep.name], sweep.name)
        for group in study_groups(results):
            primary_of(group)
    except PrimaryMetricError as err:
        raise UsageError(str(err)) from None


def _check_validation_data(statistic: Statistic | None, results: Results) -> None:
    """``val`` (chosen here or by a study file) needs every counted trial's validation
    value of each metric its tables are built on (``val_acc``; ``val_srcc``, ``val_mae``
    ... for a score task)."""
    for group in study_groups(results):
        try:
            chosen = resolve_statistic(statistic, group.report)
            if group.search != "optuna" and chosen.needs_validation:
                where = "--statistic" if statistic is not None else "[report] statistic"
                for metric in table_metrics(primary_of(group)):
                    check_validation(group.rounds, group.trials, where, metric)
        except StatisticError as err:
            raise UsageError(str(err)) from None


# ------------------------------------------------------------------------- sections
def _links(paths: dict[str, Path], out: Path) -> str:
    return " · ".join(f"[{fmt}]({p.relative_to(out).as_posix()})" for fmt, p in paths.items())


def _group_heading(group: StudyGroup) -> str:
    study = group.study or "runs without a study label"
    paper = f" — {group.paper}" if group.paper else ""
    search = " (Optuna search)" if group.search == "optuna" else ""
    condition = f" [{group.condition_text}]" if group.condition else ""
    return f"{study}{paper}{search}{condition}"


def _table_section(
    group: StudyGroup, options: TableOptions, out: Path, used: set[str]
) -> tuple[list[str], list[Table]]:
    lines: list[str] = []
    tables = study_tables(group, options)
    timing = _timing_table(group)
    tables += [timing] if timing is not None else []
    for table in tables:
        table.name = unique_stem(table.name, used)
        paths = write_table(table, out / "tables")
        lines += [to_markdown(table), f"Files: {_links(paths, out)}", ""]
    return lines, tables


def _timing_table(group: StudyGroup) -> Table | None:
    """Table 11 for a grid group: rows by method when several ran, else by the first axis
    (by dataset too when there are several)."""
    from analysis.timing import time_per_round_table

    if group.search == "optuna" or group.trials.empty:
        return None
    trials = group.trials
    several = "algorithm" in trials and trials["algorithm"].nunique() > 1
    rows = ["algorithm"] if several or not group.axes else [group.axes[0]]
    rows = (["dataset"] if len(group.datasets) > 1 else []) + rows
    return time_per_round_table(
        group.rounds,
        trials,
        [sweep.manifest for sweep in group.sweeps],
        rows=rows,
        name=f"table11_time_per_round_{group.study or 'runs'}{group.suffix}",
        title="Table 11 — time per round (s), training vs evaluation",
    )


def _figure_section(
    group: StudyGroup, options: TableOptions, out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    from analysis import figures

    lines: list[str] = []
    metric = primary_of(group)
    group, statistic = reported_group(group, options)
    words = metric_text(group, statistic, metric)
    layout = layout_for(group.report.get("figure", {}), group.axes)
    done = group.trials[group.trials["status"] == COMPLETED]
    study = group.study or "runs"
    where = ", ".join(dataset_name(d) for d in group.datasets)
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
            f"line = mean over {seeds} seed(s), band = ±1 std over seeds"
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
                "point = mean over seeds, bar = ±1 std"
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


def _per_party_section(
    group: StudyGroup,
    options: TableOptions,
    results: Results,
    party_rows: pd.DataFrame,
    out: Path,
    used: set[str],
    formats: Sequence[str],
    not_counted: list[str],
) -> list[str]:
    """Per-party outcomes (table and distribution figure) and Fig. 2's t-SNE panel of a
    grid group, where its trials recorded them: rows by method when several ran, else by
    the study's axes.  ``party_rows``: every trial's checked ``parties.csv``
    (:func:`analysis.party_tables.party_frame`); damaged captures go to ``not_counted``."""
    from analysis import party_tables, representations
    from analysis.comparisons import dataset_classes

    trials, study = group.trials, group.study or "runs"
    several = "algorithm" in trials and trials["algorithm"].nunique() > 1
    rows = ["algorithm"] if several or not group.axes else list(group.axes)
    # per method *and setting*: the study's other axes are columns (a sweep of methods x
    # noise levels must not pool, nor drop, the levels of one method)
    settings = [a for a in group.axes if a not in rows and a in trials]
    columns = settings + (["dataset"] if len(group.datasets) > 1 else [])
    baseline = (options.baseline,) if rows == ["algorithm"] else None
    if baseline and options.baseline not in set(trials["algorithm"]):
        baseline = None
    classes = dataset_classes(e for sweep in group.sweeps for e in sweep.partitions)
    metric = primary_of(group)
    mine = trials[["sweep", "trial"]]
    parties = party_rows.merge(mine, on=["sweep", "trial"])
    lines: list[str] = []
    table = party_tables.per_party_table(
        trials,
        group.rounds,
        rows=rows,
        columns=columns,
        name=unique_stem(f"per_party_{study}{group.suffix}", used),
        reference=baseline,
        classes=classes,
        metric=metric,
        parties=parties,
    )
    if table is not None:
        paths = write_table(table, out / "tables")
        lines += [to_markdown(table), f"Files: {_links(paths, out)}", ""]
        figure = party_tables.party_distribution_figure(
            parties,
            rows,
            title=f"{study}: per-party {metric.name} of the final model",
            metric=metric,
        )
        if figure is not None:
            name = unique_stem(f"fig_{study}_per_party{group.suffix}", used)
            paths = figures_save(figure, out / "figures" / name, formats)
            mix = "each party's class mix" if metric.chance else "each party's own test split"
            caption = (
                f"per-party {metric.name}{metric.unit} at the final scored round, {mix}; "
                "box = quartiles over all seeds' parties, points = parties by seed"
            )
            lines += figure_block(paths, out, caption)
    captures = representations.representation_captures(results, trials, rows, not_counted)
    if captures:
        name = unique_stem(f"fig2_tsne_{study}{group.suffix}", used)
        figure = representations.tsne_panel(
            captures, title=f"Fig. 2: t-SNE of projection-head outputs ({study})"
        )
        paths = figures_save(figure, out / "figures" / name, formats)
        seeds = ", ".join(f"{c.label} seed {c.seed}" for c in captures)
        caption = (
            f"Fig. 2: t-SNE of z on {len(captures[0].labels)} test images, global model the "
            f"round started from (left) vs the first party's model after local training "
            f"(right); {seeds}"
        )
        lines += figure_block(paths, out, caption)
    return lines


def figures_save(figure, stem: Path, formats: Sequence[str]) -> list[Path]:
    """:func:`analysis.figures.save_figure` (imported late: it loads Matplotlib)."""
    from analysis.figures import save_figure

    return save_figure(figure, stem, formats)


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


def _optuna_section(
    group: StudyGroup, out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    from analysis import figures
    from analysis.search import parameter_importance, search_history

    params = [a for a in group.axes if a in group.trials] or ["point"]
    shown = group.trials[group.trials["status"].isin([COMPLETED, "stopped"])]
    if shown.empty:
        return ["No completed or stopped trial yet.", ""]
    metric = primary_of(group)
    shown = shown.assign(final_value=final_values(shown, group.rounds, metric))
    history = search_history(shown, params, "final_value", metric)
    study = group.study or "runs"
    what = metric.name
    lines = [
        f"Trials in the order Optuna proposed them; {what} at each trial's last round "
        "(ASHA-stopped trials trained fewer rounds and never count as the best).",
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
    lines += figure_block(paths, out, f"Optuna search history: {what} per trial, best so far")
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


def _partition_section(
    sweeps: list[Sweep], out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    from analysis import figures

    seen: dict[tuple, dict] = {}
    for sweep in sweeps:
        for entry in sweep.partitions:
            fields = ("dataset", "n_parties", "partition", "beta", "labels_per_party")
            key = (*(entry.get(k) for k in fields), entry.get("data_fraction"))
            if key not in seen or entry.get("seed", 0) < seen[key].get("seed", 0):
                seen[key] = entry
    if not seen:
        return []
    lines = [
        "## Data partitions (Fig. 5)",
        "",
        "Samples of each class held by each party, for each distinct partition of the runs "
        "(the lowest seed of each; other seeds draw other partitions of the same kind).",
        "",
    ]
    for entry in list(seen.values())[:MAX_PARTITION_FIGURES]:
        stem = "fig5_partition_{}_N{}_{}{}_data{}_seed{}".format(
            # an image folder's "folder:/a/b" must not put slashes in a file name
            re.sub(r"[^A-Za-z0-9._=-]+", "_", str(entry.get("dataset"))).strip("_"),
            entry.get("n_parties"),
            entry.get("partition"),
            format_value(entry.get("beta")) if entry.get("partition") == "dirichlet" else "",
            format_value(entry.get("data_fraction")),
            entry.get("seed"),
        )
        name = unique_stem(stem, used)
        figure = figures.partition_heatmap(entry)
        paths = figures.save_figure(figure, out / "figures" / name, formats)
        lines += figure_block(paths, out, figures.partition_title(entry))
    if len(seen) > MAX_PARTITION_FIGURES:
        lines += [f"({len(seen) - MAX_PARTITION_FIGURES} more partitions not drawn.)", ""]
    return lines


def _feature_examples_section(
    sweeps: Sequence[Sweep],
    out: Path,
    used: set[str],
    formats: Sequence[str],
    not_counted: list[str],
) -> list[str]:
    """Example training images per party of every feature-skewed sweep (a damaged
    examples file is named in ``not_counted``)."""
    from analysis import figures
    from analysis.feature_examples import feature_examples_figure, read_feature_examples

    lines: list[str] = []
    for sweep in sweeps:
        arrays = read_feature_examples(sweep.path, not_counted)
        if arrays is None:
            continue
        if not lines:
            lines = ["## Feature skew: what the parties see", ""]
        stem = "feature_examples_" + re.sub(r"[^A-Za-z0-9._=-]+", "_", sweep.name)
        name = unique_stem(stem, used)
        figure = feature_examples_figure(arrays)
        paths = figures.save_figure(figure, out / "figures" / name, formats)
        settings = ", ".join(str(s) for s in arrays["settings"])
        lines += figure_block(paths, out, f"{sweep.name}: example training images ({settings})")
    return lines


def _statistic_words(statistic: Statistic | None, primaries: Sequence[Metric] = ()) -> str:
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


def _budget_words(trials: pd.DataFrame) -> str:
    if trials.empty:
        return "no trial started yet"

    def values(column: str) -> str:
        if column not in trials:
            return "?"
        return "/".join(format_value(v) for v in sorted(set(trials[column].dropna())))

    partitions = sorted(set(trials["partition"].dropna())) if "partition" in trials else []
    scheme = ", ".join(value_label("partition", p) for p in partitions)
    return (
        f"{values('rounds')} rounds, E={values('local_epochs')}, N={values('n_parties')}, "
        f"{values('data_fraction')} of train / {values('test_fraction')} of test data"
        + (f", {scheme} partition" if scheme else "")
    )


def _runs_section(results: Results, score: bool = False) -> list[str]:
    """The runs' table and how to read the numbers (``score``: some are score tasks)."""
    lines = [
        "## Runs",
        "",
        "| sweep | study (paper) | search | dataset | budget | seeds | settings | trials | state |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for sweep in results.sweeps:
        m = sweep.manifest
        trials = results.trials[results.trials["sweep"] == sweep.name]
        counts = status_counts(trials)
        found = ", ".join(f"{n} {s}" for s, n in counts.items()) or "none yet"
        planned = m.get("n_trials")
        state = sweep.status
        if state == "running":
            state = "**still running** (read as far as complete)"
        seeds = ", ".join(str(s) for s in m.get("seeds", []))
        lines.append(
            f"| `{sweep.name}` | {m.get('study', '?')} ({m.get('paper', '')}) | "
            f"{sweep.search}{' + ' + str(m['scheduler']) if m.get('scheduler') else ''} | "
            f"{dataset_name(m.get('dataset', '?'))} | {m.get('budget', '?')} | {seeds} | "
            f"{_budget_words(trials)} | {found} (of {planned}) | {state} |"
        )
    lines += [
        "",
        "Tables and curves count **completed** trials only (every planned round run). "
        "Errored, diverged and unfinished trials are never averaged in; they are listed "
        "under *Trials not counted*. Trials stopped early by ASHA appear only in the Optuna "
        "search history (with the accuracy they had when stopped). Accuracies are "
        "percentages of the test set (the fraction evaluated by the budget)."
        + (SCORE_WORDS if score else ""),
        "",
    ]
    return lines


def _not_counted_section(results: Results) -> list[str]:
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
    plain = all(m is ACCURACY for m in metrics)
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


def _files_not_counted_section(not_counted: Sequence[str]) -> list[str]:
    """The damaged files of otherwise counted trials and sweeps: path, what is wrong, and
    what was left out for it (the rest of each trial counts)."""
    if not not_counted:
        return []
    return [
        "## Files not counted",
        "",
        "Damaged files (never read as results): the part each held is left out, the rest "
        "of its trial or sweep is counted.",
        "",
        *[f"- {entry}" for entry in not_counted],
        "",
    ]


def _reproduction_section(groups: list[StudyGroup]) -> list[str]:
    reproduces = {g.study: g.report.get("reproduces", "") for g in groups if g.study}
    present = sorted(reproduces)
    lines = ["## What of the paper this reproduces", ""]
    for study in present:
        lines.append(f"- `{study}`: {reproduces[study] or 'a generic accuracy table'}")
    lines.append("- partitions.json of every sweep: Fig. 5 (and Figs. 9–10 for β = 0.1 and 5)")
    # the built-in studies (shipped study files) not among these results
    shipped = {n: r.get("reproduces", "") for n, r in shipped_reports().items()}
    missing = sorted(set(shipped) - set(present))
    if missing:
        lines.append(
            "- not in these results (run those studies to get them): "
            + "; ".join(f"{s} ({shipped[s]})" for s in missing)
        )
    lines.append("- never produced by the report: " + "; ".join(NOT_REPRODUCED))
    return [*lines, ""]


# ---------------------------------------------------------------------------- main
def write_report(
    results: Results,
    out: str | Path,
    options: TableOptions | None = None,
    *,
    sources: Sequence[str] = (),
    formats: Sequence[str] = ("png", "pdf"),
) -> Path:
    """Write every table and figure and ``report.md`` into ``out``; returns report.md.

    Everything is written into a fresh folder beside ``out`` first and moved into
    ``out`` only once complete (:func:`_move_into`): a report that fails half-way leaves
    ``out`` as it was, never half a report."""
    out = Path(out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        _write_report_files(results, staging, options or TableOptions(), sources, formats)
        _move_into(staging, out)
    except BaseException:
        if created:  # leave no empty folder behind either
            shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out / "report.md"


# what a report consists of in its folder (everything else there is left alone)
REPORT_ENTRIES = ("tables", "figures", "data", "report.md")


def _move_into(staging: Path, out: Path) -> None:
    """Replace the report entries of ``out`` by ``staging``'s: the folders first, the
    report.md last (so a report.md never links to files of another run)."""
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    try:
        for name in REPORT_ENTRIES:
            new, old = staging / name, out / name
            if old.exists() or old.is_symlink():
                os.replace(old, retired / name)
            if new.exists():
                os.replace(new, old)
    finally:
        shutil.rmtree(retired, ignore_errors=True)


def _write_report_files(
    results: Results,
    out: Path,
    options: TableOptions,
    sources: Sequence[str],
    formats: Sequence[str],
) -> None:
    """Every table, figure and data file and report.md, into the (empty) folder ``out``."""
    from analysis.party_tables import party_frame
    from analysis.selection_section import selection_section

    used: set[str] = set()
    groups = study_groups(results)
    primaries = [primary_of(group) for group in groups]
    not_counted: list[str] = []  # damaged files whose part is left out (path: reason)
    party_rows = party_frame(results, not_counted)

    body = [
        "# fedsweep report",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} by `python -m analysis.report "
        f"{' '.join(sources)}`. {_statistic_words(options.statistic, primaries)}.",
        "",
    ]
    body += _runs_section(results, any(m.task == SCORE for m in primaries))
    for group in groups:
        body += [f"## {_group_heading(group)}", ""]
        if group.study and not group.report.get("table") and group.search != "optuna":
            body += ["(No paper shape known for this study: varied parameters vs accuracy.)", ""]
        table_lines, _ = _table_section(group, options, out, used)
        body += table_lines
        if group.search == "optuna":
            body += _optuna_section(group, out, used, formats)
        else:
            body += _figure_section(group, options, out, used, formats)
            body += _per_party_section(
                group, options, results, party_rows, out, used, formats, not_counted
            )
    body += selection_section(results, party_rows, out, used, formats)
    body += _partition_section(results.sweeps, out, used, formats)
    body += _feature_examples_section(results.sweeps, out, used, formats, not_counted)
    body += _not_counted_section(results)
    body += _files_not_counted_section(not_counted)
    if results.problems:
        body += ["## Problems while reading", "", *[f"- {p}" for p in results.problems], ""]
    body += _reproduction_section(groups)
    body += [
        "Other files: [data/rounds.csv](data/rounds.csv) (one row per trial and round) and "
        "[data/trials.csv](data/trials.csv) (one row per trial, with its status); "
        "data/parties.csv (one row per trial, scored round and party) where trials "
        "recorded per-party accuracies.",
        "",
    ]

    data = out / "data"
    data.mkdir(exist_ok=True)
    results.rounds.to_csv(data / "rounds.csv", index=False)
    results.trials.to_csv(data / "trials.csv", index=False)
    if not party_rows.empty:
        party_rows.to_csv(data / "parties.csv", index=False)
    (out / "report.md").write_text("\n".join(body))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        out = check_output_folder(args.out, "--out")
        check_report_trackers(args.track)
        results = load_results(args.results)
        options = check_options(args, results)
    except (NoResultsError, UsageError, TrackerUploadError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    formats = ("png",) if args.no_pdf else ("png", "pdf")
    try:
        report = write_report(results, out, options, sources=args.results, formats=formats)
    except OSError as err:  # the disk filled, a folder vanished: one line, not a traceback
        print(
            f"error: could not write the report into {out}: {err}; nothing of it was written",
            file=sys.stderr,
        )
        return 1
    except Exception as err:  # a table or figure failed: one line, and nothing half-done
        first = (str(err).strip().splitlines() or [""])[0][:200]
        print(
            f"error: the report failed ({type(err).__name__}: {first}); nothing of it was "
            f"written into {out}",
            file=sys.stderr,
        )
        return 1
    if not args.quiet:
        for sweep in results.sweeps:
            trials = results.trials[results.trials["sweep"] == sweep.name]
            counts = ", ".join(f"{n} {s}" for s, n in status_counts(trials).items())
            print(f"{sweep.name}: {sweep.status}; trials: {counts or 'none yet'}")
    print(f"report: {report}")
    if args.track:
        sweeps = [(sweep.name, sweep.path, sweep.manifest) for sweep in results.sweeps]
        for line in upload_report(report.parent, sweeps, args.track):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
