"""Reading results directories: one tidy frame, trial statuses, sweeps still being
written, restores that repeat rounds, several directories combined."""

from __future__ import annotations

import json
import os
import time

import pytest

from analysis.reading.loading import NoResultsError, find_sweep_dirs, load_results, read_result_rows
from tests.analysis_fakes import (
    curve,
    manifest,
    plan_configs,
    result_row,
    write_sweep,
    write_trial,
)


def configs(rounds: int = 5, study: str = "moon_mu", seeds: int = 1) -> list[dict]:
    out = plan_configs(study, seeds=seeds)
    for c in out:
        c["rounds"] = rounds
    return out


def new_sweep(root, name="s", status="finished", study="moon_mu", **changes):
    sweep_dir = root / name
    sweep_dir.mkdir(parents=True)
    info = manifest(name, study, status=status, **changes)
    (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(info))
    return sweep_dir


def test_every_status_is_read_from_the_files(tmp_path):
    c = configs()
    sweep_dir = new_sweep(tmp_path, status="finished", scheduler="asha")
    write_trial(sweep_dir, 0, c[0], curve(0.6, 5))  # completed
    write_trial(sweep_dir, 1, c[1], curve(0.5, 3), error="ValueError: boom")  # error
    diverged = [result_row(c[2], 1, 0.2), result_row(c[2], 2, float("nan"), diverged=True)]
    write_trial(sweep_dir, 2, c[2], [], rows=diverged)
    write_trial(sweep_dir, 3, c[3], curve(0.3, 2))  # ASHA's sweep, fewer rounds: stopped
    results = load_results(sweep_dir)
    status = dict(zip(results.trials["mu"], results.trials["status"]))
    assert status == {0.0: "completed", 0.1: "error", 1.0: "diverged", 5.0: "stopped"}
    errored = results.trials.set_index("mu").loc[0.1]
    assert errored["error"] == "ValueError: boom"
    assert errored["last_round"] == 3 and errored["final_acc"] == pytest.approx(0.5)


def test_manifest_error_wins_and_a_completed_trial_with_an_old_error_is_completed(tmp_path):
    c = configs()
    trials = {
        "abcde_00000_mu=0.0_seed0": {"status": "ERROR", "error": "RuntimeError: from manifest"},
    }
    sweep_dir = new_sweep(tmp_path, trials=trials)
    write_trial(sweep_dir, 0, c[0], curve(0.5, 2), error="other")
    write_trial(sweep_dir, 1, c[1], curve(0.6, 5), error="failed once, retried")
    results = load_results(sweep_dir).trials.set_index("mu")
    assert results.loc[0.0, "status"] == "error"
    assert results.loc[0.0, "error"] == "RuntimeError: from manifest"
    assert results.loc[0.1, "status"] == "completed"


def test_running_sweep_half_written_line_and_unreadable_params(tmp_path):
    c = configs()
    sweep_dir = new_sweep(tmp_path, status="running")
    rows = "".join(json.dumps(result_row(c[0], r, 0.1 * r)) + "\n" for r in (1, 2))
    half = json.dumps(result_row(c[0], 3, 0.3))[:40]
    write_trial(sweep_dir, 0, c[0], [], rows=[], tail=rows + half)
    write_trial(sweep_dir, 1, c[1], curve(0.6, 5))
    broken = sweep_dir / "abcde_00002_mu=1.0_seed0"
    broken.mkdir()
    (broken / "params.json").write_text('{"algorithm": "mo')  # being written
    results = load_results(sweep_dir)
    trials = results.trials.set_index("mu")
    assert trials.loc[0.0, "status"] == "running"
    assert trials.loc[0.0, "last_round"] == 2 and trials.loc[0.0, "final_acc"] == pytest.approx(0.2)
    assert trials.loc[0.1, "status"] == "completed"
    assert len(results.trials) == 2
    assert any("params.json not readable yet" in p for p in results.problems)
    assert sorted(results.rounds.loc[results.rounds["mu"] == 0.0, "round"]) == [1, 2]


def test_interrupted_sweep_marks_unfinished_trials_interrupted(tmp_path):
    c = configs()
    sweep_dir = new_sweep(tmp_path, status="interrupted")
    write_trial(sweep_dir, 0, c[0], curve(0.4, 3))
    assert load_results(sweep_dir).trials["status"].tolist() == ["interrupted"]


