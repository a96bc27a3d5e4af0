"""Tune's copies into the sweep folder land whole: each file is copied beside its place
and renamed over it, so a driver killed during a copy leaves the old file or the new
one, never a file cut short.

Tune writes a trial's ``params.json``, ``result.json`` and its own state into the
driver's staging folder and copies that folder into the sweep folder every second
(:data:`study.tune.tuners.SYNC_PERIOD_S`) through ``pyarrow.fs.copy_files``, which
rewrites each file in place.  A ``kill -9`` during such a copy, likelier the busier the
machine, left a trial's ``params.json`` empty or a finished trial's ``result.json`` with
half its rounds, and the report read an interrupted sweep's trial as damaged.  Only
copies to a local folder change; a cloud storage path's object writes are whole already.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Callable
from typing import Any

import pyarrow.fs
import ray.train._internal.storage as ray_storage

_TUNE_COPY: Callable[..., Any] = ray_storage._pyarrow_fs_copy_files


def whole_file_copy(
    source: str,
    destination: str,
    source_filesystem: pyarrow.fs.FileSystem | None = None,
    destination_filesystem: pyarrow.fs.FileSystem | None = None,
    **kwargs: Any,
) -> None:
    """``pyarrow.fs.copy_files`` as Tune calls it, each file written to
    ``.NAME.sync.tmp`` beside its destination and renamed into place (one name per file:
    a copy a kill cut short is overwritten by the next, never left beside it)."""
    if not isinstance(destination_filesystem, pyarrow.fs.LocalFileSystem):
        return _TUNE_COPY(source, destination, source_filesystem, destination_filesystem, **kwargs)
    source_fs = source_filesystem or pyarrow.fs.LocalFileSystem()
    found = source_fs.get_file_info(source)
    if found.type == pyarrow.fs.FileType.File:
        pairs = [(source, destination)]
    elif found.type == pyarrow.fs.FileType.Directory:
        selector = pyarrow.fs.FileSelector(source, recursive=True)
        pairs = [
            (info.path, posixpath.join(destination, posixpath.relpath(info.path, source)))
            for info in source_fs.get_file_info(selector)
            if info.type == pyarrow.fs.FileType.File
        ]
        os.makedirs(destination, exist_ok=True)
    else:  # not there: pyarrow's own error, as before
        return _TUNE_COPY(source, destination, source_filesystem, destination_filesystem, **kwargs)
    for source_file, destination_file in pairs:
        folder, name = posixpath.split(destination_file)
        os.makedirs(folder, exist_ok=True)
        partial = posixpath.join(folder, f".{name}.sync.tmp")
        try:
            _TUNE_COPY(source_file, partial, source_fs, destination_filesystem, **kwargs)
        except FileNotFoundError:
            # Listed, then gone: Tune writes its experiment state to a hidden temporary
            # file and renames it, and a Ctrl-C as the sweep starts made its last save
            # copy a name that no longer existed (an ERROR with a traceback on the
            # user's terminal).  Skipped while the source is gone: the file that
            # replaced it is in the next listing.  Any other failure is raised.
            if found.type != pyarrow.fs.FileType.Directory or _exists(source_fs, source_file):
                raise
            _discard(partial)
            continue
        os.replace(partial, destination_file)
    return None


def _exists(filesystem: pyarrow.fs.FileSystem, path: str) -> bool:
    return filesystem.get_file_info(path).type != pyarrow.fs.FileType.NotFound


def _discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def install() -> None:
    """Make Tune's uploads (the syncer's and the checkpoints') go through
    :func:`whole_file_copy` in this process."""
    ray_storage._pyarrow_fs_copy_files = whole_file_copy
