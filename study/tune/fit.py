"""Running a sweep's Tuner to its end and recording each trial's outcome in the
manifest; the files written beside it before the first trial (partitions)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ray import tune

from federated.cli.error_reason import error_reason
from federated.contract.results import (
    RECORDED_DONE,
    RECORDED_ERROR,
    RECORDED_INTERRUPTED,
    SWEEP_FINISHED,
    SWEEP_INTERRUPTED,
    trial_status,
)
from study.interruption import DRIVER_SIGNALS, StopSignals
from study.plan import SweepPlan
from study.sweep_folder import PARTITIONS, read_manifest, update_manifest, write_json_atomic


def fit(
    tuner: tune.Tuner, sweep_dir: Path, signals: StopSignals = DRIVER_SIGNALS
) -> tune.ResultGrid:
    """Run to the end (or an interruption) and record each trial's final status.

    The manifest says ``finished`` only when Tune returned on its own with every trial
    done; after SIGINT/SIGTERM (``signals.received``) it says ``interrupted``, trials
    that had not reached their last round are ``INTERRUPTED`` and the trials that never
    started are counted in ``not_started``."""
    try:
        with signals.tune_loop():
            results = tuner.fit()
    except KeyboardInterrupt:
        update_manifest(sweep_dir, status="interrupted")
        raise
    except BaseException as err:  # the driver itself failed: say so, keep what was written
        update_manifest(
            sweep_dir, status="failed", error=f"{type(err).__name__}: {error_reason(err)}"
        )
        raise
    interrupted = signals.received is not None
    trials: dict[str, Any] = {}
    for result in results:
        error = None
        if result.error is not None:
            error = (str(result.error).strip().splitlines() or [type(result.error).__name__])[-1][
                :300
            ]
        metrics = result.metrics or {}
        last_round = metrics.get("round")
        planned = (result.config or {}).get("rounds")
        reached_end = bool(planned and last_round and last_round >= planned)
        status = RECORDED_ERROR if error else RECORDED_DONE
        if interrupted and not error and not reached_end:
            status = RECORDED_INTERRUPTED
        diverged = bool(metrics.get("diverged"))
        trials[Path(result.path).name] = {
            "status": status,
            # the trial's outcome in the report's words (completed, stopped, diverged ...)
            "outcome": trial_status(
                last_round=int(last_round or 0),
                planned_rounds=int(planned or 0),
                diverged=diverged,
                failed=error is not None,
                sweep_status=SWEEP_INTERRUPTED if interrupted else SWEEP_FINISHED,
            ),
            "error": error,
            "last_round": last_round,
            # the last round whose model had finite results (a diverged round has none)
            "last_good_round": (last_round or 1) - 1 if diverged else last_round,
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


def failed_trials(sweep_dir: Path) -> dict[str, str]:
    """``{trial: first error line}`` of the trials the manifest records as ERROR."""
    trials = read_manifest(sweep_dir).get("trials") or {}
    return {
        name: str(entry.get("error") or "error")
        for name, entry in trials.items()
        if entry.get("status") == RECORDED_ERROR
    }


def write_partitions(plan: SweepPlan, sweep_dir: Path, rows: list[dict[str, Any]]) -> None:
    """``partitions.json`` (``rows``: every distinct partition's class counts, Fig. 5,
    drawn by :func:`study.preflight.preflight`) and, for a feature-skewed sweep, the
    parties' example images (:mod:`study.feature_examples`)."""
    from study.feature_examples import write_feature_examples
    from study.preflight import trial_configs

    write_json_atomic(sweep_dir / PARTITIONS, rows)
    write_feature_examples(trial_configs(plan), sweep_dir)
