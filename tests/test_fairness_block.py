"""The fairness block (issue 40): each party's model on its own split, summarised as
the sample-weighted mean, the mean over parties, the worst decile and the spread."""

from __future__ import annotations

import math

import numpy as np
import pytest

from federated.engine.round_loop import FederatedRun
from federated.evaluation.fairness import fairness_block
from tests.conftest import tiny
from tests.short_runs import PARTY_SCORES


def test_the_block_by_hand():
    # party 3 was not evaluated (NaN), party 4 holds no sample: both left out
    values = [0.5, 1.0, 0.2, float("nan"), 0.9]
    sizes = [10, 30, 20, 5, 0]
    block = fairness_block(values, sizes, "party_test_acc")
    assert block["party_test_acc"] == pytest.approx((0.5 * 10 + 1.0 * 30 + 0.2 * 20) / 60)
    assert block["party_test_acc_mean"] == pytest.approx((0.5 + 1.0 + 0.2) / 3)
    assert block["party_test_acc_worst10"] == 0.2  # ceil(3 / 10) = 1 party
    spread = math.sqrt(((0.5 - 17 / 30) ** 2 + (1.0 - 17 / 30) ** 2 + (0.2 - 17 / 30) ** 2) / 3)
    assert block["party_test_acc_std"] == pytest.approx(spread)


def test_the_worst_decile_of_eleven_parties_is_the_two_lowest_and_follows_the_direction():
    values = [0.9, 0.1, 0.8, 0.3, 0.7, 0.6, 0.5, 0.4, 0.95, 0.85, 0.75]
    sizes = [1] * 11
    assert fairness_block(values, sizes, "p")["p_worst10"] == pytest.approx((0.1 + 0.3) / 2)
    # an error (lower is better): the worst parties are the highest
    assert fairness_block(values, sizes, "p", lower_is_better=True)["p_worst10"] == pytest.approx(
        (0.95 + 0.9) / 2
    )
    empty = fairness_block([float("nan")], [3], "p")
    assert all(math.isnan(v) for v in empty.values()) and len(empty) == 4


def test_a_round_reports_both_blocks_from_its_per_party_values(synthetic):
    """The local test block agrees with the per-party outcomes it summarises; the
    validation block's sample-weighted mean is val_acc; rounds in between are NaN."""
    config = tiny(
        algorithm="fedper",
        rounds=3,
        n_parties=4,
        data_fraction=0.1,
        **PARTY_SCORES,
    )
    run = FederatedRun(config, synthetic)
    rows = [run.run_round() for _ in range(3)]
    assert math.isnan(rows[0]["party_test_acc"]) and math.isnan(rows[0]["party_test_acc_std"])
    last = rows[2]
    own = run.party_scorer.last
    sizes = np.asarray(run.local_tester.split.sizes, dtype=np.float64)
    assert last["party_test_acc"] == pytest.approx(float((own * sizes).sum() / sizes.sum()))
    assert last["party_test_acc_mean"] == pytest.approx(last["party_acc_mean"])
    assert last["party_test_acc_worst10"] == pytest.approx(last["party_acc_worst10"])
    assert last["party_test_acc_std"] == pytest.approx(last["party_acc_std"])
    assert last["party_val_acc"] == pytest.approx(last["val_acc"])
    assert set(rows[0]) == set(last)  # the same columns every round


def test_the_report_tables_the_sample_weighted_own_split_accuracy(tmp_path):
    """A sweep whose rows carry ``party_test_acc`` gets a third per-party row, with its
    paired difference; one without it keeps the two (tests/test_party_report.py)."""
    import json

    import pandas as pd

    from analysis.reading.loading import load_results
    from analysis.report import write_report
    from tests.analysis_fakes import manifest, plan_configs, result_row, write_trial

    weighted = {"fedavg": [0.50, 0.52, 0.54], "moon": [0.60, 0.63, 0.62]}
    configs = [
        {**c, "rounds": 2}
        for c in plan_configs("comparison", seeds=3)
        if c["algorithm"] in ("fedavg", "moon")
    ]
    folder = tmp_path / "sweeps" / "comparison-fmnist-smoke"
    folder.mkdir(parents=True)
    info = manifest(folder.name, "comparison", n_trials=len(configs))
    (folder / "fedsweep_sweep.json").write_text(json.dumps(info))
    for i, config in enumerate(configs):
        value = weighted[config["algorithm"]][config["seed"]]
        rows = [
            result_row(
                config,
                r,
                0.5,
                party_acc_mean=value,
                party_acc_worst10=value - 0.2,
                party_test_acc=value + 0.01,
            )
            for r in (1, 2)
        ]
        trial = write_trial(folder, i, config, [], rows=rows)
        pd.DataFrame(
            {"round": 2, "party": range(2), "party_acc": [value, value], "party_samples": 50}
        ).to_csv(trial / "parties.csv", index=False)
    write_report(load_results(tmp_path / "sweeps"), tmp_path / "report", formats=("png",))
    table = pd.read_csv(tmp_path / "report" / "tables" / "per_party_comparison.csv")
    moon = table[(table["algorithm"] == "moon") & (table["party_metric"] != "")]
    row = moon[moon["party_metric"] == "sample-weighted over own test samples"].iloc[0]
    assert row["mean_pct"] == pytest.approx(62.67, abs=0.01)
    assert row["delta_pct"] == pytest.approx(9.67, abs=0.01)  # (10, 11, 8) points
