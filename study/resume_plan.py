"""``--resume``'s plan: the one the sweep's manifest records, never today's flags.

``python -m study.sweep --resume --name NAME --storage-path DIR`` is the whole command
that continues any sweep (a built-in study, a study file, or ``--vary``/``--set`` axes on
an own ``--dataset``): the study, its data, budget, seeds, overrides and Optuna samples
come from ``DIR/NAME/fedsweep_sweep.json``, and so do the trials' resources, scheduler
and concurrency unless the command gives them again (a resumed sweep may run on another
machine).  That short form is what the driver prints after an interruption.

A plan flag given beside ``--resume`` (the study, ``--vary``, ``--set``, ``--dataset``,
``--budget``, ``--seeds``, ``--num-samples``, ``--metric``, ``--search``) is honoured
only where it plans the very trials the manifest records; otherwise it is refused in one
line that names the flags and gives the short form, so a value the user wrote is never
dropped silently.  This module does not import Ray.
"""

from __future__ import annotations

import argparse
import functools
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from federated.cli.input_checks import InputError, check_output_folder
from federated.config.run_config import ConfigError
from search_spaces.study_file import StudyFileError
from study.plan import PlanTooLargeError, SweepPlan
from study.resume_discovery import find_sweep, sweep_to_resume
from study.sweep_args import UsageError, build_parser
from study.sweep_folder import read_manifest

# (argparse dest, the flag as the user typed it): what plans a sweep's trials
PLAN_FLAGS = (
    ("study", "the study"),
    ("vary", "--vary"),
    ("overrides", "--set"),
    ("dataset", "--dataset"),
    ("budget", "--budget"),
    ("seeds", "--seeds"),
    ("num_samples", "--num-samples"),
    ("metric", "--metric"),
    ("search", "--search"),
)
# (argparse dest, manifest key): how the trials ran, restored unless given again
EXECUTION_FROM_MANIFEST = (
    ("scheduler", "scheduler"),
    ("max_concurrent", "max_concurrent"),
)
# flags the short resume command carries when the user gave them (not recorded)
CARRIED_FLAGS = (
    ("address", "--address"),
    ("cpus_per_trial", "--cpus-per-trial"),
    ("gpus_per_trial", "--gpus-per-trial"),
    ("max_concurrent", "--max-concurrent"),
    ("max_failures", "--max-failures"),
    ("rerun_best", "--rerun-best"),
)
CARRIED_SWITCHES = (("quiet", "--quiet"), ("dashboard", "--dashboard"))


@functools.cache
def _defaults() -> argparse.Namespace:
    """The parser's defaults (built once: ``given`` asks for about twenty)."""
    return build_parser().parse_args([])


def given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the command line gave ``dest`` a value other than the parser's default."""
    return getattr(args, dest) != getattr(_defaults(), dest)


def resume_command(args: argparse.Namespace, name: str, storage: Path) -> str:
    """The command that continues sweep ``name`` under ``storage``: the short form, with
    the execution flags this command was given (the manifest records the plan)."""
    parts = ["python -m study.sweep --resume --name", shlex.quote(name)]
    parts += ["--storage-path", shlex.quote(str(storage))]
    for dest, flag in CARRIED_FLAGS:
        if given(args, dest):
            parts += [flag, shlex.quote(str(getattr(args, dest)))]
    parts += [flag for dest, flag in CARRIED_SWITCHES if getattr(args, dest)]
    return " ".join(parts)


def resumed_plan(args: argparse.Namespace, plan_from_flags: Callable[[], SweepPlan]) -> SweepPlan:
    """The plan ``--resume`` continues: the manifest's.  ``args.name`` is set to the sweep
    found (the latest of the flags' study when no ``--name`` is given) and the execution
    flags the user left out are set from the manifest.  ``plan_from_flags`` builds the plan
    the command's own plan flags describe, for the check that they agree."""
    flags = [flag for dest, flag in PLAN_FLAGS if given(args, dest)]
    storage = check_output_folder(args.storage_path, "--storage-path").resolve()
    if args.name is None:
        if not (given(args, "study") or given(args, "vary")):
            raise UsageError(
                "--resume needs --name NAME (the sweep's folder under --storage-path), or the "
                "study, to continue its latest sweep"
            )
        sweep_dir = find_sweep(storage, plan_from_flags(), None)
        args.name = sweep_dir.name
    else:
        sweep_dir = find_sweep(storage, None, args.name)
    # the folder's trust and digests are checked before its manifest is read as a plan
    sweep_dir, recorded = sweep_to_resume(storage, None, sweep_dir.name)
    short = resume_command(args, sweep_dir.name, storage)
    if flags:
        _check_flags_agree(flags, plan_from_flags, recorded, sweep_dir, short)
    _restore_execution_flags(args, sweep_dir)
    args.search = recorded.search
    return recorded


def _check_flags_agree(
    flags: list[str],
    plan_from_flags: Callable[[], SweepPlan],
    recorded: SweepPlan,
    sweep_dir: Path,
    short: str,
) -> None:
    """Refuse, in one line, plan flags that do not plan the trials ``recorded`` holds."""
    named = ", ".join(flags)
    try:
        asked = plan_from_flags()
    except (InputError, ConfigError, StudyFileError, PlanTooLargeError) as err:
        raise UsageError(
            f"--resume: {named} given again do not plan {sweep_dir.name} ({err}); --resume "
            f"reads them from its manifest: {short}"
        ) from None
    difference = plan_difference(asked, recorded)
    if difference:
        raise UsageError(
            f"--resume: {named} plan other trials than {sweep_dir}'s manifest records "
            f"({difference}); leave them out to continue it as it was: {short}"
        )


def plan_difference(asked: SweepPlan, recorded: SweepPlan) -> str | None:
    """The first way ``asked`` plans other trials than ``recorded`` (None: the same).  The
    torch threads are not compared: they follow ``--cpus-per-trial``, which may change."""
    if asked.search != recorded.search:
        return f"search {asked.search} vs {recorded.search}"
    if asked.search == "optuna" and asked.num_samples != recorded.num_samples:
        return f"{asked.num_samples} Optuna samples vs {recorded.num_samples}"
    if asked.budget.name != recorded.budget.name:
        return f"budget {asked.budget.name} vs {recorded.budget.name}"
    mine, theirs = _configs(asked), _configs(recorded)
    if len(mine) != len(theirs):
        return f"{len(mine)} trials vs {len(theirs)}"
    for a, b in zip(mine, theirs):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return f"{key}={a.get(key)!r} vs {b.get(key)!r}"
    return None


def _configs(plan: SweepPlan) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.config.items() if k != "threads"} for t in plan.trials()]


def _restore_execution_flags(args: argparse.Namespace, sweep_dir: Path) -> None:
    """The scheduler, concurrency and per-trial CPUs and GPUs the sweep ran with, where
    this command does not give them again."""
    manifest = read_manifest(sweep_dir)
    for dest, key in EXECUTION_FROM_MANIFEST:
        if not given(args, dest) and manifest.get(key) is not None:
            setattr(args, dest, manifest[key])
    resources = manifest.get("resources") or {}
    if not given(args, "cpus_per_trial") and resources.get("cpu") is not None:
        args.cpus_per_trial = float(resources["cpu"])
    if not given(args, "gpus_per_trial") and resources.get("gpu") is not None:
        args.gpus_per_trial = float(resources["gpu"])
