"""The report for a study it has never seen (a user's study file, an ad hoc --vary),
on hand-made results whose accuracies are known: one cell per combination of the axes,
the last axis as columns, a heat-map over two numeric axes, the communication table
when ``algorithm`` is an axis."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from analysis.reading.loading import load_results
from analysis.report import write_report
from analysis.stats.trial_statistic import FINAL
from analysis.tables.study_tables import TableOptions
from search_spaces import BUDGETS
from search_spaces.adhoc import adhoc_study
from search_spaces.study_file import load_study_file, study_to_dict
from study.plan import SweepPlan
from tests.analysis_fakes import curve, write_sweep

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mu_by_beta.toml"


def fake_sweep(root: Path, study, accuracy, seeds: int = 2, **overrides) -> Path:
    """A finished grid sweep of ``study`` whose trial accuracies are ``accuracy(config)``."""
    plan = SweepPlan.build(study, BUDGETS["smoke"], seeds=str(seeds), overrides=overrides)
    trials = [(t.config, curve(accuracy(t.config), 4)) for t in plan.trials()]
    for config, _ in trials:
        config["rounds"] = 4
    return write_sweep(
        root,
        f"{study.name}-fake",
        study.name,
        trials,
        seeds=plan.seeds,
        axes=[a.name for a in study.axes],
        definition=study_to_dict(study),
        paper=study.paper,
    )


def mu_beta_accuracy(config) -> float:
    return 0.5 + 0.1 * config["mu"] / 5 + config["beta"] / 10 + 0.01 * config["seed"]


def test_two_axes_give_one_cell_per_combination_and_a_heatmap(tmp_path):
    study = load_study_file(EXAMPLE)
    fake_sweep(tmp_path / "results", study, mu_beta_accuracy)
    out = tmp_path / "report"
    final = TableOptions(statistic=FINAL)  # the fakes set each trial's final accuracy
    write_report(load_results([str(tmp_path / "results")]), out, final, formats=("png",))
    rows = list(csv.DictReader((out / "tables" / "mu_by_beta_accuracy.csv").open()))
    cells = {(float(r["mu"]), float(r["beta"])): (float(r["mean"]), int(r["n"])) for r in rows}
    assert set(cells) == {(mu, beta) for mu in (0.1, 5.0) for beta in (0.1, 0.5)}
    assert {r["column"] for r in rows} == {"β=0.1", "β=0.5"}  # the last axis as columns
    for (mu, beta), (mean, n) in cells.items():
        expected = 0.5 + 0.1 * mu / 5 + beta / 10 + 0.005  # seeds 0 and 1
        assert mean == pytest.approx(expected) and n == 2
    markdown = (out / "tables" / "mu_by_beta_accuracy.md").read_text()
    assert "Table 4 x Table 9" in markdown
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {
        "fig_mu_by_beta_curves.png",
        "fig_mu_by_beta_sensitivity.png",
        "fig_mu_by_beta_heatmap.png",
    } <= figures
    report = (out / "report.md").read_text()
    assert "No paper shape known for this study" in report


def test_algorithm_as_an_axis_adds_the_communication_table(tmp_path):
    study = adhoc_study(["algorithm=fedavg,moon,fedprox", "beta=0.1,0.5"], "methods_by_beta")
    quality = {"fedavg": 0.5, "fedprox": 0.55, "moon": 0.6}
    fake_sweep(tmp_path / "results", study, lambda c: quality[c["algorithm"]] + c["beta"] / 10)
    out = tmp_path / "report"
    write_report(load_results([str(tmp_path / "results")]), out, formats=("png",))
    tables = {p.stem for p in (out / "tables").glob("*.csv")}
    assert {"methods_by_beta_accuracy", "methods_by_beta_communication"} <= tables
    text = (out / "tables" / "methods_by_beta_communication.md").read_text()
    assert "speed-up" in text and "MOON" in text
    # algorithm is not numeric: no heat-map
    assert not list((out / "figures").glob("fig_methods_by_beta_heatmap*"))


def test_a_study_without_a_paper_has_no_empty_parentheses(tmp_path):
    """A user's own study reproduces no paper table: its runs row and the reproduction
    list name the study alone (issue 42 item 7: it read ``raters ()``), and the
    classification wording stays the report's own."""
    study = adhoc_study(["mu=0,1"], "raters")
    fake_sweep(tmp_path / "results", study, lambda c: 0.5 + 0.1 * c["mu"] + 0.01 * c["seed"])
    out = tmp_path / "report"
    final = TableOptions(statistic=FINAL)
    write_report(load_results([str(tmp_path / "results")]), out, final, formats=("png",))
    report = (out / "report.md").read_text()
    assert "| `raters-fake` | raters | grid |" in report
    assert "- `raters`: a generic accuracy table" in report
    assert "()" not in report
    assert (
        "Trials stopped early by ASHA appear only in the Optuna search history (with the "
        "accuracy they had when stopped). Accuracies are percentages of the test set (the "
        "fraction evaluated by the budget).\n" in report
    )
    assert "(No paper shape known for this study: varied parameters vs accuracy.)" in report


