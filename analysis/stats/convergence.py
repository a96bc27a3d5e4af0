"""Had a table's trials converged by the reported round?  A comparison made while the
curves still climb says how fast methods learn, not where they end.

Each trial's *climb* (:mod:`analysis.stats.trial_statistic`) is the rise of a least-squares
line through its test accuracy over the last :data:`~analysis.stats.trial_statistic.CLIMB_WINDOW`
rounds up to the reported round, in accuracy points (a score task's metric: in its own
units; a falling error climbs downwards, and only the size counts).  A cell's climb is
the mean over its seeds.  The yardstick is the statistic's own spread: the sd over seeds
of the reported accuracy, pooled over the table's cells (each weighted by its seeds - 1).
A cell whose climb (up or down) exceeds that spread was still moving by more than the
seeds disagree: more rounds would change its value by more than the noise the table's
intervals allow for; a Δ whose cell or reference is so moving is a comparison made
mid-climb, and the table says so.

"Converged" is said only where the seeds resolve it: each cell's climbs over its seeds
give a t-interval of its mean climb (:data:`~analysis.stats.paired_stats.LEVEL`); a cell
is *flat* when that interval holds 0 and lies within ± the spread, *still climbing* when
it excludes 0 (every seed climbs alike, however little: a small climb below the spread is
still a climb), and *unresolved* otherwise (too few seeds or too much scatter to tell).
A table has converged when every cell is flat; it has not when a cell still climbs or
moves; otherwise the note says it cannot tell, and why.

With one seed there is no spread to judge against: nothing is said.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from analysis.primary_metric import ACCURACY, Metric
from analysis.stats.comparisons import CellSample, GridComparison
from analysis.stats.paired_stats import pooled_sd, t_quantile
from analysis.stats.trial_statistic import CLIMB_WINDOW

# A climb smaller than this (display units) is a least-squares fit's rounding of a flat
# curve, never a climb the seeds resolve.
FLAT = 1e-9
# A note names this many moving cells, the steepest first, then counts the rest.
NAMED_CELLS = 4


@dataclass
class Convergence:
    """The convergence judgement of one table (cells as (row index, column index)).

    Attributes:
        spread: the statistic's sd over seeds pooled over the cells (points; NaN: no
            cell has two seeds, nothing judged).
        climbs: each cell's mean climb over its seeds (points over the last rounds).
        climb_halves: each cell's t-interval half-width of that mean (points; NaN with
            fewer than two climbs).
        cells: every cell of the table, those without a climb too.
        window: the rounds the climbs were fitted over (at most, unless ``window_exact``).
        window_exact: every trial's climb was fitted over ``window`` rounds.
        compared: the cells of the table's Δ, and their references.
        metric: what the cells hold (the notes' units).
    """

    spread: float
    climbs: dict[tuple[int, int], float] = field(default_factory=dict)
    window: int = CLIMB_WINDOW
    window_exact: bool = True
    compared: set[tuple[int, int]] = field(default_factory=set)
    metric: Metric = ACCURACY
    climb_halves: dict[tuple[int, int], float] = field(default_factory=dict)
    cells: tuple[tuple[int, int], ...] = ()

    @property
    def window_text(self) -> str:
        """``last 5 rounds``, or ``last up to 5 rounds`` where trials reported earlier rounds."""
        rounds = "round" if self.window == 1 else "rounds"
        return f"last {'' if self.window_exact else 'up to '}{self.window} {rounds}"

    @property
    def judged(self) -> bool:
        return math.isfinite(self.spread) and bool(self.climbs)

    @property
    def moving(self) -> dict[tuple[int, int], float]:
        """The cells still moving by more than the spread, the steepest first."""
        if not self.judged:
            return {}
        found = {c: v for c, v in self.climbs.items() if abs(v) > self.spread}
        return dict(sorted(found.items(), key=lambda item: -abs(item[1])))

    @property
    def climbing(self) -> dict[tuple[int, int], float]:
        """The cells whose seeds resolve a climb (its interval excludes 0), the steepest
        first: the moving ones and those climbing less than the spread."""
        if not self.judged:
            return {}
        found = {
            c: v
            for c, v in self.climbs.items()
            if math.isfinite(self.climb_halves.get(c, math.nan))
            and abs(v) > max(self.climb_halves[c], FLAT)
        }
        found.update(self.moving)
        return dict(sorted(found.items(), key=lambda item: -abs(item[1])))

    @property
    def unresolved(self) -> list[tuple[int, int]]:
        """The cells neither climbing nor resolved flat: their climb's interval holds 0
        but reaches past ± the spread, or has no width (a single climb)."""
        if not self.judged:
            return []
        climbing = self.climbing
        out = []
        for c, v in self.climbs.items():
            half = self.climb_halves.get(c, math.nan)
            if c not in climbing and not (math.isfinite(half) and abs(v) + half <= self.spread):
                out.append(c)
        return out

    @property
    def converged(self) -> bool | None:
        """True (every cell flat) / False (a cell climbs or moves); None when not judged
        (one seed, or no climb recorded) or the seeds cannot tell (:attr:`unresolved`)."""
        if not self.judged:
            return None
        if self.climbing:
            return False
        return None if self.unresolved else True

    @property
    def unchecked(self) -> list[tuple[int, int]]:
        """The table's cells without a climb (their test values have gaps: scored every
        few rounds, ``personal_test_every``), so the seeds cannot check them."""
        return [c for c in self.cells if c not in self.climbs]

    def cell_verdict(self, cell: tuple[int, int]) -> str:
        """The CSV's ``converged`` of one cell: the table's :attr:`verdict`, or ``not
        checked`` for a cell without a climb."""
        if self.judged and cell not in self.climbs:
            return "not checked"
        return self.verdict

    @property
    def verdict(self) -> str:
        """The CSV's ``converged``: ``True``, ``False``, ``can't tell`` or ``not judged``."""
        if not self.judged:
            return "not judged"
        return {True: "True", False: "False", None: "can't tell"}[self.converged]

    @property
    def mid_climb(self) -> bool:
        """A Δ of the table involves a cell still moving."""
        return bool(set(self.moving) & self.compared)


def judge_convergence(
    samples: Mapping[tuple[int, int], CellSample],
    claims: GridComparison | None = None,
    window: int = CLIMB_WINDOW,
    window_exact: bool = True,
) -> Convergence:
    """The table's :class:`Convergence` from its cells' samples (their values and climbs,
    points) and, when given, the comparisons made on them (whose metric names the
    notes' units); ``window``: the rounds the climbs were fitted over (fewer than
    :data:`CLIMB_WINDOW` when the trials reported an earlier round; ``window_exact``
    False: at most that many, trials differ)."""
    spread = pooled_sd([list(s.by_seed.values()) for s in samples.values()])[0]
    climbs, halves = {}, {}
    for key, sample in samples.items():
        values = [v for v in sample.climb_by_seed.values() if math.isfinite(v)]
        if values:
            climbs[key] = float(np.mean(values))
            n = len(values)
            halves[key] = (
                t_quantile(n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n)
                if n > 1
                else math.nan
            )
    compared: set[tuple[int, int]] = set()
    if claims is not None and claims.deltas:
        compared = set(claims.deltas) | set(claims.references)
    metric = claims.metric if claims is not None else ACCURACY
    return Convergence(
        spread, climbs, window, window_exact, compared, metric, halves, tuple(samples)
    )


def convergence_note(result: Convergence, labels: Mapping[tuple[int, int], str]) -> list[str]:
    """The lines under a table: converged or not by the reported round (of the cells it
    could check, the others named), and the warning when its comparisons are made
    mid-climb."""
    if not result.judged:
        return []
    lines = _verdict_note(result, labels)
    unchecked = result.unchecked
    if unchecked:
        named = ", ".join(labels.get(c, str(c)) for c in unchecked[:NAMED_CELLS])
        rest = len(unchecked) - min(len(unchecked), NAMED_CELLS)
        lines.insert(
            1,
            f"Not checked for convergence: {len(unchecked)} of {len(result.cells)} cells "
            f"({named}{f' and {rest} more' if rest else ''}) — their rows hold too few "
            "scored rounds to fit a climb over the last rounds (a run of one or two rounds, "
            "or test values scored only every personal_test_every-th round); the verdict "
            "above is of the other cells.",
        )
    return lines


def _verdict_note(result: Convergence, labels: Mapping[tuple[int, int], str]) -> list[str]:
    """The verdict's lines (:func:`convergence_note`) over the cells with a climb."""
    steepest = max(result.climbs.values(), key=abs)
    metric = result.metric
    if result.converged:
        return [
            f"Converged by the reported round: every cell's climb over its "
            f"{result.window_text} is resolved by the seeds as flat — its interval holds 0 "
            f"and stays within the seeds' sd of the statistic ({metric.amount(result.spread)})"
            f"; the steepest mean climb is {metric.amount(abs(steepest))}."
        ]
    if result.converged is None:
        unresolved = result.unresolved
        return [
            f"Cannot tell whether converged by the reported round: {len(unresolved)} of "
            f"{len(result.climbs)} cells' climbs over their {result.window_text} are not "
            f"resolved by the seeds (their interval holds 0 but reaches past the seeds' sd "
            f"of the statistic, {metric.amount(result.spread)}); more seeds or rounds "
            "would tell."
        ]
    moving = result.moving
    if not moving:
        climbing = result.climbing
        named = [
            f"{labels.get(c, str(c))}: {v:+.{metric.digits}f}"
            for c, v in list(climbing.items())[:NAMED_CELLS]
        ]
        rest = len(climbing) - len(named)
        where = ", ".join(named) + (f" and {rest} more" if rest else "")
        return [
            f"Not converged by the reported round: {len(climbing)} of {len(result.climbs)} "
            f"cells still climb over their {result.window_text}, every seed alike ({where} "
            f"{metric.diff_unit}) — less than the seeds' sd of the statistic "
            f"({metric.amount(result.spread)}), but resolved: more rounds would still raise "
            "them."
        ]
    named = [
        f"{labels.get(c, str(c))}: {v:+.{metric.digits}f}"
        for c, v in list(moving.items())[:NAMED_CELLS]
    ]
    rest = len(moving) - len(named)
    where = ", ".join(named) + (f" and {rest} more" if rest else "")
    lines = [
        f"Not converged by the reported round: {len(moving)} of {len(result.climbs)} cells "
        f"still moved by more than the seeds' sd of the statistic "
        f"({metric.amount(result.spread)}) over their {result.window_text} ({where} "
        f"{metric.diff_unit})."
    ]
    if result.mid_climb:
        lines.append(
            "⚠ Mid-climb comparison: Δ here compares curves that are still moving; it says "
            "which learns faster by this round, not where each ends (run more rounds)."
        )
    return lines