def test_retried_trial_of_a_running_sweep_is_running_not_error(tmp_path):
    c = configs()
    sweep_dir = new_sweep(tmp_path, status="running")
    trial_dir = write_trial(sweep_dir, 0, c[0], curve(0.4, 3), error="failed once")
    old = time.time() - 60
    os.utime(trial_dir / "error.txt", (old, old))  # the failure came before these rounds
    assert load_results(sweep_dir).trials["status"].tolist() == ["running"]


def test_repeated_rounds_after_a_restore_keep_the_last_occurrence(tmp_path):
    c = configs()[0]
    rows = [result_row(c, r, a) for r, a in ((1, 0.1), (2, 0.2), (3, 0.3), (3, 0.35), (4, 0.4))]
    rows += [result_row(c, 5, 0.5)]
    sweep_dir = new_sweep(tmp_path)
    trial_dir = write_trial(sweep_dir, 0, c, [], rows=rows)
    got = read_result_rows(trial_dir / "result.json")
    assert [r["round"] for r in got] == [1, 2, 3, 4, 5]
    assert got[2]["test_acc"] == 0.35 and "config" not in got[0]
    results = load_results(sweep_dir)
    assert len(results.rounds) == 5
    assert results.trials.loc[0, "status"] == "completed"


def test_tidy_frame_has_config_status_and_metrics_per_round(tmp_path):
    c = configs(rounds=3)
    sweep_dir = write_sweep(tmp_path, "s", "moon_mu", [(cfg, curve(0.5, 3)) for cfg in c])
    results = load_results(sweep_dir)
    rounds = results.rounds
    assert len(rounds) == 5 * 3
    for column in ("sweep", "trial", "status", "algorithm", "mu", "seed", "point", "study"):
        assert column in rounds
    assert {"round", "test_acc", "test_loss", "train_loss"} <= set(rounds.columns)
    assert set(rounds["status"]) == {"completed"}
    assert rounds["round"].tolist()[:3] == [1, 2, 3]
    assert "mu" in results.config_columns and "final_acc" not in results.config_columns
    trials = results.trials
    assert trials["final_acc"].tolist() == pytest.approx([0.5] * 5)
    assert trials["order"].tolist() == [0, 1, 2, 3, 4]


def test_a_metric_named_like_a_config_field_does_not_overwrite_it(tmp_path):
    c = configs(rounds=1)[0]
    sweep_dir = new_sweep(tmp_path)
    write_trial(sweep_dir, 0, c, [], rows=[result_row(c, 1, 0.5, tau=0.01)])
    rounds = load_results(sweep_dir).rounds
    assert rounds.loc[0, "tau"] == c["tau"] and rounds.loc[0, "tau_metric"] == 0.01


def test_folders_of_sweeps_and_several_paths_combine(tmp_path):
    c = configs(rounds=2)
    for folder in ("a", "b"):
        write_sweep(tmp_path / folder, "same-name", "moon_mu", [(c[0], [0.2, 0.3])])
    write_sweep(tmp_path / "a", "other", "moon_mu", [(c[1], [0.2, 0.4])])
    assert [p.name for p in find_sweep_dirs(tmp_path / "a")] == ["other", "same-name"]
    results = load_results([tmp_path / "a", tmp_path / "b", tmp_path / "a" / "other"])
    assert [s.name for s in results.sweeps] == ["other", "same-name", "b/same-name"]
    assert len(results.trials) == 3
    assert results.trials.groupby("sweep").size().to_dict() == {
        "other": 1,
        "same-name": 1,
        "b/same-name": 1,
    }


def test_a_path_without_a_sweep_is_a_clear_error(tmp_path):
    with pytest.raises(NoResultsError, match="holds no sweep"):
        load_results(tmp_path)
    with pytest.raises(NoResultsError, match="does not exist"):
        load_results(tmp_path / "missing")


def test_a_sweep_with_no_trial_yet_loads_empty(tmp_path):
    new_sweep(tmp_path, name="fresh", status="running")
    results = load_results(tmp_path)
    assert results.trials.empty and results.rounds.empty
    assert [s.status for s in results.sweeps] == ["running"]
