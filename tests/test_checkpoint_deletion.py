"""Tune's checkpoint manager on resume after a kill: the experiment state may list a
checkpoint that was deleted after its last snapshot.  Registering the next checkpoint
must neither raise (Tune logged it as an ERROR and skipped recording the new checkpoint,
so a later resume redid rounds it held) nor keep the gone one."""

from __future__ import annotations

import pyarrow.fs
from ray.train import Checkpoint, CheckpointConfig
from ray.train._internal.checkpoint_manager import _CheckpointManager
from ray.train._internal.session import _TrainingResult

from study.tune import checkpoint_deletion


def result(path, round_: int) -> _TrainingResult:
    path.mkdir()
    (path / "state.pt").write_bytes(b"x")
    fs = pyarrow.fs.LocalFileSystem()
    return _TrainingResult(Checkpoint(str(path), filesystem=fs), {"round": round_})


def test_a_checkpoint_already_gone_is_no_error_and_the_new_one_is_recorded(tmp_path):
    checkpoint_deletion.install()
    manager = _CheckpointManager(CheckpointConfig(num_to_keep=2))
    first, second, third = (result(tmp_path / f"checkpoint_00000{k}", k) for k in (1, 2, 3))
    manager.register_checkpoint(first)
    manager.register_checkpoint(second)
    # the kill: the snapshot listed checkpoint 1, which Tune had deleted since
    (tmp_path / "checkpoint_000001" / "state.pt").unlink()
    (tmp_path / "checkpoint_000001").rmdir()
    manager.register_checkpoint(third)  # deletes checkpoint 1 again: gone, fine
    assert manager.latest_checkpoint_result is third
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_000002", "checkpoint_000003"]


def test_a_checkpoint_still_there_is_deleted_as_ray_deletes_it(tmp_path):
    checkpoint_deletion.install()
    manager = _CheckpointManager(CheckpointConfig(num_to_keep=1))
    first, second = (result(tmp_path / f"checkpoint_00000{k}", k) for k in (1, 2))
    manager.register_checkpoint(first)
    manager.register_checkpoint(second)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint_000002"]
