"""A sweep's time outside training (issue 42 item 2): the benchmark that measures it from
a finished sweep's files, the per-process data a reused trial actor takes, and one real
sweep whose trials share an actor and still equal in-process runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.sweep_overhead import main as overhead_main
from benchmarks.sweep_overhead import overhead
from federated.config.data_checks import with_data_checked
from federated.config.run_config import RunConfig
from federated.data.loading import load_run_data
from federated.engine.round_loop import run_rounds
from federated.export_tree import export_parties
from study.local_ray import LocalRay
from study.plan import run_config_fields

LAUNCHED = 1_000_000.0
PLUGIN = "tests.plugin_method:LabelSmoothing"


def write_trial(
    folder: Path, origin: int, rounds: list[tuple[float, float]], spare: float = 0.0
) -> None:
    """A trial folder as Tune writes it: rows of (time_total_s, round_seconds); whole-second
    timestamps, as Tune's; ``spare`` core-seconds a round beyond its own (idle cores)."""
    folder.mkdir(parents=True)
    (folder / "params.json").write_text("{}")
    rows = [
        {
            "round": i,
            "timestamp": int(origin + total),
            "time_total_s": total,
            "round_seconds": s,
            "spare_core_seconds": spare,
        }
        for i, (total, s) in enumerate(rounds, 1)
    ]
    (folder / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def two_slot_sweep(tmp_path: Path, lone_spare: float = 0.0) -> Path:
    """Three trials on two slots: each starts 1 s before its first 3-s round and has ~1 s
    between its two rounds; a and b start 2 s after launch, c 2 s after a ends."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    manifest = {
        "resources": {"cpu": 1.0, "gpu": 0.0},
        "max_concurrent": None,
        "machine": {"threads": 2},
        "started": "2001-09-09T01:46:40",
    }
    (sweep / "fedsweep_sweep.json").write_text(json.dumps(manifest))
    shape = [(4.0, 3.0), (7.999, 3.0)]
    write_trial(sweep / "a", int(LAUNCHED) + 2, shape)
    write_trial(sweep / "b", int(LAUNCHED) + 2, shape)
    write_trial(sweep / "c", int(LAUNCHED) + 12, shape, spare=lone_spare)
    return sweep


def test_the_capacity_splits_into_rounds_and_each_kind_of_time_outside_them(tmp_path):
    result = overhead(two_slot_sweep(tmp_path), launched=LAUNCHED)
    assert (result.trials, result.slots) == (3, 2)
    assert result.span_s == pytest.approx(20.0, abs=0.01)
    assert result.rounds_s == pytest.approx(18.0)
    assert result.start_s == pytest.approx(4.0, abs=0.01)  # two slots, 2 s each
    assert result.set_up_s == pytest.approx(3.0, abs=0.01)
    assert result.between_rounds_s == pytest.approx(3.0, abs=0.01)
    assert result.between_trials_s == pytest.approx(2.0, abs=0.01)  # a's end to c's start
    assert result.idle_end_s == pytest.approx(10.0, abs=0.01)  # b's slot while c runs
    parts = (
        result.rounds_s
        + result.start_s
        + result.set_up_s
        + result.between_rounds_s
        + result.between_trials_s
        + result.idle_end_s
    )
    assert parts == pytest.approx(result.capacity_s, abs=0.05)
    assert result.outside_share == pytest.approx(1 - 18.0 / 40.0, abs=0.002)
    assert result.last_wave_floor == 0.25  # 3 trials on 2 slots: 1 empty slot of 4
    assert result.after_s == 0.0
    # to the command's end, 5 s after the last round: every slot, in "after"
    (tmp_path / "ended").mkdir()
    ended = overhead(two_slot_sweep(tmp_path / "ended"), launched=LAUNCHED, ended=LAUNCHED + 25)
    assert ended.after_s == pytest.approx(10.0, abs=0.01)
    assert ended.capacity_s == pytest.approx(50.0, abs=0.01)
    assert ended.outside_share == pytest.approx(1 - 18.0 / 50.0, abs=0.002)


def test_the_command_prints_the_table_or_json_and_refuses_a_non_sweep_in_one_line(tmp_path, capsys):
    sweep = two_slot_sweep(tmp_path)
    assert overhead_main([str(sweep), "--launched", str(LAUNCHED)]) == 0
    text = capsys.readouterr().out
    assert "outside training: 55.0% of the capacity" in text and "idle_end" in text
    assert "last wave's empty slots, for 3 equally long trials on 2 slots" in text
    assert overhead_main([str(sweep), "--launched", str(LAUNCHED), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["slots"] == 2
    assert overhead_main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a sweep folder" in err


@pytest.fixture(scope="module")
def party_folder(fmnist, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("parties")
    export_parties(fmnist, root, n_parties=3, data_fraction=0.01)
    return root


def folder_config(root: Path, data_root: Path) -> RunConfig:
    return with_data_checked(
        RunConfig(
            dataset=f"folder:{root}",
            partition="natural",
            data_root=str(data_root),
            device="cpu",
            threads=1,
        )
    )


def test_a_worker_process_loads_a_data_set_once_and_again_when_its_files_change(
    party_folder, tmp_path
):
    config = folder_config(party_folder, tmp_path / "root")
    first = load_run_data(config)
    assert load_run_data(config) is first  # the next trial in this process: no load
    image = next((party_folder / "train").rglob("*.png"))
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    try:
        changed = load_run_data(config)
        assert changed is not first  # the folder changed: read again
        assert changed.train_x.shape == first.train_x.shape
    finally:
        os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.slow
def test_trials_share_an_actor_and_each_equals_its_run_in_process(fmnist, tmp_path):
    """Two two-round trials on one slot: the second reuses the first one's actor (one
    worker process), and each trial's accuracies equal its config run in this process.
    The machine's other core is idle throughout (one trial at a time), so from the second
    round on each trial trains its packs side by side on it (federated/runtime/
    idle_cores.py): the accuracies are still the in-process run's.

    The second trial is a plug-in method (tests/plugin_method.py, docs/writing-a-method.md):
    the reused Ray worker imports it by its path, found through ``PYTHONPATH`` as the docs
    tell users, and runs it with its parameter's default."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    cmd = [
        sys.executable, "-m", "study.sweep", "comparison", "--set", f"algorithm=moon,{PLUGIN}",
        "--budget", "smoke", "--dataset", "fmnist", "--set", "rounds=2",
        "--set", "execution=packed", "--max-concurrent", "1", "--quiet",
        "--storage-path", str(tmp_path), "--name", "reused",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    trials = sorted(p for p in (tmp_path / "reused").iterdir() if (p / "params.json").is_file())
    assert len(trials) == 2
    manifest = json.loads((tmp_path / "reused" / "fedsweep_sweep.json").read_text())
    assert manifest["status"] == "finished"
    configs = [json.loads((t / "params.json").read_text()) for t in trials]
    assert sorted(c["algorithm"] for c in configs) == sorted(["moon", PLUGIN])
    (plugin,) = [c for c in configs if c["algorithm"] == PLUGIN]
    assert plugin["smoothing"] == 0.1  # LabelSmoothingParams' default, written flat
    rows = {
        t: [json.loads(line) for line in (t / "result.json").read_text().splitlines()]
        for t in trials
    }
    assert len({r[0]["pid"] for r in rows.values()}) == 1  # one actor ran both
    for trial, trial_rows in rows.items():
        assert [row["round"] for row in trial_rows] == [1, 2]
        fields = run_config_fields(json.loads((trial / "params.json").read_text()))
        fields["device"] = "cpu"
        expected = [row["test_acc"] for row in run_rounds(RunConfig.from_dict(fields), fmnist)]
        assert [row["test_acc"] for row in trial_rows] == expected
        spare = [row["spare_core_seconds"] for row in trial_rows]
        assert spare[0] == 0.0 and spare[1] > 0.0, spare  # idle at two round starts in a row


