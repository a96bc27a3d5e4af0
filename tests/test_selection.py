"""Selection on validation (study/selection.py): the metric that ranks, the validation a
selecting sweep needs, the fresh rerun seeds, and a planted case where test and
validation disagree."""

from __future__ import annotations

import math

import pytest

from search_spaces import STUDIES
from study.selection import (
    DEFAULT_VAL_FRACTION,
    SelectionError,
    best_point,
    check_validated,
    mode_of,
    rerun_seeds,
    selector,
    with_validation,
)
from study.sweep import fixed_at


def trial(point, seed, val_acc, test_acc, val_loss=1.0):
    return (
        point,
        {"point": point, "seed": seed},
        {"val_acc": val_acc, "test_acc": test_acc, "val_loss": val_loss},
    )


def test_a_planted_disagreement_is_decided_by_validation():
    """mu=1 wins on test, mu=5 on validation: the selection takes mu=5."""
    trials = [
        trial("mu=1", 0, 0.70, 0.90),
        trial("mu=1", 1, 0.72, 0.91),
        trial("mu=5", 0, 0.80, 0.60),
        trial("mu=5", 1, 0.78, 0.61),
    ]
    point, value, chosen = best_point(trials, "val_acc")
    assert point == "mu=5" and value == pytest.approx(0.79)
    assert [m["test_acc"] for m in chosen] == [0.60, 0.61]


def test_val_loss_is_minimised_and_nan_or_missing_values_are_left_out():
    trials = [
        trial("a", 0, 0.5, 0.5, val_loss=0.9),
        trial("b", 0, 0.4, 0.4, val_loss=0.3),
        trial("c", 0, 0.9, 0.9, val_loss=math.nan),
    ]
    assert mode_of("val_loss") == "min"
    assert best_point(trials, "val_loss")[0] == "b"
    with pytest.raises(SelectionError, match="no trial ran all its rounds with a finite val_acc"):
        best_point([trial("a", 0, math.nan, 0.5)], "val_acc")


def test_an_early_stopped_trial_is_never_averaged_with_complete_ones():
    """ASHA stopped lr=0.5 at round 2 of 8, where its validation accuracy happened to be
    0.82; lr=0.05 ran all 8 rounds to 0.80.  The old rule (every trial's last value)
    chose lr=0.5 on an early-rung value; the choice is made on complete trials only."""

    def ran(point, seed, val_acc, last_round):
        return (
            point,
            {"point": point, "seed": seed, "rounds": 8},
            {"val_acc": val_acc, "round": last_round},
        )

    trials = [ran("lr=0.5", 0, 0.82, 2), ran("lr=0.05", 0, 0.80, 8), ran("lr=0.05", 1, 0.78, 8)]
    old_rule = max(("lr=0.5", 0.82), ("lr=0.05", 0.79), key=lambda p: p[1])[0]
    assert old_rule == "lr=0.5"
    point, value, chosen = best_point(trials, "val_acc")
    assert point == "lr=0.05" and value == pytest.approx(0.79) and len(chosen) == 2
    # a point with one complete and one stopped seed is ranked on the complete one alone
    mixed = [ran("a", 0, 0.90, 2), ran("a", 1, 0.70, 8), ran("b", 0, 0.75, 8)]
    assert best_point(mixed, "val_acc")[:2] == ("b", pytest.approx(0.75))
    with pytest.raises(SelectionError, match="stopped early"):
        best_point([ran("a", 0, 0.9, 2)], "val_acc")


def test_rerun_seeds_are_disjoint_from_the_searched_ones():
    assert rerun_seeds([0, 1, 2], 3) == [10_000, 10_001, 10_002]
    assert rerun_seeds([10_000, 10_005], 2) == [10_006, 10_007]
    assert not set(rerun_seeds(range(20_000), 4)) & set(range(20_000))


def test_a_selecting_sweep_holds_out_validation_unless_the_user_wrote_a_value():
    study = STUDIES["moon_mu"]
    assert selector("grid", "fifo", 0) is None
    assert selector("grid", "asha", 0) == "--scheduler asha"
    overrides, note = with_validation(study, {}, "--search optuna")
    assert overrides == {"val_fraction": DEFAULT_VAL_FRACTION} and "selects on validation" in note
    written, note = with_validation(study, {"val_fraction": 0.2}, "--search optuna")
    assert written == {"val_fraction": 0.2} and note is None
    assert with_validation(study, {}, None) == ({}, None)  # a plain grid: the paper's protocol
    with pytest.raises(SelectionError, match=r"--rerun-best selects on validation"):
        check_validated([{"val_fraction": 0.0}], "--rerun-best")


