"""Is the driver of a ``running`` sweep still alive?  (Standard library only.)

The manifest records the driver's host and process id (:func:`driver_record`); a killed
driver (kill -9, a reboot) leaves the manifest saying ``running``, and
:func:`driver_gone` tells readers (``analysis``, ``study.sweep --resume``) that it is
not.  A process id reused by another process after a reboot reads as alive: the check
errs on the side of "still running".
"""

from __future__ import annotations

import os
import socket
from typing import Any


def driver_record() -> dict[str, Any]:
    """What the manifest stores about the driver process."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def driver_gone(manifest: dict[str, Any]) -> bool:
    """True when a ``running`` manifest's driver ran on this host and is no longer alive.

    A driver on another host cannot be checked from here: it is taken as alive."""
    driver = manifest.get("driver")
    if manifest.get("status") != "running" or not isinstance(driver, dict):
        return False
    pid = driver.get("pid")
    if driver.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False
