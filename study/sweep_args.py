"""``python -m study.sweep``'s command line: the parser, the checks of its values, and
the study it names (a built-in name, a study file or ``--vary`` axes).

Nothing here starts Ray or writes a file: every value is refused here, in one line
(``error: ...``, exit status 2), before the sweep's plan is built.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from federated.cli.input_checks import (
    OneLineParser,
    UsageError,
    absolute_paths,
    check_plain_name,
    check_trial_resources,
)
from federated.config.run_config import ConfigError, coerce
from federated.registry import kind_specs
from search_spaces import BUDGETS, DEFAULT_BUDGET, STUDIES, USER_DEFAULT_BUDGET, Study
from search_spaces.adhoc import adhoc_study
from search_spaces.study_file import load_study_file
from study.selection import VALIDATION_PREFIX
from study.tracking import TrackerUnavailableError, check_trackers

# Most fresh seeds --rerun-best reruns the chosen configuration on: far beyond what any
# table resolves with (the seed forecast stops at tens), so only a typo reaches it.
MAX_RERUN_BEST = 1_000


def _primary_validation_metrics() -> str:
    """Each registered kind's default ranking metric ("val_acc for classification, ...")."""
    return ", ".join(f"val_{s.metrics[0].stem} for {name}" for name, s in kind_specs().items())


def build_parser() -> argparse.ArgumentParser:
    """The command line; a malformed flag is one ``error:`` line (OneLineParser)."""
    p = OneLineParser(
        prog="python -m study.sweep",
        description="Run a study of the MOON paper as a Ray Tune sweep.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="studies: " + ", ".join(STUDIES),
    )
    _add_study_arguments(p)
    _add_search_arguments(p)
    _add_resource_arguments(p)
    _add_sweep_folder_arguments(p)
    _add_rerun_and_output_arguments(p)
    return p


def _add_study_arguments(p: argparse.ArgumentParser) -> None:
    """What runs: the study (a name, a file or --vary's axes), its data, budget and
    overrides."""
    p.add_argument("study", nargs="?", help="study name (see --list) or a study file (.toml)")
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="FIELD=VALUES",
        help="an ad hoc study's axis: mu=0,0.1,1 (grid) or mu=loguniform:0.01:10 (Optuna); "
        "repeatable; --name names the study",
    )
    p.add_argument("--list", action="store_true", help="list the studies and exit")
    p.add_argument("--dataset", help="dataset (default: the study's, fmnist)")
    p.add_argument(
        "--budget",
        help=f"one of {', '.join(BUDGETS)} (default: {DEFAULT_BUDGET} for a built-in study, "
        f"{USER_DEFAULT_BUDGET} for a study file or --vary)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a config field, e.g. --set rounds=20 (repeatable)",
    )


def _add_search_arguments(p: argparse.ArgumentParser) -> None:
    """How the space is searched, what ranks trials, and the seeds."""
    p.add_argument("--search", default="grid", help="grid (the paper's) or optuna (TPE)")
    p.add_argument("--num-samples", type=int, help="Optuna trials (default: max(8, grid size))")
    p.add_argument(
        "--scheduler",
        default="fifo",
        help="fifo or asha (early stopping on --metric, a validation metric)",
    )
    p.add_argument(
        "--metric",
        default=None,
        help=f"what ranks trials for Optuna, ASHA and --rerun-best: "
        "a validation metric of the trials' task, val_<metric> or val_loss (default: "
        "val_ of the trials' primary metric, "
        f"{_primary_validation_metrics()}; validation, "
        "never test)",
    )
    p.add_argument(
        "--seeds",
        help="seed count (3 -> 0,1,2), list (0,4), or until:T[:CAP]: add seed batches until "
        "every table resolves T accuracy points or CAP seeds (default 10) are spent; "
        "default: the budget's",
    )


def _add_resource_arguments(p: argparse.ArgumentParser) -> None:
    """What each trial asks Ray for, and how failures are retried."""
    p.add_argument(
        "--cpus-per-trial", type=float, default=1.0, help="CPUs (and torch threads) per trial"
    )
    p.add_argument(
        "--gpus-per-trial",
        type=float,
        default=0.0,
        help="GPUs per trial, fractional (0.25: four per GPU)",
    )
    p.add_argument("--max-concurrent", type=int, help="at most this many trials at once")
    p.add_argument(
        "--max-failures",
        type=int,
        default=1,
        help="restarts of a failing trial from its checkpoint",
    )


def _add_sweep_folder_arguments(p: argparse.ArgumentParser) -> None:
    """Where results go, the sweep's name, resuming, which Ray, and a dry run."""
    p.add_argument(
        "--storage-path",
        default=os.environ.get("FEDSWEEP_RESULTS", "results"),
        help="results folder, shared by all nodes (default ./results or $FEDSWEEP_RESULTS)",
    )
    p.add_argument("--name", help="sweep name (default <study>-<dataset>-<budget>[-optuna]-<time>)")
    p.add_argument(
        "--resume", action="store_true", help="continue an interrupted sweep (--name or the latest)"
    )
    p.add_argument(
        "--address", help="join an existing Ray cluster (default $RAY_ADDRESS, else a local Ray)"
    )
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="start the Ray dashboard on 127.0.0.1, print its URL, keep it up after the sweep "
        "until Ctrl-C",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the trials and their resources; start nothing"
    )


def _add_rerun_and_output_arguments(p: argparse.ArgumentParser) -> None:
    """After the sweep (--rerun-best) and what it shows and logs (live view, trackers)."""
    p.add_argument(
        "--rerun-best",
        type=int,
        default=None,  # None: not asked for (an explicit 0 is refused, never ignored)
        metavar="K",
        help="rerun the configuration chosen on --metric over K fresh seeds (no searched "
        "trial's seed)",
    )
    p.add_argument("--quiet", action="store_true", help="no live progress view")
    p.add_argument(
        "--track",
        action="append",
        default=[],
        metavar="TRACKER",
        help="also log every trial to mlflow or wandb (repeatable; optional extras)",
    )
    p.add_argument(
        "--track-uri",
        help="MLflow tracking URI (default: sqlite:///<sweep folder>/mlflow.db)",
    )


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``--set FIELD=VALUE`` items as typed config values, paths made absolute; a comma
    list that the field's type cannot hold (``mu=0.1,5``) is kept as written, for the
    study's axis to take (:func:`search_spaces.with_axis_values`)."""
    out: dict[str, Any] = {}
    written: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set rounds=20")
        key, value = item.split("=", 1)
        if key.strip() in written:  # as a repeated --vary is: the last would win silently
            raise UsageError(
                f"--set {key.strip()} given twice ({written[key.strip()]!r} and {item!r}); "
                "give each field once"
            )
        written[key.strip()] = item
        try:
            out[key.strip()] = coerce(key.strip(), value)
        except ConfigError as err:
            if "," not in value:
                raise UsageError(
                    f"--set {item}: {err.field}={err.value!r} (allowed: {err.allowed})"
                ) from None
            # AXIS=v1,v2 on a number or boolean axis: typed item by item once the study
            # is known (search_spaces.with_axis_values), which also refuses the list on a
            # field the study does not vary
            out[key.strip()] = value.strip()
    return absolute_paths(out)  # trials run in folders of their own: no relative paths


def check_args(args: argparse.Namespace) -> None:
    """Refuse (UsageError) a flag's value, or a combination of flags, that no plan allows."""

    def one_of(flag: str, value: Any, allowed) -> None:
        if value not in allowed:
            raise UsageError(f"{flag}={value!r} (allowed: {', '.join(allowed)})")

    if args.budget is not None:
        one_of("--budget", args.budget, BUDGETS)
    one_of("--search", args.search, ("grid", "optuna"))
    one_of("--scheduler", args.scheduler, ("fifo", "asha"))
    check_trial_resources(args.cpus_per_trial, args.gpus_per_trial, args.max_failures)
    if args.name is not None:
        check_plain_name(args.name, "--name")
    if args.num_samples is not None and args.num_samples < 1:
        raise UsageError(f"--num-samples={args.num_samples!r} (allowed: an integer >= 1)")
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise UsageError(f"--max-concurrent={args.max_concurrent!r} (allowed: an integer >= 1)")
    # None: the trials' own; which val_ columns exist is the task's to say, checked
    # once the data resolve it (study/selection.py selection_metric)
    if args.metric is not None and not args.metric.startswith(VALIDATION_PREFIX):
        raise UsageError(
            f"--metric={args.metric!r} (allowed: a validation metric, val_<metric> "
            "of the trials' task or val_loss)"
        )
    if args.rerun_best is not None and not 1 <= args.rerun_best <= MAX_RERUN_BEST:
        # 0 would silently rerun nothing; a huge K is a typo that would plan K trials
        raise UsageError(
            f"--rerun-best={args.rerun_best!r} (allowed: an integer in [1, {MAX_RERUN_BEST:,}]: "
            "the fresh seeds the chosen configuration is rerun on; leave it out to rerun none)"
        )
    if args.track_uri and "mlflow" not in args.track:
        raise UsageError(f"--track-uri={args.track_uri!r} needs --track mlflow")
    try:
        check_trackers(args.track)
    except TrackerUnavailableError as err:
        raise UsageError(str(err)) from None


def resolve_study(args: argparse.Namespace) -> Study:
    """The study the arguments name: ``--vary`` axes, a study file, or a built-in name."""
    if args.vary:
        if args.study is not None:
            raise UsageError(f"study {args.study!r} and --vary: give one or the other")
        # the axes' values are checked beside what --set and --dataset give every trial
        given = parse_overrides(args.overrides)
        flags = {item.split("=", 1)[0].strip(): f"--set {item}" for item in args.overrides}
        if getattr(args, "dataset", None) and "dataset" not in given:
            given["dataset"] = args.dataset
            flags["dataset"] = f"--dataset {args.dataset}"
        return adhoc_study(args.vary, args.name, given, flags)
    if args.study is None:
        raise UsageError(
            "a study name, a study file or --vary is needed (studies: "
            + ", ".join(STUDIES)
            + "); see --list"
        )
    if args.study.endswith(".toml") or os.sep in args.study:
        return load_study_file(args.study)
    if args.study not in STUDIES:
        raise UsageError(
            f"study={args.study!r} (allowed: {', '.join(STUDIES)}, or a study file .toml)"
        )
    return STUDIES[args.study]


def check_search(study: Study, search: str) -> None:
    """A grid needs every axis to have grid values (a range-only axis is searched)."""
    if search == "grid":
        for axis in study.axes:
            if not axis.values:
                raise UsageError(
                    f"axis {axis.name} has only an Optuna range "
                    f"({axis.search_range.describe()}): use --search optuna or give it values"
                )
