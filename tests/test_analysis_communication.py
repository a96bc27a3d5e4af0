"""Rounds to reach the baseline's accuracy and the speed-up (Table 2), on hand-made
curves whose answers are known."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.tables.communication import (
    communication_frame,
    format_speedup,
    rounds_to_reach,
    sparsely_scored,
    speedup,
    summarise_communication,
)


def test_first_round_at_or_above_the_target():
    rounds = [1, 2, 3, 4, 5]
    acc = [0.10, 0.30, 0.55, 0.50, 0.70]
    assert rounds_to_reach(rounds, acc, 0.5) == 3
    assert rounds_to_reach(rounds, acc, 0.10) == 1
    assert rounds_to_reach(rounds, acc, 0.70) == 5


def test_reaching_the_target_exactly_counts_as_reached():
    # a tie with the target: >= not >
    assert rounds_to_reach([1, 2, 3], [0.2, 0.6, 0.6], 0.6) == 2


def test_never_reached_is_none():
    assert rounds_to_reach([1, 2, 3], [0.2, 0.3, 0.59999], 0.6) is None
    assert rounds_to_reach([], [], 0.6) is None


def test_rounds_are_sorted_and_nan_never_reaches():
    assert rounds_to_reach([3, 1, 2], [0.9, 0.1, float("nan")], 0.5) == 3


def test_nan_target_is_an_error():
    with pytest.raises(ValueError, match="NaN"):
        rounds_to_reach([1], [0.5], float("nan"))


def test_speedup_and_its_display():
    assert speedup(100, 27) == pytest.approx(100 / 27)
    assert format_speedup(speedup(100, 27)) == "3.7×"
    assert format_speedup(speedup(100, 100)) == "1.0×"
    assert speedup(100, None) is None
    assert format_speedup(None) == "<1×"


def _frames(curves: dict[tuple[str, int], list[float]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Completed trials (one per (method, seed)) and their per-round rows."""
    trials, rows = [], []
    for (method, seed), accs in curves.items():
        name = f"{method}_seed{seed}"
        trials.append(
            {
                "sweep": "s",
                "trial": name,
                "status": "completed",
                "algorithm": method,
                "dataset": "fmnist",
                "seed": seed,
                "final_acc": accs[-1],
                "last_round": len(accs),
            }
        )
        rows += [
            {"sweep": "s", "trial": name, "round": r, "test_acc": a} for r, a in enumerate(accs, 1)
        ]
    return pd.DataFrame(rows), pd.DataFrame(trials)


CURVES = {
    # baseline: final 0.50 (seed 0) and 0.60 (seed 1); mean target 0.55
    ("fedavg", 0): [0.2, 0.4, 0.5, 0.45, 0.50],
    ("fedavg", 1): [0.2, 0.4, 0.5, 0.55, 0.60],
    # reaches 0.50 at round 2 (seed 0) and 0.60 at round 3 (seed 1)
    ("moon", 0): [0.3, 0.5, 0.6, 0.6, 0.7],
    ("moon", 1): [0.3, 0.5, 0.6, 0.6, 0.7],
    # seed 0 reaches 0.50 at round 5 (exactly); seed 1 never reaches 0.60
    ("scaffold", 0): [0.1, 0.2, 0.3, 0.4, 0.50],
    ("scaffold", 1): [0.1, 0.2, 0.3, 0.4, 0.59],
    # never reaches anything
    ("solo", 0): [0.1, 0.1, 0.1, 0.1, 0.1],
    ("solo", 1): [0.1, 0.1, 0.1, 0.1, 0.1],
}


def test_per_seed_targets_pair_each_run_with_the_same_seed_of_the_baseline():
    rounds, trials = _frames(CURVES)
    frame = communication_frame(rounds, trials, row="algorithm", target="per-seed")
    got = {(r.algorithm, r.seed): r for r in frame.itertuples()}
    assert got[("moon", 0)].target == 0.50 and got[("moon", 0)].rounds_needed == 2
    assert got[("moon", 1)].target == 0.60 and got[("moon", 1)].rounds_needed == 3
    # one rule for every row: the baseline's rounds are its first round at its own final
    # value too (seed 0 touched 0.50 at round 3, seed 1 reached 0.60 at round 5)
    assert got[("fedavg", 0)].rounds_needed == 3 and got[("fedavg", 0)].speedup == 1.0
    assert got[("fedavg", 1)].rounds_needed == 5 and got[("fedavg", 1)].speedup == 1.0
    assert got[("moon", 0)].speedup == pytest.approx(3 / 2)
    assert got[("scaffold", 0)].rounds_needed == 5 and got[("scaffold", 0)].speedup == 3 / 5
    assert math.isnan(got[("scaffold", 1)].rounds_needed) and pd.isna(got[("scaffold", 1)].speedup)
    assert set(frame["target_source"]) == {"same seed"}


