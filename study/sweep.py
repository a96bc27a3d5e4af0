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

Results go to ``<storage path>/<name>/`` (layout: :mod:`study.layout`); read them with
``python -m analysis.report <storage path>/<name>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from federated import exit_codes
from federated.config import ConfigError, coerce
from federated.data import DatasetUnavailable
from federated.input_checks import (
    InputError,
    OneLineParser,
    absolute_paths,
    check_address,
    check_output_folder,
    check_plain_name,
    check_trial_resources,
)
from search_spaces import BUDGETS, DEFAULT_BUDGET, STUDIES, USER_DEFAULT_BUDGET, Study
from search_spaces.adhoc import adhoc_study
from search_spaces.study_file import StudyFileError, load_study_file
from study.driver_liveness import driver_gone
from study.interruption import StopSignals
from study.layout import MANIFEST, read_manifest
from study.plan import PlanTooLargeError, SweepPlan
from study.preflight import check_cpus, preflight
from study.resources import TrialResources
from study.resume_trust import check_resume_trust
from study.tracking import (
    TrackerUnavailableError,
    check_tracker_settings,
    check_trackers,
    start_tracking,
    sweep_tags,
)

# Loopback-only local Ray: with this, Ray resolves the node address of a local cluster
# to 127.0.0.1 and every Ray process binds there (README, "Network").  Read by Ray at
# import, so it is set before study.runner imports Ray, and only for a local Ray.
LOCAL_ONLY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


