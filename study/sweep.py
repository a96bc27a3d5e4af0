"""``python -m study.sweep NAME``: run one of the paper's studies as a Ray Tune sweep.

    python -m study.sweep --list                      # the studies and their paper tables
    python -m study.sweep moon_mu                     # Table 9, laptop budget, Fashion-MNIST
    python -m study.sweep moon_mu --dry-run           # the trials and resources, nothing runs
    python -m study.sweep moon_mu --budget paper --dataset cifar10 --gpus-per-trial 0.25
    python -m study.sweep moon_mu --search optuna --num-samples 20 --scheduler asha --rerun-best 3
    python -m study.sweep moon_mu --resume            # continue the latest moon_mu sweep
    python -m study.sweep my_study.toml               # a study file (search_spaces.study_file)
    python -m study.sweep --vary mu=0,0.1,1 --vary beta=0.1,0.5 --set algorithm=moon \
        --name mu-by-beta                             # an ad hoc study (search_spaces.adhoc)

Results go to ``<storage path>/<name>/`` (layout: :mod:`study.sweep_folder`); read them with
``python -m analysis.report <storage path>/<name>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import shutil
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from federated.cli import exit_codes
from federated.cli.error_reason import error_reason
from federated.cli.input_checks import InputError, check_address, check_output_folder
from federated.cli.internal_error import report_internal_error
from federated.config.checks import ExecutionAliasWarning
from federated.config.run_config import ConfigError
from federated.data import DatasetUnavailableError
from federated.runtime.owned_temp_files import remove_stale
from search_spaces import BUDGETS, DEFAULT_BUDGET, USER_DEFAULT_BUDGET, Study
from search_spaces.study_file import StudyFileError
from study.dashboard import dashboard_line, keep_dashboard_up
from study.driver_liveness import driver_record
from study.dry_run import epsilon_lines, left_out_lines
from study.interruption import DRIVER_SIGNALS
from study.plan import PlanTooLargeError, SweepPlan
from study.plan_description import describe_plan, list_studies, plan_warnings
from study.preflight import check_batches, check_cpus, check_devices, preflight, trial_configs
from study.resources import Execution, TrialResources, choose_resources
from study.resume_digests import check_key_writable, record_digests
from study.resume_plan import resume_command, resumed_plan
from study.seed_batches import SeedTarget, next_batch, parse_seed_target
from study.selection import (
    SelectionError,
    best_config,
    check_validated,
    personal_validation_note,
    rerun_seeds,
    selector,
    with_validation,
)
from study.summary_table import format_summary, summary_rows
from study.sweep_args import (
    UsageError,
    build_parser,
    check_args,
    check_search,
    parse_overrides,
    resolve_study,
)
from study.sweep_folder import MANIFEST, read_manifest, update_manifest, write_json_atomic
from study.terminal_errors import install_one_line_trial_errors
from study.tracking import (
    TrackerUnavailableError,
    check_tracker_settings,
    start_tracking,
    sweep_tags,
    tracked_sweep,
)

if TYPE_CHECKING:  # Ray is loaded only by a sweep that runs (study.tune.ray_session)
    from ray.tune import ResultGrid, Tuner

# Loopback-only local Ray: with this, Ray resolves the node address of a local cluster
# to 127.0.0.1 and every Ray process binds there (README, "Network").  Read by Ray at
# import, so it is set before study.tune.ray_session imports Ray, and only for a local Ray.
LOCAL_ONLY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


class SweepStopError(Exception):
    """Ends :func:`main` with exit status ``code``; the step that raises it has already
    printed what the user needs (the error line, the resume command)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class SweepTarget:
    """Where a sweep runs, as the checks before Ray found it."""

    storage: Path  # the results folder, resolved
    address: str | None  # the Ray cluster to join; empty: a local Ray
    sweep_dir: Path  # the sweep's folder (a new sweep's does not exist yet)
    partitions: list[dict[str, Any]]  # every distinct partition's class counts (preflight)
    resume_command: str  # the command that continues this sweep


