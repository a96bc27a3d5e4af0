"""Tune's W&B logger callback with fedsweep's per-trial runs (see :mod:`study.tracking`
for what is logged where).  Module-level classes, so the run config Tune pickles for
``--resume`` holds them by reference; imported only by a sweep that tracks to W&B."""

from __future__ import annotations

import os
import posixpath
import sys
from collections.abc import Iterable
from typing import Any

import ray
from ray.air.integrations.wandb import WandbLoggerCallback, _WandbLoggingActor

from study.tune.whole_file_sync import whole_file_copy

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
    was left holding its header only (the suite's W&B flake).

    ``wandb.finish`` returns once the service has the run's end, not once its writer has
    written the run file's last block; the service normally flushes it when the process
    exits (W&B's atexit teardown), but Tune kills a logging actor whose run has finished,
    and the service, which exits with its parent, left the file cut at a 32 KiB block (a
    resumed trial's last three rounds lost, seen once in the suite).  The actor tears
    its service down itself, which waits for the service to write everything and exit."""

    def run(self):
        os.environ.pop("WANDB_SERVICE", None)
        try:
            return super().run()
        finally:
            self._wandb.teardown()


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
            # Tune may have copied the trial's folder for the last time while the run was
            # still open (a resumed trial's last rounds were missing from its run file):
            # the closed run's folder is copied once more, as at the sweep's end
            self._persist_runs([trial])
        self._cleanup_logging_actors()

    def on_experiment_end(self, trials, **info) -> None:
        """Close every run still open, then wait for them as a trial's end does.

        A sweep stopped by Ctrl-C or SIGTERM ends its running trials without
        ``log_trial_end``, and Tune's own callback then waited its whole upload timeout
        (30 minutes) for logging actors that were never told to stop: the interrupted
        sweep hung.  Here each open run is told to finish (its history so far is kept;
        ``--resume`` continues it in a run of the same id), and one that does not close
        in :data:`WANDB_FINISH_WAIT_S` is said on stderr and stopped.

        Tune copied the trial folders into the sweep folder for the last time before it
        called this, while the runs were still open: W&B's writer had flushed nothing, and
        an interrupted attempt's run file reached the sweep folder as its 7-byte header (a
        resumed trial whose checkpoint was its last round then had no W&B history at all).
        Each closed run's folder is copied there once more (:meth:`_persist_runs`)."""
        for trial in list(self._trial_queues):
            self._signal_logging_actor_stop(trial=trial)
        futures = dict(self._trial_logging_futures)
        if futures:
            _, late = ray.wait(
                list(futures.values()), num_returns=len(futures), timeout=WANDB_FINISH_WAIT_S
            )
            for trial, future in futures.items():
                if future in late:
                    print(
                        f"warning: W&B run of trial {trial} is incomplete (not closed after "
                        f"{WANDB_FINISH_WAIT_S} s)",
                        file=sys.stderr,
                    )
        self._cleanup_logging_actors(timeout=0, kill_on_timeout=True)
        self._persist_runs(futures)

    @staticmethod
    def _persist_runs(trials: Iterable[Any]) -> None:
        """Copy each trial's ``wandb/`` folder from Tune's staging folder to the trial's
        folder in the sweep's storage, whole files as Tune's own copies are."""
        for trial in trials:
            storage = trial.storage
            source = posixpath.join(storage.trial_driver_staging_path, "wandb")
            if not os.path.isdir(source):  # its run never started
                continue
            target = posixpath.join(storage.trial_fs_path, "wandb")
            try:
                whole_file_copy(source, target, destination_filesystem=storage.storage_filesystem)
            except OSError as error:
                print(
                    f"warning: W&B run of trial {trial} was not copied to {target} ({error})",
                    file=sys.stderr,
                )

    def _start_logging_actor(self, trial, exclude_results, **init_kwargs) -> None:
        init_kwargs["tags"] = [*init_kwargs.get("tags", []), f"seed:{trial.config.get('seed')}"]
        super()._start_logging_actor(trial, exclude_results, **init_kwargs)
