"""Every study (search_spaces/catalog.py) gets its paper table shape, from hand-made results whose
configs are the real studies' (smoke budget, 2 seeds) and whose accuracies are known."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.reading.grouping import study_groups
from analysis.reading.loading import load_results
from analysis.stats.trial_statistic import BEST, FINAL
from analysis.tables.study_tables import SHAPES, TableOptions, study_tables
from search_spaces import STUDIES
from tests.analysis_fakes import curve, plan_configs, write_sweep

SEED_STEP = 0.01
# each point's seeds lie a little further apart than the previous point's: the paired
# differences of two points then vary over seeds (equal ones would give a zero-width
# interval, which the tables call not resolvable from the seeds)
SPREAD_STEP = 0.001


def final_acc(index: int, seed: int) -> float:
    """Grid point ``index`` (plan order) and ``seed`` -> a distinct final accuracy."""
    return 0.30 + 0.01 * index + (SEED_STEP + SPREAD_STEP * index) * seed


def mean_std(index: int) -> str:
    """A two-seed cell's ``mean ± std`` (percent, one decimal) of grid point ``index``."""
    a, b = final_acc(index, 0), final_acc(index, 1)
    return f"{100 * (a + b) / 2:.1f} ± {100 * abs(b - a) / math.sqrt(2):.1f}"


def fake_study(root, study: str, seeds: int = 2, **changes):
    configs = plan_configs(study, seeds=seeds)
    points = list(dict.fromkeys(c["point"] for c in configs))
    trials = []
    for c in configs:
        c.update(changes)
        acc = final_acc(points.index(c["point"]), c["seed"])
        trials.append((c, curve(acc, c["rounds"])))
    write_sweep(root, f"{study}-fake", study, trials, seeds=list(range(seeds)))
    return points


def tables_of(root, options: TableOptions | None = None) -> dict[str, object]:
    """The study's tables; by default of the final round's accuracy, which the fakes set
    (tests/test_analysis_statistic_report.py holds the other statistics)."""
    (group,) = study_groups(load_results(root))
    return {t.name: t for t in study_tables(group, options or TableOptions(statistic=FINAL))}


def test_every_design_study_names_a_table_shape_in_its_file():
    kinds = {name: s.report["table"]["kind"] for name, s in STUDIES.items()}
    assert set(kinds.values()) <= set(SHAPES)
    # every MOON-paper study has its paper shape; the heterogeneity studies of other
    # papers (FedProx's Fig. 1, NIID-Bench) are figures there: axes as columns here
    moon_paper = {n for n, s in STUDIES.items() if s.paper.startswith(("Table", "Fig"))}
    assert "generic" not in {kinds[n] for n in moon_paper}
    assert kinds["system_heterogeneity"] == kinds["feature_skew"] == "generic"


def test_comparison_gives_table1_and_table2(tmp_path):
    fake_study(tmp_path, "comparison")
    tables = tables_of(tmp_path)
    t1, t2 = tables["table1_comparison"], tables["table2_communication"]
    assert t1.row_labels == ["FedAvg", "FedProx", "MOON", "SCAFFOLD", "SOLO"]
    assert t1.column_labels == ["Fashion-MNIST"]
    # point 2 is MOON: 0.32 and 0.332 over seeds 0 and 1, 2.0 and 2.2 points above
    # FedAvg's 0.30 and 0.31: mean 2.1, sd 0.1414, half-width t(0.975, 1) 12.706 · 0.1414
    # / √2 = 1.27
    assert t1.display.loc["MOON", "Fashion-MNIST"] == "32.6 ± 0.8 · Δ +2.1 [+0.8, +3.4] ↑"
    assert t1.display.loc["FedAvg", "Fashion-MNIST"] == f"{mean_std(0)} (ref.)"
    assert t1.bold["Fashion-MNIST"].tolist() == [False, False, False, False, True]
    # the four Δ cells' sds, 0.0707 · (1, 2, 3, 4), pooled: 0.1936; 12.706 · 0.1936 / √2
    assert "resolvable ≈ 1.7 points (95%, 2 seeds)" in t1.title
    assert t2.column_labels == [("Fashion-MNIST", "#rounds"), ("Fashion-MNIST", "speed-up")]
    assert t2.display.loc["FedAvg", ("Fashion-MNIST", "speed-up")] == "1.0×"
    # every curve starts at 0.1 and rises to its final value in 2 rounds: the others end
    # higher than FedAvg, so they reach its final accuracy only at round 2 (1.0×)
    assert t2.display.loc["MOON", ("Fashion-MNIST", "#rounds")] == "2"
    assert "SOLO" not in t2.row_labels  # no communication, as in the paper's Table 2


def test_comparison_columns_and_metric_are_options(tmp_path):
    fake_study(tmp_path, "comparison")
    options = TableOptions(statistic=BEST, column="model")
    t1 = tables_of(tmp_path, options)["table1_comparison"]
    assert t1.column_labels == ["model=simple-cnn"]
    assert "best top-1 test accuracy over rounds" in t1.title