def main(argv: list[str] | None = None) -> int:
    """Plan, check before Ray, start Ray, start (or resume) the sweep's folder, fit and
    summarise, rerun the best; returns the exit status (README, exit statuses)."""
    args = build_parser().parse_args(argv)
    # the plan says so in its own notice line (protocol_notices), once
    warnings.simplefilter("ignore", ExecutionAliasWarning)
    dashboard: str | None = None  # a local Ray's dashboard, kept up after the sweep
    reached = DriverProgress()
    try:
        if args.list:
            print(list_studies())
        else:
            with DRIVER_SIGNALS.driving():
                dashboard = drive(args, reached)
        sys.stdout.flush()  # an unwritable stdout fails here, in reach of the handlers
    except SweepStopError as stop:
        code = stop.code
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM between the phases' own handlers
        code = interrupted(reached.target, bool(args.resume))
    except Exception as err:  # what every check missed is a bug: one line, not a trace
        code = report_internal_error(err, "study.sweep")
    else:
        code = exit_codes.OK
    if code == exit_codes.INTERRUPTED and DRIVER_SIGNALS.received is not None:
        code = DRIVER_SIGNALS.exit_code  # 143 for SIGTERM
    # a sweep that ended on its own (not one the user interrupted) stays inspectable
    if dashboard and code in (exit_codes.OK, exit_codes.ALL_TRIALS_FAILED):
        from study.tune import ray_session  # imported already: Ray runs

        # the driver's job ends now, so the dashboard shows the sweep finished, while
        # the local Ray holding the dashboard stays up until Ctrl-C
        ray_session.end_driver_job()
        keep_dashboard_up(dashboard)
        ray_session.end_local_ray()
    return code


# --budget, --num-samples, --set ... are not repeated: --resume reads the sweep's plan
# from its manifest (study/resume_plan.py refuses flags that would plan other trials).
RESUME_NOTE = "  (--resume reads the budget, the trials and every setting from the manifest)"


@dataclass
class DriverProgress:
    """How far :func:`drive` got: the sweep it checked and is running (None before)."""

    target: SweepTarget | None = None


def interrupted(target: SweepTarget | None, resumed: bool) -> int:
    """Say where a sweep stopped by a signal outside Tune's loop left things; its exit
    status (130, or 143 for SIGTERM).  A new sweep stopped before Tune wrote its first
    snapshot (``experiment_state-*.json``, every second) could not be resumed: its folder
    goes, and nothing was written."""
    sweep_dir = target.sweep_dir if target is not None else None
    if sweep_dir is not None and not resumed and not any(sweep_dir.glob("experiment_state*")):
        shutil.rmtree(sweep_dir, ignore_errors=True)
        sweep_dir = None
    if sweep_dir is None or not (sweep_dir / MANIFEST).is_file():
        print("error: interrupted before the sweep started; nothing was written", file=sys.stderr)
        return DRIVER_SIGNALS.exit_code
    status = read_manifest(sweep_dir).get("status")
    if status == "finished":  # the signal came after the sweep's own end was recorded
        print(f"stopped after the sweep finished; results in {sweep_dir}", file=sys.stderr)
        return DRIVER_SIGNALS.exit_code
    if status == "running":  # between the folder's creation and Tune's loop
        update_manifest(sweep_dir, status="interrupted")
    print(f"sweep interrupted; results in {sweep_dir}", file=sys.stderr)
    print(f"continue it with: {target.resume_command}", file=sys.stderr)
    print(RESUME_NOTE, file=sys.stderr)
    return DRIVER_SIGNALS.exit_code


