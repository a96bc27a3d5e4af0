"""``analysis.report --track``: the report's tables and figures into the sweep's tracker.

Where a sweep's runs went is in its manifest (``tracking``, written by ``study.sweep
--track``):

* **MLflow**: the whole report folder becomes artifacts of the sweep's parent run (under
  ``report/``), and each table's CSV also; open the parent run in the MLflow UI.
* **W&B**: W&B has no parent runs; a run named ``<sweep>-report`` (job type ``report``) in
  the sweep's group holds the report folder as an artifact of type ``report``, in the mode
  the sweep used (offline by default: ``wandb sync`` uploads it with the trials).

A sweep that was not tracked with the asked tracker is skipped with a line saying so.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from study.tracking import check_trackers


class TrackerUploadError(ValueError):
    """The report cannot be written into a tracker (one line)."""


def check_report_trackers(names: list[str]) -> None:
    """Known and installed, before any report work starts."""
    try:
        check_trackers(names)
    except ValueError as err:
        raise TrackerUploadError(str(err)) from None


def upload_report(
    out: Path, sweeps: list[tuple[str, Path, dict[str, Any]]], trackers: list[str]
) -> list[str]:
    """Upload ``out`` for each (name, folder, manifest) tracked with one of ``trackers``;
    returns one line per sweep and tracker saying where it went or why not."""
    lines = []
    for name, folder, manifest in sweeps:
        tracking = manifest.get("tracking") or {}
        for tracker in trackers:
            info = tracking.get(tracker)
            if not isinstance(info, dict):
                lines.append(f"{name}: not tracked with {tracker} (sweep run without --track)")
                continue
            if tracker == "mlflow":
                lines.append(f"{name}: {_to_mlflow(out, info)}")
            else:
                lines.append(f"{name}: {_to_wandb(out, folder, info)}")
    return lines


def _to_mlflow(out: Path, info: dict[str, Any]) -> str:
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    client = MlflowClient(info["uri"])
    run_id = info["parent_run_id"]
    client.log_artifacts(run_id, str(out), artifact_path="report")
    return f"report logged to MLflow run {run_id} ({info['uri']}, artifacts under report/)"


def _to_wandb(out: Path, folder: Path, info: dict[str, Any]) -> str:
    import wandb

    run = wandb.init(
        project=info["project"],
        group=info["group"],
        name=f"{info['group']}-report",
        job_type="report",
        mode=info["mode"],
        dir=str(folder),
        tags=["report"],
    )
    artifact = wandb.Artifact(f"{info['group']}-report", type="report")
    artifact.add_dir(str(out))
    run.log_artifact(artifact)
    run.finish(quiet=True)
    return f"report logged to W&B ({info['mode']}) run {run.id} in group {info['group']}"


__all__ = ["TrackerUploadError", "check_report_trackers", "upload_report"]
