"""Tune's MLflow logger callback with fedsweep's per-trial runs (see :mod:`study.tracking`
for what is logged where).  A module-level class, so the run config Tune pickles for
``--resume`` holds it by reference; imported only by a sweep that tracks to MLflow
(MLflow's import is about 0.7 s)."""

from __future__ import annotations

from ray.air.integrations.mlflow import MLflowLoggerCallback

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