def drive(args: argparse.Namespace, reached: DriverProgress) -> str | None:
    """:func:`main`'s work, recording in ``reached`` the sweep it is running; returns the
    URL of the dashboard kept up after it (or None).  A stop is a
    :class:`SweepStopError`, a signal outside Tune's loop ``KeyboardInterrupt``."""
    plan = plan_sweep(args)
    requested = TrialResources(args.cpus_per_trial, args.gpus_per_trial)
    # torch threads follow the CPUs a trial gets, unless --set threads=... says otherwise
    plan.overrides.setdefault("threads", requested.threads)
    if args.dry_run:
        check_machine(args, plan)  # what the real run would refuse of this machine
        for line in plan_warnings(plan) + left_out_lines(plan):
            print(line, file=sys.stderr)
        print(describe_plan(plan, requested))
        for line in epsilon_lines(plan):  # the plan's privacy: each DP setting once
            print(line)
        return None
    target = reached.target = check_before_ray(args, plan)
    remove_stale(t.run_config.party_state_dir for t in plan.trials())  # killed runs' scratch
    for line in plan_warnings(plan):
        print(line, file=sys.stderr)
    # a resumed sweep trains on the path its manifest's overrides recorded
    path = None if args.resume else choose_execution(plan, requested, target)
    execution, dashboard = start_ray(args, target)
    DRIVER_SIGNALS.reclaim()  # ray.init took SIGTERM
    tags = sweep_tags(plan.study.name, target.sweep_dir.name, plan.budget.name)
    tracking = (
        None if args.resume else start_sweep_folder(args, plan, target, execution, tags, path)
    )
    with tracked_sweep(target.sweep_dir):  # the MLflow sweep run ends with the outcome
        results = fit_and_summarise(args, plan, target, execution, tracking, tags)
    seed_target = parse_seed_target(args.seeds)
    if seed_target:
        add_seed_batches(args, plan, target, execution, tags, seed_target)
    if args.rerun_best:
        best_dir = rerun_best(
            plan, results, target.sweep_dir, target.storage, execution, args.rerun_best
        )
        print(f"report: python -m analysis.report {target.sweep_dir} {best_dir}")
    if DRIVER_SIGNALS.received is not None:  # after the last Tuner.fit: stop here too
        raise KeyboardInterrupt
    return dashboard


