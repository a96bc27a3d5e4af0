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
        _copy_whole(source, destination, source_fs, destination_filesystem, kwargs)
        return None
    if found.type != pyarrow.fs.FileType.Directory:  # not there: pyarrow's own error
        return _TUNE_COPY(source, destination, source_filesystem, destination_filesystem, **kwargs)
    os.makedirs(destination, exist_ok=True)
    copied: set[str] = set()
    # A file listed and then gone: Tune writes its experiment state to a hidden temporary
    # file and renames it, and a Ctrl-C as a sweep started made its last save copy a
    # name that no longer existed (an ERROR with a traceback on the user's terminal).  It
    # is skipped, and the folder listed once more for what replaced it (the renamed file).
    for _ in range(2):
        gone = False
        for source_file in _files(source_fs, source):
            if source_file in copied:
                continue
            target = posixpath.join(destination, posixpath.relpath(source_file, source))
            try:
                _copy_whole(source_file, target, source_fs, destination_filesystem, kwargs)
            except FileNotFoundError:
                if _exists(source_fs, source_file):  # a failure of its own: raised
                    raise
                gone = True
                continue
            copied.add(source_file)
        if not gone:
            break
    return None


def _files(filesystem: pyarrow.fs.FileSystem, folder: str) -> list[str]:
    selector = pyarrow.fs.FileSelector(folder, recursive=True)
    infos = filesystem.get_file_info(selector)
    return [info.path for info in infos if info.type == pyarrow.fs.FileType.File]


def _copy_whole(
    source_file: str,
    destination_file: str,
    source_fs: pyarrow.fs.FileSystem,
    destination_fs: pyarrow.fs.FileSystem,
    kwargs: dict[str, Any],
) -> None:
    """One file copied to ``.NAME.sync.tmp`` beside its destination, then renamed into
    place; the partial copy is removed when the copy fails."""
    folder, name = posixpath.split(destination_file)
    os.makedirs(folder, exist_ok=True)
    partial = posixpath.join(folder, f".{name}.sync.tmp")
    try:
        _TUNE_COPY(source_file, partial, source_fs, destination_fs, **kwargs)
    except FileNotFoundError:
        _discard(partial)
        raise
    os.replace(partial, destination_file)


def _exists(filesystem: pyarrow.fs.FileSystem, path: str) -> bool:
    return filesystem.get_file_info(path).type != pyarrow.fs.FileType.NotFound


def _discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def install() -> None:
    """Make Tune's uploads (the syncer's and the checkpoints') go through
    :func:`whole_file_copy` in this process."""
    ray_storage._pyarrow_fs_copy_files = whole_file_copy
