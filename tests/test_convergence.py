"""The convergence check: a table's cells still moving by more than the seeds' spread
of the statistic, and the warning when a comparison is made mid-climb."""

from __future__ import annotations

import pytest

from analysis.stats.comparisons import CellSample, compare_grid
from analysis.stats.convergence import convergence_note, judge_convergence

PARTITION = frozenset({("fmnist",)})


def cell(values: list[float], climbs: list[float]) -> CellSample:
    """A cell of seeds 0, 1, 2: accuracies and climbs in points."""
    return CellSample(dict(enumerate(values)), PARTITION, None, dict(enumerate(climbs)))


def test_flat_curves_have_converged():
    # seeds' sd 1.0 in every cell; each cell's climbs scatter about 0: (1, 0)'s mean 0.1,
    # sd 0.2 over 3 seeds, t(2) 4.303 -> interval 0.1 ± 0.497, inside ± 1.0
    samples = {
        (0, 0): cell([70.0, 71.0, 72.0], [0.2, -0.1, 0.2]),
        (1, 0): cell([73.0, 74.0, 75.0], [0.1, -0.1, 0.3]),
    }
    claims = compare_grid(samples, "column", 0)
    result = judge_convergence(samples, claims)
    assert result.spread == pytest.approx(1.0)
    assert result.climbs[(1, 0)] == pytest.approx(0.1)
    assert result.climb_halves[(1, 0)] == pytest.approx(4.302653 * 0.2 / 3**0.5, rel=1e-5)
    assert result.converged is True and result.verdict == "True"
    assert not result.mid_climb
    (note,) = convergence_note(result, {(0, 0): "μ=0", (1, 0): "μ=1"})
    assert note.startswith("Converged by the reported round")
    assert "the steepest mean climb is 0.1 points" in note and "(1.0 points)" in note


def test_defect_5_a_climb_below_the_seeds_sd_that_every_seed_shares_is_no_convergence():
    """Report issue, defect 5: every curve still climbs (0.17 -> 0.21 over the last
    rounds) by less than the seeds' sd (5.4 points): "converged" was printed.  Every seed
    climbs alike, so the seeds resolve the climb: not converged, and said why."""
    samples = {
        (0, 0): cell([17.0, 21.0, 27.0], [4.0, 4.5, 5.0]),
        (1, 0): cell([20.0, 25.0, 30.0], [4.2, 4.6, 4.4]),
    }
    result = judge_convergence(samples, compare_grid(samples, "column", 0))
    assert result.spread > 4.6 and not result.moving  # the old rule: "converged"
    assert result.converged is False and result.verdict == "False"
    assert list(result.climbing) == [(0, 0), (1, 0)]  # the steepest first
    (note,) = convergence_note(result, {(0, 0): "FedAvg", (1, 0): "MOON"})
    assert note.startswith("Not converged by the reported round: 2 of 2 cells still climb")
    assert "(FedAvg: +4.5, MOON: +4.4 points)" in note
    assert "resolved: more rounds would still raise them" in note


def test_defect_5_scattered_climbs_the_seeds_cannot_resolve_say_so():
    samples = {
        (0, 0): cell([70.0, 71.0, 72.0], [2.0, -1.5, 0.5]),
        (1, 0): cell([70.0, 71.0, 72.0], [0.0, 0.0, 0.0]),
    }
    result = judge_convergence(samples, compare_grid(samples, "column", 0))
    assert result.converged is None and result.verdict == "can't tell"
    assert result.unresolved == [(0, 0)]
    (note,) = convergence_note(result, {})
    assert note.startswith("Cannot tell whether converged by the reported round: 1 of 2 cells")


def test_a_climbing_cell_makes_its_comparison_mid_climb():
    # μ=5 still gains 6 points over its last rounds; the seeds' sd is 1.0
    samples = {
        (0, 0): cell([70.0, 71.0, 72.0], [0.5, 0.5, 0.5]),
        (1, 0): cell([60.0, 61.0, 62.0], [5.0, 6.0, 7.0]),
    }
    claims = compare_grid(samples, "column", 0)
    result = judge_convergence(samples, claims)
    assert result.converged is False
    assert list(result.moving) == [(1, 0)]
    assert result.mid_climb
    notes = convergence_note(result, {(0, 0): "μ=0", (1, 0): "μ=5"})
    assert notes[0].startswith("Not converged by the reported round: 1 of 2 cells")
    assert "μ=5: +6.0" in notes[0]
    assert notes[1].startswith("⚠ Mid-climb comparison")