def test_a_rerun_holds_every_axis_at_the_chosen_value():
    study = STUDIES["moon_mu"]
    fixed = fixed_at(study, {"mu": 0.37, "seed": 3})
    assert fixed.grid() == [{"mu": 0.37}]


def outcomes_frame():
    import pandas as pd

    return pd.DataFrame(
        {
            "trial": ["a", "b", "c"],
            "point": ["mu=0", "mu=1", "mu=5"],
            "seed": [0, 0, 0],
            "status": ["completed"] * 3,
            "value": [0.60, 0.70, 0.65],
            "test_acc": [0.80, 0.75, 0.90],
            "rounds": [4, 4, 2],
            "party_updates": [8.0, 8.0, 4.0],
            "seconds": [1.0, 1.0, 0.5],
        }
    )


def test_the_report_numbers_of_a_selection_by_hand():
    import numpy as np

    from analysis.stats.selection import (
        best_so_far,
        evaluation_noise,
        point_choice,
        rank_correlation,
        rerun_outcome,
    )

    outcomes = outcomes_frame()
    assert best_so_far(outcomes, "val_acc").tolist() == [0.60, 0.70, 0.70]
    choice = point_choice(outcomes, "val_acc")
    assert choice["point"] == "mu=1" and choice["hindsight_point"] == "mu=5"
    assert choice["regret"] == pytest.approx(0.15)
    assert rank_correlation(outcomes) == pytest.approx(-0.5)  # ranks (1,3,2) vs (2,1,3)
    rerun = rerun_outcome([0.70, 0.72], [0.75])
    assert rerun["mean"] == pytest.approx(0.71) and rerun["optimism"] == pytest.approx(0.04)
    # half-width t(0.975, 1) * sd / sqrt(2) = 12.706 * 0.01414 / 1.414
    assert rerun["high"] - rerun["mean"] == pytest.approx(0.12706, rel=1e-3)
    # two parties each: with both evaluating the choice is the full one; with one, the
    # draw decides between mu=1's parties (0.9 / 0.5) and the others' constant values
    values = {
        "a": (np.array([0.6, 0.6]), np.array([10.0, 10.0])),
        "b": (np.array([0.9, 0.5]), np.array([10.0, 10.0])),
        "c": (np.array([0.65, 0.65]), np.array([10.0, 10.0])),
    }
    noise = evaluation_noise(outcomes, values, "val_acc", [1, 2], draws=400)
    full = noise[noise["k"] == 2].iloc[0]
    assert full["changed"] == 0.0 and full["regret"] == 0.0
    assert full["regret_hindsight"] == pytest.approx(0.15)
    one = noise[noise["k"] == 1].iloc[0]
    assert 0.4 < one["changed"] < 0.6  # mu=1 loses whenever its 0.5 party is drawn
    # losing mu=1 picks mu=5 (test 0.90): a negative regret against the full choice
    assert one["regret"] == pytest.approx(-0.15 * one["changed"])


def test_the_full_evaluation_row_is_the_simulations_own_estimator_at_k_equal_n():
    """A pooled metric (mAP, mIoU) is no mean over parties: the rows' validation value
    chose mu=1 (0.70) while the size-weighted mean of the parties' values prefers mu=5.
    The noise table's k = N row is "the full evaluation the sweep chose with": it must
    read 0 changed and 0 regret (issue 68, point 2: it read 100% and 0.054 mAP)."""
    import numpy as np

    from analysis.stats.selection import evaluation_noise, full_evaluation_choice

    outcomes = outcomes_frame()
    values = {
        "a": (np.array([0.60, 0.60]), np.array([10.0, 10.0])),
        "b": (np.array([0.55, 0.55]), np.array([10.0, 10.0])),  # pooled 0.70, mean 0.55
        "c": (np.array([0.66, 0.64]), np.array([10.0, 10.0])),
    }
    assert full_evaluation_choice(outcomes, values, "val_acc")["point"] == "mu=5"
    noise = evaluation_noise(outcomes, values, "val_acc", [1, 2], draws=50)
    full = noise[noise["k"] == 2].iloc[0]
    assert full["changed"] == 0.0 and full["regret"] == 0.0


def test_the_noise_figure_gives_regret_and_changed_choices_an_axis_each():
    """Regret (≈0.05 mAP) on a "%" axis read as 0: each has its own axis and unit, and
    k ticks are whole parties."""
    import pandas as pd

    from analysis.primary_metric import metric_of
    from analysis.sections.selection import _noise_figure
    from federated.tasks.detection.spec import SPEC as DETECTION_TASK

    noise = pd.DataFrame(
        {"k": [2, 4, 8], "changed": [0.5, 0.2, 0.0], "regret": [0.05, 0.02, 0.0]}
        | {"regret_hindsight": [0.06, 0.03, 0.01]}
    )
    fig = _noise_figure(noise, metric_of(DETECTION_TASK), "t")
    left, right = fig.axes
    assert left.get_ylabel() == "expected regret (mAP@0.5 units)"
    assert right.get_ylabel() == "choice changed (%)"
    assert list(left.get_xticks()) == [2, 4, 8]
    # the two regret lines, equal where the choice is also best in hindsight, dashed apart
    assert [line.get_linestyle() for line in left.get_lines()] == ["-", "--"]


