"""The report's per-party table and figure, data/parties.csv and Fig. 2's t-SNE panel
(analysis/tables/party_tables.py, analysis/figures/representations.py), on a hand-made sweep."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from analysis.reading.loading import load_results
from analysis.report import write_report
from analysis.tables.party_tables import final_party_columns
from tests.analysis_fakes import manifest, plan_configs, result_row, write_trial

# final-round mean over parties / worst 10% by (method, seed): MOON - FedAvg is
# (+3, +4, +2) points on the mean -> 3.0 ± t(0.975, 2) * 1.0 / sqrt(3) = [0.516, 5.484]
MEAN = {"fedavg": [0.60, 0.62, 0.64], "moon": [0.63, 0.66, 0.66]}
WORST = {"fedavg": [0.40, 0.40, 0.40], "moon": [0.50, 0.52, 0.54]}
ROUNDS = 3


def trial_rows(config, mean, worst):
    rows = []
    for r in range(1, ROUNDS + 1):
        scored = r == ROUNDS  # earlier rounds: not scored (NaN), as with every=k
        extra = {
            "party_acc_mean": mean if scored else float("nan"),
            "party_acc_worst10": worst if scored else float("nan"),
        }
        rows.append(result_row(config, r, 0.5 + 0.01 * r, **extra))
    return rows


def class_blobs(seed: int, spread: float) -> dict[str, np.ndarray]:
    """60 points of 3 classes in 8 dimensions, around three far-apart centres."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(3), 20)
    centres = np.eye(8)[labels] * 10
    return {
        "labels": labels.astype(np.int64),
        "z": (centres + spread * rng.standard_normal((60, 8))).astype(np.float32),
    }


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("party")
    configs = [
        {**c, "rounds": ROUNDS}
        for c in plan_configs("comparison", seeds=3)
        if c["algorithm"] in ("fedavg", "moon")
    ]
    folder = root / "comparison-fmnist-smoke"
    folder.mkdir()
    info = manifest(folder.name, "comparison", n_trials=len(configs))
    (folder / "fedsweep_sweep.json").write_text(json.dumps(info))
    for i, config in enumerate(configs):
        method, seed = config["algorithm"], config["seed"]
        mean, worst = MEAN[method][seed], WORST[method][seed]
        rows = trial_rows(config, mean, worst)
        trial = write_trial(folder, i, config, [], rows=rows)
        # four parties whose mean is the row's mean
        accs = [mean - 0.1, mean - 0.05, mean + 0.05, mean + 0.1]
        parties = pd.DataFrame(
            {"round": ROUNDS, "party": range(4), "party_acc": accs, "party_samples": 100}
        )
        parties.to_csv(trial / "parties.csv", index=False)
        blobs = class_blobs(seed, 1.0)
        (trial / "representations").mkdir()
        np.savez(
            trial / "representations" / "round_0003.npz",
            round=np.int64(3),
            party=np.int64(0),
            labels=blobs["labels"],
            indices=np.arange(60),
            global_z=blobs["z"],
            local_z=class_blobs(seed + 10, 4.0)["z"],
        )
    return root


def test_final_scored_round_is_taken(sweep):
    results = load_results(sweep)
    final = final_party_columns(results.rounds, "acc")
    assert len(final) == 6 and set(final["party_round"]) == {ROUNDS}
    moon = results.trials[results.trials["algorithm"] == "moon"]
    picked = final.merge(moon[["sweep", "trial", "seed"]]).sort_values("seed")
    # the rows' declared summaries (party_acc_mean) under the names every metric shares
    assert picked["party_mean"].tolist() == MEAN["moon"]


def test_per_party_table_figure_and_fig2(sweep, tmp_path):
    results = load_results(sweep)
    report = write_report(results, tmp_path / "report", formats=("png",))
    text = report.read_text()
    assert "Per-party accuracy (%) of the global model" in text
    table = pd.read_csv(tmp_path / "report" / "tables" / "per_party_comparison.csv")
    moon = table[table["algorithm"] == "moon"]
    moon_mean = moon[moon["party_metric"] == "mean over parties"]
    row = moon_mean.iloc[0]
    assert row["mean_pct"] == pytest.approx(65.0)
    assert row["delta_pct"] == pytest.approx(3.0)
    assert row["delta_low_pct"] == pytest.approx(0.516, abs=1e-3)
    assert row["delta_high_pct"] == pytest.approx(5.484, abs=1e-3)
    moon_worst = moon[moon["party_metric"] == "worst 10% of parties"]
    assert moon_worst.iloc[0]["delta_pct"] == pytest.approx(12.0)  # (10, 12, 14) points

    parties = pd.read_csv(tmp_path / "report" / "data" / "parties.csv")
    assert len(parties) == 6 * 4 and {"algorithm", "seed", "party_acc"} <= set(parties)
    figures = tmp_path / "report" / "figures"
    assert (figures / "fig_comparison_per_party.png").is_file()
    with Image.open(figures / "fig2_tsne_comparison.png") as image:
        # two methods: two rows of (2 × 3.2 + 1.2) × (2 × 3.2 + 0.6) inches at 120 dpi
        assert image.size == (912, 840)
    assert "Fig. 2: t-SNE of z on 60 test images" in text
    assert "FedAvg seed 0" in text and "MOON seed 0" in text
