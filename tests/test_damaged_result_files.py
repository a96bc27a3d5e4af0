"""Damaged result files (a bad line in result.json, wrong-typed partitions, a corrupt
manifest) are named as damaged and never stop the rest of the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import report
from analysis.reading.loading import NoResultsError, load_results
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
    it in one line naming the file and the field."""
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


def _damage_params_types(trial: Path) -> None:
    config = json.loads((trial / "params.json").read_text())
    (trial / "params.json").write_text(json.dumps({**config, "rounds": "many"}))


def _damage_params_value(trial: Path, key: str, value: object) -> None:
    config = json.loads((trial / "params.json").read_text())
    (trial / "params.json").write_text(json.dumps({**config, key: value}))


def _damage_result_tail(trial: Path) -> None:
    data = (trial / "result.json").read_bytes()
    (trial / "result.json").write_bytes(data[: len(data) // 2])  # a copy cut short


DAMAGED_TRIAL_FILES = [
    ("params-garbage", lambda t: (t / "params.json").write_bytes(b"\x00garbage"), "not JSON"),
    ("params-not-utf8", lambda t: (t / "params.json").write_bytes(b'{"a": "\xff"}'), "UTF-8"),
    ("params-types", _damage_params_types, "rounds='many' is not a whole number"),
    ("params-list-value", lambda t: _damage_params_value(t, "mu", [1]), "mu=[1] is not a single"),
    ("params-a-list", lambda t: (t / "params.json").write_text("[1]"), "not a JSON object"),
    ("result-cut-short", _damage_result_tail, "result.json"),
    ("result-garbage", lambda t: (t / "result.json").write_bytes(b"\xff\xfe\n"), "not JSON"),
    (
        "result-wrong-types",
        lambda t: (t / "result.json").write_text(
            '{"round": 1, "test_acc": "high"}\n{"round": 2, "test_acc": 7.5}\n'
        ),
        "test_acc='high' is not a number",
    ),
]


def _results_folder(root: Path) -> tuple[Path, list[Path]]:
    """A finished moon_mu sweep (grid, no scheduler) of completed trials, as study.sweep
    writes it, with a good partitions.json: the files the tests then damage."""
    from tests.analysis_fakes import curve, plan_configs, write_sweep

    configs = plan_configs("moon_mu", seeds=2)
    partitions = [
        {"dataset": "fmnist", "n_parties": 2, "partition": "dirichlet", "beta": 0.5,
         "data_fraction": 0.05, "seed": 0, "class_counts": [[3] * 10, [4] * 10]}
    ]  # fmt: skip
    trials = [(c, curve(0.3 + 0.05 * i, c["rounds"])) for i, c in enumerate(configs)]
    sweep_dir = write_sweep(root, "mm", "moon_mu", trials, partitions=partitions)
    return sweep_dir, sorted(p for p in sweep_dir.iterdir() if p.is_dir())


@pytest.mark.parametrize(
    ("damage", "words"), [pytest.param(d, w, id=i) for i, d, w in DAMAGED_TRIAL_FILES]
)
def test_a_damaged_trial_file_is_named_under_trials_not_counted(tmp_path, capsys, damage, words):
    sweep_dir, trials = _results_folder(tmp_path / "results")
    damage(trials[0])
    out = tmp_path / "report"
    assert report.main([str(sweep_dir), "--out", str(out), "--no-pdf", "--quiet"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    text = (out / "report.md").read_text()
    section = text.split("## Trials not counted")[1].split("\n## ")[0]
    line = next(ln for ln in section.splitlines() if trials[0].name in ln)
    assert "| damaged |" in line and words in line, line
    if "params" in line:  # a damaged params.json is named by its whole path
        assert str(trials[0] / "params.json") in line, line
    others = [t.name for t in trials[1:]]
    assert not any(name in section for name in others), "only the damaged trial is left out"
    counted = _trial_rows(out, "completed")  # never averaged: not among the counted
    assert trials[0].name not in counted and len(counted) == len(others)


def _trial_rows(out: Path, status: str) -> list[str]:
    import csv

    with open(out / "data" / "trials.csv", newline="") as fh:
        return [row["trial"] for row in csv.DictReader(fh) if row["status"] == status]


@pytest.mark.parametrize(
    "content",
    [b'[{"class_counts": [[1, 2], [3', b"\xff", b'[{"class_counts": [[1, 2], [3]]}]'],
    ids=["cut-short", "not-utf8", "ragged"],
)
def test_a_damaged_partitions_file_is_named_and_its_figure_skipped(tmp_path, capsys, content):
    sweep_dir, _ = _results_folder(tmp_path / "results")
    (sweep_dir / "partitions.json").write_bytes(content)
    out = tmp_path / "report"
    assert report.main([str(sweep_dir), "--out", str(out), "--no-pdf", "--quiet"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    problems = (out / "report.md").read_text().split("## Problems while reading")[1]
    assert f"{sweep_dir / 'partitions.json'}: " in problems
    assert not list((out / "figures").glob("fig5_partition*"))


@pytest.mark.parametrize(
    "kind, column, value, words",
    [
        ("classification", "test_acc", 1.7, "accuracy's range [0, 1]"),
        ("classification", "party_acc/2", 1.7, "accuracy's range [0, 1]"),
        ("detection", "test_map50", 1.5, "mAP@0.5's range [0, 1]"),
        ("score", "test_srcc", -1.2, "SRCC's range [-1, 1]"),
        ("score", "test_mae", -0.5, "MAE's range [0, inf]"),
    ],
)
def test_a_metric_outside_its_declared_range_is_damage_not_a_percentage(
    tmp_path, kind, column, value, words
):
    """Each metric of the trial's declared task bounds its values (MetricSpec.bounds): a
    row holding 1.7 as an accuracy is named and left out, never shown as 170 %."""
    from federated.registry import kind_specs

    sweep_dir = _one_trial_sweep(tmp_path, task_spec=kind_specs()[kind].to_dict())
    path = _result_file(sweep_dir)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[2][column] = value
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    results = load_results(sweep_dir)
    trial = results.trials.iloc[0]
    assert sorted(results.rounds["round"].tolist()) == [1, 2, 4]
    assert trial["status"] == "damaged"
    assert f"line 3 of result.json: {column}={value!r} is outside {words}" in trial["error"]


def test_a_declared_metric_that_is_not_a_number_is_named_as_damage(tmp_path):
    """A row holding ``party_test_acc_mean='abc'`` is named (line and column), its round
    left out; the trial's other rounds stay."""
    sweep_dir = _one_trial_sweep(tmp_path)
    path = _result_file(sweep_dir)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[1]["party_test_acc_mean"] = "abc"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    results = load_results(sweep_dir)
    trial = results.trials.iloc[0]
    assert sorted(results.rounds["round"].tolist()) == [1, 3, 4]
    assert trial["status"] == "damaged"
    assert "line 2 of result.json: party_test_acc_mean='abc' is not a number" in trial["error"]