def test_seed_batches_stop_at_the_target_or_the_cap():
    import math

    from study.seed_batches import SeedTarget, SeedTargetError, next_batch, parse_seed_target

    assert parse_seed_target("3") is None
    assert parse_seed_target("until:2") == SeedTarget(2.0, 10)
    assert parse_seed_target("until:1.5:12") == SeedTarget(1.5, 12)
    for bad in ("until:", "until:0", "until:x", "until:2:1", "until:2:3:4", "until:nan"):
        with pytest.raises(SeedTargetError, match=r"--seeds='until"):
            parse_seed_target(bad)
    target = SeedTarget(2.0, 8)
    # a table above the target, cap not reached: three more seeds
    seeds, why = next_batch({"table9": 5.1, "other": 1.0}, target, 3, 3)
    assert seeds == [3, 4, 5] and "table9 5.10" in why and "other" not in why
    # the last batch stops at the cap
    assert next_batch({"table9": 2.5}, target, 6, 3)[0] == [6, 7]
    # cap reached: stop, and say which table still does not resolve
    seeds, why = next_batch({"table9": 2.5}, target, 8, 3)
    assert seeds == [] and why.startswith("cap reached: 8 seeds") and "table9 2.50" in why
    # target reached
    seeds, why = next_batch({"table9": 1.9, "t2": 2.0}, target, 4, 3)
    assert seeds == [] and why.startswith("target reached")
    # no interval yet (one seed) counts as not resolving
    assert next_batch({"table9": math.nan}, target, 1, 1)[0] == [1]


def test_a_diverged_trial_fails_in_optuna_without_a_warning(tmp_path, caplog):
    """A NaN validation value (a diverged trial) is told to Optuna as a failed trial,
    not as a value Optuna refuses with "The value nan is not acceptable"."""
    import logging

    import optuna
    from ray import tune

    from study.tune.optuna_storage import SweepOptunaSearch, storage_url

    search = SweepOptunaSearch(
        space={"mu": tune.uniform(0.0, 1.0)},
        metric="val_acc",
        mode="max",
        study_name="s",
        sweep_dir=tmp_path,
        planned_rounds=4,
    )
    for trial in ("t1", "t2", "t3", "t4"):
        assert search.suggest(trial) is not None
    with caplog.at_level(logging.WARNING):
        search.on_trial_complete("t1", {"val_acc": math.nan, "test_acc": 0.1, "round": 2})
        search.on_trial_complete("t2", {"val_acc": 0.5, "test_acc": 0.4, "round": 4})
        # stopped by ASHA at round 2 of 4: pruned, its early value never told
        search.on_trial_complete("t3", {"val_acc": 0.9, "test_acc": 0.4, "round": 2})
        # a diverged row (its ranking metric NaN, diverged set) after a finite history
        search.on_trial_complete("t4", {"val_acc": math.nan, "diverged": True, "round": 3})
    assert "not acceptable" not in caplog.text
    study = optuna.load_study(study_name="s", storage=storage_url(tmp_path))
    states = [t.state for t in study.trials]
    state = optuna.trial.TrialState
    assert states == [state.FAIL, state.COMPLETE, state.PRUNED, state.FAIL]
    assert study.metric_names == ["val_acc"] and study.trials[1].value == 0.5


def test_a_rank_correlation_that_cannot_be_taken_says_why():
    """Three completed trials that learned nothing alike (one validation value) have no
    ranking: the report said "n/a (fewer than 3)" of three trials.  A regret that rounds
    to zero prints without a sign (it read "-0.00")."""
    from analysis.primary_metric import ACCURACY
    from analysis.sections.selection import _rho_words
    from analysis.stats.selection import rank_correlation, ranked_trials

    tied = outcomes_frame().assign(value=0.5)
    rho = rank_correlation(tied)
    assert _rho_words(rho, len(ranked_trials(tied)), "val_acc", ACCURACY) == (
        "n/a (the 3 trials' val_acc or test accuracy values are all equal: no ranking)"
    )
    two = outcomes_frame().iloc[:2]
    assert _rho_words(rank_correlation(two), 2, "val_acc", ACCURACY) == (
        "n/a (2 trial(s) to rank, fewer than 3)"
    )
    assert ACCURACY.show(-0.00001, 2) == "0.00" and ACCURACY.show(-0.001, 2) == "-0.10"