def plan_sweep(args: argparse.Namespace) -> SweepPlan:
    """The sweep's plan: a new sweep's from the command line (its values checked, the
    study resolved, the budget chosen and applied), a resumed one's from its manifest
    (:mod:`study.resume_plan`).  Nothing is written and Ray is not started."""
    try:
        check_args(args)
        if args.resume:
            plan = resumed_plan(args, lambda: plan_from_flags(args)[0])
            by = selector(plan.search, args.scheduler, args.rerun_best)
            check_selection_flags(args, plan, by)
            return plan
        plan, notes = plan_from_flags(args)
        for note in notes:
            print(note, file=sys.stderr)
        return plan
    except (InputError, ConfigError, StudyFileError, PlanTooLargeError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SweepStopError(exit_codes.BAD_INPUT) from None
    except KeyboardInterrupt:  # Ctrl-C while planning: nothing has been written yet
        print("error: interrupted while planning; nothing was written", file=sys.stderr)
        raise SweepStopError(exit_codes.INTERRUPTED) from None


def plan_from_flags(args: argparse.Namespace) -> tuple[SweepPlan, list[str]]:
    """The plan the command line's study, data, budget, seeds and overrides describe,
    and the notes on how its trials are validated (printed for a new sweep)."""
    if not (args.address or os.environ.get("RAY_ADDRESS")):
        # a local Ray has this machine's CPUs: said as the flag the user gave, before
        # the trials' torch threads (which follow it) are checked as a field
        check_cpus(args.cpus_per_trial)
    study = resolve_study(args)
    check_search(study, args.search)
    # a built-in study's values are the paper's, which budgets scale; a user's study
    # runs as written unless a budget is asked for (search_spaces/budgets.py)
    budget = args.budget or (DEFAULT_BUDGET if study.paper_settings else USER_DEFAULT_BUDGET)
    # Optuna, ASHA and --rerun-best select on validation (study/selection.py)
    by = selector(args.search, args.scheduler, args.rerun_best)
    overrides, note = with_validation(study, parse_overrides(args.overrides), by)
    # torch threads follow the CPUs a trial gets, unless --set threads=... says
    # otherwise; set before the plan resolves its trials, so that each resolves once
    requested = TrialResources(args.cpus_per_trial, args.gpus_per_trial)
    overrides = {**overrides, "threads": overrides.get("threads", requested.threads)}
    seed_target = parse_seed_target(args.seeds)
    if seed_target and (args.resume or args.search == "optuna"):
        raise UsageError(
            f"--seeds={args.seeds} runs a grid in seed batches: not with --resume (resume "
            "each batch's folder by its --name) nor --search optuna (a search runs one seed)"
        )
    plan = SweepPlan.build(
        study,
        BUDGETS[budget],
        dataset=args.dataset,
        search=args.search,
        # until:T starts with the budget's seeds and adds batches after the sweep
        seeds=None if seed_target else args.seeds,
        overrides=overrides,
        num_samples=args.num_samples,
        metric=args.metric,
    )
    check_validated((t.config for t in plan.trials()), by)
    check_selection_flags(args, plan, by)
    personal = personal_validation_note((t.config for t in plan.trials()), plan.ranking_metric)
    return plan, [n for n in (note, personal) if n]


def check_selection_flags(args: argparse.Namespace, plan: SweepPlan, by: str | None) -> None:
    """Refuse, in one line, the selection flags a plan would ignore or fail on at its
    end: a ``--metric`` its task does not record (checked here, so a dry run refuses
    what the real run would), a ``--metric`` where nothing ranks trials, and
    ``--rerun-best`` of a grid with one point (nothing is chosen)."""
    if by or args.metric is not None:
        plan.chosen_metric  # noqa: B018 -- raises SelectionError for a metric not recorded
    if args.metric is not None and plan.ranking_metric is None:
        raise UsageError(
            f"--metric={args.metric!r}: this sweep ranks no trials (a plain grid without "
            "validation data) (allowed: with --search optuna, --scheduler asha or "
            "--rerun-best K, or --set val_fraction=0.1 to rank the summary)"
        )
    if args.rerun_best and args.search == "grid" and plan.study.grid_size == 1:
        raise UsageError(
            f"--rerun-best={args.rerun_best}: the grid has one point, so there is nothing "
            "to choose (allowed: a grid of >= 2 points or --search optuna; for more seeds "
            "of one point, --seeds)"
        )


def check_machine(args: argparse.Namespace, plan: SweepPlan) -> None:
    """A dry run's share of :func:`check_before_ray`, refused in the same one line: the
    CPUs a trial asks for and the devices the trials name, when a local Ray would run
    them on this machine; parties smaller than a batch are warned of.  Loads no data."""
    try:
        configs = trial_configs(plan)
        if not (args.address or os.environ.get("RAY_ADDRESS")):
            check_cpus(args.cpus_per_trial)
            check_devices(configs)
        check_batches(configs)
    except (InputError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SweepStopError(exit_codes.BAD_INPUT) from None


def check_before_ray(args: argparse.Namespace, plan: SweepPlan) -> SweepTarget:
    """Everything that can be refused before Ray starts, refused now in one line: the
    results folder, the cluster address, this machine's CPUs, the folder to resume (or
    the new one's name and trackers), and what every trial would check when it starts
    (data, partition, device).  Nothing is written."""
    try:
        storage = check_output_folder(args.storage_path, "--storage-path").resolve()
        address = args.address or os.environ.get("RAY_ADDRESS")
        if address:
            check_address(address)
        if not address:  # a local Ray has this machine's CPUs
            check_cpus(args.cpus_per_trial)
        if args.resume:
            # plan_sweep found the folder, checked its trust and digests and built the
            # plan its manifest records (study/resume_plan.py): the trials' checks run on it
            sweep_dir, checked_plan = storage / args.name, plan
        else:
            sweep_dir = storage / (args.name or plan.default_name(time.strftime("%Y%m%d-%H%M%S")))
            if sweep_dir.exists():
                raise UsageError(
                    f"{sweep_dir} exists: pass --resume to continue it, or another --name"
                )
            check_key_writable()  # a sweep --resume could never continue is refused
            try:
                check_tracker_settings(args.track, args.track_uri)
            except TrackerUnavailableError as err:
                raise UsageError(str(err)) from None
            checked_plan = plan
        # what every trial would check when it starts (data, partition, device), now
        partitions = preflight(checked_plan, local=not address)
    except (InputError, ConfigError, StudyFileError, DatasetUnavailableError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SweepStopError(exit_codes.BAD_INPUT) from None
    except KeyboardInterrupt:
        print("error: interrupted before the sweep started; nothing was written", file=sys.stderr)
        raise SweepStopError(exit_codes.INTERRUPTED) from None
    command = resume_command(args, sweep_dir.name, storage)
    return SweepTarget(storage, address, sweep_dir, partitions, command)


def choose_execution(
    plan: SweepPlan, requested: TrialResources, target: SweepTarget
) -> dict[str, Any]:
    """The trials' execution path where the user wrote none: packed or sequential, timed
    here before Ray starts (:mod:`study.path_choice`); said in one line.  Returns the
    manifest's ``execution_choice``.  A calibration that fails leaves the default path,
    with a warning: it never stops a sweep."""
    from study.path_choice import DEFAULT_PATH, sweep_path_choice

    try:
        choice = sweep_path_choice(plan, requested, remote=bool(target.address))
    except KeyboardInterrupt:
        print("error: interrupted before the sweep started; nothing was written", file=sys.stderr)
        raise SweepStopError(exit_codes.INTERRUPTED) from None
    except Exception as err:  # a failed measurement is no reason to stop the sweep
        first = error_reason(err)
        print(
            f"warning: execution path not measured ({type(err).__name__}: {first}); "
            f"trials train {DEFAULT_PATH}",
            file=sys.stderr,
        )
        return {"path": DEFAULT_PATH, "source": "not measured", "reason": first}
    print(choice.line(), flush=True)
    return choice.to_manifest()


def start_ray(args: argparse.Namespace, target: SweepTarget) -> tuple[Execution, str | None]:
    """Start a local Ray (loopback only) or join ``target.address``, check that a trial
    fits the largest node, print the dashboard's URL when asked, and choose the trials'
    resources (a GPU request on a cluster without GPUs falls back to CPU, with a
    warning); returns how the trials run and the URL of the dashboard the driver keeps
    up after the sweep (``--dashboard`` on a local Ray; else None)."""
    if not target.address:
        os.environ.update(LOCAL_ONLY_ENV)
        # token authentication, as Ray turns it on for a local cluster: the driver joins
        # a head node started apart (study/local_ray.py), and Ray reads the mode at import
        os.environ.setdefault("RAY_AUTH_MODE", "token")

    # a failed trial is one line on the terminal (its traceback stays in its error.txt)
    install_one_line_trial_errors()
    from study.tune import ray_session  # imports Ray: only now that there is something to run

    try:
        # the Tune modules load while the local Ray comes up in its own processes
        url = ray_session.start_ray(target.address, args.dashboard, import_tune_modules)
        ray_session.check_fits_cluster(args.cpus_per_trial, args.gpus_per_trial)
    except (InputError, ConnectionError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SweepStopError(exit_codes.BAD_INPUT) from None
    except Exception as err:  # Ray's own start-up failures (a raylet that timed out): one line
        first = error_reason(err)
        print(
            f"error: Ray did not start ({first}); nothing was written — on a busy machine, "
            "try again when it is quieter",
            file=sys.stderr,
        )
        raise SweepStopError(exit_codes.BAD_INPUT) from None
    if args.dashboard:
        print(dashboard_line(url, target.sweep_dir), flush=True)
    resources, warning = choose_resources(
        args.cpus_per_trial, args.gpus_per_trial, ray_session.cluster_gpus()
    )
    if warning:
        print(warning, file=sys.stderr, flush=True)
    execution = Execution(
        resources=resources,
        max_concurrent=args.max_concurrent,
        scheduler=None if args.scheduler == "fifo" else args.scheduler,
        max_failures=args.max_failures,
        verbose=0 if args.quiet else 1,
        # a reused actor keeps its first trial's name on the dashboard's Actors page:
        # reused only where no dashboard is asked for, on this machine's own Ray
        reuse_actors=not (args.dashboard or target.address),
    )
    return execution, (url if args.dashboard and url and not target.address else None)


# The Ray Tune modules a sweep imports after Ray is up (tuners, fit, callbacks): seconds
# of imports (5 s on a loaded 2-core machine), which start_ray overlaps with Ray's start.
TUNE_MODULES = (
    "study.manifest_content",
    "study.tune.fit",
    "study.tune.resume_digest_callback",
    "study.tune.tracking_callbacks",
    "study.tune.tuners",
)


def import_tune_modules() -> None:
    """Import :data:`TUNE_MODULES` now (their later imports are then lookups)."""
    for name in TUNE_MODULES:
        importlib.import_module(name)


def start_sweep_folder(
    args: argparse.Namespace,
    plan: SweepPlan,
    target: SweepTarget,
    execution: Execution,
    tags: dict[str, str],
    execution_choice: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Create a new sweep's folder with its tracker runs, ``partitions.json`` (and the
    feature-skew examples) and manifest (with ``execution_choice``: how the trials'
    execution path was chosen); returns the manifest's ``tracking`` entry.

    The folder, its tracker runs, partitions and manifest come together: a tracker that
    fails to set up leaves nothing behind (never a folder without a manifest)."""
    # Ray is already imported by start_ray, after LOCAL_ONLY_ENV
    from study import manifest_content
    from study.tune import fit

    try:
        target.sweep_dir.mkdir(parents=True)
        tracking = start_tracking(args.track, target.sweep_dir, args.track_uri, tags)
    except Exception as err:  # whatever the tracker's library raises: one line
        shutil.rmtree(target.sweep_dir, ignore_errors=True)
        first = error_reason(err)
        print(f"error: --track {','.join(args.track)}: {first}", file=sys.stderr)
        raise SweepStopError(exit_codes.BAD_INPUT) from None
    fit.write_partitions(plan, target.sweep_dir, target.partitions)
    write_json_atomic(
        target.sweep_dir / MANIFEST,
        manifest_content.manifest_for(
            plan,
            target.sweep_dir.name,
            execution,
            tracking=tracking,
            execution_choice=execution_choice,
        ),
    )
    return tracking


def fit_and_summarise(
    args: argparse.Namespace,
    plan: SweepPlan,
    target: SweepTarget,
    execution: Execution,
    tracking: dict[str, dict[str, Any]] | None,
    tags: dict[str, str],
) -> ResultGrid:
    """Run the sweep (a new one, or the resumed one) until it ends or is interrupted, then
    print its summary and outcome (:func:`summarise`).  Returns Tune's results when every
    trial finished; otherwise ends the command with the outcome's exit status."""
    from study.tune import fit, tracking_callbacks, tuners  # import Ray
    from study.tune.resume_digest_callback import ResumeDigestRecorder

    started = time.perf_counter()
    # Ctrl-C before Tune's loop listens, or a second one, is a KeyboardInterrupt that main()
    # turns into the interrupted sweep's lines (or removes a folder Tune had not used)
    if args.resume:
        # its callbacks, the digest recorder among them, come back from tuner.pkl
        tuner = restored_tuner(target.sweep_dir, execution)
    else:
        print("\n".join(describe_plan(plan, execution.resources).splitlines()[:2]), flush=True)
        callbacks = [
            *tracking_callbacks.tracking_callbacks(
                tracking or {}, tags, plan.varied_fields, plan.summary_columns
            ),
            ResumeDigestRecorder(),  # what --resume will verify (study/resume_digests.py)
        ]
        tuner = tuners.new_tuner(plan, target.sweep_dir.name, target.storage, execution, callbacks)
        record_digests(target.sweep_dir)  # tuner.pkl, written as the Tuner was built
    try:
        results = fit.fit(tuner, target.sweep_dir)
    finally:  # finished, interrupted or failed: the state Tune left is the user's
        record_digests(target.sweep_dir)
    summarise(results, time.perf_counter() - started, target, DRIVER_SIGNALS.exit_code)
    return results


def restored_tuner(sweep_dir: Path, execution: Execution) -> Tuner:
    """The Tuner that continues ``sweep_dir``: its manifest says running again (with this
    driver), W&B runs continue in the mode they were started in, and a grid gets its
    param space back from the manifest's plan (:func:`study.tune.tuners.restore_tuner`)."""
    from study.tune import tuners  # import Ray

    print(f"resuming {sweep_dir}", flush=True)
    before = read_manifest(sweep_dir)
    manifest = update_manifest(sweep_dir, status="running", driver=driver_record())
    try:
        if "wandb" in manifest.get("tracking", {}):  # Tune's restored callback checks it
            os.environ["WANDB_MODE"] = manifest["tracking"]["wandb"]["mode"]
        space = None
        if manifest["search"] == "grid":
            space = SweepPlan.from_manifest(manifest).param_space()
        return tuners.restore_tuner(sweep_dir, execution.resources, space)
    except BaseException as err:
        # nothing ran: the manifest says again what it said before this resume
        update_manifest(sweep_dir, status=before.get("status"), driver=before.get("driver"))
        if isinstance(err, KeyboardInterrupt):
            raise
        first = error_reason(err, default="")
        print(
            f"error: could not resume {sweep_dir} ({type(err).__name__}: {first}); "
            "its manifest and results are as they were",
            file=sys.stderr,
        )
        raise SweepStopError(exit_codes.BAD_INPUT) from None


def summarise(results: ResultGrid, elapsed: float, target: SweepTarget, stop_code: int) -> None:
    """Print the summary table and the sweep's outcome.  An unfinished sweep (interrupted,
    failed) ends the command with ``stop_code`` and the resume command on stderr; one with
    errored trials with exit status 4 and their distinct first error lines."""
    from study.tune import fit  # import Ray

    sweep_dir = target.sweep_dir
    recorded = read_manifest(sweep_dir)
    print(
        format_summary(
            summary_rows(results, recorded),
            int(recorded.get("not_started") or 0),
            recorded.get("metric"),
        )
    )
    status = recorded["status"]
    if status != "finished":  # what is left to do goes with the error, on stderr
        print(f"sweep {status} after {elapsed:.0f} s; results in {sweep_dir}", file=sys.stderr)
        print(f"continue it with: {target.resume_command}", file=sys.stderr)
        print(RESUME_NOTE, file=sys.stderr)
        raise SweepStopError(stop_code)
    failed = fit.failed_trials(sweep_dir)
    if failed:
        # Tune is done but not every trial is: never "finished" with exit status 0
        lines = sorted(set(failed.values()))
        whom = f"all {len(failed)}" if len(failed) == len(results) else f"{len(failed)} of"
        total = "" if len(failed) == len(results) else f" {len(results)}"
        print(
            f"error: {whom}{total} trials errored; distinct first error lines:",
            file=sys.stderr,
        )
        for line in lines:
            print(f"  {line}", file=sys.stderr)
        print(
            f"results in {sweep_dir}; retry the errored trials with: {target.resume_command}",
            file=sys.stderr,
        )
        raise SweepStopError(
            exit_codes.ALL_TRIALS_FAILED
        )  # 4: trials errored (README, exit statuses)
    print(f"sweep finished in {elapsed:.0f} s; results in {sweep_dir}")
    print(f"report: python -m analysis.report {sweep_dir}")


def add_seed_batches(
    args: argparse.Namespace,
    plan: SweepPlan,
    target: SweepTarget,
    execution: Execution,
    tags: dict[str, str],
    seed_target: SeedTarget,
) -> list[Path]:
    """``--seeds until:T[:CAP]``: after the first sweep, run further seed batches as
    sweeps beside it until every table resolves T points or CAP seeds are spent
    (study/seed_batches.py); prints each decision and the report command over all
    batches; returns the batch folders."""
    from analysis.tables.resolvable_tables import resolvable_differences

    folders = [target.sweep_dir]
    done = len(plan.seeds)
    while True:
        try:
            resolvable = resolvable_differences(folders)
        except ValueError as err:  # NoResultsError, StatisticError: one line
            print(f"error: --seeds {args.seeds}: {err}", file=sys.stderr)
            raise SweepStopError(exit_codes.BAD_INPUT) from None
        seeds, why = next_batch(resolvable, seed_target, done, len(plan.seeds))
        print(f"--seeds {args.seeds}: {why}", flush=True)
        if not seeds:
            break
        batch_plan = dataclasses.replace(plan, seeds=seeds)
        batch_dir = target.storage / f"{target.sweep_dir.name}-seeds{seeds[0]}-{seeds[-1]}"
        batch = dataclasses.replace(
            target,
            sweep_dir=batch_dir,
            partitions=preflight(batch_plan, local=not target.address),
            resume_command=target.resume_command.replace(target.sweep_dir.name, batch_dir.name),
        )
        tracking = start_sweep_folder(args, batch_plan, batch, execution, tags)
        with tracked_sweep(batch_dir):
            fit_and_summarise(args, batch_plan, batch, execution, tracking, tags)
        folders.append(batch_dir)
        done = seeds[-1] + 1
    print("report: python -m analysis.report " + " ".join(str(f) for f in folders))
    return folders


def rerun_best(
    plan: SweepPlan,
    results: ResultGrid,
    sweep_dir: Path,
    storage: Path,
    execution: Execution,
    k: int,
) -> Path:
    """Run the configuration the sweep chose on validation again over ``k`` seeds that
    no searched trial used (a sweep of its own, ``<sweep>-best``), recording what the
    search saw of it for the report's optimism (study/selection.py)."""
    from study import manifest_content
    from study.tune import fit, tuners  # import Ray

    try:
        best = best_config(results, plan.ranking_metric or plan.chosen_metric)
    except SelectionError as err:
        print(f"error: --rerun-best: {err}", file=sys.stderr)
        raise SweepStopError(exit_codes.ALL_TRIALS_FAILED) from None
    config, selection = best["config"], best["selection"]
    name = f"{sweep_dir.name}-best"
    rerun_plan = SweepPlan.build(
        fixed_at(plan.study, config),
        plan.budget,
        dataset=plan.dataset,
        seeds=rerun_seeds(plan.seeds, k),
        overrides=plan.overrides,
        metric=plan.metric,
    )
    manifest = manifest_content.manifest_for(
        rerun_plan,
        name,
        execution,
        rerun_of=sweep_dir.name,
        best_point=selection["point"],
        selection=selection,
    )
    manifest.update(search="rerun-best", n_trials=k)
    write_json_atomic(storage / name / MANIFEST, manifest)
    seeds = rerun_plan.seeds
    print(
        f"re-running the configuration chosen on {selection['metric']} "
        f"({selection['point']}) over fresh seeds {seeds[0]}..{seeds[-1]}",
        flush=True,
    )
    from study.tune.resume_digest_callback import ResumeDigestRecorder
    from study.tune.tracking_callbacks import tracking_callbacks

    # the search's varied fields in TensorBoard's HPARAMS, and the digests --resume checks
    callbacks = [
        *tracking_callbacks({}, {}, plan.varied_fields, plan.summary_columns),
        ResumeDigestRecorder(),
    ]
    tuner = tuners.rerun_tuner(rerun_plan, name, storage, execution, callbacks)
    record_digests(storage / name)  # tuner.pkl, written as the Tuner was built
    try:
        rerun = fit.fit(tuner, storage / name)
    finally:
        record_digests(storage / name)
    print(format_summary(summary_rows(rerun), metric=rerun_plan.ranking_metric))
    return storage / name


def fixed_at(study: Study, config: Mapping[str, Any]) -> Study:
    """``study`` with each axis held at the value a trial ``config`` took (a plain
    axis's field, a joint axis's label): a one-point grid, ranges included."""
    axes = tuple(dataclasses.replace(a, values=(config[a.name],)) for a in study.axes)
    return dataclasses.replace(study, axes=axes)


if __name__ == "__main__":
    from federated.runtime.process_exit import exit_process

    # a signal after main's work (Ray's shutdown among the exit hooks) still says 130
    exit_process(main(), final=DRIVER_SIGNALS.final_code)
