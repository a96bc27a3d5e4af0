"""Building the Tune ``Tuner`` of a sweep: new (grid or Optuna search), rerun of the
chosen configuration, or restored after an interruption.

Resume after a hard kill works because Tune snapshots its experiment state and syncs
result files to the storage path every second here (``TUNE_GLOBAL_CHECKPOINT_S``, set by
:mod:`study`, and :data:`SYNC_PERIOD_S`; Tune's defaults are minutes, after which a
killed driver's restore would restart every trial from round 0); each copy lands whole
(:mod:`study.tune.whole_file_sync`), so a kill during one cuts no file short; a checkpoint
the snapshot still lists but a killed driver had already deleted is no error on resume
(:mod:`study.tune.checkpoint_deletion`).
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.schedulers import ASHAScheduler

from study.plan import OPTUNA_SEED, SweepPlan, trial_dirname
from study.resources import Execution, TrialResources
from study.selection import mode_of, primary_stem
from study.tune import checkpoint_deletion, whole_file_sync
from study.tune.live_view import LiveView
from study.tune.optuna_storage import SweepOptunaSearch
from study.tune.trial_actor import FederatedTrial

SYNC_PERIOD_S = 1
whole_file_sync.install()
checkpoint_deletion.install()


def trainable_with(resources: TrialResources):
    # FederatedTrial: train_federated, its Ray actor named by point and seed (dashboard)
    return tune.with_resources(FederatedTrial, resources.as_ray())


@contextlib.contextmanager
def _quiet_all_nan_cutoff():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "All-NaN slice", RuntimeWarning)
        yield


class QuietASHA(ASHAScheduler):
    """ASHA whose rung cutoff over diverged trials alone says nothing: a diverged trial
    records NaN, and numpy's "All-NaN slice encountered" warning from the cutoff's
    ``nanpercentile`` reached the terminal through ``--quiet``.  The cutoff is NaN with or
    without the warning, and stops no trial.  (At module level: Tune pickles it into the
    sweep's ``tuner.pkl`` for ``--resume``.)"""

    def on_trial_result(self, tune_controller, trial, result):
        with _quiet_all_nan_cutoff():
            return super().on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller, trial, result):
        with _quiet_all_nan_cutoff():
            return super().on_trial_complete(tune_controller, trial, result)


def _scheduler(name: str | None, max_rounds: int):
    if name != "asha":
        return None
    return QuietASHA(
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
        primary=primary_stem(plan.first_config()),
        task=plan.task,
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
            mode=mode_of(plan.ranking_metric, plan.task),
            sampler=optuna.samplers.TPESampler(seed=OPTUNA_SEED),
            # the study lives in <sweep>/optuna.db: optuna-dashboard reads it (objective
            # named after the metric, trials labelled), --resume continues it
            # (study/tune/optuna_storage.py)
            study_name=name,
            sweep_dir=storage / name,
            planned_rounds=plan.max_rounds,
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


def rerun_tuner(
    plan: SweepPlan,
    name: str,
    storage: Path,
    execution: Execution,
    callbacks: list | None = None,
) -> tune.Tuner:
    """The Tuner of ``--rerun-best``: ``plan`` is the chosen point over fresh seeds
    (study.sweep.rerun_best), a grid with no search and no scheduler: early stopping
    would cut seeds short, and every seed's last round is what the rerun is for."""
    return _tuner(plan, name, storage, execution, plan.param_space(), callbacks=callbacks)


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
            mode=mode_of(plan.ranking_metric, plan.task) if plan.ranking_metric else None,
            search_alg=search_alg,
            scheduler=scheduler,
            num_samples=num_samples,
            max_concurrent_trials=execution.max_concurrent,
            trial_dirname_creator=trial_dirname,
            # no new process, imports and data load between trials (study/resources.py)
            reuse_actors=execution.reuse_actors,
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