def test_a_falling_curve_is_moving_too():
    samples = {
        (0, 0): cell([70.0, 71.0, 72.0], [-3.0, -3.0, -3.0]),
        (1, 0): cell([70.0, 71.0, 72.0], [0.0, 0.0, 0.0]),
    }
    result = judge_convergence(samples, compare_grid(samples, "column", 0))
    assert list(result.moving) == [(0, 0)]
    assert "μ=0: -3.0" in convergence_note(result, {(0, 0): "μ=0"})[0]


def test_a_moving_cell_outside_every_comparison_is_no_mid_climb_comparison():
    samples = {
        (0, 0): cell([70.0, 71.0, 72.0], [0.0, 0.0, 0.0]),
        (0, 1): cell([50.0, 51.0, 52.0], [9.0, 9.0, 9.0]),
    }
    # no comparison at all (along=None): the moving cell is reported, no Δ warned about
    result = judge_convergence(samples, compare_grid(samples, None, None))
    assert result.converged is False
    assert not result.mid_climb
    assert len(convergence_note(result, {})) == 1


def test_one_seed_is_not_judged():
    samples = {
        (0, 0): CellSample({0: 70.0}, PARTITION, None, {0: 9.0}),
        (1, 0): CellSample({0: 60.0}, PARTITION, None, {0: 9.0}),
    }
    result = judge_convergence(samples, compare_grid(samples, "column", 0))
    assert result.converged is None
    assert convergence_note(result, {}) == []


def test_defect_10_cells_scored_every_few_rounds_are_named_not_checked():
    """Report issue, defect 10: a table of 3 whose 2 personalised cells were scored on
    the pooled test every 5th round said "1 of 1 cells"; it now says the verdict is of
    the one cell it could check and names the others, and their CSV rows say so."""
    samples = {
        (0, 0): cell([70.0, 71.0, 72.0], [5.0, 6.0, 7.0]),
        (1, 0): CellSample({0: 80.0, 1: 81.0, 2: 82.0}, PARTITION, None, {}),
        (2, 0): CellSample({0: 75.0, 1: 76.0, 2: 77.0}, PARTITION, None, {}),
    }
    result = judge_convergence(samples, compare_grid(samples, "column", 0))
    assert result.unchecked == [(1, 0), (2, 0)]
    labels = {(0, 0): "FedAvg", (1, 0): "FedPer", (2, 0): "Ditto"}
    notes = convergence_note(result, labels)
    assert notes[0].startswith("Not converged by the reported round: 1 of 1 cells")
    assert notes[1].startswith("Not checked for convergence: 2 of 3 cells (FedPer, Ditto)")
    assert [result.cell_verdict(c) for c in samples] == ["False", "not checked", "not checked"]


def test_defect_7_a_seed_plan_from_one_degree_of_freedom_is_not_made():
    """Report issue, defect 7: a one-comparison rerun table of 2 seeds printed "2 seeds
    suffice" from an sd with one degree of freedom; it now says it cannot plan."""
    from analysis.stats.comparisons import comparison_notes, planning_note

    samples = {
        (0, 0): CellSample({0: 70.0, 1: 71.0}, PARTITION, None, {}),
        (1, 0): CellSample({0: 72.0, 1: 73.5}, PARTITION, None, {}),
    }
    claims = compare_grid(samples, "column", 0)
    assert claims.sd_dof == 1
    (line,) = planning_note(claims, {(1, 0): "MOON"})
    assert line == (
        "Seeds to resolve 2 points: not estimated — the sd rests on 1 degree of freedom (a "
        "single comparison of two seeds), too few to plan a seed count from."
    )
    notes = comparison_notes(claims, "FedAvg", ["column"])
    assert any("s rests on 1 degree of freedom, so this is a rough guess" in n for n in notes)
