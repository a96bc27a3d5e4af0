"""Tune's deletion of a trial's old checkpoints, tolerant of one already gone.

Tune keeps a trial's newest checkpoints (``CheckpointConfig(num_to_keep=2)``) and deletes
the older ones as new ones register.  Its experiment state is snapshotted every second,
so a driver killed between a deletion and the next snapshot leaves a state that still
lists a checkpoint no longer on disk.  On ``--resume``, registering the trial's next
checkpoint then tries to delete that one again; Ray's ``_delete_fs_path`` asks the path's
type outside its own ``try`` and raises ``FileNotFoundError``, which Tune logs as
``ERROR tune_controller.py ... Error handling checkpoint`` — and, worse, the new checkpoint
is then never recorded, so a later resume redoes rounds it holds.

:func:`install` makes the deletion of a path that is already gone a no-op (what a
deletion wants is true), and deletes everything else as Ray does.  It patches the name
Ray's checkpoint manager calls, in the driver process, where Tune's controller runs.
"""

from __future__ import annotations

import pyarrow.fs
from ray.train._internal import checkpoint_manager, storage

_ray_delete = storage._delete_fs_path


def delete_unless_gone(fs: pyarrow.fs.FileSystem, fs_path: str) -> None:
    """Delete ``fs_path`` (a checkpoint folder) as Ray does; nothing where it is gone."""
    if fs.get_file_info(fs_path).type == pyarrow.fs.FileType.NotFound:
        return
    _ray_delete(fs, fs_path)


def install() -> None:
    """Route Tune's checkpoint deletions through :func:`delete_unless_gone`."""
    checkpoint_manager._delete_fs_path = delete_unless_gone
