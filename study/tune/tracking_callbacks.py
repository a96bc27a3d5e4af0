"""Tune's MLflow and W&B logger callbacks with fedsweep's per-trial tags (see
:mod:`study.tracking` for what is logged where), and Tune's TensorBoard logger with the
sweep's hyperparameters.  Module-level classes, so the run config Tune pickles for
``--resume`` holds them by reference."""

from __future__ import annotations

# Imported with the other Tune modules while Ray comes up (study.sweep.TUNE_MODULES):
# Tune imports MLflow's and W&B's callbacks itself whenever a sweep passes callbacks (it
# counts their kinds for its usage tags), so a sweep pays for them tracked or not.
import numbers
import os
import sys
from typing import Any

import ray
from ray.air.integrations.mlflow import MLflowLoggerCallback
from ray.air.integrations.wandb import WandbLoggerCallback, _WandbLoggingActor
from ray.tune.logger import TBXLoggerCallback

from study.tune.trial_actor import trial_label


class MLflowTrialRuns(MLflowLoggerCallback):
    """One child run per trial under the sweep's run, named by the trial's point and seed
    (``mu=0.1 seed=2``) and tagged with its seed and id; a trial continued after
    ``--resume`` logs into the run it had before, which says RUNNING again until the
    trial ends (Tune's callback ends it FINISHED or FAILED)."""

    def log_trial_start(self, trial) -> None:
        if trial not in self._trial_runs:
            self._trial_runs[trial] = self._run_for(trial)
        super().log_trial_start(trial)  # the run exists now: this logs the params only

    def _run_for(self, trial) -> str:
        client = self.mlflow_util._mlflow.tracking.MlflowClient(self.tracking_uri)
        experiment = client.get_experiment_by_name(self.experiment_name)
        query = f"tags.trial_id = '{trial.trial_id}'"
        found = client.search_runs([experiment.experiment_id], query, max_results=1)
        if found:
            run_id = found[0].info.run_id
            client.update_run(run_id, status="RUNNING")  # ended KILLED when interrupted
            return run_id
        tags = {
            **self.tags,
            "trial_name": str(trial),
            "trial_id": trial.trial_id,
            "seed": str(trial.config.get("seed")),
        }
        run = self.mlflow_util.start_run(tags=tags, run_name=trial_label(trial.config))
        return run.info.run_id

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        # the config is the run's params already; as metrics it would double every insert
        row = {k: v for k, v in result.items() if k != "config"}
        super().log_trial_result(iteration, trial, row)


# How long a trial's end waits for its W&B logging actor to finish writing the run, and
# how long W&B's own start may take (its default, 90 s, ran out on a loaded 2-core machine:
# the run file then held a header and no run record).
WANDB_FINISH_WAIT_S = 600
WANDB_INIT_TIMEOUT_S = 300


class OwnServiceLoggingActor(_WandbLoggingActor):
    """Tune's W&B logging actor, with a wandb-core service of its own.

    W&B keeps the address of the service a process started in ``$WANDB_SERVICE``, and a
    logging actor could start with another actor's address in its environment: two
    trials' runs then went through one service, which exits with the process that
    started it, so when the first trial's actor was stopped the second trial's run file
    was left holding its header only (the suite's W&B flake)."""

    def run(self):
        os.environ.pop("WANDB_SERVICE", None)
        return super().run()


class WandbTrialRuns(WandbLoggerCallback):
    """One W&B run per trial in the sweep's group, tagged with the trial's seed.

    A trial is reported done only once its logging actor has closed the run
    (``wandb.finish``): Tune's callback would only collect finished actors, and a sweep's
    last trial lost its run file when the driver shut Ray down first.  A run that could
    not be written is said on stderr, naming the trial, rather than left half-written
    without a word."""

    _logger_actor_cls = OwnServiceLoggingActor

    def log_trial_end(self, trial, failed: bool = False) -> None:
        if trial not in self._trial_queues:  # it failed before its first result
            return
        self._signal_logging_actor_stop(trial=trial)
        future = self._trial_logging_futures.get(trial)
        if future is not None:
            done, _ = ray.wait([future], timeout=WANDB_FINISH_WAIT_S)
            problem = f"not closed after {WANDB_FINISH_WAIT_S} s" if not done else None
            if done:
                try:
                    ray.get(future)
                except Exception as error:  # the actor's own failure, whatever it was
                    problem = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            if problem is not None:
                print(
                    f"warning: W&B run of trial {trial} is incomplete ({problem})", file=sys.stderr
                )
        self._cleanup_logging_actors()

    def _start_logging_actor(self, trial, exclude_results, **init_kwargs) -> None:
        init_kwargs["tags"] = [*init_kwargs.get("tags", []), f"seed:{trial.config.get('seed')}"]
        super()._start_logging_actor(trial, exclude_results, **init_kwargs)


