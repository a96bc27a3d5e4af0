"""Temporary files and folders named after the process that owns them, and the removal
of those whose owner is gone.

A run keeps two kinds of scratch outside its results: the party store's spill folder
(``fedsweep-party-states-<host>-<pid>-<random>``, :mod:`federated.engine.party_store`)
and a local Ray's start log (``fedsweep-ray-start-<host>-<pid>-<random>.log``,
``study/local_ray.py``).  Each owner removes its own when it ends; a process killed
with SIGKILL (or a machine that lost power) cannot, so every fedsweep start removes the
ones whose owner no longer runs (:func:`remove_stale`): a sweep's driver as it starts or
resumes, each trial as it starts, and a run's party store as it first spills.

An owner is its host name and process id, both in the name.  A name of another host (a
``party_state_dir`` on a disk that several machines share) is never touched, and a
process id that runs (whatever process: perhaps another one that reused a dead owner's
number) keeps its name, so a leftover may wait until that process ends but nothing is
removed while its owner runs.  Names without an owner (written before owners were
named) are left alone: nothing says whether their run still runs.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path

#: the party store's spill folders (federated/engine/party_store.py)
SPILL_PREFIX = "fedsweep-party-states-"
#: a local Ray's start logs (study/local_ray.py)
RAY_START_PREFIX = "fedsweep-ray-start-"
# tempfile's random part is 8 of [a-z0-9_] (never '-'), so the last two dashes before
# it delimit the process id, whatever dashes the host name holds
_OWNED = re.compile(
    rf"(?:{re.escape(SPILL_PREFIX)}|{re.escape(RAY_START_PREFIX)})"
    r"(?P<host>.+)-(?P<pid>[0-9]+)-[A-Za-z0-9_]+(?:\.log)?"
)
# the environment variables Python's tempfile reads, in its order
TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")


def host_name() -> str:
    """This machine's name as it appears in an owned name (letters, digits, '.', '-')."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "localhost"


def owned_prefix(prefix: str) -> str:
    """``prefix`` followed by this process's owner (``<host>-<pid>-``): the ``prefix``
    argument of :func:`tempfile.mkdtemp` / :func:`tempfile.mkstemp` for scratch that
    :func:`remove_stale` may remove once this process is gone."""
    return f"{prefix}{host_name()}-{os.getpid()}-"


def named_temp_dir() -> tuple[Path, str]:
    """The temporary folder the environment names (``$TMPDIR``, ``$TEMP`` or ``$TMP``,
    the first set), else Python's default, and which of them it is (``"$TMPDIR"`` ...
    or ``"Python's default"``)."""
    for name in TEMP_VARIABLES:
        value = os.environ.get(name)
        if value:
            return Path(value).expanduser().absolute(), f"${name}"
    return Path(tempfile.gettempdir()), "Python's default"


def system_temp_dir() -> Path:
    """:func:`named_temp_dir`'s folder.  Unlike :func:`tempfile.gettempdir`, a named
    folder that cannot be written is returned as named, never swapped for /tmp: the
    checks refuse it in one line instead."""
    return named_temp_dir()[0]


def process_runs(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (signal 0 sends nothing).  True
    wherever that cannot be told (another user's process, not a POSIX system): a name
    is removed only when its owner is known to be gone."""
    if os.name != "posix":
        return True  # Windows' os.kill ends the process whatever the signal
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it runs, as another user
        return True
    return True


def stale_entries(folder: Path) -> list[Path]:
    """The owned names in ``folder`` of this host whose process no longer runs."""
    try:
        names = os.listdir(folder)
    except OSError:  # not there, or not readable: nothing of ours can be in it
        return []
    host, stale = host_name(), []
    for name in names:
        match = _OWNED.fullmatch(name)
        if match is None or match["host"] != host:
            continue
        pid = int(match["pid"])
        if pid != os.getpid() and not process_runs(pid):
            stale.append(folder / name)
    return sorted(stale)


def remove_stale(folders: Iterable[str | os.PathLike | None] = ()) -> list[Path]:
    """Remove the spill folders and start logs that killed runs of this host left in
    the system's temporary folder and in each of ``folders`` (a ``party_state_dir``;
    None entries are skipped); returns what was removed.  Never raises: a leftover that
    cannot be removed stays for the next start to try."""
    # tempfile's own choice too: a start log is made there (it may differ from the
    # named folder when that one cannot be written)
    roots = {system_temp_dir(), Path(tempfile.gettempdir())}
    roots.update(Path(f).expanduser().absolute() for f in folders if f)
    removed = []
    for root in sorted(roots):
        for path in stale_entries(root):
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except OSError:
                continue
            removed.append(path)
    return removed
