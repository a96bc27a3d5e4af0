"""Running a :class:`~study.plan.SweepPlan` on Ray Tune: start or join Ray, build or
restore the Tuner, keep the manifest current, summarise.

Resume after a hard kill works because Tune snapshots its experiment state and syncs
result files to the storage path every second here (Tune's defaults are minutes, after
which a killed driver's restore would restart every trial from round 0).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Before Ray is imported: the legacy reporter prints the live table we configure, the
# experiment state is snapshotted every second (resume after a hard kill), and the
# snapshot-duration warning that this frequency triggers is silenced.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "1")
os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
# A tracker's callback (MLflow's SQLite inserts) takes up to a second per result on a small
# machine; Tune's warning about it at 0.5 s would fill the terminal.
os.environ.setdefault("TUNE_WARN_THRESHOLD_S", "5")
# The driver handles SIGINT itself (study.interruption) and stops Tune through SIGUSR1.
os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")

import ray
from ray import tune

from federated.data.folder_dataset import folder_identity
from federated.data.folder_layout import is_folder_dataset
from federated.input_checks import check_fits_cluster as check_fits_node
from federated.models.pretrained_start import start_hashes
from federated.results_contract import (
    RECORDED_DONE,
    RECORDED_ERROR,
    RECORDED_INTERRUPTED,
    SWEEP_FINISHED,
    SWEEP_INTERRUPTED,
    trial_status,
)
from search_spaces.study_file import study_to_dict
from study.driver_liveness import driver_record
from study.interruption import StopSignals
from study.layout import (
    MANIFEST,
    MANIFEST_FORMAT,
    PARTITIONS,
    read_manifest,
    update_manifest,
    write_json_atomic,
)
from study.live_view import LiveView
from study.machine import machine_description
from study.optuna_storage import OPTUNA_DB, SweepOptunaSearch
from study.plan import OPTUNA_SEED, SweepPlan, trial_dirname
from study.resources import TrialResources, choose_resources
from study.selection import SELECTION_METRICS, best_point, mode_of
from study.tracking_callbacks import tracking_callbacks
from study.trial_actor import FederatedTrial


class _NoTuneResumeHint(logging.Filter):
    """Drop Tune's "Resume experiment with: Tuner.restore(...)" warning after an
    interruption: the driver prints the command that resumes a sweep (``--resume``),
    and Tune's Python call would contradict it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("has been interrupted" in message and ".restore(" in message)


logging.getLogger("ray.tune.tune").addFilter(_NoTuneResumeHint())