def ray_start_children() -> set[int]:
    """This process's children that hold a local Ray (read from Linux's /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # a process that ended while being read
        if ppid == os.getpid() and b"study.tune.ray_head" in cmdline:
            found.add(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_driver_works_while_its_local_ray_comes_up_and_failing_work_stops_the_node():
    """The driver's Tune imports run once ``ray start`` is launched, before it is awaited
    (study/sweep.py overlaps them with Ray's start); work that fails stops the node.  One
    node: every sweep test covers the work that succeeds."""
    before = ray_start_children()
    launched: list[set[int]] = []

    def failing_import() -> None:
        launched.append(ray_start_children() - before)
        raise ImportError("an import failed")

    with pytest.raises(ImportError, match="an import failed"):
        LocalRay.start(False, failing_import)
    assert len(launched) == 1 and len(launched[0]) == 1  # launched before the work ran, once
    assert ray_start_children() == before  # the node it had launched is gone


def test_idle_cores_a_lone_trial_trained_on_count_as_training(tmp_path):
    """c runs alone while b's slot is empty (10 s); its packs used 2 s of that core in
    each of its two rounds: outside training is 40 - 18 - 4 of 40."""
    result = overhead(two_slot_sweep(tmp_path, lone_spare=2.0), launched=LAUNCHED)
    assert result.spare_cores_s == pytest.approx(4.0)
    assert result.idle_end_s == pytest.approx(10.0, abs=0.01)  # the slot had no trial
    assert result.outside_share == pytest.approx(1 - 22.0 / 40.0, abs=0.002)


def children_named(parent: int, name: str) -> list[int]:
    """Processes whose parent is ``parent`` and whose name is ``name`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # a process that ended while being read
        comm, rest = text.split("(", 1)[1].rsplit(")", 1)
        if comm == name and int(rest.split()[1]) == parent:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_ray_process_that_dies_stops_the_local_node_and_its_holder(tmp_path, monkeypatch):
    """The holder (study/tune/ray_head.py) watches the Ray processes it started: one that
    dies (here the raylet, killed) stops the others, and the holder exits with status 1
    saying which; a sweep on that node then fails instead of waiting on a dead node.

    Started from a folder with a ``study`` package of its own (a user's project), as a
    sweep may be: the holder still imports the code the driver imports, and the local Ray
    comes up.  Its trials run at the priority the sweep was started with (Ray's default,
    niceness 15 for workers, starved them beside other work): a task there reads its
    niceness."""
    (tmp_path / "study" / "tune").mkdir(parents=True)
    for init in ("study/__init__.py", "study/tune/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "study" / "tune" / "ray_head.py").write_text("raise SystemExit(3)\n")
    monkeypatch.chdir(tmp_path)
    # as a sweep starts its local Ray (study/tune/ray_session.py): loopback, a token
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from ray._private.authentication.authentication_token_setup import (
        ensure_token_if_auth_enabled,
    )

    ensure_token_if_auth_enabled(None, create_token_if_missing=True)
    holder = LocalRay.start(False)
    try:
        assert holder.process.poll() is None and "Ray runtime started" in holder.log.read_text()
        probe = (
            f"import os, ray; ray.init(address={holder.address!r}, logging_level='ERROR');"
            "print(ray.get(ray.remote(lambda: os.getpriority(os.PRIO_PROCESS, 0)).remote()))"
        )
        worker = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300
        )
        assert worker.stdout.split()[-1:] == [str(os.getpriority(os.PRIO_PROCESS, 0))], (
            worker.stderr[-2000:]
        )
        (raylet,) = children_named(holder.process.pid, "raylet")
        gcs = children_named(holder.process.pid, "gcs_server")
        assert len(gcs) == 1
        os.kill(raylet, signal.SIGKILL)
        assert holder.process.wait(timeout=60) == 1
        assert "Ray processes exited: [('raylet', -9)]" in holder.log.read_text()
        assert not Path(f"/proc/{gcs[0]}").exists() or "Z" in status_of(gcs[0])
    finally:
        holder.stop()


def status_of(pid: int) -> str:
    """A process's state letter (Z: exited, not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
