"""The Ray dashboard of a local sweep (``--dashboard``): the line that gives its URL and
says what is where, and keeping it up after the sweep until Ctrl-C.

Ray's dashboard shows each trial as an actor named by its point and seed, with its state
(:mod:`study.tune.trial_actor`); it has no page for a trial's rounds and accuracy, which
TensorBoard shows from the files every trial writes, so the printed line names both.

A local Ray ends with the driver, and its dashboard with it: a finished sweep could not
be looked at.  With ``--dashboard`` the driver waits after the sweep's summary (one line
says so) until Ctrl-C or SIGTERM, then exits with the sweep's own exit status.  It has
disconnected from Ray by then, so the dashboard's Jobs and Overview pages show the
sweep's job SUCCEEDED (Ray's word for a driver that ended), not RUNNING: the local Ray
is held by a child process (:mod:`study.local_ray`), not by the driver's connection.
It does not wait after the sweep was interrupted (the user asked it to stop), nor when
it joined a cluster (``--address``: the cluster's dashboard outlives the driver
anyway).  This module does not import Ray.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TextIO

# How often the wait looks at its stop flag (s): signal handlers run between looks.
WAIT_STEP_S = 0.5


def dashboard_line(url: str | None, sweep_dir: Path) -> str:
    """The line printed when the sweep starts with ``--dashboard``."""
    return (
        f"Ray dashboard: {url or 'not available'} (Actors page: one actor per trial, named "
        f"by point and seed, with its state; rounds and accuracy curves are in TensorBoard: "
        f"tensorboard --logdir {sweep_dir})"
    )


def keep_dashboard_up(url: str, stream: TextIO | None = None) -> None:
    """Say that the dashboard stays up, then block until SIGINT or SIGTERM.

    The local Ray and its dashboard stay up meanwhile (the caller ends them after)."""
    out = stream or sys.stdout
    print(
        f"the Ray dashboard stays up at {url} until Ctrl-C (the sweep's Ray job has ended: "
        "SUCCEEDED on its Jobs page)",
        file=out,
        flush=True,
    )
    stop = threading.Event()

    def _stop(sig: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.is_set():
            stop.wait(WAIT_STEP_S)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
