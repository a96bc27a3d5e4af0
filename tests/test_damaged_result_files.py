"""Damaged result files (a bad line in result.json, wrong-typed partitions, a corrupt
manifest) are named as damaged and never stop the rest of the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import report
from analysis.loading import NoResultsError, load_results
from tests.analysis_fakes import curve, plan_configs, write_sweep


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


def test_wrong_typed_partitions_are_reported_and_a_wrong_typed_manifest_refused(tmp_path, capsys):
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
