"""Checks of command-line inputs that are not RunConfig fields: paths, names, resources.

``python -m federated.run``, ``python -m study.sweep`` and ``python -m analysis.report``
(and the Python API, through the same functions) call these before any work starts, so
the same bad value gets the same line everywhere.  Each raises :class:`InputError`, whose
message is one line naming the flag (or field) and the value, and saying what is
allowed.  RunConfig's own fields are checked in :mod:`federated.config.run_config`.

Nothing here imports torch or Ray: start-up to the first error stays fast.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# A plain name: one path component of ASCII letters, digits, '.', '_', '-', not starting with
# '.' or '-' (so never '.', '..', a hidden file or an option).
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,199}")
# Config fields that hold paths: made absolute in the driver, because every Tune trial
# runs in a working directory of its own.
PATH_FIELDS = ("data_root", "party_state_dir")
ADDRESS_TIMEOUT_S = 3.0


class InputError(ValueError):
    """A command-line value is not allowed; the message is one line."""


class UsageError(InputError):
    """A flag's value, or a combination of flags, that the command refuses (one
    ``error: ...`` line, exit status 2): the one class every command line raises."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one ``error: ...`` line (no usage block)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def check_plain_name(value: str, flag: str) -> str:
    """``value`` if it is a plain name (no '/', not '.' or '..', not hidden)."""
    if not PLAIN_NAME.fullmatch(value):
        raise InputError(
            f"{flag}={value!r} (allowed: a plain name of ASCII letters and digits (A-Z, a-z, "
            "0-9), '.', '_', '-', at most 200 characters, not starting with '.' or '-')"
        )
    return value


def _existing_ancestor(path: Path) -> Path:
    for parent in [path, *path.parents]:
        if parent.exists():
            return parent
    return Path("/")


def _folder_problem(path: Path) -> str | None:
    """Why ``path`` cannot be (made into) a writable folder; None when it can."""
    if path.exists() and not path.is_dir():
        return f"{path} exists and is not a folder"
    base = _existing_ancestor(path)
    if not base.is_dir():
        return f"{base} is a file, not a folder"
    if not os.access(base, os.W_OK | os.X_OK):
        return f"{base} is not writable"
    return None


def check_output_folder(value: str | os.PathLike, flag: str) -> Path:
    """The absolute folder ``value`` if it is, or can be created as, a writable folder."""
    path = Path(value).expanduser().absolute()
    problem = _folder_problem(path)
    if problem:
        raise InputError(f"{flag}={str(value)!r}: {problem}")
    return path


def check_output_file(value: str | os.PathLike, flag: str) -> Path:
    """The absolute file ``value`` if it can be written (its folder exists or can be made)."""
    path = Path(value).expanduser().absolute()
    if str(value).endswith(os.sep) or path.is_dir():
        raise InputError(f"{flag}={str(value)!r}: is a folder (allowed: a file path)")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{flag}={str(value)!r}: is not writable")
    problem = _folder_problem(path.parent)
    if problem:
        raise InputError(f"{flag}={str(value)!r}: {problem}")
    return path


def check_trial_resources(cpus: float, gpus: float, max_failures: int) -> None:
    """CPUs and GPUs per trial and retries, before Ray starts (Ray would hang or misread)."""
    if not (math.isfinite(cpus) and cpus > 0):
        raise InputError(f"--cpus-per-trial={cpus!r} (allowed: a number > 0)")
    if not (math.isfinite(gpus) and gpus >= 0):
        raise InputError(f"--gpus-per-trial={gpus!r} (allowed: a number >= 0)")
    if gpus > 1 and not float(gpus).is_integer():
        # Ray cannot give a trial 1.5 GPUs: fractions share one GPU, more than one is whole.
        raise InputError(
            f"--gpus-per-trial={gpus!r} (allowed: a fraction <= 1, or a whole number of GPUs)"
        )
    if max_failures < 0:  # Ray reads -1 as "retry forever"
        raise InputError(f"--max-failures={max_failures!r} (allowed: an integer >= 0)")


def check_fits_cluster(cpus: float, gpus: float, largest_cpus: float, largest_gpus: float) -> None:
    """A trial must fit on one node, else Ray keeps it pending forever."""
    if cpus > largest_cpus:
        raise InputError(
            f"--cpus-per-trial={cpus:g} (allowed: at most {largest_cpus:g}, the CPUs of the "
            "largest Ray node)"
        )
    if gpus > largest_gpus > 0:
        raise InputError(
            f"--gpus-per-trial={gpus:g} (allowed: at most {largest_gpus:g}, the GPUs of the "
            "largest Ray node)"
        )


def check_address(value: str) -> str:
    """``host:port`` of a Ray head that answers within a few seconds."""
    host, _, port = value.rpartition(":")
    if value in ("auto", "local"):
        return value
    if value.startswith("ray://"):
        host, _, port = value[len("ray://") :].rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(
            f"--address={value!r} (allowed: HOST:PORT of a Ray head, e.g. 10.0.0.5:6379)"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=ADDRESS_TIMEOUT_S):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise InputError(
            f"--address={value!r}: no Ray head answers there ({reason}); start one with "
            "`ray start --head` or leave --address out for a local Ray"
        ) from None
    return value


def absolute_paths(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with path fields (``data_root``, ``party_state_dir``) made absolute.

    (``dataset=folder:PATH`` is made absolute where RunConfig resolves it.)"""
    out = dict(values)
    for name in PATH_FIELDS:
        if isinstance(out.get(name), str) and out[name]:
            out[name] = str(Path(out[name]).expanduser().absolute())
    return out
