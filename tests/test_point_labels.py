"""Points in words where a user reads them: floats at 4 significant digits in the live
view, the end-of-sweep summary and trial folder names, labels kept distinct when two
points round alike, full values in the trial's config (params.json) — on real plans,
a real Optuna study and Tune's own trial records' shape."""

from __future__ import annotations

import math
from types import SimpleNamespace

import optuna

from search_spaces import BUDGETS
from search_spaces.adhoc import adhoc_study
from search_spaces.study import distinct_label, distinct_labels, label_value, point_label
from study.plan import POINT_ATTR, SweepPlan, trial_dirname
from study.summary_table import format_summary
from study.tune.live_view import LiveView

MU, LR = 0.020547625125911337, 0.13416642577896967


def test_floats_are_written_at_four_significant_digits_and_short_values_as_written():
    assert point_label({"mu": MU, "lr": LR}) == "mu=0.02055, lr=0.1342"
    assert point_label({"mu": 5.0, "beta": 0.001, "algorithm": "moon"}) == (
        "mu=5.0, beta=0.001, algorithm=moon"
    )
    assert label_value(1234.5678) == "1235" and label_value(1.23456e-7) == "1.235e-07"
    assert label_value(10) == "10" and label_value(float("nan")) == "nan"
    assert point_label({"mu": MU}, digits=None) == f"mu={MU}"  # a sweep from before


def test_points_that_round_alike_keep_distinct_labels_deterministically():
    close = [{"mu": 0.020547}, {"mu": 0.020551}, {"mu": 0.020547}, {"mu": 0.0205}]
    assert distinct_labels(close) == ["mu=0.02055", "mu=0.020551", "mu=0.02055", "mu=0.0205"]
    # a value written exactly as another point's rounded label: full precision cannot
    # part them, a counter does
    assert distinct_labels([{"mu": 0.1234567}, {"mu": 0.1235}]) == [
        "mu=0.1235",
        "mu=0.1235 (2)",
    ]
    assert distinct_label({"mu": 0.020551}, [({"mu": 0.020547}, "mu=0.02055")]) == ("mu=0.020551")


def grid_plan(values: str) -> SweepPlan:
    study = adhoc_study([f"mu={values}"], "labels")
    return SweepPlan.build(
        study, BUDGETS["smoke"], dataset="synthetic", seeds="2", overrides={"algorithm": "moon"}
    )


def test_a_grid_labels_its_points_distinctly_and_keeps_full_values_in_the_config():
    plan = grid_plan("0.020547,0.020551,1")
    labels = [t.label for t in plan.trials() if t.seed == 0]
    assert labels == ["mu=0.02055", "mu=0.020551", "mu=1.0"]
    assert [t.config["mu"] for t in plan.trials() if t.seed == 0] == [0.020547, 0.020551, 1.0]
    assert plan.param_space()["point"]["grid_search"] == labels
    record = SimpleNamespace(trial_id="ab12c_00000", config=plan.trials()[0].config)
    assert trial_dirname(record) == "ab12c_00000_mu=0.02055_seed0"


def test_optuna_points_are_labelled_apart_from_the_earlier_trials_of_the_study():
    study = adhoc_study(["mu=loguniform:0.01:10"], "labels")
    plan = SweepPlan.build(
        study,
        BUDGETS["smoke"],
        dataset="synthetic",
        search="optuna",
        overrides={"algorithm": "moon"},
    )
    space = plan.optuna_space()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    configs = []
    for mu in (MU, 0.0205476, MU):  # the second rounds like the first; the third is it
        storage.enqueue_trial({"mu": mu})
        trial = storage.ask()
        configs.append({**space(trial), "mu": trial.params["mu"]})
        assert trial.user_attrs[POINT_ATTR] == configs[-1]["point"]
    assert [c["point"] for c in configs] == ["mu=0.02055", "mu=0.020548", "mu=0.02055"]
    assert configs[0]["mu"] == MU  # the value itself is kept whole


def test_the_live_view_and_the_summary_show_the_labels():
    config = {"point": "mu=0.02055, lr=0.1342", "mu": MU, "lr": LR, "seed": 1}
    running = SimpleNamespace(
        trial_id="t0", status="RUNNING", config=config, last_result={"round": 2, "test_acc": 0.5}
    )
    view = LiveView("s", 2, 5, ["mu", "lr", "seed"])
    assert view.lines([running], 10.0)[1] == (
        "  mu=0.02055, lr=0.1342 seed=1   round   2/5  test_acc 0.5000"
    )
    one_seed = LiveView("s", 2, 5, ["mu", "lr"])
    assert one_seed.lines([running], 10.0)[1].startswith("  mu=0.02055, lr=0.1342     ")
    row = {
        "trial": "ab12c_00000",
        "point": config["point"],
        "seed": 1,
        "status": "completed",
        "rounds": 5,
        "test_acc": 0.5,
    }
    assert format_summary([row]).splitlines()[1] == (
        "ab12c_00000    mu=0.02055, lr=0.1342                 1 completed        5   0.5000"
    )


def test_the_end_of_sweep_table_never_cuts_a_point_label():
    """Three methods' DP points share their first 34 characters: cut there, their rows
    looked the same (issue 68, point 9); the column is as wide as the longest label."""
    points = [
        f"algorithm={m}, dp_noise_multiplier=0.01, beta=0.1" for m in ("fedavg", "fedprox", "moon")
    ]
    rows = [
        {"trial": f"t{i}", "point": p, "seed": 0, "status": "completed", "rounds": 5}
        | {"test_acc": 0.5}
        for i, p in enumerate(points)
    ]
    lines = format_summary(rows).splitlines()
    assert all(p in line for p, line in zip(points, lines[1:]))
    assert len({len(line) for line in lines}) == 1  # the columns stay aligned


def test_the_end_of_sweep_table_gives_each_dp_trials_epsilon():
    """ε was on no console line (issue 68, point 9): a DP sweep's end table has a
    dp_epsilon column (inf where clipping added no noise), a sweep without DP none."""
    rows = [
        {"trial": f"t{i}", "point": f"dp_noise_multiplier={s}", "seed": 0, "status": "completed"}
        | {"rounds": 2, "test_acc": 0.5, "dp_epsilon": eps}
        for i, (s, eps) in enumerate([(0.0, math.inf), (0.1, 534.87)])
    ]
    lines = format_summary(rows).splitlines()
    assert lines[0] == (
        "dp_epsilon: the ε each trial spent by its last round, at its δ (inf: no noise)"
    )
    assert lines[1].split()[-2:] == ["dp_epsilon", "test_acc"]
    assert lines[2].split()[-2:] == ["inf", "0.5000"] and lines[3].split()[-2:] == ["535", "0.5000"]
    plain = [{k: v for k, v in r.items() if k != "dp_epsilon"} for r in rows]
    assert "dp_epsilon" not in format_summary(plain)
