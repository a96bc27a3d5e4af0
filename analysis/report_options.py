"""``python -m analysis.report``'s command line and the checks of its options against the
loaded results (one-line :class:`UsageError`, exit status 2)."""

from __future__ import annotations

import argparse

from analysis.primary_metric import PrimaryMetricError, sweep_metric, table_metrics
from analysis.reading.grouping import study_groups
from analysis.reading.loading import Results
from analysis.stats.trial_statistic import (
    DEFAULT_STATISTIC,
    Statistic,
    StatisticError,
    check_validation,
    parse_statistic,
    resolve_statistic,
)
from analysis.tables.study_tables import TableOptions, primary_of
from federated.cli.input_checks import OneLineParser, UsageError

METRIC_CHOICES = ("final", "best")  # --metric: the older spelling of --statistic final|best
TARGET_CHOICES = ("per-seed", "mean")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m analysis.report``."""
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