def test_comparison_with_another_baseline(tmp_path):
    fake_study(tmp_path, "comparison")
    t2 = tables_of(tmp_path, TableOptions(baseline="moon"))["table2_communication"]
    assert t2.display.loc["MOON", ("Fashion-MNIST", "speed-up")] == "1.0×"
    assert t2.display.loc["FedAvg", ("Fashion-MNIST", "speed-up")] == "<1×"
    # the accuracy table's baseline follows the option too
    t1 = tables_of(tmp_path, TableOptions(baseline="moon"))["table1_comparison"]
    assert t1.display.loc["MOON", "Fashion-MNIST"].endswith("(ref.)")


@pytest.mark.parametrize(
    ("study", "name", "rows"),
    [
        ("moon_mu", "table9_moon_mu", ["0", "0.1", "1", "5", "10"]),
        ("fedprox_mu", "fedprox_mu", ["0.001", "0.01", "0.1", "1"]),
        ("temperature", "fig11a_temperature", ["0.1", "0.5", "1"]),
        ("out_dim", "fig11b_out_dim", ["64", "128", "256"]),
        (
            "iid",
            "table8_iid",
            ["FedAvg (μ=0)", "MOON μ=0.1", "MOON μ=1", "MOON μ=5", "MOON μ=10"],
        ),
    ],
)
def test_one_parameter_studies(tmp_path, study, name, rows):
    points = fake_study(tmp_path, study)
    table = tables_of(tmp_path)[name]
    assert table.row_labels == rows
    assert table.column_labels == ["Fashion-MNIST"]
    assert table.display.iloc[-1, 0].startswith(f"{mean_std(len(points) - 1)} · Δ +")
    assert table.display.iloc[0, 0].endswith("(ref.)")  # the study's first value
    assert table.bold.iloc[-1, 0] and table.bold.sum().sum() == 1


def test_local_epochs_is_methods_by_epochs(tmp_path):
    fake_study(tmp_path, "local_epochs")
    table = tables_of(tmp_path)["fig7_local_epochs"]
    assert table.row_labels == ["MOON", "FedAvg", "FedProx", "SCAFFOLD"]
    assert table.column_labels == ["E=1", "E=5", "E=10", "E=20", "E=40"]


def test_heterogeneity_is_table4(tmp_path):
    fake_study(tmp_path, "heterogeneity")
    table = tables_of(tmp_path)["table4_heterogeneity"]
    assert table.row_labels == ["MOON", "FedAvg", "FedProx", "SCAFFOLD", "SOLO"]
    assert table.column_labels == ["β=0.1", "β=0.5", "β=5"]


def test_parties_is_table3_at_half_and_all_rounds(tmp_path):
    fake_study(tmp_path, "parties", rounds=4)
    table = tables_of(tmp_path)["table3_parties"]
    assert table.row_labels == [
        "MOON (mu=1)",
        "MOON (mu=10)",
        "FedAvg",
        "FedProx",
        "SCAFFOLD",
        "SOLO",
    ]
    settings = ["N=10", "N=50", "N=100, 20% per round"]
    assert table.column_labels == [(s, f"{r} rounds") for s in settings for r in (2, 4)]
    # FedAvg at N=10 is grid point 2; its curve 0.1 -> final over 4 rounds
    final = final_acc(2, 0), final_acc(2, 1)
    at_half = [0.1 + (f - 0.1) / 3 for f in final]  # round 2 of 4
    assert table.display.loc["FedAvg", ("N=10", "2 rounds")].startswith(
        f"{100 * sum(at_half) / 2:.1f} ± "
    )
    assert table.display.loc["FedAvg", ("N=10", "4 rounds")] == (f"{mean_std(2)} (ref.)")


def test_loss_ablation_is_table5_with_the_best_l2_mu(tmp_path):
    fake_study(tmp_path, "loss_ablation")
    tables = tables_of(tmp_path)
    best = tables["table5_loss_ablation"]
    assert best.row_labels == ["none (FedAvg)", "ℓ2 (best μ)", "MOON"]
    # the l2 points are 1..6 (mu 0.001 ... 10); the last (mu=10) has the highest accuracy
    assert "(μ=10) · Δ" in best.display.loc["ℓ2 (best μ)", "Fashion-MNIST"]
    assert len(tables["table5_loss_ablation_all"].row_labels) == 8


def test_projection_head_is_table7(tmp_path):
    fake_study(tmp_path, "projection_head")
    table = tables_of(tmp_path)["table7_projection_head"]
    assert len(table.row_labels) == 10
    assert table.row_labels[0] == "with head · MOON"
    assert table.row_labels[5] == "without head · MOON"


