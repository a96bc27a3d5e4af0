"""Writing a file or a folder so that a reader never sees half of it: the one helper for each.

:func:`atomic_open` writes into a temporary file in the target's folder (same file
system, so the final rename is atomic) and renames it over the target only when the
block finishes without an error; on an error the temporary file is removed and the
target is left as it was.  ``tempfile.mkstemp`` creates files 0600: before the rename
the file gets the mode any other file of the user's gets (0666 minus the umask).
:func:`atomic_folder` does the same for a whole folder (a built data tree).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """Open ``path`` for writing (``mode`` "w" or "wb", ``kwargs`` as for :func:`open`)
    through a hidden temporary file that replaces ``path`` when the block succeeds.
    Creates the parent folder."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
        os.chmod(tmp, user_file_mode())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def process_umask() -> int:
    """The process's umask."""
    mask = os.umask(0)
    os.umask(mask)  # reading the umask needs setting it: put it back at once
    return mask


def user_file_mode() -> int:
    """0666 minus the process's umask (what ``open(path, "w")`` would create)."""
    return 0o666 & ~process_umask()


@contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """A hidden temporary folder beside ``path`` to fill; renamed to ``path`` when the
    block succeeds (``path`` must not exist), removed on an error: ``path`` is complete
    or absent.  The folder gets the mode ``mkdir`` would give it (0777 minus the umask)."""
    path = Path(path)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield staging
        os.chmod(staging, 0o777 & ~process_umask())
        os.rename(staging, path)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