def test_defect_12_a_method_scored_every_few_rounds_is_counted_as_a_bound(tmp_path):
    """A personalised method's own models scored on the test set every 2nd round (NaN
    rows between, as ``personal_test_every = 2`` writes them): the communication table
    counts it by its first scored round that reaches the target (at most that round, a
    speed-up at least that), says so; before, it was left out ("not counted") and the
    table held FedAvg and MOON only (report issue, defect 12)."""
    nan = float("nan")
    curves = {
        "fedavg": [0.2, 0.4, 0.5, 0.5],
        "moon": [0.3, 0.5, 0.6, 0.6],
        "lg-fedavg": [nan, 0.6, nan, 0.7],
    }
    out = _methods_report(tmp_path, curves)
    text = (out / "tables" / "methods_communication.md").read_text()
    assert (
        "≤ / ≥: LG-FedAvg — its own models were scored on the test set every few "
        "rounds (personal_test_every = 2), not every round: #rounds is its first scored "
        "round that reached the target" in text
    )
    # FedAvg reaches its own final 0.5 at round 3 (one rule for every row): 3 / 2
    assert "| LG-FedAvg | ≤ 2 | ≥ 1.5× |" in text
    rows = list(csv.DictReader((out / "tables" / "methods_communication.csv").open()))
    assert {r["algorithm"] for r in rows} == {"fedavg", "moon", "lg-fedavg"}
    lg = next(r for r in rows if r["algorithm"] == "lg-fedavg")
    assert lg["rounds_needed"] == "2.0" and lg["at_most"] == "True"


def test_no_bound_is_explained_where_the_baseline_learned_nothing(tmp_path):
    """A writer-block study whose FedAvg ended at 15% (below chance + 10 points): every
    cell reads "no target", so the note on LG-FedAvg's bounded rounds ("its speed-up ...
    is at least the one given") explained a number no cell shows (issue 68, point 11)."""
    nan = float("nan")
    curves = {
        "fedavg": [0.1, 0.12, 0.15, 0.15],
        "moon": [0.1, 0.12, 0.16, 0.16],
        "lg-fedavg": [nan, 0.16, nan, 0.2],
    }
    text = (_methods_report(tmp_path, curves) / "tables" / "methods_communication.md").read_text()
    assert "| LG-FedAvg | no target: FedAvg 15.0% < chance 10% + 10 |" in text
    assert "≤ / ≥" not in text and "at least the one given" not in text


def _methods_report(tmp_path, curves):
    """The report folder of a one-seed FedAvg, MOON, LG-FedAvg study of 4 rounds with
    ``curves`` (test accuracy per round), LG-FedAvg scored every 2nd round."""
    study = adhoc_study(["algorithm=fedavg,moon,lg-fedavg"], "methods")
    plan = SweepPlan.build(study, BUDGETS["smoke"], seeds="1", overrides={})
    trials = []
    for trial in plan.trials():
        config = {**trial.config, "rounds": 4}
        if config["algorithm"] == "lg-fedavg":
            config["personal_test_every"] = 2
        trials.append((config, curves[config["algorithm"]]))
    write_sweep(
        tmp_path / "results",
        "methods-fake",
        study.name,
        trials,
        seeds=plan.seeds,
        axes=["algorithm"],
        definition=study_to_dict(study),
    )
    out = tmp_path / "report"
    write_report(load_results([str(tmp_path / "results")]), out, formats=("png",))
    return out


def test_a_one_cell_table_compares_nothing_and_says_nothing_of_it(tmp_path):
    """One point over two seeds (a grid of one value, an Optuna search that proposed one
    point): its table has a single cell, so no Δ caption, no bold rule and no
    "Resolvable ≈" (issue 68, point 4)."""
    study = adhoc_study(["lr=0.01"], "one")
    plan = SweepPlan.build(study, BUDGETS["smoke"], seeds="2", overrides={})
    trials = [({**t.config, "rounds": 3}, curve(0.5 + 0.02 * t.seed, 3)) for t in plan.trials()]
    write_sweep(
        tmp_path / "results",
        "one-fake",
        study.name,
        trials,
        seeds=plan.seeds,
        axes=["lr"],
        definition=study_to_dict(study),
    )
    out = tmp_path / "report"
    write_report(load_results([str(tmp_path / "results")]), out, formats=("png",))
    tables = [p for p in (out / "tables").glob("*.md")]
    text = "\n".join(p.read_text() for p in tables)
    assert "| 0.01 |" in text and "±" in text  # the cell is there, mean ± std
    assert "Δ =" not in text and "Resolvable ≈" not in text and "resolvable ≈" not in text
    assert "Bold: the best" not in text


JOINT_METHODS = """
name = "joint_methods"
dataset = "fmnist"
seeds = 2
[[axes]]
name = "method"
[axes.joint]
"FedAvg" = { algorithm = "fedavg" }
"MOON" = { algorithm = "moon" }
"FedAvg+FT" = { algorithm = "fedavg", finetune_epochs = 1 }
[report]
table = { kind = "generic" }
"""


def test_a_joint_method_axis_gets_the_rounds_to_target_table(tmp_path):
    """The form docs/reports.md shows (methods, FedAvg+FT among them, on one joint axis)
    had no rounds-to-target table and no word why (issue 68, point 5): methods that vary
    get it on any axis that names them; FedAvg+FT's identical curve reads 1.0×."""
    path = tmp_path / "joint.toml"
    path.write_text(JOINT_METHODS)
    study = load_study_file(path)
    plan = SweepPlan.build(study, BUDGETS["smoke"], seeds="2", overrides={})
    finals = {"FedAvg": 0.5, "MOON": 0.9, "FedAvg+FT": 0.5}
    trials = [
        ({**t.config, "rounds": 3}, curve(finals[t.config["method"]], 3)) for t in plan.trials()
    ]
    write_sweep(
        tmp_path / "results",
        "joint-fake",
        study.name,
        trials,
        seeds=plan.seeds,
        axes=["method"],
        definition=study_to_dict(study),
    )
    out = tmp_path / "report"
    write_report(load_results([str(tmp_path / "results")]), out, formats=("png",))
    text = (out / "tables" / "joint_methods_communication.md").read_text()
    assert "| FedAvg+FT (1 epoch) | 3 | 1.0× |" in text
    assert "| MOON | 2 | 1.5× |" in text
