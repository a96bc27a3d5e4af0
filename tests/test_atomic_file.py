"""The one atomic file writer: a finished block replaces the file, a failed one leaves
the old file and no temporary file behind."""

from __future__ import annotations

import pytest
import torch

from federated.runtime.atomic_file import atomic_folder, atomic_open, process_umask


def test_a_finished_block_replaces_the_file(tmp_path):
    path = tmp_path / "sub" / "rows.csv"
    with atomic_open(path) as fh:
        fh.write("a,b\n")
        assert not path.exists()  # nothing visible until the block ends
    assert path.read_text() == "a,b\n"
    with atomic_open(path, "wb") as fh:
        torch.save({"x": torch.arange(3)}, fh)
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.arange(3))
    assert sorted(p.name for p in path.parent.iterdir()) == ["rows.csv"]


def test_a_failed_block_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(path) as fh:
        fh.write("half of the new")
        raise RuntimeError("writer died")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_only_whole_file_modes():
    with pytest.raises(ValueError, match="mode 'w' or 'wb'"), atomic_open("x", "a"):
        pass


def test_a_folder_appears_whole_or_not_at_all(tmp_path):
    out = tmp_path / "tree"
    with pytest.raises(RuntimeError), atomic_folder(out) as staging:
        (staging / "half.json").write_text("{")
        raise RuntimeError("builder died")
    assert list(tmp_path.iterdir()) == []
    with atomic_folder(out) as staging:
        (staging / "whole.json").write_text("{}")
    assert [p.name for p in tmp_path.iterdir()] == ["tree"]
    assert (out / "whole.json").read_text() == "{}"
    assert out.stat().st_mode & 0o777 == 0o777 & ~process_umask()
