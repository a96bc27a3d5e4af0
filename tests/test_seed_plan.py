"""Seed planning: the arithmetic of "resolvable" inverted, on hand-computed cases.

The expected seed counts come from a printed t table (two-sided 95%, t(0.975, df)):
t(1) = 12.706, t(2) = 4.303, t(3) = 3.182, t(5) = 2.571, t(6) = 2.447, t(13) = 2.160,
t(14) = 2.145, t(50) = 2.009, t(52) = 2.007.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.stats.paired_stats import resolvable_difference, resolvable_unpaired
from analysis.stats.seed_plan import resolvable_with, seeds_text, seeds_to_resolve
from analysis.tables.resolvable_tables import tables_above


@pytest.mark.parametrize(
    ("sd", "target", "seeds"),
    [
        # 3.6 points (the demo's paired sd of last:3): t(14)*3.6/sqrt(15) = 1.994 <= 2,
        # t(13)*3.6/sqrt(14) = 2.079 > 2
        (3.6, 2.0, 15),
        # sd = target: t(6)/sqrt(7) = 0.925 <= 1, t(5)/sqrt(6) = 1.050 > 1
        (2.0, 2.0, 7),
        # t(3)*1/sqrt(4) = 1.591 <= 2, t(2)*1/sqrt(3) = 2.484 > 2
        (1.0, 2.0, 4),
        # two seeds already: t(1)*0.1/sqrt(2) = 0.898 <= 1
        (0.1, 1.0, 2),
        # no spread at all: the fewest seeds an interval needs
        (0.0, 2.0, 2),
    ],
)
def test_seeds_to_resolve_hand_computed(sd, target, seeds):
    assert seeds_to_resolve(sd, target) == seeds


def test_unpaired_plan_hand_computed():
    # t(52)*3.6*sqrt(2/27) = 1.966 <= 2; t(50)*3.6*sqrt(2/26) = 2.005 > 2
    assert seeds_to_resolve(3.6, 2.0, paired=False) == 27


@pytest.mark.parametrize("sd", [0.3, 1.7, 3.6, 6.3, 12.1, 40.0])
@pytest.mark.parametrize("target", [0.5, 2.0, 3.0])
def test_the_plan_is_the_smallest_n_the_report_would_call_resolved(sd, target):
    """The report's own resolvable difference at the planned n is within the target,
    and one seed fewer is not (the arithmetic matches analysis.stats.paired_stats)."""
    n = seeds_to_resolve(sd, target)
    # n paired differences whose sample sd is exactly sd: 0, 1, ..., n-1 rescaled
    base = np.arange(n, dtype=float)
    diffs = list(base * sd / np.std(base, ddof=1))
    assert resolvable_difference([diffs]) == pytest.approx(resolvable_with(sd, n))
    assert resolvable_with(sd, n) <= target
    if n > 2:
        assert resolvable_with(sd, n - 1) > target
    # unpaired too: matches resolvable_unpaired's formula
    m = seeds_to_resolve(sd, target, paired=False)
    assert resolvable_with(sd, m, paired=False) <= target
    if m > 2:
        assert resolvable_with(sd, m - 1, paired=False) > target


def test_resolvable_with_matches_the_unpaired_report_formula():
    cells = [[70.0, 72.0, 74.0], [60.0, 61.0, 65.0]]
    pooled = math.sqrt((4.0 + 7.0) / 2)  # sample variances 4 and 7, equal weights
    assert resolvable_unpaired(cells) == pytest.approx(resolvable_with(pooled, 3, paired=False))


@pytest.mark.parametrize(
    ("sd", "target", "confidence"),
    [(-1.0, 2.0, 0.95), (math.nan, 2.0, 0.95), (1.0, 0.0, 0.95), (1.0, 2.0, 1.0)],
)
def test_bad_arguments_are_refused(sd, target, confidence):
    with pytest.raises(ValueError):
        seeds_to_resolve(sd, target, confidence)


def test_a_hopeless_plan_is_refused_not_looped_on():
    with pytest.raises(ValueError, match="more than"):
        seeds_to_resolve(1e6, 0.01)


def test_seeds_text_without_an_sd():
    assert seeds_text(math.nan, 2.0) == "–"
    assert seeds_text(3.6, 2.0) == "15"


def test_tables_above_counts_no_interval_as_not_resolved():
    resolvable = {"table9": 1.5, "table9_all": 2.5, "one_seed": math.nan}
    assert tables_above(resolvable, 2.0) == {"table9_all": 2.5, "one_seed": resolvable["one_seed"]}
    assert tables_above({"table9": 2.0}, 2.0) == {}
