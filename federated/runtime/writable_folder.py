"""Whether a folder can be written (or made) here, asked before any work.

Permission bits do not say it for every user (root passes ``os.access`` on any folder
of a writable mount, and a read-only mount or ``/proc`` refuses root too), so the test
is the one that counts: a file made and removed at once in the folder, or in its nearest
existing ancestor when the folder is still to be made (nothing stays behind).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


def nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    for parent in [path, *path.parents]:
        if parent.exists():
            return parent
    return Path(path.anchor or "/")


def folder_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be (made into) a folder this process writes, in a few words
    naming the path at fault; None when it can."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{path} is not a folder"
    base = nearest_existing(path)
    if not base.is_dir():
        return f"{base} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as err:
        # /proc answers "no such file": the folder is there, it takes no files
        why = "" if err.errno in (None, errno.ENOENT) else f" ({err.strerror})"
        return f"{base} is not writable{why}"
    return None
