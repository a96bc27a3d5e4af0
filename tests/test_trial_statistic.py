"""The reported statistic: what a trial's accuracy is (final, last:K, val, best), its
parsing, its values on hand-made rows (every expected number worked out by hand), and
the refusal of ``val`` for runs without validation."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.stats.trial_statistic import (
    BEST,
    DEFAULT_STATISTIC,
    FINAL,
    REPORTED,
    Statistic,
    StatisticError,
    check_validation,
    parse_statistic,
    resolve_statistic,
    trial_values,
    with_statistic,
)

# one trial: test accuracy over 6 rounds, validation measured on rounds 2, 4 and 6
TEST = [0.20, 0.50, 0.60, 0.58, 0.64, 0.62]
VAL = [math.nan, 0.55, 0.55, 0.70, 0.70, 0.66]
VAL_ROUND = [0, 2, 2, 4, 4, 6]


def rows(test=TEST, val=VAL, val_round=VAL_ROUND, trial="t0", **extra) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "sweep": "s",
            "trial": trial,
            "round": range(1, len(test) + 1),
            "test_acc": test,
            **({"val_acc": val} if val is not None else {}),
            **({"val_round": val_round} if val_round is not None else {}),
            **extra,
        }
    )
    return frame


def value(frame: pd.DataFrame, statistic: Statistic, upto: int | None = None) -> float:
    return float(trial_values(frame, statistic, upto).loc[("s", "t0"), "value"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("final", FINAL),
        ("best", BEST),
        ("val", Statistic("val")),
        ("last:3", Statistic("last", 3)),
        (" LAST:10 ", Statistic("last", 10)),
    ],
)
def test_parse_statistic_accepts_the_documented_forms(text, expected):
    assert parse_statistic(text) == expected
    assert str(parse_statistic(str(expected))) == str(expected)


@pytest.mark.parametrize("text", ["", "median", "last", "last:0", "last:-1", "last:2.5", 3, None])
def test_parse_statistic_refuses_anything_else_in_one_line(text):
    with pytest.raises(StatisticError) as err:
        parse_statistic(text, "[report] statistic")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("[report] statistic=")
    assert "allowed: final, last:K" in message


def test_each_statistic_on_hand_made_rows():
    frame = rows()
    assert value(frame, FINAL) == pytest.approx(0.62)
    # mean of rounds 4, 5, 6
    assert value(frame, Statistic("last", 3)) == pytest.approx((0.58 + 0.64 + 0.62) / 3)
    assert value(frame, Statistic("last", 1)) == pytest.approx(0.62)
    assert value(frame, BEST) == pytest.approx(0.64)
    # validation peaks at 0.70, measured at round 4 (round 5 repeats round 4's score):
    # the test accuracy of round 4 is reported, not round 5's 0.64
    assert value(frame, Statistic("val")) == pytest.approx(0.58)
    assert trial_values(frame, Statistic("val")).loc[("s", "t0"), "round"] == 4


def test_val_takes_the_earliest_of_tied_measured_rounds_and_ignores_repeats():
    # without val_round every row counts as measured: the tie 0.55 / 0.55 goes to round 2
    frame = rows(val=[0.1, 0.55, 0.55, 0.3, 0.3, 0.3], val_round=None)
    assert value(frame, Statistic("val")) == pytest.approx(0.50)


def test_last_k_uses_every_round_of_a_shorter_trial():
    frame = rows(test=[0.3, 0.5], val=None, val_round=None)
    assert value(frame, Statistic("last", 5)) == pytest.approx(0.4)


def test_last_k_and_the_climb_count_rounds_when_the_test_set_was_scored_every_few():
    """Own models scored on the test set every 2nd round (personal_test_every=2; NaN
    between): last:3 of 6 rounds averages the scored rounds among rounds 4-6 (4 and 6),
    not the last three scored rows (2, 4, 6); the climb fits rounds 2-6's scored ones."""
    nan = math.nan
    frame = rows(test=[nan, 0.2, nan, 0.4, nan, 0.6], val=None, val_round=None)
    assert value(frame, Statistic("last", 3)) == pytest.approx((0.4 + 0.6) / 2)
    assert value(frame, FINAL) == pytest.approx(0.6)
    assert trial_values(frame, FINAL).loc[("s", "t0"), "climb"] == pytest.approx(0.4)


