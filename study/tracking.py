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
  after the sweep and every trial a child run of it, so the MLflow UI nests them.
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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
