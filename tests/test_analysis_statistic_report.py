"""The report on a chosen statistic, end to end on hand-made results folders: the
default (the mean of the last 3 rounds) and its caption, ``val`` (refused without
validation, else the test accuracy at the best validation round), the study file's
choice, the seed plan under every comparison, the convergence check, and the sweep's
stopping rule (:func:`analysis.tables.resolvable_tables.resolvable_differences`)."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest

from analysis.report import main
from analysis.stats.trial_statistic import FINAL, StatisticError, parse_statistic
from analysis.tables.resolvable_tables import resolvable_differences, tables_above
from search_spaces.study_file import STATISTIC_FORM, StudyFileError, study_from_dict
from tests.analysis_fakes import manifest, plan_configs, result_row, write_trial

# moon_mu (smoke budget): 5 μ values; 3 seeds; 4 rounds each
SEEDS = 3
ROUNDS = 4
# each seed's offset (points) in every μ > 0 cell: the paired differences to μ = 0 have
# sd exactly 1.8 points, in every Δ cell
OFFSET = (-1.8, 0.0, 1.8)


def level(point: int, seed: int) -> float:
    """The accuracy (fraction) of grid point ``point`` (μ's index) and ``seed``."""
    return 0.50 + 0.02 * point + (OFFSET[seed] / 100 if point else 0.0)


def write_moon_mu(root: Path, rows_of, *, definition_report: dict | None = None) -> Path:
    """A finished moon_mu sweep; ``rows_of(point, seed, config)`` gives a trial's rows."""
    sweep = root / "moon_mu-fake"
    sweep.mkdir(parents=True)
    configs = plan_configs("moon_mu", seeds=SEEDS)
    info = manifest("moon_mu-fake", "moon_mu", n_trials=len(configs), seeds=list(range(SEEDS)))
    if definition_report is not None:
        info["definition"]["report"] = {**info["definition"]["report"], **definition_report}
    (sweep / "fedsweep_sweep.json").write_text(json.dumps(info))
    points = list(dict.fromkeys(c["point"] for c in configs))
    for i, config in enumerate(configs):
        config["rounds"] = ROUNDS
        rows = rows_of(points.index(config["point"]), config["seed"], config)
        write_trial(sweep, i, config, [], rows=rows)
    return sweep


def flat_rows(point: int, seed: int, config: dict) -> list[dict]:
    """Rounds 1-2 lower, rounds 2-4 at the cell's level except a dip at round 3: the last
    round is ``level``, the last 3 rounds' mean is ``level - 1 point``."""
    top = level(point, seed)
    tests = [0.2, top, top - 0.03, top]
    return [result_row(config, r, acc) for r, acc in enumerate(tests, 1)]


def table_rows(out: Path, name: str = "table9_moon_mu") -> list[dict]:
    return list(csv.DictReader((out / "tables" / f"{name}.csv").open()))


def test_the_default_reports_the_mean_of_the_last_three_rounds(tmp_path):
    sweep = write_moon_mu(tmp_path / "results", flat_rows)
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--no-pdf", "--quiet"]) == 0
    markdown = (out / "tables" / "table9_moon_mu.md").read_text()
    assert "mean of the last 3 rounds" in markdown.splitlines()[0]  # the caption names it
    means = {float(r["mu"]): float(r["mean"]) for r in table_rows(out)}
    # μ = 0: 0.50 at rounds 2 and 4, 0.47 at round 3
    assert means[0.0] == pytest.approx(0.49)
    assert means[5.0] == pytest.approx(0.49 + 0.06)  # point 3; the offsets average out
    report = (out / "report.md").read_text()
    assert "Accuracy: each study's [report] statistic, else top-1 test accuracy (%), mean" in (
        report
    )
    # the explicit final round gives the last row's accuracy
    out2 = tmp_path / "final"
    assert main([str(sweep), "--out", str(out2), "--no-pdf", "--statistic", "final"]) == 0
    assert {float(r["mu"]): float(r["mean"]) for r in table_rows(out2)}[0.0] == pytest.approx(0.5)
    assert "final-round top-1 test accuracy" in (out2 / "tables" / "table9_moon_mu.md").read_text()


def test_the_seed_plan_under_the_table_is_the_hand_computed_one(tmp_path):
    sweep = write_moon_mu(tmp_path / "results", flat_rows)
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--no-pdf", "--quiet"]) == 0
    rows = table_rows(out)
    # sd 1.8 over 3 seeds: resolvable t(2)*1.8/sqrt(3) = 4.303*1.039 = 4.47 points;
    # 2 points need 6 seeds: t(5)*1.8/sqrt(6) = 1.89, t(4)*1.8/sqrt(5) = 2.23
    assert float(rows[0]["resolvable_pct"]) == pytest.approx(4.4717, abs=1e-3)
    assert [r["seeds_to_resolve"] for r in rows] == ["", "6", "6", "6", "6"]
    markdown = (out / "tables" / "table9_moon_mu.md").read_text()
    assert "Seeds to resolve 2 points at 95%: 6 for the table (sd of the paired " in markdown
    assert "per comparison, from its own sd: μ=0.1: 6, μ=1: 6, μ=5: 6, μ=10: 6." in markdown
    # another target: 1 point needs t(n-1)*1.8/sqrt(n) <= 1: n = 15 (t(14) = 2.145:
    # 0.997), not 14 (t(13) = 2.160: 1.039)
    out2 = tmp_path / "one_point"
    assert main([str(sweep), "--out", str(out2), "--no-pdf", "--resolve-target", "1"]) == 0
    assert (
        "Seeds to resolve 1 points at 95%: 15 for the table"
        in (out2 / "tables" / "table9_moon_mu.md").read_text()
    )


def test_val_is_refused_without_validation_before_anything_is_written(tmp_path, capsys):
    sweep = write_moon_mu(tmp_path / "results", flat_rows)
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--statistic", "val"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: --statistic=val: trial moon_mu-fake/")
    assert "recorded no val_acc (run with val_fraction > 0" in line
    assert not out.exists()


