"""The per-party table says which model it evaluates, from what the trials recorded (a
round scored with each party's own model writes ``test_acc_std``), and the fairness
block's table beside it (mean, worst decile, std over the parties' own test splits), on
a hand-made ``personalisation`` sweep."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.reading.loading import load_results
from analysis.report import write_report
from analysis.tables.party_tables import (
    GLOBAL_MODEL,
    OWN_MODEL,
    evaluated_models,
    fairness_table,
    per_party_table,
)
from tests.analysis_fakes import manifest, plan_configs, result_row, write_trial

ROUNDS = 2
# final round's fairness block by (method, seed): mean, worst decile, std over parties
BLOCK = {
    "fedavg": [(0.60, 0.30, 0.15), (0.62, 0.32, 0.14), (0.64, 0.34, 0.13)],
    "fedper": [(0.80, 0.70, 0.05), (0.82, 0.72, 0.04), (0.84, 0.74, 0.03)],
}


def rows_of(config, block, own_model):
    mean, worst, std = block
    rows = []
    for r in range(1, ROUNDS + 1):
        scored = r == ROUNDS
        nan = float("nan")
        extra = {
            "party_acc_mean": mean if scored else nan,
            "party_acc_worst10": worst if scored else nan,
            "party_test_acc": mean if scored else nan,
            "party_test_acc_mean": mean if scored else nan,
            "party_test_acc_worst10": worst if scored else nan,
            "party_test_acc_std": std if scored else nan,
        }
        if own_model:  # what the engine's personal evaluation path writes every round
            extra["test_acc_std"] = 0.02
        rows.append(result_row(config, r, 0.5 + 0.01 * r, **extra))
    return rows


def make_sweep(root, methods, own_models):
    configs = [
        {**c, "rounds": ROUNDS}
        for c in plan_configs("personalisation", seeds=3)
        if c["algorithm"] in methods and c["beta"] == 0.5
    ]
    folder = root / "personalisation-fmnist-smoke"
    folder.mkdir(parents=True)
    info = manifest(folder.name, "personalisation", n_trials=len(configs))
    (folder / "fedsweep_sweep.json").write_text(json.dumps(info))
    for i, config in enumerate(configs):
        method = config["algorithm"]
        block = BLOCK[method][config["seed"]]
        write_trial(folder, i, config, [], rows=rows_of(config, block, method in own_models))
    return root


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return load_results(
        make_sweep(tmp_path_factory.mktemp("mixed"), ("fedavg", "fedper"), {"fedper"})
    )


def test_the_recorded_spread_says_which_model_each_trial_evaluated(mixed):
    models = evaluated_models(mixed.trials, mixed.rounds, "acc")
    by_method = dict(zip(mixed.trials["algorithm"], models))
    assert by_method == {"fedavg": GLOBAL_MODEL, "fedper": OWN_MODEL}


def test_a_mixed_table_names_each_rows_model(mixed):
    table = per_party_table(
        mixed.trials, mixed.rounds, rows=["algorithm"], name="per_party", reference=("fedavg",)
    )
    assert "of each party's own or the global model" in table.title
    assert "of the global model" not in table.title
    note = next(n for n in table.notes if n.startswith("Evaluated model"))
    # row labels as every table writes them (analysis/naming.py)
    assert "each party's own model: fedper" in note.lower()
    assert "the global model: fedavg" in note.lower()


def test_fairness_table_holds_the_blocks_mean_worst_decile_and_std(mixed):
    table = fairness_table(mixed.trials, mixed.rounds, rows=["algorithm"], name="fairness")
    data = table.data
    fedper = data[data["algorithm"] == "fedper"].set_index("party_metric")["mean_pct"]
    assert fedper["std over parties (own test splits)"] == pytest.approx(4.0)
    assert fedper["worst 10% of parties (own test splits)"] == pytest.approx(72.0)
    assert fedper["mean over parties (own test splits)"] == pytest.approx(82.0)
    fedavg = data[data["algorithm"] == "fedavg"].set_index("party_metric")["mean_pct"]
    assert fedavg["std over parties (own test splits)"] == pytest.approx(14.0)
    assert not table.bold.to_numpy().any()  # no "best": a low std is not a win


def test_the_report_titles_a_personalised_only_group_by_its_own_models(tmp_path):
    results = load_results(make_sweep(tmp_path / "own", ("fedper",), {"fedper"}))
    report = write_report(results, tmp_path / "report", formats=("png",))
    text = report.read_text()
    assert "Per-party accuracy (%) of each party's own model" in text
    assert "of the global model on each party" not in text
    assert "Fairness over the parties' own test splits: each party's own model" in text
    fairness = pd.read_csv(tmp_path / "report" / "tables" / "fairness_personalisation.csv")
    worst = fairness[fairness["party_metric"] == "worst 10% of parties (own test splits)"]
    assert worst.iloc[0]["mean_pct"] == pytest.approx(72.0)


def test_per_party_words_follow_what_the_trials_measured():
    """Defect 8 of the report issue: the words came from whether the metric has a chance
    level ("class mix" for any accuracy) while personalised trials measured each party's
    own test split; they now come from the trials' party_test_fraction."""
    import pandas as pd

    from analysis.primary_metric import ACCURACY
    from analysis.tables.party_tables import party_split_words

    accuracy = ACCURACY
    own = pd.DataFrame({"party_test_fraction": [0.2, 0.2]})
    pooled = pd.DataFrame({"party_test_fraction": [0.0, 0.0]})
    assert party_split_words(own, accuracy) == "own test split"
    assert party_split_words(pooled, accuracy) == "class mix"
    assert party_split_words(pd.DataFrame({"x": [1]}), accuracy) == "class mix"
    assert party_split_words(pd.concat([own, pooled]), accuracy).startswith("own test split (")
