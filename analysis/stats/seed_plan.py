"""Seed planning: how many seeds a comparison needs to resolve a stated difference, and
what a results folder's tables resolve now.

The arithmetic is the report's own (:mod:`analysis.stats.paired_stats`): a table of ``n`` seeds
resolves ``t(1 - α/2, n - 1) · s / √n`` accuracy points, ``s`` the sd of the paired
differences (pooled over the table's Δ cells); unpaired tables
``t(1 - α/2, 2(n - 1)) · s · √(2/n)``, ``s`` the within-cell sd.  Planning inverts it:
:func:`seeds_to_resolve` is the smallest ``n`` whose resolvable difference is at most
the target, for the observed ``s``.  The ``s`` observed with few seeds is itself an
estimate, so the plan is a forecast, not a promise:
:func:`analysis.tables.resolvable_tables.resolvable_differences` then says what the seeds run
did resolve.

Stopping a sweep when every table's *resolvable difference* (the interval's half-width,
which does not depend on the observed differences) reaches the target keeps the intervals
honest; stopping when a difference first looks significant would not (it picks the seeds
that happened to agree).

Pure functions (arithmetic only): the report's notes and :mod:`study` (``--seeds
until:T``) both use them.
"""

from __future__ import annotations

import math

from analysis.stats.paired_stats import LEVEL, t_quantile

# Where a t-based search starts looking beyond (a guard: 10^6 seeds is no plan).
MAX_SEEDS = 1_000_000
DEFAULT_TARGET = 2.0  # accuracy points: the papers' differences are 1-3 points


def resolvable_with(sd: float, n: int, confidence: float = LEVEL, *, paired: bool = True) -> float:
    """The smallest difference (points) ``n`` seeds resolve at ``confidence`` for a
    spread ``sd`` (points): paired ``t(n-1)·sd/√n``, unpaired ``t(2(n-1))·sd·√(2/n)``.
    NaN for fewer than two seeds."""
    if n < 2:
        return math.nan
    if paired:
        return t_quantile(n - 1, confidence) * sd / math.sqrt(n)
    return t_quantile(2 * (n - 1), confidence) * sd * math.sqrt(2 / n)


def seeds_to_resolve(
    sd: float, target: float, confidence: float = LEVEL, *, paired: bool = True
) -> int:
    """The fewest seeds (≥ 2: an interval needs two) whose resolvable difference for a
    spread ``sd`` (accuracy points, the sd of the paired differences; unpaired: the
    within-cell sd) is at most ``target`` points at ``confidence``.

    Raises ValueError for a negative or non-finite ``sd``, a ``target`` ≤ 0, a
    ``confidence`` outside (0, 1), or a plan beyond :data:`MAX_SEEDS` seeds.
    """
    if not math.isfinite(sd) or sd < 0:
        raise ValueError(f"sd={sd!r} (allowed: a finite number >= 0, accuracy points)")
    if not math.isfinite(target) or target <= 0:
        raise ValueError(f"target={target!r} (allowed: a number > 0, accuracy points)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r} (allowed: between 0 and 1)")
    if sd == 0:
        return 2
    # The normal quantile is below every t quantile, so the normal approximation's n is a
    # lower bound; step up from it (a few steps: t approaches the normal quickly).
    z = t_quantile(math.inf, confidence)
    factor = 1.0 if paired else 2.0
    n = max(2, math.ceil(factor * (z * sd / target) ** 2))
    while resolvable_with(sd, n, confidence, paired=paired) > target:
        n += 1
        if n > MAX_SEEDS:
            raise ValueError(
                f"sd={sd:g} points needs more than {MAX_SEEDS} seeds to resolve {target:g}"
            )
    return n


def seeds_text(sd: float, target: float, confidence: float = LEVEL, *, paired: bool = True) -> str:
    """``"14"``, or ``"–"`` when ``sd`` is unknown (NaN: fewer than two seeds)."""
    if not math.isfinite(sd):
        return "–"
    return str(seeds_to_resolve(sd, target, confidence, paired=paired))
