"""Writing a file so that a reader never sees half of it: the one helper for it.

:func:`atomic_open` writes into a temporary file in the target's folder (same file
system, so the final rename is atomic) and renames it over the target only when the
block finishes without an error; on an error the temporary file is removed and the
target is left as it was.  ``tempfile.mkstemp`` creates files 0600: before the rename
the file gets the mode any other file of the user's gets (0666 minus the umask).
"""

from __future__ import annotations

import os
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


def user_file_mode() -> int:
    """0666 minus the process's umask (what ``open(path, "w")`` would create)."""
    mask = os.umask(0)
    os.umask(mask)  # reading the umask needs setting it: put it back at once
    return 0o666 & ~mask