def test_mean_target_compares_every_run_with_the_baseline_mean():
    rounds, trials = _frames(CURVES)
    frame = communication_frame(rounds, trials, row="algorithm", target="mean")
    got = {(r.algorithm, r.seed): r for r in frame.itertuples()}
    assert got[("moon", 0)].target == pytest.approx(0.55)
    assert got[("moon", 0)].rounds_needed == 3 and got[("moon", 1)].rounds_needed == 3
    assert math.isnan(got[("scaffold", 0)].rounds_needed)  # 0.50 < 0.55
    # a speed-up only where both reached: fedavg's seed 0 (final 0.50) never reaches 0.55
    assert not got[("moon", 0)].baseline_reached and pd.isna(got[("moon", 0)].speedup)
    assert got[("moon", 1)].baseline_rounds == 4 and got[("moon", 1)].speedup == 4 / 3


def test_summary_reaches_only_if_every_seed_does():
    rounds, trials = _frames(CURVES)
    frame = communication_frame(rounds, trials, row="algorithm")
    summary = summarise_communication(frame, row="algorithm").set_index("algorithm")
    assert summary.loc["moon", "rounds_mean"] == 2.5
    assert summary.loc["moon", "rounds_std"] == pytest.approx(math.sqrt(0.5))
    assert summary.loc["moon", "speedup"] == pytest.approx(((3 + 5) / 2) / 2.5)
    assert summary.loc["fedavg", "speedup"] == 1.0
    assert summary.loc["scaffold", "n_reached"] == 1 and pd.isna(summary.loc["scaffold", "speedup"])
    assert summary.loc["solo", "n_reached"] == 0 and math.isnan(summary.loc["solo", "rounds_mean"])


def test_ties_between_methods_give_equal_rounds_and_speedups():
    curves = {
        ("fedavg", 0): [0.2, 0.4, 0.5],
        ("moon", 0): [0.3, 0.5, 0.5],
        ("fedprox", 0): [0.3, 0.5, 0.4],
    }
    rounds, trials = _frames(curves)
    summary = summarise_communication(
        communication_frame(rounds, trials, row="algorithm"), row="algorithm"
    ).set_index("algorithm")
    assert summary.loc["moon", "rounds_mean"] == summary.loc["fedprox", "rounds_mean"] == 2
    assert summary.loc["moon", "speedup"] == summary.loc["fedprox", "speedup"] == 1.5


def test_seed_without_baseline_falls_back_to_the_mean_target():
    curves = {("fedavg", 0): [0.2, 0.5], ("moon", 0): [0.5, 0.6], ("moon", 7): [0.45, 0.49]}
    rounds, trials = _frames(curves)
    frame = communication_frame(rounds, trials, row="algorithm").set_index(["algorithm", "seed"])
    assert frame.loc[("moon", 7), "target_source"] == "mean over seeds"
    assert not frame.loc[("moon", 7), "reached"]
    assert frame.loc[("moon", 0), "rounds_needed"] == 1


def test_only_completed_trials_are_used_and_a_missing_baseline_gives_no_rows():
    rounds, trials = _frames(CURVES)
    trials.loc[trials["algorithm"] == "fedavg", "status"] = "error"
    assert communication_frame(rounds, trials, row="algorithm").empty


def test_unknown_target_mode_is_rejected():
    rounds, trials = _frames(CURVES)
    with pytest.raises(ValueError, match="target"):
        communication_frame(rounds, trials, row="algorithm", target="median")


def test_a_curve_scored_every_few_rounds_is_counted_as_a_bound():
    """LG-FedAvg's own models scored on the test set every 2nd round (NaN between): its
    first scored round at the target (4) bounds the round that reached it (3 or 4), so
    it counts as at most 4 rounds (``at_most``); the others keep theirs exactly."""
    nan = float("nan")
    curves = {
        ("fedavg", 0): [0.2, 0.4, 0.5, 0.45, 0.50],
        ("moon", 0): [0.3, 0.5, 0.6, 0.6, 0.7],
        ("lg-fedavg", 0): [nan, 0.3, nan, 0.55, 0.6],
    }
    rounds, trials = _frames(curves)
    frame = communication_frame(rounds, trials, row="algorithm")
    assert set(frame["algorithm"]) == {"fedavg", "moon", "lg-fedavg"}
    by_method = frame.set_index("algorithm")
    assert by_method.loc["moon", "rounds_needed"] == 2 and not by_method.loc["moon", "at_most"]
    assert by_method.loc["lg-fedavg", "rounds_needed"] == 4
    assert by_method.loc["lg-fedavg", "at_most"]
    assert list(sparsely_scored(rounds, trials)["algorithm"]) == ["lg-fedavg"]
