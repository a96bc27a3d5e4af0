"""Best-so-far curves and the chosen point compare like with like (issue 37 item 2): a
trial ASHA stopped early (fewer rounds than its config's) or one that diverged is shown,
never counted as a best-so-far value nor in a point's mean, and the captions say what
was left out.  A hand-made search where the old rule chose wrongly: the stopped trial's
early-round value is the highest of all."""

from __future__ import annotations

import csv
import math

import pandas as pd
import pytest

from analysis.report import main
from analysis.stats.search import best_exclusions, ran_all_rounds, search_history
from analysis.stats.selection import best_so_far, point_choice, trial_outcomes
from tests.analysis_fakes import plan_configs, result_row, write_sweep, write_trial

ROUNDS = 4
# mu -> (rounds run, last validation accuracy, last test accuracy, diverged)
TRIALS = {
    0.0: (ROUNDS, 0.60, 0.58, False),
    0.1: (1, 0.90, 0.88, False),  # stopped by ASHA after round 1: the old rule's best
    1.0: (ROUNDS, 0.70, 0.66, False),
    5.0: (2, 0.95, 0.93, True),  # diverged at round 2 (its last finite values high)
    10.0: (ROUNDS, 0.65, 0.61, False),
}


def search_folder(root):
    """An Optuna + ASHA search over μ (one seed per point), finished, in proposal order
    μ = 0, 0.1, 1, 5, 10."""
    configs = [{**c, "rounds": ROUNDS} for c in plan_configs("moon_mu", seeds=1)]
    sweep = write_sweep(
        root, "search", "moon_mu", [], search="optuna", scheduler="asha", metric="val_acc"
    )
    for index, config in enumerate(configs):
        run, val, test, diverged = TRIALS[config["mu"]]
        rows = [
            result_row(
                config,
                r,
                test if r == run else 0.3,
                val_acc=val if r == run else 0.3,
                diverged=diverged and r == run,
            )
            for r in range(1, run + 1)
        ]
        write_trial(sweep, index, config, [], rows=rows)
    return sweep


def test_the_engine_rule_over_the_tidy_frame():
    frame = pd.DataFrame(
        {
            "status": ["completed", "stopped", "completed", "diverged", "completed"],
            "value": [0.6, 0.9, math.nan, 0.95, 0.7],
            "last_round": [4, 1, 4, 2, 3],
            "rounds": [4, 4, 4, 4, None],
        }
    )
    assert ran_all_rounds(frame).tolist() == [True, False, True, False, True]
    assert best_exclusions(frame).tolist() == ["", "stopped early", "no value", "diverged", ""]


def test_the_search_history_counts_only_trials_that_ran_all_rounds():
    trials = pd.DataFrame(
        {
            "sweep_started": "",
            "order": range(5),
            "trial": [f"t{i}" for i in range(5)],
            "status": ["completed", "stopped", "completed", "diverged", "completed"],
            "mu": list(TRIALS),
            "final_acc": [0.58, 0.88, 0.66, 0.93, 0.61],
            "last_round": [4, 1, 4, 2, 4],
            "rounds": ROUNDS,
        }
    )
    history = search_history(trials, ["mu"])
    # the old rule (every value) read 0.58, 0.88, 0.88, 0.93, 0.93
    assert history["best_so_far"].tolist() == [0.58, 0.58, 0.66, 0.66, 0.66]
    assert history["counted_in_best"].tolist() == [True, False, True, False, True]
    assert "rounds" not in history  # the history shows the rounds run (last_round)


def test_the_selection_ranks_and_tracks_the_best_on_completed_trials(tmp_path):
    from analysis.reading.loading import load_results

    results = load_results(search_folder(tmp_path))
    outcomes = trial_outcomes(results.rounds, results.trials, "val_acc")
    assert outcomes["left_out_why"].tolist() == ["", "stopped early", "", "diverged", ""]
    # the old rule: 0.60, 0.90, 0.90, 0.95, 0.95, and μ = 5 (diverged) chosen
    assert best_so_far(outcomes, "val_acc").tolist() == [0.60, 0.60, 0.70, 0.70, 0.70]
    choice = point_choice(outcomes, "val_acc")
    assert choice["point"] == "mu=1.0" and choice["test"] == pytest.approx(0.66)


def test_the_report_says_what_the_best_so_far_left_out(tmp_path):
    sweep = search_folder(tmp_path / "results")
    out = tmp_path / "report"
    assert main([str(sweep), "--out", str(out), "--no-pdf", "--quiet"]) == 0
    text = (out / "report.md").read_text()
    left = (
        "est so far (the trial best so far by validation `val_acc`, what the search ranked "
        "by and the selection chooses on; shown by its test accuracy) over the 3 completed "
        "trials that ran all their rounds (like with like); "
        "left out: 1 stopped early (ASHA: fewer rounds, an earlier round's accuracy), "
        "1 diverged (no trained model)"
    )
    lead = "Trials in the order Optuna proposed them; accuracy at each trial's last round. "
    assert f"{lead}B{left}." in text
    assert f"*Optuna search history: accuracy per trial; b{left}*" in text
    assert "| 4 | 5 | diverged | 2 | 95.00 | 93.00 | 66.00 |" in text  # shown, never the best
    history = list(csv.DictReader((out / "tables" / "search_history_moon_mu_optuna.csv").open()))
    assert [r["counted_in_best"] for r in history] == ["True", "False", "True", "False", "True"]
    assert [float(r["best_so_far"]) for r in history] == [0.58, 0.58, 0.66, 0.66, 0.66]
    selection = text.split("## Selection: search", 1)[1]
    assert "- chosen on val_acc: **mu=1.0** (val_acc 70.00%" in selection
    assert (
        "- ranked and best so far over the 3 trials that ran all their rounds; left out: "
        "1 stopped early (fewer rounds than planned: an earlier round's value), "
        "1 diverged (no trained model)" in selection
    )
    assert (
        "*best-so-far val_acc vs trials and vs party updates spent (ranked and best so far "
        "over the 3 trials that ran all their rounds; left out: 1 stopped early, "
        "1 diverged)*" in selection
    )