# Where Tune's TensorBoard logger puts a trial's reported values.
SCALAR_PREFIX = "ray/tune/"
# The metrics the HPARAMS tab tables and plots: the final validation and test values.
HPARAM_METRIC_PREFIXES = ("val_", "test_")
# row columns under those prefixes that count rather than score: the parties that
# validated this round (a constant axis in the parallel-coordinates view)
HPARAM_NOT_METRICS = frozenset({"val_parties"})


class SweepTensorBoard(TBXLoggerCallback):
    """Tune's TensorBoard logger, whose HPARAMS entry of a trial holds what the sweep
    varies, typed, and the trial's final validation and test metrics.

    Tune's own entry lists the trial's *evaluated* parameters: in a grid sweep ``point``
    (a string such as ``"mu=0.1"``) and ``seed`` only, so TensorBoard could not plot μ
    against accuracy; and it names the metrics by the result's keys (``test_acc``) while
    the scalars are logged as ``ray/tune/test_acc``, so their columns stayed empty.
    Here the hyperparameters are ``hparams`` (the study's axes and every field that
    differs between its points, then ``seed``) with the trial config's values — numbers
    as numbers, a joint axis's label as text — and the metrics are the scalar tags
    ``ray/tune/val_*`` and ``ray/tune/test_*``, which the HPARAMS tab reads at their
    last step: the trial's final values.  Written when a trial ends, as Tune does."""

    def __init__(self, hparams: list[str]) -> None:
        super().__init__()
        self.hparams = list(hparams)

    def _try_log_hparams(self, trial, result: dict) -> None:
        from tensorboardX.summary import hparams

        config = trial.config or {}
        values = {
            name: config[name]
            for name in self.hparams
            if isinstance(config.get(name), (bool, int, float, str))
        }
        # Tune hands over the trial's last logged values under their scalar tags
        # (ray/tune/test_acc); HPARAMS names a metric by that tag
        metrics = {
            SCALAR_PREFIX + key.removeprefix(SCALAR_PREFIX): float(value)
            for key, value in result.items()
            if key.removeprefix(SCALAR_PREFIX).startswith(HPARAM_METRIC_PREFIXES)
            and key.removeprefix(SCALAR_PREFIX) not in HPARAM_NOT_METRICS
            and isinstance(value, numbers.Real)
            and not isinstance(value, bool)
        }
        writer = self._trial_writer[trial].file_writer
        for summary in hparams(hparam_dict=values, metric_dict=metrics):
            writer.add_summary(summary)


def tracking_callbacks(
    tracking: dict[str, dict[str, Any]], tags: dict[str, str], hparams: list[str] | None = None
) -> list[Any]:
    """Tune callbacks for what :func:`study.tracking.start_tracking` set up, and the
    TensorBoard logger with ``hparams`` as the HPARAMS tab's hyperparameters
    (:class:`SweepTensorBoard`; without them, Tune's own logger)."""
    callbacks: list[Any] = [SweepTensorBoard(hparams)] if hparams else []
    if "mlflow" in tracking:
        info = tracking["mlflow"]
        callbacks.append(
            MLflowTrialRuns(
                tracking_uri=info["uri"],
                experiment_name=info["experiment"],
                tags={**tags, "mlflow.parentRunId": info["parent_run_id"]},
            )
        )
    if "wandb" in tracking:
        info = tracking["wandb"]
        callbacks.append(
            WandbTrialRuns(
                project=info["project"],
                group=info["group"],
                mode=info["mode"],
                tags=[f"{k}:{v}" for k, v in tags.items()],
                settings={"init_timeout": WANDB_INIT_TIMEOUT_S},
            )
        )
    return callbacks
