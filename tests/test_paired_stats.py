"""The statistics behind every table's Δ, bold and "resolvable" caption, against values
worked out by hand (accuracy points; t quantiles from a printed table:
t(0.975, 2) = 4.3027, t(0.975, 3) = 3.1824, t(0.975, 4) = 2.7764)."""

from __future__ import annotations

import math

import pytest

from analysis.stats.comparisons import CellSample, compare_grid, delta_text, signed
from analysis.stats.paired_stats import (
    PAIRED,
    WELCH,
    compare,
    paired_difference,
    resolvable_difference,
    resolvable_unpaired,
    t_quantile,
    welch_interval,
)

T2, T3, T4 = 4.302653, 3.182446, 2.776445


def test_t_quantiles_are_the_printed_table_values():
    assert t_quantile(2) == pytest.approx(T2, abs=1e-6)
    assert t_quantile(3) == pytest.approx(T3, abs=1e-6)
    assert t_quantile(4) == pytest.approx(T4, abs=1e-6)


def test_paired_difference_whose_interval_contains_zero():
    # d = 2, 1, 4: mean 7/3, sd = sqrt(7/3) = 1.5275, se = sd / sqrt(3) = 0.8819
    diff = paired_difference([70, 72, 74], [68, 71, 70])
    half = T2 * math.sqrt(7 / 3) / math.sqrt(3)  # 3.7946
    assert diff.mean == pytest.approx(7 / 3)
    assert (diff.low, diff.high) == pytest.approx((7 / 3 - half, 7 / 3 + half), abs=1e-5)
    assert diff.kind == PAIRED and diff.n == 3 and diff.df == 2
    assert not diff.resolved and diff.direction == 0


def test_paired_difference_whose_interval_excludes_zero():
    # d = 1, 2, 3, 4: mean 2.5, sd = 1.2910, se = 0.6455, half = 3.1824 * 0.6455 = 2.0543
    diff = paired_difference([2, 3, 4, 5], [1, 1, 1, 1])
    assert (diff.low, diff.high) == pytest.approx((0.44574, 4.55426), abs=1e-4)
    assert diff.resolved and diff.direction == 1
    worse = paired_difference([1, 1, 1, 1], [2, 3, 4, 5])
    assert worse.direction == -1 and worse.mean == -2.5


def test_identical_differences_give_a_zero_width_interval():
    diff = paired_difference([31, 32], [30, 31])
    assert diff.low == pytest.approx(1.0) and diff.high == pytest.approx(1.0) and diff.resolved
    tie = paired_difference([30, 31], [30, 31])
    assert tie.mean == 0 and not tie.resolved  # [0, 0] contains 0


def test_one_pair_has_no_interval():
    diff = paired_difference([70], [60])
    assert diff.mean == 10 and math.isnan(diff.low) and not diff.has_interval
    assert not diff.resolved


def test_welch_interval_equal_sizes_and_spreads():
    # means 2 and 5, both variances 1: se = sqrt(1/3 + 1/3) = 0.8165, Welch df = 4
    diff = welch_interval([1, 2, 3], [4, 5, 6])
    assert diff.mean == -3 and diff.df == pytest.approx(4) and diff.kind == WELCH
    assert (diff.low, diff.high) == pytest.approx((-3 - T4 * 0.816497, -3 + T4 * 0.816497), 1e-5)
    assert diff.direction == -1


def test_welch_degrees_of_freedom_for_unequal_spreads():
    # var 4 over 3 values, var 32 over 2: se² = 4/3 + 16 = 17.333,
    # df = 17.333² / ((4/3)²/2 + 16²/1) = 300.44 / 256.89 = 1.1696
    diff = welch_interval([60, 62, 64], [50, 58])
    assert diff.mean == pytest.approx(8) and diff.n == 2
    assert diff.df == pytest.approx(300.4444 / 256.8889, rel=1e-4)
    assert not diff.resolved  # 8 points, but with 2-3 seeds this spread cannot tell


def test_compare_pairs_only_matching_seeds_of_shared_partitions():
    a, b = {0: 2.0, 1: 3.0, 2: 4.0, 3: 5.0}, {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}
    assert compare(a, b).kind == PAIRED
    assert compare(a, b, pairable=False).kind == WELCH  # e.g. different β: no pairs
    assert compare(a, {0: 1.0, 1: 1.0, 7: 1.0}).kind == WELCH  # seeds do not match up


def test_resolvable_difference_pools_the_paired_spread():
    # variances 7/3 and 1, each with 2 degrees of freedom: pooled 5/3; n = 3
    got = resolvable_difference([[2, 1, 4], [1, 2, 3]])
    assert got == pytest.approx(T2 * math.sqrt(5 / 3) / math.sqrt(3), rel=1e-5)  # 3.2070
    assert math.isnan(resolvable_difference([[1.0], [2.0]]))  # one seed: nothing resolves


def test_resolvable_unpaired_is_welchs_half_width_for_equal_cells():
    got = resolvable_unpaired([[1, 2, 3], [4, 5, 6]])
    assert got == pytest.approx(T4 * math.sqrt(2 / 3), rel=1e-5)  # 2.2670
    assert got == pytest.approx(welch_interval([1, 2, 3], [4, 5, 6]).high + 3)


def test_grid_bold_needs_best_minus_runner_up_resolved():
    same = frozenset({("fmnist",)})
    column = {
        (0, 0): CellSample({0: 60.0, 1: 62.0, 2: 61.0}, same, 10.0),  # baseline
        (1, 0): CellSample({0: 65.0, 1: 66.0, 2: 68.0}, same, 10.0),  # +5, +4, +7
        (2, 0): CellSample({0: 64.0, 1: 67.0, 2: 66.0}, same, 10.0),  # runner-up: -1, +1, -2
    }
    result = compare_grid(column, "column", 0)
    assert result.bold == set() and result.unresolved == [0]
    assert result.deltas[(1, 0)].resolved and result.references == {(0, 0)}
    # the paired differences to the baseline, (5, 4, 7) and (4, 5, 5), pooled
    expected = resolvable_difference([[5, 4, 7], [4, 5, 5]])
    assert result.resolvable == pytest.approx(expected)
    column[(2, 0)] = CellSample({0: 50.0, 1: 51.0, 2: 50.5}, same, 10.0)
    assert compare_grid(column, "column", 0).bold == {(1, 0)}


def test_grid_names_no_winner_at_chance_and_none_with_one_seed():
    same = frozenset({("fmnist",)})
    chance = {
        (0, 0): CellSample({0: 10.0, 1: 10.2}, same, 10.0),
        (1, 0): CellSample({0: 11.0, 1: 11.2}, same, 10.0),  # resolved, but at chance
    }
    result = compare_grid(chance, "column", 0)
    assert result.bold == set() and result.at_chance == [0]
    one = {(0, 0): CellSample({0: 50.0}, same), (1, 0): CellSample({0: 70.0}, same)}
    result = compare_grid(one, "column", 0)
    assert result.no_claim and result.bold == set() and result.deltas == {}


def test_delta_text():
    assert signed(-0.04) == "+0.0" and signed(2.06) == "+2.1" and signed(-1.25) == "-1.2"
    assert delta_text(paired_difference([2, 3, 4, 5], [1, 1, 1, 1])) == "Δ +2.5 [+0.4, +4.6] ↑"
    assert delta_text(welch_interval([1, 2, 3], [4, 5, 6])) == "Δ -3.0 [-5.3, -0.7]‡ ↓"
    assert delta_text(paired_difference([70], [60])) == "Δ +10.0 (no interval)"
