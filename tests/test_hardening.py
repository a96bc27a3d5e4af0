"""Each defect of the hardening issue, pinned by a test that fails without its fix
(the bad-input catalogue is tests/test_bad_inputs.py, the fault drill
tests/test_fault_drill.py, the loopback check tests/test_local_ray_network.py)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import stat
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from analysis import report
from analysis.loading import NoResultsError, load_results
from federated import exit_codes, run
from federated.algorithms.fedprox import FedProx
from federated.atomic_file import atomic_open, user_file_mode
from federated.config import RunConfig
from federated.data import DatasetUnavailable, load_dataset
from federated.inert_settings import inert_settings
from federated.params import MethodParams, describe
from federated.registry import load_method
from federated.round_loop import run_rounds
from federated.trainable import STATE_FILE, CheckpointError, load_run_state
from study.driver_liveness import driver_gone
from study.sweep import parse_overrides
from study.sweep_folder import write_json_atomic
from tests.analysis_fakes import curve, plan_configs, write_sweep
from tests.conftest import tiny


# ---------------------------------------------------------------- 2: checkpoints
class RunsCode:
    """A pickle that would create a file when unpickled without weights_only."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_a_crafted_run_state_is_refused_without_running_its_code(tmp_path):
    marker = tmp_path / "code-ran"
    with open(tmp_path / STATE_FILE, "wb") as fh:
        pickle.dump({"model": RunsCode(str(marker))}, fh)
    with pytest.raises(CheckpointError) as caught:
        load_run_state(tmp_path)
    assert not marker.exists()
    assert "\n" not in str(caught.value) and STATE_FILE in str(caught.value)


