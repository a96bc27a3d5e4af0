"""Experiment trackers for sweeps: MLflow and Weights & Biases, through Tune's own logger
callbacks (``ray.air.integrations``), subclassed only to add per-trial tags.

What each tracker receives, per trial: the trial's config as parameters, every reported
round's numeric metrics with ``round`` (Tune's ``training_iteration``) as the step, and
the tags ``study``, ``sweep``, ``budget`` and ``seed``.

* **MLflow** (``--track mlflow``): by default a local store in the sweep's folder,
  ``sqlite:///<sweep>/mlflow.db`` with artifacts in ``<sweep>/mlartifacts`` (MLflow 3
  keeps its plain-file store in maintenance mode and refuses it unless told otherwise, so
  the local default is MLflow's own SQLite backend); ``--track-uri`` names a tracking
  server instead.  The experiment is ``fedsweep-<study>``; the sweep is a parent run named
  after the sweep and every trial a child run of it, named by its point and seed
  (``mu=0.1 seed=2``), so the MLflow UI nests them.  The sweep's run ends with the
  sweep's outcome (:func:`tracked_sweep`): FINISHED, FAILED (a trial errored, or the
  driver failed) or KILLED (Ctrl-C, SIGTERM); a trial's run that was still open then is
  KILLED too; ``--resume`` sets them RUNNING again.  Only a driver killed outright
  (``kill -9``) leaves them RUNNING, until the sweep is resumed.
  Open it with ``mlflow ui --backend-store-uri sqlite:///<sweep>/mlflow.db``.
* **W&B** (``--track wandb``): project ``fedsweep`` (or ``$WANDB_PROJECT``), one group per
  sweep, one run per trial written under the trial's folder (``<trial>/wandb/``).
  Offline unless the user has configured W&B (``$WANDB_API_KEY``, ``wandb login``) or set
  ``$WANDB_MODE``: no account and no network are needed; ``wandb sync <trial>/wandb/
  offline-run-*`` uploads later.

Both are optional extras (``pip install 'fedsweep[mlflow]'`` / ``'fedsweep[wandb]'``);
:func:`check_trackers` refuses a tracker that is not installed before Ray starts.  Where
the runs went is recorded in the manifest (``tracking``), so ``analysis.report --track``
can add the report to the same place.
"""

from __future__ import annotations

import importlib.util
import logging
import netrc
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from federated.cli import exit_codes
from federated.cli.error_reason import error_reason
from study.sweep_folder import read_manifest

TRACKERS = ("mlflow", "wandb")
WANDB_PROJECT = "fedsweep"
MLFLOW_DB = "mlflow.db"
MLFLOW_ARTIFACTS = "mlartifacts"
# Marks the MLflow run that stands for the whole sweep (the trials' parent).
SWEEP_ROLE_TAG = "fedsweep.role"


class TrackerUnavailableError(ValueError):
    """A tracker was asked for that is unknown or not installed (one line)."""


def check_trackers(names: Iterable[str]) -> None:
    """Refuse unknown trackers and ones whose package is missing, naming the extra."""
    for name in names:
        if name not in TRACKERS:
            raise TrackerUnavailableError(f"--track={name!r} (allowed: {', '.join(TRACKERS)})")
        if importlib.util.find_spec(name) is None:
            raise TrackerUnavailableError(
                f"--track {name}: the {name} package is not installed "
                f"(install the extra: pip install 'fedsweep[{name}]')"
            )


# The store schemes MLflow 3 opens without extra set-up here ("file" stores are in
# maintenance mode and refused by MLflow itself, so they are refused up front).
MLFLOW_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks")
WANDB_MODES = ("online", "offline", "disabled", "dryrun", "run", "shared")
TRACKER_TIMEOUT_S = 5.0