class UsageError(InputError):
    """A command-line value is not allowed (one line, printed as ``error: ...``)."""


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="python -m study.sweep",
        description="Run a study of the MOON paper as a Ray Tune sweep.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="studies: " + ", ".join(STUDIES),
    )
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
    p.add_argument("--search", default="grid", help="grid (the paper's) or optuna (TPE)")
    p.add_argument("--num-samples", type=int, help="Optuna trials (default: max(8, grid size))")
    p.add_argument("--scheduler", default="fifo", help="fifo or asha (early stopping on test_acc)")
    p.add_argument("--seeds", help="seed count (3 -> 0,1,2) or list (0,4); default: the budget's")
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
        help="start the Ray dashboard on 127.0.0.1 and print its URL",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the trials and their resources; start nothing"
    )
    p.add_argument(
        "--rerun-best",
        type=int,
        default=0,
        metavar="K",
        help="after an Optuna search, rerun the best config over K seeds",
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
    return p


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set rounds=20")
        key, value = item.split("=", 1)
        out[key.strip()] = coerce(key.strip(), value)
    return absolute_paths(out)  # trials run in folders of their own: no relative paths


def check_args(args: argparse.Namespace) -> None:
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
    if args.rerun_best and args.search != "optuna":
        raise UsageError("--rerun-best needs --search optuna (a grid already runs every seed)")
    if args.rerun_best < 0:
        raise UsageError(f"--rerun-best={args.rerun_best!r} (allowed: an integer >= 1)")
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
        return adhoc_study(args.vary, args.name)
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


def study_argument(args: argparse.Namespace) -> str:
    """How the command line named the study (for the 'continue it with' hint)."""
    if args.vary:
        return " ".join(
            [*(f"--vary {v}" for v in args.vary), *(f"--set {o}" for o in args.overrides)]
        )
    return str(args.study)


def list_studies() -> str:
    lines = [f"{'study':<16} {'reproduces':<26} {'grid':>4} {'seeds':>5}  varies"]
    for s in STUDIES.values():
        varies = " x ".join(f"{a.name} ({len(a.values)})" for a in s.axes)
        lines.append(f"{s.name:<16} {s.paper:<26} {s.grid_size:>4} {s.seeds:>5}  {varies}")
        lines.append(f"{'':<16} {s.description}; paper datasets: {', '.join(s.paper_datasets)}")
    lines.append("")
    lines.append("budgets: " + "; ".join(f"{b.name}: {b.description}" for b in BUDGETS.values()))
    return "\n".join(lines)


def describe_plan(plan: SweepPlan, resources: TrialResources) -> str:
    paper = f" ({plan.study.paper})" if plan.study.paper else ""
    head = (
        f"study {plan.study.name}{paper} on {plan.dataset}, "
        f"budget {plan.budget.name}, {plan.search} search: {plan.n_trials} trials"
    )
    if plan.search == "grid":
        head += f" ({plan.study.grid_size} grid points x {len(plan.seeds)} seeds)"
    lines = [head, describe_budget(plan), f"each trial: {resources.describe()}"]
    if resources.gpus:
        lines.append("(GPUs fall back to CPU with a warning when the cluster has none)")
    if plan.search == "optuna":
        lines.append(f"seed {plan.seeds[0]}; Optuna TPE (seed 0) over:")
        for axis in plan.study.axes:
            lines.append(f"  {axis.name}: {axis.search_range.describe()}")
        lines.append("every trial resolves like this example:")
    for i, trial in enumerate(plan.trials(), 1):
        c = trial.config
        lines.append(
            f"  {i:>3}. {trial.label:<40} seed={trial.seed}  {c['algorithm']} {c['model']} "
            f"N={c['n_parties']} frac={c['sample_fraction']:g} rounds={c['rounds']} "
            f"E={c['local_epochs']} "
            f"data={c['data_fraction']:g} mu={c['mu']:g} tau={c['tau']:g}"
        )
    return "\n".join(lines)


def describe_budget(plan: SweepPlan) -> str:
    """What the budget changed, ``field from -> to`` (the manifest keeps the same), and
    that values the user wrote stand."""
    changes = plan.budget_changes()

    def show(value: Any) -> str:
        return f"{value:g}" if isinstance(value, float) else str(value)

    if not changes:
        return f"budget {plan.budget.name}: changes nothing (every value as written)"
    parts = [
        f"{name} " + ", ".join(f"{show(a)} -> {show(b)}" for a, b in pairs)
        for name, pairs in changes.items()
    ]
    stands = "" if plan.study.paper_settings else " (your study's own values stand)"
    return f"budget {plan.budget.name} changed: " + "; ".join(parts) + stands


def find_sweep(storage: Path, plan: SweepPlan, name: str | None) -> Path:
    if name:
        path = storage / name
        if not path.is_dir():
            raise UsageError(f"--resume: no sweep {name!r} under {storage}")
        return path
    prefix = plan.default_name("")
    candidates = sorted(
        (p for p in storage.glob(prefix + "*") if p.is_dir()), key=lambda p: p.stat().st_mtime
    )
    if not candidates:
        raise UsageError(f"--resume: no sweep named {prefix}* under {storage}; pass --name")
    return candidates[-1]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        print(list_studies())
        return 0
    try:
        check_args(args)
        study = resolve_study(args)
        check_search(study, args.search)
        # a built-in study's values are the paper's, which budgets scale; a user's study
        # runs as written unless a budget is asked for (search_spaces/budgets.py)
        budget = args.budget or (DEFAULT_BUDGET if study.paper_settings else USER_DEFAULT_BUDGET)
        plan = SweepPlan.build(
            study,
            BUDGETS[budget],
            dataset=args.dataset,
            search=args.search,
            seeds=args.seeds,
            overrides=parse_overrides(args.overrides),
            num_samples=args.num_samples,
        )
    except (InputError, ConfigError, StudyFileError, PlanTooLargeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C while planning: nothing has been written yet
        print("error: interrupted while planning; nothing was written", file=sys.stderr)
        return exit_codes.INTERRUPTED
    requested = TrialResources(args.cpus_per_trial, args.gpus_per_trial)
    # torch threads follow the CPUs a trial gets, unless --set threads=... says otherwise
    plan.overrides.setdefault("threads", requested.threads)
    if args.dry_run:
        print(describe_plan(plan, requested))
        return 0

    try:
        storage = check_output_folder(args.storage_path, "--storage-path").resolve()
        address = args.address or os.environ.get("RAY_ADDRESS")
        if address:
            check_address(address)
        if not address:  # a local Ray has this machine's CPUs
            check_cpus(args.cpus_per_trial)
        if args.resume:
            sweep_dir = find_sweep(storage, plan, args.name)
            if runner_manifest_running(sweep_dir):
                raise UsageError(
                    f"--resume: {sweep_dir} is still running (its driver is alive); stop it first"
                )
            # before anything of the folder is read as code (Tune's pickles)
            check_resume_trust(sweep_dir)
            checked_plan = resumable_plan(sweep_dir)
        else:
            sweep_dir = storage / (args.name or plan.default_name(time.strftime("%Y%m%d-%H%M%S")))
            if sweep_dir.exists():
                raise UsageError(
                    f"{sweep_dir} exists: pass --resume to continue it, or another --name"
                )
            try:
                check_tracker_settings(args.track, args.track_uri)
            except TrackerUnavailableError as err:
                raise UsageError(str(err)) from None
            checked_plan = plan
        # what every trial would check when it starts (data, partition, device), now
        partitions = preflight(checked_plan, local=not address)
    except (InputError, ConfigError, StudyFileError, DatasetUnavailable) as err:
        print(f"error: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted before the sweep started; nothing was written", file=sys.stderr)
        return exit_codes.INTERRUPTED
    for line in override_warnings(plan):
        print(line, file=sys.stderr)
    resume_command = (
        f"python -m study.sweep {study_argument(args)} --resume --name {sweep_dir.name} "
        f"--storage-path {storage}"
    )
    if not address:
        os.environ.update(LOCAL_ONLY_ENV)

    from study import runner  # imports Ray: only now that there is something to run

    try:
        url = runner.start_ray(address, args.dashboard)
        runner.check_fits_cluster(args.cpus_per_trial, args.gpus_per_trial)
    except (InputError, ConnectionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    if args.dashboard:
        print(
            f"Ray dashboard: {url or 'not available'} (Tune results also in TensorBoard: "
            f"tensorboard --logdir {sweep_dir})",
            flush=True,
        )
    resources, warning = runner.choose_resources(
        args.cpus_per_trial, args.gpus_per_trial, runner.cluster_gpus()
    )
    if warning:
        print(warning, file=sys.stderr, flush=True)
    execution = runner.Execution(
        resources=resources,
        max_concurrent=args.max_concurrent,
        scheduler=None if args.scheduler == "fifo" else args.scheduler,
        max_failures=args.max_failures,
        verbose=0 if args.quiet else 1,
    )
    tags = sweep_tags(plan.study.name, sweep_dir.name, plan.budget.name)
    if not args.resume:
        # the folder, its tracker runs, partitions and manifest come together: a tracker
        # that fails to set up leaves nothing behind (never a folder without a manifest)
        try:
            sweep_dir.mkdir(parents=True)
            tracking = start_tracking(args.track, sweep_dir, args.track_uri, tags)
        except Exception as err:  # whatever the tracker's library raises: one line
            shutil.rmtree(sweep_dir, ignore_errors=True)
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            print(f"error: --track {','.join(args.track)}: {first}", file=sys.stderr)
            return exit_codes.BAD_INPUT
        runner.write_partitions(plan, sweep_dir, partitions)
        runner.write_json_atomic(
            sweep_dir / runner.MANIFEST,
            runner.manifest_for(plan, sweep_dir.name, execution, tracking=tracking),
        )

    started = time.perf_counter()
    with StopSignals() as signals:
        try:
            if args.resume:
                print(f"resuming {sweep_dir}", flush=True)
                manifest = runner.update_manifest(
                    sweep_dir, status="running", driver=runner.driver_record()
                )
                if "wandb" in manifest.get("tracking", {}):  # Tune's restored callback checks it
                    os.environ["WANDB_MODE"] = manifest["tracking"]["wandb"]["mode"]
                space = None
                if manifest["search"] == "grid":
                    space = SweepPlan.from_manifest(manifest).param_space()
                tuner = runner.restore_tuner(sweep_dir, resources, space)
            else:
                print("\n".join(describe_plan(plan, resources).splitlines()[:2]), flush=True)
                callbacks = runner.tracking_callbacks(tracking, tags)
                tuner = runner.new_tuner(plan, sweep_dir.name, storage, execution, callbacks)
            results = runner.fit(tuner, sweep_dir, signals)
        except KeyboardInterrupt:  # a second signal, or one before Tune's loop ran
            print(f"sweep interrupted; results in {sweep_dir}", file=sys.stderr)
            print(f"continue it with: {resume_command}", file=sys.stderr)
            return signals.exit_code
    elapsed = time.perf_counter() - started
    recorded = runner.read_manifest(sweep_dir)
    print(
        runner.format_summary(
            runner.summary_rows(results, recorded), int(recorded.get("not_started") or 0)
        )
    )
    status = recorded["status"]
    if status != "finished":  # what is left to do goes with the error, on stderr
        print(f"sweep {status} after {elapsed:.0f} s; results in {sweep_dir}", file=sys.stderr)
        print(f"continue it with: {resume_command}", file=sys.stderr)
        return signals.exit_code
    failed = runner.failed_trials(sweep_dir)
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
            f"results in {sweep_dir}; retry the errored trials with: {resume_command}",
            file=sys.stderr,
        )
        return exit_codes.ALL_TRIALS_FAILED  # 4: trials errored (README, exit statuses)
    print(f"sweep finished in {elapsed:.0f} s; results in {sweep_dir}")
    print(f"report: python -m analysis.report {sweep_dir}")

    if args.rerun_best:
        best_dir = rerun_best(plan, results, sweep_dir, storage, execution, args.rerun_best)
        print(f"report: python -m analysis.report {sweep_dir} {best_dir}")
    return exit_codes.OK


def resumable_plan(sweep_dir: Path) -> SweepPlan:
    """The plan a sweep folder's manifest records, or one line saying why it cannot be
    resumed (no manifest, a damaged one, no Tune state)."""
    try:
        manifest = read_manifest(sweep_dir)
    except FileNotFoundError:
        raise UsageError(
            f"--resume: {sweep_dir} has no {MANIFEST}: not a fedsweep sweep, or one that "
            "never started; start it again without --resume"
        ) from None
    except (OSError, ValueError) as err:
        raise UsageError(f"--resume: {sweep_dir / MANIFEST} is unreadable ({err})") from None
    if not (sweep_dir / "tuner.pkl").is_file():
        raise UsageError(
            f"--resume: {sweep_dir} has no Ray Tune state (tuner.pkl): the sweep never got "
            "to its first trial; start it again under another --name"
        )
    try:
        return SweepPlan.from_manifest(manifest)
    except (ConfigError, StudyFileError, PlanTooLargeError) as err:
        raise UsageError(f"--resume: {sweep_dir / MANIFEST}: {err}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise UsageError(
            f"--resume: {sweep_dir / MANIFEST} is damaged ({type(err).__name__}: {err})"
        ) from None


def runner_manifest_running(sweep_dir: Path) -> bool:
    """True when the sweep's manifest says running and its driver process is alive."""
    try:
        manifest = json.loads((sweep_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(manifest, dict)
        and manifest.get("status") == "running"
        and isinstance(manifest.get("driver"), dict)
        and not driver_gone(manifest)
    )


def override_warnings(plan: SweepPlan) -> list[str]:
    """``warning:`` lines for ``--set`` fields that have no effect in any of the trials."""
    from federated.config import RunConfig
    from federated.inert_settings import inert_settings
    from study.plan import run_config_fields

    given = [k for k in plan.overrides if k != "threads"]
    if not given:
        return []
    per_trial = [
        set(inert_settings(RunConfig.from_dict(run_config_fields(t.config)), given))
        for t in plan.trials()
    ]
    common = set.intersection(*per_trial) if per_trial else set()
    return sorted(common)


def rerun_best(plan: SweepPlan, results, sweep_dir: Path, storage: Path, execution, k: int) -> Path:
    """Run the best Optuna configuration again over seeds 0..k-1 (a sweep of its own)."""
    from ray import tune

    from study import runner

    best = runner.best_config(results)
    best.pop("seed", None)
    name = f"{sweep_dir.name}-best"
    space = {**best, "seed": tune.grid_search(list(range(k)))}
    rerun_plan = SweepPlan(
        plan.study, plan.budget, plan.dataset, "grid", list(range(k)), plan.overrides
    )
    manifest = runner.manifest_for(
        rerun_plan, name, execution, rerun_of=sweep_dir.name, best_point=best.get("point")
    )
    manifest.update(search="rerun-best", n_trials=k)
    runner.write_json_atomic(storage / name / runner.MANIFEST, manifest)
    print(
        f"re-running the best configuration ({best.get('point')}) over seeds 0..{k - 1}", flush=True
    )
    tuner = tune.Tuner(
        runner.trainable_with(execution.resources),
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="test_acc",
            mode="max",
            max_concurrent_trials=execution.max_concurrent,
            trial_dirname_creator=runner.trial_dirname,
        ),
        run_config=runner.tune_run_config(rerun_plan, name, storage, execution),
    )
    rerun = runner.fit(tuner, storage / name)
    print(runner.format_summary(runner.summary_rows(rerun)))
    return storage / name


if __name__ == "__main__":
    sys.exit(main())