class _NoVanishedTempFileSync(logging.Filter):
    """Drop the syncer's "Last sync command failed" warning (with its traceback) when
    what failed was a file that vanished while being copied: a trial writes its files
    (parties.csv, representations) through :func:`federated.atomic_file.atomic_open`,
    whose ``.NAME….tmp`` exists for a moment before it is renamed into place; the next
    sync (every SYNC_PERIOD_S, and the final one after the trial) copies the file itself.
    Any other sync failure is still shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (
            "Last sync command failed" in message
            and "No such file or directory" in message
            and re.search(r"/\.[^/']+\.tmp'", message) is not None
        )


logging.getLogger("ray.train._internal.syncer").addFilter(_NoVanishedTempFileSync())


SYNC_PERIOD_S = 1
DASHBOARD_PORT = 8265
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Execution:
    """How to run (never what): resources, concurrency, scheduler, failures."""

    resources: TrialResources
    max_concurrent: int | None = None
    scheduler: str | None = None  # "asha"
    max_failures: int = 1
    verbose: int = 1


def start_ray(address: str | None, dashboard: bool) -> str | None:
    """Join ``address`` (or $RAY_ADDRESS), else start a local Ray; returns the dashboard URL.

    A local Ray binds every port to loopback: its node address is 127.0.0.1 (with
    ``study.sweep.LOCAL_ONLY_ENV`` set before Ray is imported, Ray keeps it rather than
    resolving it to the machine's network address) and the dashboard, when asked for,
    listens on 127.0.0.1 only.  Raises ConnectionError (one line) when Ray cannot start
    or join."""
    options: dict[str, Any] = {"logging_level": "WARNING", "log_to_driver": False}
    address = address or os.environ.get("RAY_ADDRESS")
    try:
        if address:
            context = ray.init(address=address, **options)
        else:
            context = ray.init(
                address="local",
                _node_ip_address=LOOPBACK,
                include_dashboard=dashboard,
                dashboard_host=LOOPBACK,
                dashboard_port=DASHBOARD_PORT,
                **options,
            )
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        where = f"join the Ray cluster at {address}" if address else "start a local Ray"
        raise ConnectionError(f"could not {where}: {first}") from None
    url = getattr(context, "dashboard_url", None)
    return f"http://{url}" if url and not str(url).startswith("http") else url


def check_fits_cluster(cpus: float, gpus: float) -> None:
    """Refuse (InputError) a trial larger than every live node: Ray would keep it pending."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    largest_cpus = max((r.get("CPU", 0.0) for r in nodes), default=0.0)
    largest_gpus = max((r.get("GPU", 0.0) for r in nodes), default=0.0)
    check_fits_node(cpus, gpus, largest_cpus, largest_gpus)


def failed_trials(sweep_dir: Path) -> dict[str, str]:
    """``{trial: first error line}`` of the trials the manifest records as ERROR."""
    trials = read_manifest(sweep_dir).get("trials") or {}
    return {
        name: str(entry.get("error") or "error")
        for name, entry in trials.items()
        if entry.get("status") == RECORDED_ERROR
    }


def cluster_gpus() -> float:
    return float(ray.cluster_resources().get("GPU", 0.0))


def write_partitions(plan: SweepPlan, sweep_dir: Path, rows: list[dict[str, Any]]) -> None:
    """``partitions.json`` (``rows``: every distinct partition's class counts, Fig. 5,
    drawn by :func:`study.preflight.preflight`) and, for a feature-skewed sweep, the
    parties' example images (:mod:`study.feature_examples`)."""
    from study.feature_examples import write_feature_examples
    from study.preflight import trial_configs

    write_json_atomic(sweep_dir / PARTITIONS, rows)
    write_feature_examples(trial_configs(plan), sweep_dir)


def trainable_with(resources: TrialResources):
    # FederatedTrial: train_federated, its Ray actor named by point and seed (dashboard)
    return tune.with_resources(FederatedTrial, resources.as_ray())


def _scheduler(name: str | None, max_rounds: int):
    if name != "asha":
        return None
    from ray.tune.schedulers import ASHAScheduler

    return ASHAScheduler(
        time_attr="training_iteration",
        max_t=max_rounds,
        grace_period=max(1, max_rounds // 4),
        reduction_factor=2,
    )


def _reporter(plan: SweepPlan) -> LiveView:
    trials = plan.num_samples if plan.search == "optuna" else plan.n_trials
    return LiveView(
        plan.study.name,
        trials,
        plan.max_rounds,
        plan.parameter_columns,
        metric=plan.ranking_metric,
        primary=plan.first_config().get("primary_metric") or "acc",
    )


def tune_run_config(
    plan: SweepPlan, name: str, storage: Path, execution: Execution, callbacks: list | None = None
) -> tune.RunConfig:
    return tune.RunConfig(
        callbacks=callbacks,
        name=name,
        storage_path=str(storage),
        failure_config=tune.FailureConfig(max_failures=execution.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        sync_config=tune.SyncConfig(sync_period=SYNC_PERIOD_S),
        progress_reporter=_reporter(plan),
        verbose=execution.verbose,
    )


def new_tuner(
    plan: SweepPlan, name: str, storage: Path, execution: Execution, callbacks: list | None = None
) -> tune.Tuner:
    """The Tuner of a new sweep: the plan's grid, or its Optuna search (TPE, its study
    kept in the sweep's folder), with the execution's scheduler."""
    if plan.search == "optuna":
        import optuna

        # A define-by-run space makes OptunaSearch ignore TuneConfig's metric and mode:
        # it must be told them itself.
        search_alg = SweepOptunaSearch(
            space=plan.optuna_space(),
            metric=plan.ranking_metric,
            mode=mode_of(plan.ranking_metric),
            sampler=optuna.samplers.TPESampler(seed=OPTUNA_SEED),
            # the study lives in <sweep>/optuna.db: optuna-dashboard reads it (objective
            # named after the metric, trials labelled), --resume continues it
            # (study/optuna_storage.py)
            study_name=name,
            sweep_dir=storage / name,
        )
        param_space: dict[str, Any] = {}
        num_samples = plan.num_samples
    else:
        search_alg = None
        param_space = plan.param_space()
        num_samples = 1
    return _tuner(
        plan,
        name,
        storage,
        execution,
        param_space,
        callbacks=callbacks,
        search_alg=search_alg,
        scheduler=_scheduler(execution.scheduler, plan.max_rounds),
        num_samples=num_samples,
    )


def rerun_tuner(plan: SweepPlan, name: str, storage: Path, execution: Execution) -> tune.Tuner:
    """The Tuner of ``--rerun-best``: ``plan`` is the chosen point over fresh seeds
    (study.sweep.rerun_best), a grid with no search and no scheduler: early stopping
    would cut seeds short, and every seed's last round is what the rerun is for."""
    return _tuner(plan, name, storage, execution, plan.param_space())


def _tuner(
    plan: SweepPlan,
    name: str,
    storage: Path,
    execution: Execution,
    param_space: dict[str, Any],
    callbacks: list | None = None,
    search_alg: Any = None,
    scheduler: Any = None,
    num_samples: int = 1,
) -> tune.Tuner:
    """The one Tuner construction every sweep goes through: the trial with the
    execution's resources, test accuracy maximised, fedsweep's trial folder names, and
    :func:`tune_run_config`'s storage, failures, checkpoints and live view."""
    return tune.Tuner(
        trainable_with(execution.resources),
        param_space=param_space,
        tune_config=tune.TuneConfig(
            # what ASHA and the best result rank by (study/selection.py)
            metric=plan.ranking_metric,
            mode=mode_of(plan.ranking_metric) if plan.ranking_metric else None,
            search_alg=search_alg,
            scheduler=scheduler,
            num_samples=num_samples,
            max_concurrent_trials=execution.max_concurrent,
            trial_dirname_creator=trial_dirname,
        ),
        run_config=tune_run_config(plan, name, storage, execution, callbacks),
    )


def restore_tuner(
    sweep_dir: Path, resources: TrialResources, param_space: dict[str, Any] | None
) -> tune.Tuner:
    """Continue an interrupted sweep: finished trials stay, unfinished ones continue from
    their last checkpoint, errored ones are retried from theirs.

    A grid's ``sample_from`` lookups are functions, which Tune saves as placeholders:
    without the same ``param_space`` handed back, trials that had not started yet would
    be created with the placeholders as values."""
    return tune.Tuner.restore(
        str(sweep_dir),
        trainable=trainable_with(resources),
        resume_unfinished=True,
        resume_errored=True,
        param_space=param_space,
    )


def manifest_for(plan: SweepPlan, name: str, execution: Execution, **extra: Any) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "name": name,
        "study": plan.study.name,
        "paper": plan.study.paper,
        "budget": plan.budget.name,
        "dataset": plan.dataset,
        # the trials' dataset (a study may fix its own), as every trial resolves it
        **dataset_identity(_trial_dataset(plan)),
        # which weights the trials start from (init): {init: {file, sha256}}
        "starts": start_hashes(t.config for t in plan.trials()),
        "search": plan.search,
        # the metric that ranks trials (study/selection.py): validation, never test
        "metric": plan.ranking_metric,
        "seeds": plan.seeds,
        "axes": [a.name for a in plan.study.axes],
        "label_columns": plan.study.label_columns,
        # the whole study (its [report] too): resume and the report need no catalogue
        "definition": study_to_dict(plan.study),
        "overrides": plan.overrides,
        # whose values the budget may scale (the paper's, in a built-in study) and what
        # it changed: {field: [{"from": written or default, "to": the budget's}, ...]}
        "paper_settings": plan.study.paper_settings,
        "budget_changes": {
            name: [{"from": a, "to": b} for a, b in pairs]
            for name, pairs in plan.budget_changes().items()
        },
        "n_trials": plan.n_trials,
        "num_samples": plan.num_samples if plan.search == "optuna" else None,
        "optuna_storage": OPTUNA_DB if plan.search == "optuna" else None,
        "scheduler": execution.scheduler,
        "resources": {"cpu": execution.resources.cpus, "gpu": execution.resources.gpus},
        "max_concurrent": execution.max_concurrent,
        "command": " ".join([os.path.basename(sys.executable), "-m", "study.sweep", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "finished": None,
        "status": "running",
        "driver": driver_record(),
        # the report's time-per-round table names it (timings mean nothing without it)
        "machine": machine_description(),
        "trials": {},
        **extra,
    }


def _trial_dataset(plan: SweepPlan) -> str:
    """The trials' dataset (a study may fix its own): a planned trial's, or for a plan
    with no grid (a rerun of a range-only search) the example point's."""
    trials = plan.trials()
    if trials:
        return trials[0].config["dataset"]
    return plan.resolve(plan.study.example_point(), plan.seeds[0])["dataset"]


def dataset_identity(dataset: str) -> dict[str, Any]:
    """Image folders: ``{"dataset_identity": {path, fingerprint, ...}}`` for the manifest
    (which files the sweep read); nothing for the built-in datasets."""
    if not is_folder_dataset(dataset):
        return {}
    return {"dataset_identity": folder_identity(dataset)}


def fit(tuner: tune.Tuner, sweep_dir: Path, signals: StopSignals | None = None) -> tune.ResultGrid:
    """Run to the end (or an interruption) and record each trial's final status.

    The manifest says ``finished`` only when Tune returned on its own with every trial
    done; after SIGINT/SIGTERM (``signals.received``) it says ``interrupted``, trials
    that had not reached their last round are ``INTERRUPTED`` and the trials that never
    started are counted in ``not_started``."""
    try:
        results = tuner.fit()
    except KeyboardInterrupt:
        update_manifest(sweep_dir, status="interrupted")
        raise
    except BaseException as err:  # the driver itself failed: say so, keep what was written
        update_manifest(sweep_dir, status="failed", error=f"{type(err).__name__}: {err}"[:300])
        raise
    interrupted = signals is not None and signals.received is not None
    trials: dict[str, Any] = {}
    for result in results:
        error = None
        if result.error is not None:
            error = (str(result.error).strip().splitlines() or [type(result.error).__name__])[-1][
                :300
            ]
        last_round = (result.metrics or {}).get("round")
        planned = (result.config or {}).get("rounds")
        reached_end = bool(planned and last_round and last_round >= planned)
        status = RECORDED_ERROR if error else RECORDED_DONE
        if interrupted and not error and not reached_end:
            status = RECORDED_INTERRUPTED
        trials[Path(result.path).name] = {
            "status": status,
            "error": error,
            "last_round": last_round,
        }
    planned_trials = read_manifest(sweep_dir).get("n_trials") or 0
    done = results.num_terminated + results.num_errors
    complete = not interrupted and done >= len(results) and len(results) >= planned_trials
    update_manifest(
        sweep_dir,
        trials=trials,
        not_started=max(0, planned_trials - len(results)),
        status="finished" if complete else "interrupted",
        finished=time.strftime("%Y-%m-%dT%H:%M:%S") if complete else None,
    )
    return results


def summary_rows(
    results: tune.ResultGrid, manifest: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """One row per trial, its status in the report's words
    (:func:`federated.results_contract.trial_status`); ``manifest`` (as :func:`fit` left
    it) tells interrupted and never-started trials from finished ones."""
    manifest = manifest or {}
    recorded = manifest.get("trials") or {}
    rows = []
    for result in results:
        config = result.config or {}
        metrics = result.metrics or {}
        entry = recorded.get(Path(result.path).name) or {}
        reported = f"test_{config.get('primary_metric') or 'acc'}"
        sweep_status = manifest.get("status") or SWEEP_FINISHED
        if entry.get("status") == RECORDED_INTERRUPTED:
            sweep_status = SWEEP_INTERRUPTED
        rows.append(
            {
                "trial": metrics.get("trial_id") or Path(result.path).name[:11],
                "point": config.get("point", ""),
                "seed": config.get("seed"),
                "status": trial_status(
                    last_round=int(metrics.get("round") or 0),
                    planned_rounds=int(config.get("rounds") or 0),
                    diverged=bool(metrics.get("diverged")),
                    failed=result.error is not None or entry.get("status") == RECORDED_ERROR,
                    sweep_status=sweep_status,
                ),
                "rounds": metrics.get("round"),
                "test_acc": metrics.get("test_acc"),
                # the trial's primary metric on test (a score task's test_srcc ...)
                "reported": reported,
                "reported_value": metrics.get(reported),
                **{k: v for k, v in metrics.items() if k.startswith("val_")},
            }
        )
    return sorted(rows, key=lambda r: str(r["trial"]))  # trial ids follow the grid order


def format_summary(
    rows: list[dict[str, Any]], not_started: int = 0, metric: str | None = None
) -> str:
    """The end-of-sweep table; ``not_started``: trials Tune never created (an
    interrupted sweep), named in a last line since they have no row.  ``metric``: what
    ranks the trials (a validation metric gets a column of its own and a first line
    saying so)."""
    shown = metric if metric in SELECTION_METRICS else None
    reported = rows[0].get("reported", "test_acc") if rows else "test_acc"
    head = f"{'trial':<14} {'point':<34} {'seed':>4} {'status':<11} {'rounds':>6}"
    head += f" {shown:>8}" if shown else ""
    lines = [head + f" {reported:>8}"]
    if shown:
        lines.insert(0, f"trials ranked by {shown} (validation); {reported} is reported")
    for r in rows:
        value = r.get("reported_value", r["test_acc"])
        acc = "-" if value is None else f"{value:.4f}"
        rounds = "-" if r["rounds"] is None else str(r["rounds"])
        seed = "-" if r["seed"] is None else str(r["seed"])
        ranked = ""
        if shown:
            value = r.get(shown)
            ranked = " " + (f"{value:.4f}" if isinstance(value, float) else "-").rjust(8)
        lines.append(
            f"{r['trial']:<14} {str(r['point'])[:34]:<34} {seed:>4} "
            f"{r['status']:<11} {rounds:>6}{ranked} {acc:>8}"
        )
    if not_started:
        lines.append(f"({not_started} more trial(s) not started)")
    return "\n".join(lines)


def best_config(results: tune.ResultGrid, metric: str) -> dict[str, Any]:
    """The best point's config (seed removed) by its trials' mean final ``metric`` (a
    grid's seeds averaged, an Optuna trial alone; NaN and diverged left out), with
    ``selection``: the metric, its value and the chosen trials' search-time test
    accuracies and seeds (the report's optimism)."""
    trials = [
        (str((r.config or {}).get("point", "")), r.config or {}, r.metrics or {})
        for r in results
        if r.metrics and not r.metrics.get("diverged")
    ]
    point, value, chosen = best_point(trials, metric)
    config = next(dict(c) for p, c, _ in trials if p == point)
    config.pop("seed", None)
    reported = f"test_{config.get('primary_metric') or 'acc'}"
    selection = {
        "metric": metric,
        "mode": mode_of(metric),
        "value": value,
        "point": point,
        # the chosen trials' test values of their primary metric (the report's optimism
        # reads search_test_<metric>: search_test_acc for classification)
        f"search_{reported}": [m.get(reported) for m in chosen],
        "search_seeds": [c.get("seed") for p, c, m in trials if p == point and m in chosen],
    }
    return {"config": config, "selection": selection}


__all__ = [
    "MANIFEST",
    "Execution",
    "choose_resources",
    "cluster_gpus",
    "fit",
    "new_tuner",
    "read_manifest",
    "rerun_tuner",
    "restore_tuner",
    "start_ray",
    "tracking_callbacks",
    "trainable_with",
    "tune_run_config",
    "update_manifest",
    "write_json_atomic",
    "write_partitions",
]