def test_val_reports_the_test_accuracy_at_the_best_validation_round(tmp_path):
    def rows_with_validation(point: int, seed: int, config: dict) -> list[dict]:
        # validation peaks at round 2 (measured at rounds 2 and 4 only): round 2's test
        # accuracy is reported, whatever rounds 3 and 4 hold
        tests = [0.2, level(point, seed), 0.9, 0.1]
        vals = [math.nan, 0.8, 0.8, 0.7]
        measured = [0, 2, 2, 4]
        return [
            result_row(config, r, acc, val_acc=v, val_round=m)
            for r, (acc, v, m) in enumerate(zip(tests, vals, measured), 1)
        ]

    sweep = write_moon_mu(tmp_path / "results", rows_with_validation)
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--no-pdf", "--statistic", "val"]) == 0
    means = {float(r["mu"]): float(r["mean"]) for r in table_rows(out)}
    assert means[0.0] == pytest.approx(0.50) and means[10.0] == pytest.approx(0.58)
    caption = (out / "tables" / "table9_moon_mu.md").read_text().splitlines()[0]
    assert "at the round of best validation accuracy" in caption


def test_the_study_files_statistic_is_used_unless_the_user_chose(tmp_path):
    sweep = write_moon_mu(tmp_path / "results", flat_rows, definition_report={"statistic": "final"})
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--no-pdf"]) == 0
    assert {float(r["mu"]): float(r["mean"]) for r in table_rows(out)}[0.0] == pytest.approx(0.5)
    out2 = tmp_path / "chosen"
    assert main([str(sweep), "--out", str(out2), "--no-pdf", "--statistic", "last:3"]) == 0
    assert {float(r["mu"]): float(r["mean"]) for r in table_rows(out2)}[0.0] == pytest.approx(0.49)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--statistic", "median"], "--statistic='median' (allowed: final, last:K"),
        (["--statistic", "last:0"], "--statistic='last:0'"),
        (["--metric", "best", "--statistic", "last:3"], "disagree (give --statistic only)"),
        (["--resolve-target", "0"], "--resolve-target='0' (allowed: accuracy points"),
        (["--resolve-target", "two"], "--resolve-target='two'"),
    ],
)
def test_bad_statistic_options_are_one_line(tmp_path, capsys, options, message):
    sweep = write_moon_mu(tmp_path / "results", flat_rows)
    assert main([str(sweep), "--out", str(tmp_path / "out"), *options]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and message in line


def test_metric_is_the_older_spelling_of_final_and_best(tmp_path):
    sweep = write_moon_mu(tmp_path / "results", flat_rows)
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--no-pdf", "--metric", "final"]) == 0
    assert {float(r["mu"]): float(r["mean"]) for r in table_rows(out)}[0.0] == pytest.approx(0.5)


def test_a_comparison_made_mid_climb_is_warned_about(tmp_path):
    def climbing(point: int, seed: int, config: dict) -> list[dict]:
        # μ = 10 still rises 5 points a round; the others are flat
        rise = 0.05 if point == 4 else 0.0
        top = level(point, seed)
        return [result_row(config, r, top - rise * (ROUNDS - r)) for r in range(1, ROUNDS + 1)]

    sweep = write_moon_mu(tmp_path / "results", climbing)
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--no-pdf", "--statistic", "final"]) == 0
    markdown = (out / "tables" / "table9_moon_mu.md").read_text()
    assert markdown.splitlines()[0].endswith("; ⚠ mid-climb**")
    # the fitted line over rounds 1-4 rises 3 rounds x 5 points; the seeds' sd of the
    # statistic pooled over the cells is 1.6 points (1.8 in the four μ > 0 cells, 0 in μ = 0)
    assert "1 of 5 cells still moved by more than the seeds' sd" in markdown
    assert "over their last 4 rounds (μ=10: +15.0 points)" in markdown
    assert "⚠ Mid-climb comparison" in markdown
    rows = table_rows(out)
    assert {r["converged"] for r in rows} == {"False"}
    assert float(rows[-1]["climb_pct"]) == pytest.approx(15.0)


def test_flat_curves_are_said_to_have_converged(tmp_path):
    def flat(point: int, seed: int, config: dict) -> list[dict]:
        return [result_row(config, r, level(point, seed)) for r in range(1, ROUNDS + 1)]

    sweep = write_moon_mu(tmp_path / "results", flat)
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--no-pdf"]) == 0
    markdown = (out / "tables" / "table9_moon_mu.md").read_text()
    assert "mid-climb" not in markdown
    assert "Converged by the reported round" in markdown


def test_resolvable_differences_is_what_the_report_prints(tmp_path):
    sweep = write_moon_mu(tmp_path / "results", flat_rows)
    got = resolvable_differences(sweep)
    assert list(got) == ["table9_moon_mu"]
    assert got["table9_moon_mu"] == pytest.approx(4.4717, abs=1e-3)
    # the stopping rule: 3 seeds do not resolve 2 points, they do resolve 5
    assert tables_above(got, 2.0) == got
    assert tables_above(got, 5.0) == {}
    # the statistic is the caller's choice, refused as the report refuses it
    assert resolvable_differences(sweep, FINAL)["table9_moon_mu"] == pytest.approx(4.4717, abs=1e-3)
    with pytest.raises(StatisticError, match="val_fraction > 0"):
        resolvable_differences(sweep, parse_statistic("val"))


def test_one_seed_resolves_nothing_yet(tmp_path):
    sweep = write_moon_mu(tmp_path / "results", flat_rows)
    for trial in sweep.iterdir():
        if trial.is_dir() and not trial.name.endswith("seed0"):
            for file in trial.iterdir():
                file.unlink()
            trial.rmdir()
    got = resolvable_differences(sweep)
    assert math.isnan(got["table9_moon_mu"])
    assert tables_above(got, 100.0) == got


def test_a_table_without_a_counted_trial_is_not_resolved(tmp_path):
    """Every trial failed after round 2: the table is there with NaN (the sweep's stopping
    rule must not read a missing table as a resolved one)."""
    sweep = write_moon_mu(tmp_path / "results", lambda p, s, c: flat_rows(p, s, c)[:2])
    for trial in sweep.iterdir():
        if trial.is_dir():
            (trial / "error.txt").write_text("Failure # 1\nRuntimeError: boom\n")
    got = resolvable_differences(sweep)
    assert list(got) == ["table9_moon_mu"] and math.isnan(got["table9_moon_mu"])
    assert tables_above(got, 2.0) == got


@pytest.mark.parametrize(
    "text", ["final", "val", "best", "last:1", "last:3", "last:12", "last:0", "Last:3", "mean"]
)
def test_the_study_file_accepts_exactly_the_statistics_the_report_parses(text):
    """search_spaces names the forms without importing analysis (pandas): the two must
    not drift apart (the study file takes them as written, lower case)."""
    try:
        parse_statistic(text)
        parsed = text == text.strip().lower()
    except StatisticError:
        parsed = False
    assert bool(STATISTIC_FORM.fullmatch(text)) == parsed


def test_a_study_files_bad_statistic_is_one_line():
    data = {
        "name": "s",
        "axes": [{"name": "mu", "values": [0.0, 1.0]}],
        "fixed": {"algorithm": "moon"},
        "report": {"statistic": "last:x"},
    }
    with pytest.raises(StudyFileError) as err:
        study_from_dict(data, "my.toml")
    assert re.search(r"report\.statistic = 'last:x' \(allowed: final, last:K", str(err.value))