def check_tracker_settings(trackers: Iterable[str], uri: str | None) -> None:
    """Check where the trackers will write before Ray starts, so that a tracker that
    cannot work stops the sweep in one line rather than after Ray started (MLflow's
    client retries an unreachable server for minutes) with a folder left behind."""
    trackers = list(trackers)
    if "mlflow" in trackers and uri:
        _check_mlflow_uri(uri)
    mode = os.environ.get("WANDB_MODE")
    if "wandb" in trackers and mode and mode not in WANDB_MODES:
        raise TrackerUnavailableError(
            f"--track wandb: $WANDB_MODE={mode!r} (allowed: {', '.join(WANDB_MODES)})"
        )


def _check_mlflow_uri(uri: str) -> None:
    from urllib.error import HTTPError, URLError
    from urllib.parse import urlparse
    from urllib.request import urlopen

    scheme = urlparse(uri).scheme.split("+")[0]
    if scheme not in MLFLOW_SCHEMES:
        raise TrackerUnavailableError(
            f"--track-uri={uri!r} (allowed: a tracking server http(s)://HOST:PORT, or a "
            "database store such as sqlite:///PATH)"
        )
    if scheme == "sqlite":
        folder = Path(uri[len("sqlite:///") :]).expanduser().absolute().parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise TrackerUnavailableError(f"--track-uri={uri!r}: {folder} is not a writable folder")
    elif scheme in ("http", "https"):
        try:  # MLflow's server answers /health; any HTTP answer means it is there
            with urlopen(uri.rstrip("/") + "/health", timeout=TRACKER_TIMEOUT_S):
                pass
        except HTTPError:
            pass  # it answered (e.g. 401 without credentials): MLflow decides
        except (URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", None) or err
            raise TrackerUnavailableError(
                f"--track-uri={uri!r}: no tracking server answers there ({reason})"
            ) from None


def sweep_tags(study: str, sweep: str, budget: str) -> dict[str, str]:
    return {"study": study, "sweep": sweep, "budget": budget}


# ------------------------------------------------------------------------------ MLflow
def mlflow_uri(sweep_dir: Path, uri: str | None) -> str:
    """The tracking URI: ``uri`` when given, else the SQLite store in the sweep's folder."""
    return uri or f"sqlite:///{sweep_dir / MLFLOW_DB}"


def start_mlflow_sweep(sweep_dir: Path, uri: str | None, tags: dict[str, str]) -> dict[str, Any]:
    """Create (or find, on resume) the experiment and the sweep's parent run.

    Returns what the manifest records: ``{"uri", "experiment", "parent_run_id"}``."""
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # not its database set-up chatter
    tracking_uri = mlflow_uri(sweep_dir, uri)
    client = MlflowClient(tracking_uri)
    experiment = f"fedsweep-{tags['study']}"
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        experiment_id = found.experiment_id
    else:
        # a local store keeps its artifacts beside it, not in the working directory
        location = None if uri else (sweep_dir / MLFLOW_ARTIFACTS).as_uri()
        experiment_id = client.create_experiment(experiment, artifact_location=location)
    query = f"tags.sweep = '{tags['sweep']}' and tags.`{SWEEP_ROLE_TAG}` = 'sweep'"
    existing = client.search_runs([experiment_id], filter_string=query, max_results=1)
    if existing:
        parent = existing[0].info.run_id
    else:
        run = client.create_run(
            experiment_id, run_name=tags["sweep"], tags={**tags, SWEEP_ROLE_TAG: "sweep"}
        )
        parent = run.info.run_id
    return {"uri": tracking_uri, "experiment": experiment, "parent_run_id": parent}


# MLflow's words for how a run ended (mlflow.entities.RunStatus).
FINISHED, FAILED, KILLED, RUNNING = "FINISHED", "FAILED", "KILLED", "RUNNING"
# The manifest's word for a trial that errored (study.tune.fit.fit writes it).
TRIAL_ERROR = "ERROR"


def mlflow_sweep_status(manifest: dict[str, Any], error: BaseException | None) -> str:
    """The MLflow status a sweep's run ends with, from the manifest's ``status`` as the
    sweep left it (``study.tune.fit.fit``) and the exception the sweep ended with, if any.

    finished: FINISHED, or FAILED when a trial errored; interrupted: KILLED; failed (the
    driver itself): FAILED.  A manifest still saying running means the sweep stopped
    before Tune recorded an outcome: KILLED when that was Ctrl-C or SIGTERM, else FAILED."""
    status = manifest.get("status")
    if status == "finished":
        trials = manifest.get("trials") or {}
        errored = any(entry.get("status") == TRIAL_ERROR for entry in trials.values())
        return FAILED if errored else FINISHED
    if status == "interrupted":
        return KILLED
    stopped = getattr(error, "code", None) in (exit_codes.INTERRUPTED, exit_codes.TERMINATED)
    if status == "running" and (isinstance(error, KeyboardInterrupt) or stopped):
        return KILLED
    return FAILED


def set_mlflow_sweep_status(info: dict[str, Any], status: str) -> None:
    """Set the sweep's run to ``status``: RUNNING (again, on ``--resume``), or its end.

    Ending it also ends its trials' runs that are still open, KILLED: Tune ends a trial's
    run when the trial ends, never when the sweep is interrupted."""
    from mlflow.tracking import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    client = MlflowClient(info["uri"])
    parent = info["parent_run_id"]
    if status == RUNNING:
        client.update_run(parent, status=RUNNING)
        return
    experiment_id = client.get_run(parent).info.experiment_id
    query = f"tags.`mlflow.parentRunId` = '{parent}' and attributes.status = '{RUNNING}'"
    for run in client.search_runs([experiment_id], filter_string=query, max_results=10_000):
        client.set_terminated(run.info.run_id, status=KILLED)
    client.set_terminated(parent, status=status)


@contextmanager
def tracked_sweep(sweep_dir: Path) -> Iterator[None]:
    """Around the fit of a sweep (new or resumed): its MLflow run, when the manifest
    records one, says RUNNING while the sweep runs and ends with the sweep's outcome
    (:func:`mlflow_sweep_status`) however the fit ends.  A tracker that cannot be
    reached then is said in one line on stderr; it never changes the sweep's outcome."""
    info = (read_manifest(sweep_dir).get("tracking") or {}).get("mlflow")
    if isinstance(info, dict):
        _quietly(set_mlflow_sweep_status, info, RUNNING)
    error: BaseException | None = None
    try:
        yield
    except BaseException as err:
        error = err
        raise
    finally:
        if isinstance(info, dict):
            status = mlflow_sweep_status(read_manifest(sweep_dir), error)
            _quietly(set_mlflow_sweep_status, info, status)


def _quietly(step: Any, info: dict[str, Any], status: str) -> None:
    try:
        step(info, status)
    except Exception as err:  # whatever MLflow's client raises: one line, the sweep goes on
        first = error_reason(err)
        print(f"warning: MLflow sweep run not set to {status}: {first}", file=sys.stderr)


# -------------------------------------------------------------------------------- W&B
def wandb_mode() -> str:
    """``$WANDB_MODE`` if set; online when an API key is configured; else offline."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if os.environ.get("WANDB_API_KEY"):
        return "online"
    try:
        if netrc.netrc().authenticators("api.wandb.ai"):
            return "online"
    except (OSError, netrc.NetrcParseError):
        pass
    return "offline"


def start_wandb_sweep(tags: dict[str, str]) -> dict[str, Any]:
    """Where the sweep's W&B runs go: ``{"project", "group", "mode"}`` (for the manifest)."""
    mode = wandb_mode()
    # Tune's callback asks for an API key unless the mode variable says offline.
    os.environ["WANDB_MODE"] = mode
    project = os.environ.get("WANDB_PROJECT", WANDB_PROJECT)
    return {"project": project, "group": tags["sweep"], "mode": mode}


# ------------------------------------------------------------------------- together
def start_tracking(
    trackers: Iterable[str], sweep_dir: Path, uri: str | None, tags: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Set up each tracker for a sweep; returns the manifest's ``tracking`` entry."""
    info: dict[str, dict[str, Any]] = {}
    for name in trackers:
        if name == "mlflow":
            info["mlflow"] = start_mlflow_sweep(sweep_dir, uri, tags)
        elif name == "wandb":
            info["wandb"] = start_wandb_sweep(tags)
    return info
