"""A sweep killed while Tune copies its staging folder into the sweep folder: the copy
lands whole (study/tune/whole_file_sync.py), and a file a kill cut short in an older
sweep reads as the interruption, not as damage (analysis/reading/loading.py).  The
SIGKILL drill (tests/test_fault_drill.py) is the end-to-end case; these pin each half."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.fs
import pytest

from analysis.reading.loading import load_results
from study.tune import whole_file_sync
from tests.analysis_fakes import curve, plan_configs, write_sweep


def _killed_sweep(tmp_path: Path) -> Path:
    """Two trials of 4 rounds, the second cut at round 2, and a driver that is gone."""
    configs = [{**c, "rounds": 4} for c in plan_configs("moon_mu", seeds=1)[:2]]
    sweep_dir = write_sweep(
        tmp_path, "s", "moon_mu", [(configs[0], curve(0.5, 4)), (configs[1], curve(0.4, 2))]
    )
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    manifest["status"] = "interrupted"
    (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(manifest))
    return sweep_dir


@pytest.mark.parametrize("content", [b"", b'{"algorithm": "mo'], ids=["empty", "cut"])
def test_a_params_file_cut_short_by_a_kill_is_the_interruption(tmp_path, content):
    sweep_dir = _killed_sweep(tmp_path)
    running = sorted(p for p in sweep_dir.iterdir() if p.is_dir())[1]
    (running / "params.json").write_bytes(content)
    results = load_results(sweep_dir)
    statuses = dict(zip(results.trials["trial"], results.trials["status"]))
    assert statuses[running.name] == "interrupted"
    assert sorted(statuses.values()) == ["completed", "interrupted"]
    row = results.trials.set_index("trial").loc[running.name]
    assert row["mu"] == plan_configs("moon_mu", seeds=1)[1]["mu"]  # config from result.json
    assert any("cut short by the interruption" in p for p in results.problems)


def test_a_params_file_cut_short_in_a_finished_sweep_is_damage(tmp_path):
    sweep_dir = _killed_sweep(tmp_path)
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    manifest["status"] = "finished"
    (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(manifest))
    first = sorted(p for p in sweep_dir.iterdir() if p.is_dir())[0]
    (first / "params.json").write_bytes(b"")
    results = load_results(sweep_dir)
    assert "damaged" in set(results.trials["status"])


def test_a_copy_lands_whole_and_leaves_no_partial_file(tmp_path):
    source = tmp_path / "staging"
    (source / "trial").mkdir(parents=True)
    (source / "trial" / "result.json").write_text('{"round": 1}\n' * 50)
    (source / "state.json").write_text("{}")
    destination = tmp_path / "sweep"
    (destination / "trial").mkdir(parents=True)
    (destination / "trial" / "result.json").write_text("old")
    local = pyarrow.fs.LocalFileSystem()
    whole_file_sync.whole_file_copy(str(source), str(destination), None, local)
    assert (destination / "trial" / "result.json").read_text() == '{"round": 1}\n' * 50
    assert (destination / "state.json").read_text() == "{}"
    assert sorted(p.name for p in destination.rglob("*")) == ["result.json", "state.json", "trial"]


def test_a_copy_that_fails_midway_leaves_the_old_file(tmp_path, monkeypatch):
    source = tmp_path / "params.json"
    source.write_text('{"mu": 5}')
    destination = tmp_path / "sweep" / "params.json"
    destination.parent.mkdir()
    destination.write_text('{"mu": 1}')

    def copy_then_die(src, dst, *args, **kwargs):
        Path(dst).write_text('{"m')  # the first bytes, then the kill
        raise KeyboardInterrupt

    monkeypatch.setattr(whole_file_sync, "_TUNE_COPY", copy_then_die)
    with pytest.raises(KeyboardInterrupt):
        whole_file_sync.whole_file_copy(
            str(source), str(destination), None, pyarrow.fs.LocalFileSystem()
        )
    assert destination.read_text() == '{"mu": 1}'


def test_a_file_gone_between_listing_and_copying_is_skipped(tmp_path, monkeypatch):
    """Tune's state file written under a temporary name and renamed away while the folder
    is copied (a Ctrl-C as a sweep starts): the copy goes on without the old name and
    takes the renamed file, no error; a file that is still there but cannot be copied
    still fails the copy."""
    source = tmp_path / "staging"
    source.mkdir()
    (source / "params.json").write_text('{"mu": 5}')
    temporary = source / ".abc-tmp-basic-variant-state.json"
    temporary.write_text("{}")
    destination = tmp_path / "sweep"
    copy = whole_file_sync._TUNE_COPY

    def renamed_first(src, dst, *args, **kwargs):
        if Path(src) == temporary and temporary.exists():
            temporary.rename(source / "basic-variant-state.json")  # Tune's rename
        return copy(src, dst, *args, **kwargs)

    monkeypatch.setattr(whole_file_sync, "_TUNE_COPY", renamed_first)
    local = pyarrow.fs.LocalFileSystem()
    whole_file_sync.whole_file_copy(str(source), str(destination), None, local)
    # the renamed file, found by listing the folder again; no partial copy left
    names = sorted(p.name for p in destination.iterdir())
    assert names == ["basic-variant-state.json", "params.json"]
    assert (destination / "params.json").read_text() == '{"mu": 5}'

    def unreadable(src, dst, *args, **kwargs):
        raise FileNotFoundError(f"{dst}: its folder vanished")

    monkeypatch.setattr(whole_file_sync, "_TUNE_COPY", unreadable)
    with pytest.raises(FileNotFoundError, match="its folder vanished"):
        whole_file_sync.whole_file_copy(str(source), str(destination), None, local)


def test_tunes_list_of_trials_without_result_files_is_not_printed():
    """After an interruption Tune lists every trial that never started ("Failed to fetch
    metrics for 17 trial(s): ... FileNotFoundError"): the summary names them already.
    A failure of another kind still shows."""
    import logging

    from study.tune import ray_session

    unstarted = "\n".join(
        ["Failed to fetch metrics for 2 trial(s):"]
        + [f"- t{i}: FileNotFoundError('.../progress.csv')" for i in range(2)]
    )
    other = "Failed to fetch metrics for 1 trial(s):\n- t0: PermissionError(13)"

    def shown(message: str) -> bool:
        record = logging.LogRecord("x", logging.WARNING, __file__, 1, message, None, None)
        return ray_session._NoUnstartedTrialMetrics().filter(record)

    assert not shown(unstarted)
    assert shown(other)
    assert shown("any other warning")
