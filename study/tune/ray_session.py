"""Starting or joining Ray for a sweep, and what the driver asks of the cluster.

A local Ray binds every port to loopback (README, "Network") and is held by a child
process of the driver (:mod:`study.local_ray`: free ports, so sweeps run side by side,
and a driver job that ends when the sweep does); Tune's own log lines that would
contradict the driver or alarm for nothing are filtered here (the Ray environment
variables are set by :mod:`study`, before Ray is imported).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import optuna
import ray
from ray._private.authentication.authentication_token_setup import (
    ensure_token_if_auth_enabled,
)

from federated.cli.error_reason import error_reason
from federated.cli.input_checks import check_fits_cluster as check_fits_node
from study.local_ray import LocalRay

# The local head node this driver holds, if any (None: none, or a cluster was joined).
_LOCAL: LocalRay | None = None


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
    (parties.csv, representations) through :func:`federated.runtime.atomic_file.atomic_open`,
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


class _NoUnstartedTrialMetrics(logging.Filter):
    """Drop Tune's "Failed to fetch metrics for N trial(s)" warning (a line per trial)
    when each failure is a missing result file: after an interruption those are the
    trials that never started, which the driver's summary names "not started".  A
    failure of any other kind is still shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith("Failed to fetch metrics for"):
            return True
        failures = message.splitlines()[1:]
        return not failures or not all("FileNotFoundError" in line for line in failures)


logging.getLogger("ray.tune.analysis.experiment_analysis").addFilter(_NoUnstartedTrialMetrics())


class _NoTokenAuthNotice(logging.Filter):
    """Drop Ray's notices that a local cluster turned token authentication on by default
    (it opened every sweep's output) and, on a machine's first sweep, that it generated
    the token (~/.ray/auth_token): that is the safe state, and nothing to act on.
    Ray's warning that authentication is *disabled* still shows."""

    NOTICES = ("Token authentication is enabled", "Generated new authentication token")

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.NOTICES)


logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(
    _NoTokenAuthNotice()
)


# Optuna logs at INFO on the driver ("A new study created in RDB with name: ...", "Using
# an existing study ..." on --resume), which went through --quiet: the sweep's own lines
# say what the user needs; Optuna's warnings still show.
optuna.logging.set_verbosity(optuna.logging.WARNING)


def _no_callback_usage_tag(callbacks: object) -> bool:
    """Ray's ``tag_callbacks``, for a Ray that reports no usage statistics: nothing tagged."""
    return False


def skip_callback_usage_tag() -> None:
    """Tune tags every run with the kinds of its callbacks for Ray's usage statistics,
    importing MLflow's, W&B's, Comet's and Aim's callbacks to tell them apart: about
    1 CPU-s in every sweep, tracked or not (MLflow's import alone is 0.7 s).  A local
    Ray reports no usage statistics (:mod:`study.tune.ray_head`), so that tag went
    nowhere; for a sweep on its own local Ray the tagging is skipped.  A cluster the
    sweep joins keeps Ray's own."""
    from ray.air._internal import usage as air_usage

    air_usage.tag_callbacks = _no_callback_usage_tag


def start_ray(
    address: str | None, dashboard: bool, meanwhile: Callable[[], object] | None = None
) -> str | None:
    """Join ``address`` (or $RAY_ADDRESS), else start a local Ray; returns the dashboard URL.

    A local Ray binds every port to loopback: its node address is 127.0.0.1 (with
    ``study.sweep.LOCAL_ONLY_ENV`` set before Ray is imported, Ray keeps it rather than
    resolving it to the machine's network address) and the dashboard, when asked for,
    listens on 127.0.0.1 only.  It is held by a ``ray start`` child
    (:class:`study.local_ray.LocalRay`) with token authentication on, as Ray sets it for
    a cluster ``ray.init`` starts (unless $RAY_AUTH_MODE says otherwise).  Raises
    ConnectionError (one line) when Ray cannot start or join.

    ``meanwhile``: the driver's work to do while a local Ray comes up in its own
    processes (:meth:`study.local_ray.LocalRay.start`); joining a cluster, it runs first."""
    global _LOCAL
    options: dict[str, Any] = {"logging_level": "WARNING", "log_to_driver": False}
    address = address or os.environ.get("RAY_ADDRESS")
    try:
        if address:
            if meanwhile is not None:
                meanwhile()
            context = ray.init(address=address, **options)
            url = getattr(context, "dashboard_url", None)
            return f"http://{url}" if url and not str(url).startswith("http") else url
        # the holder and the driver read the mode from the environment (study.sweep sets
        # it before Ray is imported); a local cluster gets a token made for it when none
        # exists yet (ray.init does the same)
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        ensure_token_if_auth_enabled(None, create_token_if_missing=True)
        _LOCAL = LocalRay.start(dashboard, meanwhile)
        skip_callback_usage_tag()
        atexit.register(end_local_ray)  # after Ray's own exit hook: it runs first
        ray.init(address=_LOCAL.address, **options)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as err:
        first = error_reason(err)
        if first.startswith("could not start a local Ray"):
            raise ConnectionError(first) from None
        where = f"join the Ray cluster at {address}" if address else "start a local Ray"
        raise ConnectionError(f"could not {where}: {first}") from None
    return _LOCAL.dashboard_url


def end_driver_job() -> None:
    """Disconnect the driver from Ray: Ray marks its job finished (SUCCEEDED on the
    dashboard's Jobs and Overview pages).  A local Ray and its dashboard stay up, held
    by :class:`study.local_ray.LocalRay`, until :func:`end_local_ray`."""
    if ray.is_initialized():
        ray.shutdown()


def end_local_ray() -> None:
    """End the driver's job, then the local Ray this driver holds (if any); idempotent.
    In this order, so that the node has no live job to drain when it is stopped."""
    end_driver_job()
    if _LOCAL is not None:
        _LOCAL.stop()


def check_fits_cluster(cpus: float, gpus: float) -> None:
    """Refuse (InputError) a trial larger than every live node: Ray would keep it pending."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    largest_cpus = max((r.get("CPU", 0.0) for r in nodes), default=0.0)
    largest_gpus = max((r.get("GPU", 0.0) for r in nodes), default=0.0)
    check_fits_node(cpus, gpus, largest_cpus, largest_gpus)


def cluster_gpus() -> float:
    return float(ray.cluster_resources().get("GPU", 0.0))
