"""``--seeds until:T[:CAP]``: a sweep that adds seeds in batches until its tables resolve
T accuracy points, or CAP seeds are spent.

The first batch is the budget's (or the study's) seeds, 0..n-1; each later batch adds as
many seeds again (never past CAP), run as a sweep of its own beside the first,
``<sweep>-seeds<a>-<b>``: the report reads them together (one study, one condition, the
seeds paired).  After each batch the tables the report would print are rebuilt from all
batches (:func:`analysis.tables.resolvable_tables.resolvable_differences`, the report's own
statistic) and the rule below decides.

The rule stops on the *width* of the intervals — each table's resolvable difference, which
does not depend on the differences observed — never on a difference first looking
significant, which would choose the seeds that happened to agree and leave the intervals
too narrow (docs/reported-statistic.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from federated.cli.input_checks import InputError

DEFAULT_CAP = 10
MAX_CAP = 1_000


class SeedTargetError(InputError):
    """A malformed ``--seeds until:...`` (one line)."""


@dataclass(frozen=True)
class SeedTarget:
    """Stop when every table resolves ``points`` accuracy points, or at ``cap`` seeds."""

    points: float
    cap: int = DEFAULT_CAP


def parse_seed_target(text: str | None) -> SeedTarget | None:
    """``until:2`` or ``until:2:12`` as a :class:`SeedTarget`; None for any other
    ``--seeds`` value (a count or a list, read by the plan)."""
    if text is None or not text.startswith("until:"):
        return None
    parts = text.split(":")
    allowed = "until:T or until:T:CAP, T accuracy points > 0, CAP an integer in [2, 1000]"
    try:
        points = float(parts[1])
        cap = int(parts[2]) if len(parts) == 3 else DEFAULT_CAP
    except (ValueError, IndexError):
        raise SeedTargetError(f"--seeds={text!r} (allowed: {allowed})") from None
    if len(parts) > 3 or not math.isfinite(points) or points <= 0 or not 2 <= cap <= MAX_CAP:
        raise SeedTargetError(f"--seeds={text!r} (allowed: {allowed})")
    return SeedTarget(points, cap)


def next_batch(
    resolvable: Mapping[str, float], target: SeedTarget, done: int, batch: int
) -> tuple[list[int], str]:
    """The seeds to run next (empty: stop) and the line that says why, from each table's
    ``resolvable`` difference (points; NaN: no interval yet) after ``done`` seeds
    (0..done-1), adding ``batch`` at a time."""
    above = {
        name: value
        for name, value in resolvable.items()
        if not (math.isfinite(value) and value <= target.points)
    }
    if not resolvable:
        return [], f"no table compares cells: nothing to resolve ({done} seeds)"
    if not above:
        worst = max(resolvable.values())
        return [], (
            f"target reached: every table resolves <= {target.points:g} points with {done} "
            f"seeds (largest {worst:.2f})"
        )
    shown = ", ".join(f"{name} {value:.2f}" for name, value in sorted(above.items()))
    if done >= target.cap:
        return [], (
            f"cap reached: {done} seeds (until:{target.points:g}:{target.cap}); still above "
            f"{target.points:g} points: {shown}"
        )
    stop = min(target.cap, done + max(1, batch))
    return list(range(done, stop)), (
        f"adding seeds {done}..{stop - 1}: still above {target.points:g} points: {shown}"
    )