# ------------------------------------------------------- 1: killed driver detected
def test_a_running_manifest_whose_driver_is_gone_reads_as_interrupted(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    configs = plan_configs("moon_mu", seeds=1)[:2]
    driver = {"host": os.uname().nodename, "pid": dead.pid}
    sweep_dir = write_sweep(
        tmp_path,
        "killed",
        "moon_mu",
        [(configs[0], [0.2, 0.3])],
        status="running",
        driver=driver,
    )
    assert driver_gone(json.loads((sweep_dir / "fedsweep_sweep.json").read_text()))
    results = load_results(sweep_dir)
    assert results.sweeps[0].status == "interrupted"
    assert any("driver process is gone" in p for p in results.problems)
    alive = {"status": "running", "driver": {"host": os.uname().nodename, "pid": os.getpid()}}
    assert not driver_gone(alive)


# ------------------------------------------------------ 4: paths made absolute
def test_set_paths_are_made_absolute_in_the_driver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_overrides(["data_root=data"])["data_root"] == str(tmp_path / "data")


# ------------------------------------------------------------ 7: damaged results
def _one_trial_sweep(tmp_path: Path, **manifest) -> Path:
    config = {**plan_configs("moon_mu", seeds=1)[0], "rounds": 4}
    return write_sweep(tmp_path, "s", "moon_mu", [(config, curve(0.5, 4))], **manifest)


def _result_file(sweep_dir: Path) -> Path:
    return next(sweep_dir.glob("*/result.json"))


def test_a_bad_line_in_the_middle_of_result_json_keeps_later_rounds_and_marks_damaged(
    tmp_path,
):
    sweep_dir = _one_trial_sweep(tmp_path)
    path = _result_file(sweep_dir)
    lines = path.read_text().splitlines()
    lines[1] = '{"round": 2, "test_acc": 0.3'  # cut short, then the trial went on
    path.write_text("\n".join(lines) + "\n")
    results = load_results(sweep_dir)
    trial = results.trials.iloc[0]
    assert sorted(results.rounds["round"].tolist()) == [1, 3, 4]
    assert trial["status"] == "damaged" and "line 2" in trial["error"]


@pytest.mark.parametrize(
    "content",
    [b"", b'{"round": 1, "test_acc": 0.2}\n{"rou', b"\xff\xfe\x00garbage\n", b'{"round": "x"}\n'],
    ids=["empty", "truncated", "not-utf8", "round-not-integer"],
)
def test_damaged_result_files_of_a_finished_trial_are_marked_damaged(tmp_path, content):
    sweep_dir = _one_trial_sweep(tmp_path)
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    trial_name = _result_file(sweep_dir).parent.name
    manifest["trials"] = {trial_name: {"status": "TERMINATED", "error": None, "last_round": 4}}
    (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(manifest))
    _result_file(sweep_dir).write_bytes(content)
    results = load_results(sweep_dir)
    assert results.trials.iloc[0]["status"] == "damaged"


def test_wrong_typed_partitions_are_reported_and_a_wrong_typed_manifest_refused(
    tmp_path, capsys
):
    """A damaged partitions.json is named among the problems (its figure skipped); a
    manifest of the wrong types is the sweep's own description, so the report refuses
    it in one line naming the file and the field (issue 20, item 6)."""
    sweep_dir = _one_trial_sweep(tmp_path, partitions=[{"class_counts": "many"}, 3])
    results = load_results(sweep_dir)
    assert len(results.trials) == 1
    assert any("partitions.json" in p for p in results.problems)
    out = tmp_path / "report"
    assert report.main([str(sweep_dir), "--out", str(out), "--quiet", "--no-pdf"]) == 0

    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    manifest.update(trials=["x"], seeds="0,1", n_trials="five", status=7)
    (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(manifest))
    with pytest.raises(NoResultsError, match=r"fedsweep_sweep\.json: field trials="):
        load_results(sweep_dir)
    capsys.readouterr()
    assert report.main([str(sweep_dir), "--out", str(tmp_path / "r2"), "--no-pdf"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unreadable sweep manifest:") and "\n" not in err


def test_one_corrupt_manifest_does_not_block_the_other_sweeps(tmp_path, capsys):
    _one_trial_sweep(tmp_path)
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "fedsweep_sweep.json").write_text("{")
    results = load_results(tmp_path)
    assert [s.name for s in results.sweeps] == ["s"]
    assert any("broken" in p for p in results.problems)


# ------------------------------------------------- 8 and 12: files that are written
def test_atomic_files_get_the_users_umask_and_leave_no_temp_file(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_open(tmp_path / "a.txt") as fh:
            fh.write("x")
        written = tmp_path / "a.txt"
        write_json_atomic(tmp_path / "b.json", {"a": 1})
        for path in (written, tmp_path / "b.json"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o644 == user_file_mode()
        (tmp_path / "folder.txt").mkdir()
        with pytest.raises(OSError), atomic_open(tmp_path / "folder.txt") as fh:
            fh.write("x")  # the rename onto a folder fails
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.json", "folder.txt"]


# ---------------------------------------------------------- 9: corrupt datasets
def test_a_corrupt_dataset_file_is_one_line(tmp_path):
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        with gzip.open(folder / f"{name}.gz", "wb") as fh:
            fh.write(b"\x00\x00\x08\x03\x00\x00")  # a header cut short
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("fmnist", tmp_path)
    assert "\n" not in str(caught.value) and "damaged" in str(caught.value)


# ------------------------------------------------------------ 10: inert settings
@dataclass(frozen=True)
class ProxPluginParams(MethodParams):
    mu: float = field(default=0.3, metadata=describe("a plug-in's own proximal weight"))


class ProxPlugin(FedProx):
    """A plug-in method declaring ``mu``, as FedProx does, with another default."""

    name = "prox_plugin"
    Params = ProxPluginParams


def test_inert_settings_are_warned_once_each():
    flat = RunConfig.from_dict
    lines = inert_settings(flat({"algorithm": "fedavg", "mu": 0.5, "server_momentum": 0.5}))
    assert len(lines) == 2
    assert lines[0].startswith("warning: mu=0.5 has no effect: algorithm=fedavg")
    assert "server_momentum" in lines[1]
    assert inert_settings(flat({"algorithm": "fedprox", "mu": 0.5})) == []
    # from the declarations: a plug-in method that declares mu gets no warning for it,
    # and its own default when mu is left unset
    plugin = "tests.test_hardening:ProxPlugin"
    assert inert_settings(flat({"algorithm": plugin, "mu": 0.5})) == []
    assert RunConfig(algorithm=plugin).resolved().algorithm_params.mu == 0.3
    assert load_method("algorithm", plugin).Params is ProxPluginParams
    assert "tau" in inert_settings(RunConfig(algorithm="fedprox"), given=["tau"])[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        next(run_rounds(tiny(algorithm="fedavg", mu=0.3, rounds=1)))
    assert [str(w.message) for w in caught if "mu=0.3" in str(w.message)]


# --------------------------------------------------------- 11: diverged exit code
def test_a_diverged_run_has_its_own_exit_status(tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    argv = [
        "--dataset",
        "synthetic",
        "--rounds",
        "3",
        "--local-epochs",
        "1",
        "--n-parties",
        "4",
        "--data-fraction",
        "0.04",
        "--test-fraction",
        "0.1",
        "--threads",
        "1",
        "--device",
        "cpu",
        "--lr",
        "1e6",
        "--out",
        str(out),
        "--quiet",
    ]
    status = run.main(argv)
    assert "diverged" in capsys.readouterr().out
    assert status == exit_codes.DIVERGED == 3
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temporary file left


def test_a_sync_of_an_atomic_temp_file_that_vanished_is_not_shown_as_a_failure():
    """A trial's atomic write leaves ``.NAME….tmp`` for a moment; Ray's syncer may try to
    copy it after the rename.  That warning (a traceback) is dropped; others stay."""
    import logging

    from study.ray_session import _NoVanishedTempFileSync

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("ray.train._internal.syncer", 30, "", 0, message, None, None)

    vanished = (
        "Last sync command failed with the following error:\nFileNotFoundError: [Errno 2] "
        "Failed to open local file '/tmp/ray/a/trial/.parties.csv1fbxeozc.tmp'. Detail: "
        "[errno 2] No such file or directory"
    )
    other = "Last sync command failed with the following error:\nPermissionError: denied"
    assert not _NoVanishedTempFileSync().filter(record(vanished))
    assert _NoVanishedTempFileSync().filter(record(other))