def test_upto_computes_the_statistic_as_if_the_trial_stopped_there():
    frame = rows()
    assert value(frame, FINAL, upto=3) == pytest.approx(0.60)
    assert value(frame, Statistic("last", 2), upto=3) == pytest.approx(0.55)
    # validation up to round 3: measured rounds 2 (0.55) only -> round 2's test accuracy
    assert value(frame, Statistic("val"), upto=3) == pytest.approx(0.50)


def test_solo_spread_over_parties_is_the_root_mean_square_over_the_window():
    frame = rows(test_acc_std=[0.1, 0.1, 0.1, 0.03, 0.04, 0.0])
    got = trial_values(frame, Statistic("last", 2)).loc[("s", "t0"), "std"]
    assert got == pytest.approx(math.sqrt((0.04**2 + 0.0**2) / 2))
    assert math.isnan(trial_values(frame, BEST).loc[("s", "t0"), "std"])


def test_climb_is_the_rise_of_the_fitted_line_over_the_last_five_rounds():
    # rounds 2..6 of a straight line rising 0.05 a round: the line rises 4 * 0.05
    frame = rows(test=[0.1, 0.2, 0.25, 0.3, 0.35, 0.4], val=None, val_round=None)
    assert trial_values(frame, FINAL).loc[("s", "t0"), "climb"] == pytest.approx(0.2)
    # a flat end climbs nothing
    flat = rows(test=[0.1, 0.5, 0.5, 0.5, 0.5, 0.5], val=None, val_round=None)
    assert trial_values(flat, FINAL).loc[("s", "t0"), "climb"] == pytest.approx(0.0)


def test_with_statistic_adds_the_reported_columns_to_each_trial():
    frame = pd.concat([rows(), rows(test=[0.3] * 6, trial="t1")])
    trials = pd.DataFrame({"sweep": ["s", "s", "s"], "trial": ["t0", "t1", "never_ran"]})
    out = with_statistic(trials, frame, Statistic("last", 3))
    assert out[REPORTED].iloc[0] == pytest.approx(0.6133333, abs=1e-6)
    assert out[REPORTED].iloc[1] == pytest.approx(0.3)
    assert math.isnan(out[REPORTED].iloc[2])  # a trial without rows has no value
    assert list(out["reported_acc_round"].iloc[:2]) == [6, 6]


def test_val_is_refused_for_trials_without_validation_naming_the_fix():
    trials = pd.DataFrame(
        {"sweep": ["s", "s"], "trial": ["t0", "t1"], "status": ["completed", "completed"]}
    )
    with_val = pd.concat([rows(), rows(trial="t1")])
    check_validation(with_val, trials)  # both have val_acc: nothing to refuse
    without = pd.concat([rows(), rows(trial="t1", val=[math.nan] * 6)])
    with pytest.raises(StatisticError) as err:
        check_validation(without, trials)
    assert str(err.value) == (
        "--statistic=val: trial s/t1 recorded no val_acc (run with val_fraction > 0, "
        "or choose final or last:K)"
    )
    no_column = rows(val=None, val_round=None)
    with pytest.raises(StatisticError, match="s/t0 and 1 more"):
        check_validation(no_column, trials)


def test_the_choice_is_the_users_else_the_study_files_else_the_default():
    assert resolve_statistic(FINAL, {"statistic": "last:5"}) == FINAL
    assert resolve_statistic(None, {"statistic": "last:5"}) == Statistic("last", 5)
    assert resolve_statistic(None, {}) == DEFAULT_STATISTIC


def test_captions_name_the_statistic():
    assert FINAL.text() == "final-round top-1 test accuracy (%)"
    assert Statistic("last", 3).text() == ("top-1 test accuracy (%), mean of the last 3 rounds")
    assert "where a trial ran fewer" in Statistic("last", 3).text(shortest=2)
    assert "fewer" not in Statistic("last", 3).text(shortest=3)
    assert "best validation accuracy" in Statistic("val").text()
