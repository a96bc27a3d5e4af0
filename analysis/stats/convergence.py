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
intervals allow for.  A table has converged when none of its cells is still moving; a Δ
whose cell or reference is still moving is a comparison made mid-climb, and the table
says so.

With one seed there is no spread to judge against: nothing is said.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from analysis.primary_metric import ACCURACY, Metric
from analysis.stats.comparisons import CellSample, GridComparison
from analysis.stats.paired_stats import pooled_sd
from analysis.stats.trial_statistic import CLIMB_WINDOW

# A note names this many moving cells, the steepest first, then counts the rest.
NAMED_CELLS = 4


@dataclass
class Convergence:
    """The convergence judgement of one table (cells as (row index, column index)).

    Attributes:
        spread: the statistic's sd over seeds pooled over the cells (points; NaN: no
            cell has two seeds, nothing judged).
        climbs: each cell's mean climb over its seeds (points over the last rounds).
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
    def converged(self) -> bool | None:
        """True / False; None when not judged (one seed, or no climb recorded)."""
        return None if not self.judged else not self.moving

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
    climbs = {}
    for key, sample in samples.items():
        values = [v for v in sample.climb_by_seed.values() if math.isfinite(v)]
        if values:
            climbs[key] = float(np.mean(values))
    compared: set[tuple[int, int]] = set()
    if claims is not None and claims.deltas:
        compared = set(claims.deltas) | set(claims.references)
    metric = claims.metric if claims is not None else ACCURACY
    return Convergence(spread, climbs, window, window_exact, compared, metric)


def convergence_note(result: Convergence, labels: Mapping[tuple[int, int], str]) -> list[str]:
    """The lines under a table: converged or not by the reported round, and the warning
    when its comparisons are made mid-climb."""
    if not result.judged:
        return []
    steepest = max(result.climbs.values(), key=abs)
    metric = result.metric
    if result.converged:
        return [
            f"Converged by the reported round: no cell moved more over its "
            f"{result.window_text} (at most {metric.amount(abs(steepest))}) than the seeds' "
            f"sd of the statistic ({metric.amount(result.spread)})."
        ]
    moving = result.moving
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
