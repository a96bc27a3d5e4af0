"""The report's DP part from hand-built trial frames (no sweep): accuracy vs ε with the
seeds' sd, the clipped fraction per cell, and the privacy–heterogeneity difference in
differences (paired by seed within β, Welch across), with what its interval claims."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.figures.privacy_curves import epsilon_accuracy_plot, log_epsilon_axis
from analysis.primary_metric import ACCURACY
from analysis.stats.paired_stats import PAIRED, WELCH
from analysis.stats.privacy_interaction import (
    interaction_frame,
    interaction_verdict,
    privacy_interactions,
)
from analysis.tables.privacy_rounds import clipped_fractions, epsilon_curves

KEYS = ["algorithm", "dp_noise_multiplier"]


def frames(accuracy, epsilon, clipped=None):
    """Trials fedavg × σ ∈ {0, 0.5} × seeds {0, 1}, 3 rounds: ``accuracy(σ, seed, r)``
    (a fraction), ``epsilon(σ, r)``, ``clipped(σ, seed, r)`` where given."""
    trials, rounds = [], []
    for sigma in (0.0, 0.5):
        for seed in (0, 1):
            trial = f"t{sigma}-{seed}"
            trials.append(
                dict(
                    sweep="s",
                    trial=trial,
                    status="completed",
                    algorithm="fedavg",
                    dp_noise_multiplier=sigma,
                    seed=seed,
                )
            )
            for r in (1, 2, 3):
                row = dict(sweep="s", trial=trial, round=r, test_acc=accuracy(sigma, seed, r))
                row["dp_epsilon"] = epsilon(sigma, r)
                if clipped is not None:
                    row["dp_clipped_fraction"] = clipped(sigma, seed, r)
                rounds.append(row)
    return pd.DataFrame(rounds), pd.DataFrame(trials)


def test_accuracy_by_epsilon_is_the_seeds_mean_and_sd_per_round():
    """σ = 0.5 spends 2 per round: ε 2, 4, 6; seeds 0 and 1 at 0.40 + 0.1 r and 0.44 +
    0.1 r: mean 42 + 10 r points, sd 4/√2; σ = 0 (ε = ∞) has no curve."""
    rounds, trials = frames(
        lambda s, seed, r: 0.40 + 0.04 * seed + 0.1 * r,
        lambda s, r: 2.0 * r if s > 0 else math.inf,
    )
    curves = epsilon_curves(rounds, trials, KEYS, ACCURACY)
    assert set(curves["dp_noise_multiplier"]) == {0.5}
    assert curves["epsilon"].tolist() == [2.0, 4.0, 6.0]
    assert curves["mean"].tolist() == pytest.approx([52.0, 62.0, 72.0])
    assert curves["sd"].tolist() == pytest.approx([4 / math.sqrt(2)] * 3)
    assert curves["seeds"].tolist() == [2, 2, 2]
    assert not log_epsilon_axis(curves)  # 2 to 6: under a decade
    assert log_epsilon_axis(curves.assign(epsilon=[2.0, 4.0, 20.0]))
    figure = epsilon_accuracy_plot(curves, KEYS, [], ACCURACY)
    (ax,) = figure.axes[:1]
    np.testing.assert_allclose(ax.lines[0].get_xdata(), [2.0, 4.0, 6.0])
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [52.0, 62.0, 72.0])


def test_cells_with_equal_values_stay_visible_each_with_its_own_dashes_and_marker():
    """The DP sweep's accuracy-vs-ε figure drew three methods that learned alike as one
    line (FedAvg's under MOON's, issue 68 point 10's rule missed this figure): each cell
    its own dash pattern and marker."""
    curves = pd.DataFrame(
        {"algorithm": ["fedavg", "fedprox", "moon"] * 2, "round": [1] * 3 + [2] * 3}
        | {"epsilon": [2.0] * 3 + [4.0] * 3, "mean": [50.0] * 6, "sd": [1.0] * 6}
        | {"seeds": [2] * 6}
    )
    ax = epsilon_accuracy_plot(curves, ["algorithm"], [], ACCURACY).axes[0]
    styles = {(str(line.get_linestyle()), line.get_marker()) for line in ax.lines}
    assert len(styles) == len(ax.lines) == 3


def test_a_trial_that_did_not_complete_draws_nothing():
    rounds, trials = frames(lambda s, seed, r: 0.5, lambda s, r: float(r))
    trials.loc[trials["seed"] == 1, "status"] = "failed"
    curves = epsilon_curves(rounds, trials, KEYS, ACCURACY)
    assert curves["seeds"].tolist() == [1] * 6


def test_the_clipped_fraction_per_cell_leaves_out_rounds_nobody_reported():
    """σ = 0.5: seed 0 clips 1, 0.5, 0.5; seed 1 clips 0.5, NaN (nobody reported), 0:
    mean over the five numbers 0.5, round 1 0.75, the last 0.25; σ = 0 clips all."""
    table = {(0, 1): 1.0, (0, 2): 0.5, (0, 3): 0.5, (1, 1): 0.5, (1, 2): math.nan, (1, 3): 0.0}
    rounds, trials = frames(
        lambda s, seed, r: 0.5,
        lambda s, r: float(r),
        lambda s, seed, r: table[(seed, r)] if s > 0 else 1.0,
    )
    out = clipped_fractions(rounds, trials, KEYS).set_index("dp_noise_multiplier")
    assert out.loc[0.5, "mean"] == pytest.approx(0.5)
    assert out.loc[0.5, "first"] == pytest.approx(0.75)
    assert out.loc[0.5, "last"] == pytest.approx(0.25)
    assert (out.loc[0.5, "rounds"], out.loc[0.5, "seeds"]) == (3, 2)
    assert out.loc[0.0, ["mean", "first", "last"]].tolist() == [1.0, 1.0, 1.0]
    assert clipped_fractions(rounds.drop(columns="dp_clipped_fraction"), trials, KEYS).empty


def interaction_trials(low_noisy, high_noisy, *, unpaired=False):
    """FedAvg, 3 seeds; β = 0.1: σ = 0 at 50, 52, 54 points, σ = 0.1 at ``low_noisy``;
    β = 0.5: σ = 0 at 70, 71, 72, σ = 0.1 at ``high_noisy``.  ``unpaired``: β = 0.1's σ
    = 0 trials on another data fraction (another partition)."""
    values = {
        (0.0, 0.1): [50, 52, 54],
        (0.1, 0.1): low_noisy,
        (0.0, 0.5): [70, 71, 72],
        (0.1, 0.5): high_noisy,
    }
    rows = []
    for (sigma, beta), points in values.items():
        for seed, value in enumerate(points):
            fraction = 0.1 if unpaired and sigma == 0 and beta == 0.1 else 0.2
            rows.append(
                dict(
                    algorithm="fedavg",
                    dp_noise_multiplier=sigma,
                    beta=beta,
                    seed=seed,
                    dataset="fmnist",
                    data_fraction=fraction,
                    reported=value / 100,
                )
            )
    return pd.DataFrame(rows)


KEYS3 = ["dp_noise_multiplier", "beta", "algorithm"]


def test_the_difference_in_differences_is_paired_within_beta_and_welch_across():
    """Costs at β = 0.1: -2, -3, -4 (mean -3, sd 1); at β = 0.5: 0, -0.5, -0.5 (mean
    -1/3, var 1/12).  DiD = -8/3 with Welch's interval over the two sets of costs,
    which excludes 0: noise costs more under β = 0.1."""
    trials = interaction_trials([48, 49, 50], [70, 70.5, 71.5])
    (row,) = privacy_interactions(trials, KEYS3, "reported", ACCURACY)
    assert (row.cell, row.sigma, row.beta_low, row.beta_high) == (("fedavg",), 0.1, 0.1, 0.5)
    assert row.cost_low.kind == PAIRED and row.cost_high.kind == PAIRED
    half = stats.t.ppf(0.975, 2) * 1 / math.sqrt(3)
    assert (row.cost_low.mean, row.cost_low.low, row.cost_low.high) == pytest.approx(
        (-3.0, -3.0 - half, -3.0 + half)
    )
    assert row.cost_high.mean == pytest.approx(-1 / 3)
    va, vb = 1 / 3, (1 / 12) / 3
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert row.did.kind == WELCH
    assert (row.did.mean, row.did.low, row.did.high) == pytest.approx(
        (-8 / 3, -8 / 3 - half, -8 / 3 + half)
    )
    assert row.did.high < 0
    assert interaction_verdict(row, ACCURACY) == "noise costs more under β = 0.1"
    frame = interaction_frame([row], ["algorithm"], ACCURACY)
    assert frame.loc[0, "did_kind"] == WELCH
    assert frame.loc[0, "did"] == pytest.approx(-8 / 3)


def test_no_direction_is_claimed_when_the_interval_holds_zero():
    """Costs -2, +3, -4 at β = 0.1 (mean -1, wide) against 0, -0.5, -0.5: not resolved."""
    trials = interaction_trials([48, 55, 50], [70, 70.5, 71.5])
    (row,) = privacy_interactions(trials, KEYS3, "reported", ACCURACY)
    assert row.did.low < 0 < row.did.high
    assert interaction_verdict(row, ACCURACY) == "not resolved (the interval holds 0)"


def test_cells_of_different_partitions_within_a_beta_are_not_paired():
    trials = interaction_trials([48, 49, 50], [70, 70.5, 71.5], unpaired=True)
    (row,) = privacy_interactions(trials, KEYS3, "reported", ACCURACY)
    assert row.cost_low is None and row.did is None
    assert row.cost_high.kind == PAIRED
    assert interaction_verdict(row, ACCURACY) == "not paired within a β: no interval"
    assert interaction_frame([row], ["algorithm"], ACCURACY).loc[0, "did_text"] == "not paired"


def test_no_interaction_without_a_noiseless_cell():
    trials = interaction_trials([48, 49, 50], [70, 70.5, 71.5])
    noisy = trials[trials["dp_noise_multiplier"] > 0]
    assert privacy_interactions(noisy, KEYS3, "reported", ACCURACY) == []


def test_the_privacy_note_names_the_accounting_and_level_the_rows_recorded():
    from analysis.reading.loading import COMPLETED, _privacy_columns
    from analysis.tables.privacy import ACCOUNTANT, privacy_words

    row = {
        "dp_epsilon": 2.35,
        "dp_epsilon_accountant": "pld",
        "dp_epsilon_neighbours": "add-remove",
        "dp_epsilon_sampling": "poisson",
    }
    loaded = _privacy_columns([row])
    assert loaded == {
        "final_dp_epsilon": 2.35,
        "dp_accounting": "pld, add-remove neighbours, poisson sampling",
    }
    trials = pd.DataFrame(
        [{"status": COMPLETED, "dp_delta": 1e-5, "dp_level": "party", "m": 1, **loaded}]
    )
    tail, (note,), _ = privacy_words(trials, ["m"])
    assert tail == "client-level DP: ε = 2.35, δ = 1e-05, PLD accountant"
    assert note.endswith(
        "(dp-accounting: pld, add-remove neighbours, poisson sampling; docs/privacy.md)."
    )
    record = trials.assign(dp_level="record").drop(columns="dp_accounting")
    tail, (note,), _ = privacy_words(record, ["m"])
    assert tail.startswith("record-level DP") and note.endswith(f"({ACCOUNTANT}).")


def dp_trials() -> pd.DataFrame:
    """FedAvg × σ ∈ {0.5, 1} × seeds {0, 1}: σ = 0.5 spent ε 6, σ = 1 ε 2, δ = 1e-5."""
    rows = []
    for order, (sigma, seed) in enumerate((s, k) for s in (0.5, 1.0) for k in (0, 1)):
        rows.append(
            dict(
                sweep="s",
                trial=f"t{sigma}-{seed}",
                status="completed",
                algorithm="fedavg",
                dataset="fmnist",
                dp_noise_multiplier=sigma,
                dp_delta=1e-5,
                seed=seed,
                final_acc=0.5 + 0.1 * sigma + 0.01 * seed,
                final_dp_epsilon=6.0 if sigma == 0.5 else 2.0,
                order=order,
                sweep_started="x",
            )
        )
    return pd.DataFrame(rows)


def test_a_dp_table_speaks_sigma_and_gives_each_cells_epsilon_with_delta_and_accountant():
    """Issue 68, point 9: row labels and headers say σ (never the raw field), a table
    whose cells spent different budgets gives each cell's ε where it is read, and the
    caption states δ and the accountant."""
    from analysis.tables.formats import to_markdown
    from analysis.tables.table import accuracy_table

    one = accuracy_table(dp_trials(), rows=["dp_noise_multiplier"], name="t", title="T")
    text = to_markdown(one)
    assert "| σ (noise multiplier) |" in text and "dp_noise_multiplier" not in text
    assert "client-level DP: ε per cell (2–6), δ = 1e-05, Rényi-DP accountant" in one.title
    cells = one.display.iloc[:, 0].tolist()
    assert cells[0].endswith("· ε 6") and cells[1].endswith("· ε 2")
    two = accuracy_table(
        dp_trials(), rows=["algorithm", "dp_noise_multiplier"], name="u", title="U"
    )
    assert list(two.display.index) == ["FedAvg · σ=0.5", "FedAvg · σ=1"]


def test_a_per_party_table_of_dp_trials_states_no_epsilon():
    """Per-party scores are outside the guarantee: no ε in the title, a note says so."""
    from analysis.tables.party_tables import outside_the_guarantee

    (note,) = outside_the_guarantee(dp_trials())
    assert note.startswith("Differential privacy: these per-party scores are outside")
    assert outside_the_guarantee(dp_trials().drop(columns="final_dp_epsilon")) == []


def test_the_accountant_a_run_recorded_is_the_one_the_caption_names():
    """Rows that record their accountant and party sampling (``dp_accountant``,
    ``party_sampling``) are named by them; older rows by the accountant of the time."""
    from analysis.tables.privacy import accountant_name, accountant_words

    recorded = dp_trials().assign(dp_accountant="pld", party_sampling="poisson")
    assert accountant_name(recorded) == "PLD accountant"
    assert accountant_words(recorded) == (
        "accountant: pld, parties drawn by poisson sampling; docs/privacy.md"
    )
    assert accountant_name(dp_trials()) == "Rényi-DP accountant"


def test_a_record_level_per_party_table_names_the_record_level_guarantee():
    from analysis.tables.party_tables import outside_the_guarantee

    (note,) = outside_the_guarantee(dp_trials().assign(dp_level="record"))
    assert "outside the record-level (ε, δ) guarantee, which covers each party's training" in note
    (note,) = outside_the_guarantee(dp_trials().assign(dp_level="party"))
    assert "outside the client-level (ε, δ) guarantee" in note
