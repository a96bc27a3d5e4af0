"""Nothing a killed run left behind survives the next start (issue 67): spill folders
and start logs are named after their process (federated/runtime/owned_temp_files.py),
and those whose process is gone, on this host, are removed; a full spill disk ends the
run in one line naming the folder and the bytes needed."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from federated import run
from federated.engine import party_store
from federated.engine.party_store import PartyStates, SpillSpaceError
from federated.runtime.owned_temp_files import (
    RAY_START_PREFIX,
    SPILL_PREFIX,
    host_name,
    owned_prefix,
    remove_stale,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def temp_root(tmp_path, monkeypatch) -> Path:
    """A private system temporary folder: the test never scans the machine's /tmp."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def dead_pid() -> int:
    """The id of a process that has ended (this host's next ones are numbered above it)."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_only_this_hosts_scratch_of_ended_processes_is_removed(temp_root, tmp_path):
    gone, host = dead_pid(), host_name()
    chosen = tmp_path / "states"  # a party_state_dir
    chosen.mkdir()
    stale_spill = chosen / f"{SPILL_PREFIX}{host}-{gone}-ab_12cd3"
    stale_spill.mkdir()
    (stale_spill / "7.pt").write_bytes(b"x" * 100)
    stale_log = temp_root / f"{RAY_START_PREFIX}{host}-{gone}-x9y8z7w6.log"
    stale_log.write_text("Ray runtime started")
    kept = [
        temp_root / f"{SPILL_PREFIX}{host}-{os.getppid()}-running1",  # its owner runs
        temp_root / f"{SPILL_PREFIX}other-host-{gone}-abcdefgh",  # another machine's
        temp_root / f"{SPILL_PREFIX}k3j2h1g0",  # no owner in the name (an older run)
        temp_root / f"{RAY_START_PREFIX}{host}-{gone}-abcdefgh.txt",  # not a start log
    ]
    for path in kept:
        path.mkdir()
    assert remove_stale([chosen, None]) == sorted([stale_spill, stale_log])
    assert not stale_spill.exists() and not stale_log.exists()
    assert all(path.exists() for path in kept)
    assert remove_stale([chosen]) == []  # nothing left to remove


def test_a_killed_runs_spill_folder_is_removed_by_the_next_start(temp_root):
    """A process that made its spill folder is killed with SIGKILL (no clean-up runs):
    the folder stays until a later start, which removes it."""
    code = (
        "import sys, tempfile, time\n"
        "from federated.runtime.owned_temp_files import SPILL_PREFIX, owned_prefix\n"
        "print(tempfile.mkdtemp(prefix=owned_prefix(SPILL_PREFIX)), flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp_root)}
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env)
    folder = Path(child.stdout.readline().decode().strip())
    child.kill()
    child.wait()
    child.stdout.close()
    assert folder.parent == temp_root and folder.is_dir()
    assert remove_stale() == [folder] and not folder.exists()


def test_the_spill_folder_is_in_party_state_dir_named_after_its_process(tmp_path):
    root = tmp_path / "not-yet"  # made on the first spill
    states = PartyStates([{"v": torch.zeros(1000)} for _ in range(3)], 0, spill_root=root)
    states.changed([0, 1, 2])  # over the 0-byte budget: all three wait on disk
    (folder,) = root.iterdir()
    assert folder.name.startswith(owned_prefix(SPILL_PREFIX))
    assert sorted(p.name for p in folder.iterdir()) == ["0.pt", "1.pt", "2.pt"]
    assert torch.equal(states[1]["v"], torch.zeros(1000))
    states.close()
    assert list(root.iterdir()) == []


@contextlib.contextmanager
def full_disk(path, mode="w"):
    """atomic_open on a disk with no space left: the first write fails with ENOSPC."""

    class Full:
        def write(self, data):
            raise OSError(28, "No space left on device")

    yield Full()


def test_a_full_spill_disk_is_one_line_naming_the_folder_and_the_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(party_store, "atomic_open", full_disk)
    monkeypatch.setattr(party_store.shutil, "disk_usage", lambda p: SimpleNamespace(free=0))
    states = PartyStates([{"v": torch.zeros(1000)}, {}], 0, spill_root=tmp_path)
    with pytest.raises(SpillSpaceError) as caught:
        states.changed([0])
    (folder,) = tmp_path.iterdir()
    assert str(caught.value) == (
        f"no space left on the disk of {folder} to spill party 0's state (4000 bytes "
        "needed, 0 KiB free); free space there, or pass --party-state-dir on a disk with "
        "room or a larger --party-memory-mib"
    )


@pytest.mark.filterwarnings("ignore:packed execution does not apply")
def test_federated_run_says_a_full_spill_disk_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(party_store, "atomic_open", full_disk)
    out = tmp_path / "rows.csv"
    argv = [
        "--dataset", "synthetic", "--algorithm", "moon", "--n-parties", "4", "--rounds", "1",
        "--data-fraction", "0.02", "--test-fraction", "0.05", "--threads", "1",
        "--party-memory-mib", "1", "--party-state-dir", str(tmp_path / "states"),
        "--out", str(out), "--quiet",
    ]  # fmt: skip
    assert run.main(argv) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "Traceback" not in err[0]
    assert err[0].startswith(f"error: no space left on the disk of {tmp_path / 'states'}")


def test_a_local_rays_start_log_is_named_after_the_driver(temp_root, monkeypatch):
    """The log study/local_ray.py keeps of the Ray head's start: a killed driver's is
    recognised (and removed) by the next start, as a spill folder is."""
    from study import local_ray

    monkeypatch.setattr(local_ray.subprocess, "Popen", lambda *args, **kwargs: None)
    holder = local_ray.LocalRay._launch(dashboard=False)  # Popen replaced: nothing starts
    assert holder.log.parent == temp_root
    assert holder.log.name.startswith(owned_prefix(RAY_START_PREFIX))
    assert holder.log.name.endswith(".log")
    assert remove_stale() == []  # its driver (this process) runs
    holder.log.unlink()
