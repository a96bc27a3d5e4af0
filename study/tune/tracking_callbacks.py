"""The Tune callbacks a sweep's trackers ask for (:func:`tracking_callbacks`), and Tune's
TensorBoard logger with the sweep's hyperparameters (:class:`SweepTensorBoard`).
Module-level classes, so the run config Tune pickles for ``--resume`` holds them by
reference.  MLflow's and W&B's callbacks live in modules of their own
(:mod:`study.tune.mlflow_runs`, :mod:`study.tune.wandb_runs`), imported only
by a sweep that tracks to them: MLflow's import alone is about 0.7 s."""

from __future__ import annotations

import importlib
import math
import numbers
from typing import Any

from ray.tune.logger import TBXLoggerCallback

# Where each tracker's callback classes live; a sweep folder of an earlier fedsweep
# pickled them as this module's (``study.tune.tracking_callbacks.MLflowTrialRuns``), and
# ``--resume`` finds them here through :func:`__getattr__`.
CALLBACK_MODULES = {
    "MLflowTrialRuns": "study.tune.mlflow_runs",
    "WandbTrialRuns": "study.tune.wandb_runs",
    "OwnServiceLoggingActor": "study.tune.wandb_runs",
}


def __getattr__(name: str) -> Any:
    if name in CALLBACK_MODULES:
        return getattr(importlib.import_module(CALLBACK_MODULES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Where Tune's TensorBoard logger puts a trial's reported values.
SCALAR_PREFIX = "ray/tune/"
# The metrics the HPARAMS tab tables and plots, where the callback was built without the
# task's declared columns (one pickled by an earlier fedsweep, resumed): the final
# validation and test values.
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

    def __init__(self, hparams: list[str], metric_columns: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.hparams = list(hparams)
        #: the trials' declared summary columns (the results contract,
        #: :func:`federated.contract.columns.summary_column_names`): the HPARAMS metrics
        self.metric_columns = frozenset(metric_columns)

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        # Tune's logger skips NaN but hands an infinite value (the epsilon of a DP run
        # without noise) to tensorboardX, which warns "NaN or Inf found in input tensor."
        # on the sweep's terminal at every round; the row keeps the value, TensorBoard
        # shows no point for it.
        super().log_trial_result(iteration, trial, finite_values(result))

    def _try_log_hparams(self, trial, result: dict) -> None:
        from tensorboardX.summary import hparams

        config = trial.config or {}
        values = {
            name: config[name]
            for name in self.hparams
            if isinstance(config.get(name), (bool, int, float, str))
        }
        metrics = hparam_metrics(result, getattr(self, "metric_columns", frozenset()))
        writer = self._trial_writer[trial].file_writer
        for summary in hparams(hparam_dict=values, metric_dict=metrics):
            writer.add_summary(summary)


def finite_values(result: dict) -> dict:
    """``result`` without its infinite or NaN numbers (other values as they are)."""
    return {
        key: value
        for key, value in result.items()
        if not (isinstance(value, float) and not math.isfinite(value))
    }


def hparam_metrics(result: dict, metric_columns: frozenset[str]) -> dict[str, float]:
    """The HPARAMS tab's metrics of a trial's last ``result``, by their scalar tags (Tune
    hands the values over as ``ray/tune/test_acc``, and HPARAMS names a metric by that
    tag): the numbers of the columns ``metric_columns`` declares (a personalised run's
    own-split mean ``party_test_acc_mean`` among them); without a declaration, the
    ``val_*`` and ``test_*`` values."""
    metrics = {}
    for key, value in result.items():
        column = key.removeprefix(SCALAR_PREFIX)
        if metric_columns:
            declared = column in metric_columns
        else:
            declared = column.startswith(HPARAM_METRIC_PREFIXES)
        if (
            declared
            and column not in HPARAM_NOT_METRICS
            and isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and math.isfinite(value)
        ):
            metrics[SCALAR_PREFIX + column] = float(value)
    return metrics


def tracking_callbacks(
    tracking: dict[str, dict[str, Any]],
    tags: dict[str, str],
    hparams: list[str] | None = None,
    metric_columns: frozenset[str] = frozenset(),
) -> list[Any]:
    """Tune callbacks for what :func:`study.tracking.start_tracking` set up, and the
    TensorBoard logger with ``hparams`` as the HPARAMS tab's hyperparameters and the
    declared ``metric_columns`` as its metrics (:class:`SweepTensorBoard`; without
    hyperparameters, Tune's own logger)."""
    callbacks: list[Any] = [SweepTensorBoard(hparams, metric_columns)] if hparams else []
    if "mlflow" in tracking:
        from study.tune.mlflow_runs import MLflowTrialRuns

        info = tracking["mlflow"]
        callbacks.append(
            MLflowTrialRuns(
                tracking_uri=info["uri"],
                experiment_name=info["experiment"],
                tags={**tags, "mlflow.parentRunId": info["parent_run_id"]},
            )
        )
    if "wandb" in tracking:
        from study.tune.wandb_runs import WANDB_INIT_TIMEOUT_S, WandbTrialRuns

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
