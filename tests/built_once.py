"""A test input built once per test session, however many pytest-xdist workers read it.

A session-scoped fixture is made once per worker; an input that takes seconds of CPU to
build (a generated image tree) and that is the same whoever builds it (its builder is
seeded) is built by the first worker that asks and read by the others, under a file
lock in the session's shared temporary folder (pytest-xdist's documented pattern)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """The folder ``name`` in the session's shared temporary folder, made by
    ``build(folder)`` if no worker has made it yet (``build`` gets a folder that does
    not exist and must create it)."""
    # under xdist each worker's base temp is <session root>/popen-gwN: its parent is shared
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if base.name.startswith("popen-gw") else base
    folder = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        done = shared / f"{name}.built"
        if not done.is_file():
            try:
                build(folder)
            except BaseException:  # the next worker builds it again, from nothing
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder
