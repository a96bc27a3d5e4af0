"""The report and the sweep's ranking pieces on a score task (image assessment): tables,
Δ, bold, intervals and rounds-to-target on the primary metric (SRCC by default) and on
MAE, where lower is better; a sweep whose trials disagree on the primary metric refused
in one line (analysis/primary_metric.py, docs/reports.md "Score tasks: the primary
metric").  Every expected number is worked out by hand from the fake rows below."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.primary_metric import (
    ACCURACY,
    PrimaryMetricError,
    metrics_of,
    sweep_metric,
    table_metrics,
)
from analysis.reading.loading import load_results
from analysis.report import main, write_report
from analysis.stats.trial_statistic import FINAL, Statistic, trial_values
from analysis.tables.communication import rounds_to_reach
from analysis.tables.resolvable_tables import resolvable_differences
from analysis.tables.study_tables import TableOptions
from federated.tasks.written_before import WRITTEN_BEFORE_THE_CONTRACT
from study.selection import (
    SelectionError,
    best_point,
    mode_of,
    selection_metric,
)
from study.tune.live_view import LiveView
from tests.analysis_fakes import manifest, plan_configs, result_row, write_sweep, write_trial

ROUNDS = 4
T_975_2 = 4.302652729911275  # t(0.975, 2): three seeds
# per seed (0, 1, 2): FedAvg's and MOON's test MAE and SRCC at each round (the last is
# the final); MOON's MAE is lower by (0.05, 0.06, 0.04), its SRCC higher by (0.10, 0.09, 0.11)
MAE = {
    "fedavg": [[0.40, 0.30, 0.25, 0.20], [0.40, 0.30, 0.25, 0.22], [0.40, 0.30, 0.25, 0.21]],
    "moon": [[0.35, 0.19, 0.17, 0.15], [0.35, 0.19, 0.17, 0.16], [0.35, 0.19, 0.17, 0.17]],
}
SRCC = {
    "fedavg": [[0.30, 0.50, 0.60, 0.70], [0.30, 0.50, 0.60, 0.72], [0.30, 0.50, 0.60, 0.74]],
    "moon": [[0.40, 0.60, 0.75, 0.80], [0.40, 0.60, 0.75, 0.81], [0.40, 0.60, 0.76, 0.85]],
}
# each party's own-test-split SRCC at the last round (4 parties: the worst 10% is 1 party)
PARTY_SRCC = {"fedavg": [0.50, 0.70, 0.75, 0.85], "moon": [0.65, 0.80, 0.85, 0.90]}
PARTY_WOBBLE = {0: 0.0, 1: 0.005, 2: -0.005}  # per seed, mean 0


def score_configs(primary: str = "srcc") -> list[dict]:
    """FedAvg and MOON × seeds 0, 1, 2 as a score task's trials record them."""
    configs = []
    for c in plan_configs("comparison", seeds=3):
        if c["algorithm"] in ("fedavg", "moon"):
            configs.append(
                {
                    **c,
                    "rounds": ROUNDS,
                    "dataset": "folder:/data/iqa",
                    "task": "score",
                    "primary_metric": primary,
                }
            )
    return configs


def score_rows(config: dict, binary: str = "bin_acc") -> list[dict]:
    """A score trial's rows: every score metric, validation as on every round;
    ``binary``: the binary accuracy's stem (``acc`` in runs written before it had a
    name of its own)."""
    method, seed = config["algorithm"], config["seed"]
    rows = []
    for r in range(ROUNDS):
        mae, srcc = MAE[method][seed][r], SRCC[method][seed][r]
        metrics = {"mae": mae, "rmse": mae + 0.05, "srcc": srcc, "plcc": srcc - 0.02}
        row = result_row(
            config,
            r + 1,
            0.6 + 0.01 * r,  # the binary accuracy at the threshold
            **{f"test_{k}": v for k, v in metrics.items()},
            **{f"val_{k}": v for k, v in metrics.items()},
            **{f"val_{binary}": 0.6},
            val_loss=mae,
            val_round=r + 1,
        )
        row[f"test_{binary}"] = row.pop("test_acc")
        rows.append(row)
    return rows


def write_score_sweep(
    root: Path,
    configs: list[dict],
    name: str = "iqa-score",
    binary: str = "bin_acc",
    **manifest_fields,
) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    info = manifest(name, "comparison", n_trials=len(configs), seeds=[0, 1, 2], **manifest_fields)
    (folder / "fedsweep_sweep.json").write_text(json.dumps(info))
    for i, config in enumerate(configs):
        trial = write_trial(folder, i, config, [], rows=score_rows(config, binary))
        srcc = PARTY_SRCC[config["algorithm"]]
        # MOON's seeds wobble about their mean: its per-seed differences to FedAvg vary
        # (equal ones would be not resolvable from the seeds, no interval to show)
        wobble = PARTY_WOBBLE[config["seed"]] if config["algorithm"] == "moon" else 0.0
        pd.DataFrame(
            {
                "round": ROUNDS,
                "party": range(4),
                f"party_{binary}": 0.6,
                "party_samples": 50,
                "party_test_samples": 10,
                "party_test_srcc": [v + 0.01 * config["seed"] + wobble for v in srcc],
                "party_test_mae": 0.2,
            }
        ).to_csv(trial / "parties.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("score")
    write_score_sweep(root / "results", score_configs())
    out = root / "report"
    results = load_results(root / "results")
    write_report(results, out, TableOptions(statistic=FINAL), formats=("png",))
    return out


def cells(out: Path, name: str) -> dict[str, dict[str, str]]:
    with (out / "tables" / f"{name}.csv").open() as fh:
        return {row["row"]: row for row in csv.DictReader(fh)}


def markdown(out: Path, name: str) -> str:
    return (out / "tables" / f"{name}.md").read_text()


# ------------------------------------------------------------------------- the metrics
def test_the_reports_metrics_are_the_engines_tasks_metrics():
    from federated.registry import load_method

    # the report reads each task's declaration, the very one the engine's task holds
    for task in ("classification", "score", "detection", "segmentation"):
        engine = load_method("task", task)
        assert engine.task_spec().to_dict()["name"] == task
        stems = tuple(spec.stem for spec in engine.metrics)
        assert set(stems) <= set(engine.recorded_stems())
        if task != "segmentation":  # no folder written before the contract holds it
            assert tuple(metrics_of(WRITTEN_BEFORE_THE_CONTRACT[task])) == stems
    SCORE_METRICS = metrics_of(WRITTEN_BEFORE_THE_CONTRACT["score"])
    lower = {m.stem for m in SCORE_METRICS.values() if not m.higher_is_better}
    assert lower == {"mae", "rmse"}
    assert table_metrics(SCORE_METRICS["srcc"]) == [SCORE_METRICS["srcc"], SCORE_METRICS["mae"]]
    assert table_metrics(SCORE_METRICS["mae"]) == [SCORE_METRICS["mae"], SCORE_METRICS["srcc"]]
    assert table_metrics(ACCURACY) == [ACCURACY]


def test_an_older_score_sweeps_acc_columns_read_as_bin_acc(tmp_path):
    """A score sweep written before the binary accuracy had its own name (``test_acc``,
    ``val_acc``, parties.csv's ``party_acc``, ``primary_metric = "acc"``, ranked on
    ``val_acc``) reads exactly as the same sweep written today (``bin_acc``), and its
    report's tables on the binary accuracy are byte-identical."""
    from analysis.tables.party_tables import party_frame

    loaded, tables = {}, {}
    for era, binary in (("old", "acc"), ("new", "bin_acc")):
        write_score_sweep(
            tmp_path / era, score_configs(binary), binary=binary, metric=f"val_{binary}"
        )
        loaded[era] = results = load_results(tmp_path / era)
        out = write_report(
            results, tmp_path / f"{era}-report", TableOptions(statistic=FINAL), formats=("png",)
        ).parent
        tables[era] = {p.name: p.read_bytes() for p in sorted((out / "tables").iterdir())}
    old, new = loaded["old"], loaded["new"]
    # the loader's test_acc column (every frame has one) holds no score value
    assert old.rounds["test_acc"].isna().all() and "val_acc" not in old.rounds
    assert list(old.rounds["test_bin_acc"].iloc[:ROUNDS]) == [0.6, 0.61, 0.62, 0.63]
    pd.testing.assert_frame_equal(old.rounds, new.rounds)
    pd.testing.assert_frame_equal(old.trials, new.trials)
    assert set(old.trials["primary_metric"]) == {"bin_acc"}
    assert old.sweeps[0].manifest["metric"] == "val_bin_acc"
    pd.testing.assert_frame_equal(party_frame(old), party_frame(new))
    assert "party_bin_acc" in party_frame(old)
    assert (
        sweep_metric(old.trials, "old")
        == metrics_of(WRITTEN_BEFORE_THE_CONTRACT["score"])["bin_acc"]
    )
    assert "table1_comparison.csv" in tables["new"] and tables["old"] == tables["new"]
    # a classification sweep's acc is never renamed
    config = {**plan_configs("comparison", seeds=1)[0], "rounds": 2, "task": "classification"}
    cls = write_sweep(tmp_path, "cls", "comparison", [(config, [0.5, 0.6])])
    classification = load_results(cls)
    assert list(classification.rounds["test_acc"]) == [0.5, 0.6]
    assert "test_bin_acc" not in classification.rounds


def test_older_rows_without_task_columns_are_classification_accuracy():
    trials = pd.DataFrame({"status": ["completed"] * 2, "algorithm": ["fedavg", "moon"]})
    assert sweep_metric(trials, "old") == ACCURACY


def test_the_statistic_picks_rounds_in_the_metrics_direction():
    rows = pd.DataFrame(
        {
            "sweep": "s",
            "trial": "t",
            "round": [1, 2, 3],
            "test_mae": [0.30, 0.10, 0.20],
            "val_mae": [0.25, 0.12, 0.05],
            "val_round": [1, 2, 3],
        }
    )
    mae = metrics_of(WRITTEN_BEFORE_THE_CONTRACT["score"])["mae"]

    def value(statistic: Statistic) -> float:
        return float(trial_values(rows, statistic, metric=mae).loc[("s", "t"), "value"])

    assert value(Statistic("best")) == pytest.approx(0.10)  # the lowest error
    assert value(Statistic("val")) == pytest.approx(0.20)  # round 3: the lowest val_mae
    assert value(Statistic("last", 2)) == pytest.approx(0.15)


def test_an_error_is_reached_from_above():
    assert rounds_to_reach([1, 2, 3], [0.30, 0.20, 0.10], 0.2, higher_is_better=False) == 2
    assert rounds_to_reach([1, 2, 3], [0.30, 0.25, math.nan], 0.2, higher_is_better=False) is None
    assert rounds_to_reach([1, 2, 3], [0.1, 0.2, 0.3], 0.2) == 2  # accuracy: from below


# ------------------------------------------------------------------------ the report
def test_the_srcc_table_claims_moon_better_with_an_interval_worked_by_hand(report):
    rows = cells(report, "table1_comparison")
    moon, fedavg = rows["MOON"], rows["FedAvg"]
    # paired differences 0.10, 0.09, 0.11: mean 0.10, sd 0.01
    half = T_975_2 * 0.01 / math.sqrt(3)
    assert float(moon["delta"]) == pytest.approx(0.10, abs=1e-4)
    assert float(moon["delta_low"]) == pytest.approx(0.10 - half, abs=1e-4)
    assert float(moon["delta_high"]) == pytest.approx(0.10 + half, abs=1e-4)
    assert moon["delta_claim"] == "better" and moon["best"] == "True"
    assert fedavg["delta_kind"] == "reference" and fedavg["best"] == "False"
    assert moon["metric"] == "srcc" and "mean_pct" not in moon and "delta_pct" not in moon
    text = markdown(report, "table1_comparison")
    assert "final-round test SRCC" in text
    assert "**0.820 ± 0.026 · Δ +0.100 [+0.075, +0.125] ↑**" in text
    assert f"resolvable ≈ {half:.3f} SRCC (95%, 3 seeds)" in text
    assert "chance" not in text


def test_the_mae_table_bolds_the_lower_error_and_its_delta_is_negative(report):
    rows = cells(report, "table1_comparison_mae")
    moon = rows["MOON"]
    # paired differences -0.05, -0.06, -0.04: a lower MAE, better
    half = T_975_2 * 0.01 / math.sqrt(3)
    assert float(moon["delta"]) == pytest.approx(-0.05, abs=1e-4)
    assert float(moon["delta_low"]) == pytest.approx(-0.05 - half, abs=1e-4)
    assert float(moon["delta_high"]) == pytest.approx(-0.05 + half, abs=1e-4)
    assert float(moon["mean"]) == pytest.approx(0.16)
    assert moon["delta_claim"] == "better" and moon["best"] == "True"
    assert rows["FedAvg"]["best"] == "False"
    text = markdown(report, "table1_comparison_mae")
    assert "Table 1 — methods compared: final-round test MAE" in text
    assert "| MOON | **0.160 ± 0.010 · Δ -0.050 [-0.075, -0.025] ↑** |" in text
    assert "| FedAvg | 0.210 ± 0.010 (ref.) |" in text
    assert "(↑ = a lower MAE)" in text and "Bold: the best (the lowest MAE)" in text
    assert "Seeds to resolve 0.02 MAE at 95%" in text  # --resolve-target 2 = 0.02


def test_rounds_to_target_on_the_error_and_on_the_correlation(report):
    mae = markdown(report, "table2_communication_mae")
    # FedAvg's final MAE (0.20, 0.22, 0.21) is first reached by MOON's 0.19 at round 2
    assert "rounds to reach FedAvg's final test MAE" in mae
    assert "| MOON | 2 | 2.0× |" in mae
    assert "first round with test MAE ≤ target" in mae and "chance" not in mae
    srcc = markdown(report, "table2_communication")
    # FedAvg's final SRCC (0.70 .. 0.74) is first reached by MOON's 0.75 / 0.76 at round 3
    assert "| MOON | 3 | 1.3× |" in srcc
    assert "first round with test SRCC ≥ target" in srcc


def test_report_md_names_the_metrics_and_has_per_party_srcc(report):
    text = (report / "report.md").read_text()
    assert "Reported: final-round test SRCC (tables again on test MAE)." in text
    assert "Score tasks (image assessment) report their primary metric" in text
    with (report / "tables" / "per_party_comparison.csv").open() as fh:
        party = {(r["row"], r["party_metric"]): r for r in csv.DictReader(fh)}
    # MOON's parties: 0.65, 0.80, 0.85, 0.90 (+ 0.01 · seed); the worst 10% of 4 parties
    # is the one lowest SRCC
    assert float(party["MOON", "worst 10% of parties"]["mean"]) == pytest.approx(0.66)
    assert float(party["MOON", "mean over parties"]["mean"]) == pytest.approx(0.81)
    assert float(party["FedAvg", "worst 10% of parties"]["mean"]) == pytest.approx(0.51)
    table = markdown(report, "per_party_comparison")
    assert "Per-party SRCC of the global model on each party's own test split" in table
    assert "own held-out local test split" in table
    assert "Seeds to resolve 0.02 SRCC" in table
    assert (report / "figures" / "fig_comparison_curves.png").is_file()
    assert (report / "figures" / "fig_comparison_per_party.png").is_file()


def test_the_report_wording_follows_the_primary_metric(report):
    """A score report reads its numbers in its metric's words (issue 42 item 7): no
    "Accuracies are percentages", the metric's name where accuracy stood."""
    text = (report / "report.md").read_text()
    assert "Accuracies are" not in text
    assert (
        "Trials stopped early by ASHA appear only in the Optuna search history (with the "
        "SRCC they had when stopped). Values are on the test set (the fraction evaluated by "
        "the budget): test SRCC. Score tasks (image assessment) report their primary metric" in text
    )
    assert "| `iqa-score` | comparison (Table 1, Fig. 6) | grid |" in text
    assert "where trials recorded per-party values (SRCC)." in text


def test_seed_stopping_reads_score_tables_in_hundredths_of_the_scale(tmp_path):
    write_score_sweep(tmp_path, score_configs())
    resolvable = resolvable_differences(tmp_path, FINAL)
    half = T_975_2 * 0.01 / math.sqrt(3)
    assert resolvable["table1_comparison"] == pytest.approx(100 * half)
    assert resolvable["table1_comparison_mae"] == pytest.approx(100 * half)


def test_a_score_trial_with_a_non_numeric_metric_is_damaged_not_completed(tmp_path):
    """``test_srcc='abc'`` in a score trial's last row: the trial is damaged (named with
    the line and the value), never counted as completed; the rest of the report holds."""
    folder = write_score_sweep(tmp_path / "results", score_configs())
    trial = sorted(p for p in folder.iterdir() if p.is_dir())[0]
    rows = [json.loads(line) for line in (trial / "result.json").open()]
    rows[-1]["test_srcc"] = "abc"
    (trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "report"
    assert main([str(tmp_path / "results"), "--out", str(out), "--no-pdf", "--quiet"]) == 0
    results = load_results(tmp_path / "results")
    status = dict(zip(results.trials["trial"], results.trials["status"]))
    assert status.pop(trial.name) == "damaged" and set(status.values()) == {"completed"}
    text = (out / "report.md").read_text()
    words = f"line {ROUNDS} of result.json: test_srcc='abc' is not a number"
    not_counted = text.split("## Trials not counted", 1)[1].split("\n## ", 1)[0]
    assert trial.name in not_counted and words in not_counted
    assert f"- iqa-score/{trial.name}: damaged: {words}" in text  # Problems while reading
    assert "(n=2)" in (out / "tables" / "table1_comparison.md").read_text()


def test_a_sweep_mixing_primary_metrics_is_refused_in_one_line(tmp_path, capsys):
    configs = score_configs()
    configs[0]["primary_metric"] = "mae"
    write_score_sweep(tmp_path / "results", configs)
    code = main([str(tmp_path / "results"), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "record different primary metrics (score mae: 1 trial(s), score srcc: 5" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(PrimaryMetricError):
        sweep_metric(load_results(tmp_path / "results").trials, "here")


def test_val_on_a_score_sweep_without_validation_is_refused(tmp_path, capsys):
    folder = write_score_sweep(tmp_path / "results", score_configs())
    for trial in folder.iterdir():
        if trial.is_dir():
            rows = [json.loads(line) for line in (trial / "result.json").open()]
            for row in rows:
                for key in [k for k in row if k.startswith("val_")]:
                    del row[key]
            (trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main([str(tmp_path / "results"), "--statistic", "val", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "recorded no val_srcc" in err


# ----------------------------------------------------------- the sweep's ranking pieces
def test_a_score_sweep_ranks_by_its_primary_validation_metric():
    assert selection_metric(None, "score", "srcc") == "val_srcc"
    assert selection_metric(None, "score", "mae") == "val_mae"
    assert selection_metric(None, "classification", "acc") == "val_acc"
    # the direction is the task's declaration, asked of the task the trials name
    assert mode_of("val_mae", "score") == mode_of("test_rmse", "score") == "min"
    assert mode_of("val_srcc", "score") == mode_of("test_acc", "classification") == "max"
    assert mode_of("val_loss", "classification") == "min"
    with pytest.raises(SelectionError) as err:
        selection_metric("val_srcc", "classification", "acc")
    assert str(err.value) == (
        "--metric='val_srcc': a classification sweep's trials record no val_srcc "
        "(allowed: val_acc, val_loss)"
    )
    # the point with the lowest mean val_mae is chosen
    trials = [("a", {}, {"val_mae": 0.3}), ("b", {}, {"val_mae": 0.1}), ("a", {}, {"val_mae": 0.2})]
    assert best_point(trials, "val_mae", "score")[:2] == ("b", pytest.approx(0.1))


def test_the_live_view_shows_the_best_primary_metric():
    def trial(i: int, status: str, mae: float) -> SimpleNamespace:
        result = {"round": 2, "test_mae": mae, "test_acc": 0.5}
        return SimpleNamespace(
            trial_id=f"t{i}", status=status, config={"seed": i}, last_result=result
        )

    view = LiveView("iqa", 3, 4, ["seed"], primary="mae", task="score")
    lines = view.lines([trial(0, "TERMINATED", 0.2), trial(1, "RUNNING", 0.15)], 10.0)
    assert "best test_mae 0.1500" in lines[0]  # the lowest error
    assert lines[1].endswith("round   2/4  test_mae 0.1500")
    ranked = LiveView("iqa", 3, 4, ["seed"], metric="val_srcc", primary="srcc")
    row = SimpleNamespace(
        trial_id="t", status="RUNNING", config={}, last_result={"round": 1, "val_srcc": 0.7}
    )
    assert "best val_srcc 0.7000" in ranked.lines([row], 1.0)[0]
