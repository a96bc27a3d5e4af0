"""The statistics behind every table's Δ, bold and "resolvable" caption, against values
worked out by hand (accuracy points; t quantiles from a printed table:
t(0.975, 2) = 4.3027, t(0.975, 3) = 3.1824, t(0.975, 4) = 2.7764)."""

from __future__ import annotations

import math

import pytest

from analysis.stats.comparisons import (
    CellSample,
    caption_text,
    compare_grid,
    comparison_notes,
    delta_text,
    signed,
)
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


def test_differences_without_spread_are_not_resolvable():
    """Equal per-seed differences would give a zero-width interval that measured no
    noise: no interval, no direction, and the cell says so."""
    diff = paired_difference([31, 32], [30, 31])
    assert diff.mean == 1 and not diff.spread_seen and not diff.has_interval
    assert not diff.resolved and diff.direction == 0
    assert delta_text(diff) == "Δ +1.0 (not resolvable from 2 seeds)"
    # the report's case: two seeds at chance, equal up to floating-point rounding
    # (100 × 0.101 − 100 × 0.102 and 100 × 0.205 − 100 × 0.206 differ in the last bits)
    chance = paired_difference([100 * 0.101, 100 * 0.205], [100 * 0.102, 100 * 0.206])
    assert chance.low != chance.low and not chance.spread_seen
    assert delta_text(chance) == "Δ -0.1 (not resolvable from 2 seeds)"
    assert not paired_difference([30, 31, 35], [29, 30, 34]).spread_seen  # any number of seeds
    tie = paired_difference([30, 31], [30, 31])
    assert tie.mean == 0 and not tie.resolved and not tie.spread_seen


def test_two_seeds_whose_differences_vary_keep_their_interval():
    # d = 1, 1.5: mean 1.25, sd 0.35355, half = t(0.975, 1) 12.7062 × 0.35355 / √2 = 3.1766
    diff = paired_difference([31, 32.5], [30, 31])
    assert diff.spread_seen and diff.df == 1
    assert (diff.low, diff.high) == pytest.approx((1.25 - 3.17655, 1.25 + 3.17655), abs=1e-4)
    assert delta_text(diff) == "Δ +1.2 [-1.9, +4.4]"


def test_welch_without_spread_in_either_cell_is_not_resolvable():
    flat = welch_interval([10.0, 10.0], [11.0, 11.0, 11.0])
    assert flat.kind == WELCH and not flat.spread_seen and not flat.has_interval
    assert delta_text(flat) == "Δ -1.0‡ (not resolvable from 2 seeds)"
    one_varies = welch_interval([10.0, 10.0, 10.0], [11.0, 12.0, 13.0])
    assert one_varies.spread_seen and one_varies.has_interval


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
        (1, 0): CellSample({0: 11.0, 1: 11.3}, same, 10.0),  # resolved, but at chance
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


def test_grid_bolds_nothing_on_a_difference_without_spread():
    """A best − runner-up equal on every seed is not resolvable: no bold, a note naming
    the line, and a table whose seeds showed no spread at all says so in its caption."""
    same = frozenset({("fmnist",)})
    column = {
        (0, 0): CellSample({0: 60.0, 1: 62.0}, same, 10.0),  # baseline
        (1, 0): CellSample({0: 70.0, 1: 72.0}, same, 10.0),  # +10 on both seeds
    }
    result = compare_grid(column, "column", 0)
    assert result.bold == set() and result.spreadless == [0] and result.unresolved == []
    assert not result.deltas[(1, 0)].spread_seen
    assert result.no_spread and math.isnan(result.resolvable)
    assert caption_text(result) == "not resolvable from 2 seeds"
    notes = comparison_notes(result, "FedAvg", ["Fashion-MNIST"])
    assert (
        "No bold in Fashion-MNIST: best − runner-up is the same on every seed, not "
        "resolvable from 2 seeds." in notes
    )
    assert any(n.startswith("Not resolvable: the per-seed differences are equal") for n in notes)
    assert not any(n.startswith("Resolvable ≈") for n in notes)
    # a third cell whose differences vary: the table resolves from its spread alone (and
    # best − runner-up, +9 and +7, now has an interval: wide, with two seeds)
    column[(2, 0)] = CellSample({0: 61.0, 1: 65.0}, same, 10.0)  # +1, +3
    result = compare_grid(column, "column", 0)
    assert not result.no_spread and result.bold == set() and result.unresolved == [0]
    assert result.resolvable == pytest.approx(resolvable_difference([[1, 3]], n=2))