def test_negatives_is_table12_with_the_best_mu_per_k(tmp_path):
    fake_study(tmp_path, "negatives")
    tables = tables_of(tmp_path)
    best = tables["table12_negatives"]
    assert best.row_labels == ["1", "2", "5", "100"]
    assert all("(μ=10)" in text for text in best.display["Fashion-MNIST"])
    every = tables["table12_negatives_all"]
    assert every.column_labels == ["μ=0.1", "μ=1", "μ=5", "μ=10"]


def test_server_momentum_is_table10_with_the_best_beta(tmp_path):
    fake_study(tmp_path, "server_momentum")
    tables = tables_of(tmp_path)
    best = tables["table10_server_momentum"]
    assert best.row_labels == ["Fashion-MNIST"]
    assert best.column_labels == ["FedAvg", "FedAvgM", "MOON", "MOON+FedAvgM"]
    assert "(β=0.9) · Δ" in best.display.loc["Fashion-MNIST", "MOON+FedAvgM"]
    assert best.display.loc["Fashion-MNIST", "FedAvg"].endswith("(ref.)")  # along the row
    assert best.bold.loc["Fashion-MNIST"].tolist() == [False, False, False, True]
    every = tables["table10_server_momentum_all"]
    assert every.column_labels == [
        "average",
        "fedavgm (beta=0.1)",
        "fedavgm (beta=0.7)",
        "fedavgm (beta=0.9)",
    ]


def test_annealed_tau_compares_schedules_per_tau(tmp_path):
    fake_study(tmp_path, "annealed_tau")
    table = tables_of(tmp_path)["annealed_table2_tau"]
    assert table.row_labels == ["0.5", "1", "1.5", "2"]
    assert table.column_labels == ["MOON (fixed τ)", "NEW-MOON (annealed τ)"]
    assert table.bold["NEW-MOON (annealed τ)"].all()  # best per row


def test_two_budgets_of_one_study_are_not_pooled(tmp_path):
    fake_study(tmp_path / "a", "moon_mu")
    fake_study(tmp_path / "b", "moon_mu", budget="laptop", rounds=3)
    groups = study_groups(load_results([tmp_path / "a", tmp_path / "b"]))
    assert [g.condition for g in groups] == [{"budget": "smoke"}, {"budget": "laptop"}]
    names = [t.name for g in groups for t in study_tables(g)]
    assert names == ["table9_moon_mu_budget-smoke", "table9_moon_mu_budget-laptop"]


def test_two_datasets_of_one_study_become_two_columns(tmp_path):
    fake_study(tmp_path / "a", "moon_mu")
    fake_study(tmp_path / "b", "moon_mu", dataset="mnist")
    (group,) = study_groups(load_results([tmp_path / "a", tmp_path / "b"]))
    (table,) = study_tables(group)
    assert table.column_labels == ["Fashion-MNIST", "MNIST"]


def test_an_unknown_study_gets_the_generic_table(tmp_path):
    configs = plan_configs("moon_mu", seeds=1)
    for c in configs:
        c["study"] = "my_study"
    trials = [(c, curve(0.5, c["rounds"])) for c in configs]
    write_sweep(tmp_path, "custom", "my_study", trials, axes=["mu"])
    (table,) = tables_of(tmp_path).values()
    assert table.name == "my_study_accuracy"
    assert table.row_labels == ["0", "0.1", "1", "5", "10"]


def test_trials_without_a_study_label_take_the_manifests(tmp_path):
    configs = plan_configs("moon_mu", seeds=1)
    for c in configs:
        del c["study"]
    write_sweep(tmp_path, "old", "moon_mu", [(c, curve(0.5, c["rounds"])) for c in configs])
    assert list(tables_of(tmp_path)) == ["table9_moon_mu"]


def test_optuna_groups_get_no_grid_tables(tmp_path):
    configs = plan_configs("moon_mu", seeds=1)
    trials = [(c, curve(0.5, c["rounds"])) for c in configs]
    write_sweep(tmp_path, "opt", "moon_mu", trials, search="optuna")
    (group,) = study_groups(load_results(tmp_path))
    assert group.search == "optuna" and study_tables(group) == []


def test_table_numbers_equal_the_per_round_rows(tmp_path):
    fake_study(tmp_path, "heterogeneity")
    results = load_results(tmp_path)
    (group,) = study_groups(results)
    (table,) = study_tables(group, TableOptions(statistic=FINAL))
    last = results.rounds.sort_values("round").groupby("trial").tail(1)
    expected = last.groupby(["algorithm", "beta"])["test_acc"].agg(["mean", "std"])
    got = table.data.set_index(["algorithm", "beta"])[["mean", "std"]]
    pd.testing.assert_frame_equal(
        got.sort_index(), expected.sort_index(), check_names=False, check_exact=False
    )


def test_the_study_file_loader_accepts_exactly_the_report_table_shapes():
    """search_spaces names the shapes without importing analysis (pandas): the two lists must
    not drift apart."""
    from search_spaces.study_file import TABLE_KINDS

    assert set(TABLE_KINDS) == set(SHAPES)
