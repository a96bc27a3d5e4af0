"""Differences between table cells over seeds, with 95% intervals: the one place for the
statistics behind every table's Δ, bold and "resolvable" caption.

Units: the callers pass accuracies in **accuracy points** (percent, 0-100), so every mean
difference, interval bound and resolvable difference returned here is in accuracy points
too (nothing below depends on the unit; the tables use points so that what the reader
sees and what the CSV holds agree).

- :func:`paired_difference`: two cells measured with the same seeds (same partition,
  initialisation and batches): the mean of the per-seed differences ``a - b`` with a
  Student-t interval, ``t(1 - α/2, n - 1) · sd(d) / √n`` (``sd`` the sample std, ddof 1).
- :func:`welch_interval`: two cells whose seeds cannot be paired (different partitions,
  seeds that do not match up): difference of means, standard error
  ``√(s_a²/n_a + s_b²/n_b)``, Welch-Satterthwaite degrees of freedom.
- :func:`compare`: picks one of the two from per-seed values.
- :func:`resolvable_difference` / :func:`resolvable_unpaired`: the smallest difference a
  table's seeds could tell from 0 at 95%, pooled over the table's cells.

Fewer than two seeds (or pairs) give NaN bounds: no interval, no claim.

**No spread, no interval.**  A Student-t interval is an estimate of seed-to-seed noise
from the spread the seeds showed.  Per-seed differences that are all equal (to
floating-point rounding, :func:`no_spread`: e.g. two models at chance whose accuracies
move in step on every seed, or test sets so small that the differences fall on the same
step) give a zero-width interval that measured no noise at all: "Δ -0.1 [-0.1, -0.1]"
would claim a difference resolved that no seed could have contradicted.  Such a
difference gets NaN bounds like a single seed, with :attr:`Difference.spread_seen` False,
and the tables write it as "not resolvable from N seeds" (no arrow, no bold).  The same
holds for Welch's interval when neither sample varies, and for a pooled sd (the
resolvable difference) of zero.  Two seeds whose differences do vary keep their
interval: the t quantile with one degree of freedom (12.7) already widens it for how
little one difference of differences says, and it could have been wide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95
PAIRED = "paired"
WELCH = "welch"
# Values reach here as points (100 × a recorded fraction) or a score metric's units, and
# two equal differences can come back a few ulps apart (100 × 0.205 - 100 × 0.206 is not
# 100 × 0.101 - 100 × 0.102 in floating point).  A range below this share of the values'
# magnitude (at least 1) is rounding, not seed-to-seed noise: no recorded metric
# resolves a billionth of its scale.
ROUNDING = 1e-9


@dataclass(frozen=True)
class Difference:
    """``a - b`` in accuracy points, with its interval.

    Attributes:
        mean: the estimated difference (paired: mean of per-seed differences; Welch:
            difference of the means).
        low, high: the interval's bounds (NaN when fewer than two seeds).
        n: pairs (paired), or the smaller of the two seed counts (Welch).
        df: the t distribution's degrees of freedom (NaN without an interval).
        kind: :data:`PAIRED` or :data:`WELCH`.
        spread_seen: False when two or more seeds were compared but showed no spread
            (:func:`no_spread`): the bounds are NaN, the difference is not resolvable
            from these seeds (module docstring).
    """

    mean: float
    low: float
    high: float
    n: int
    df: float
    kind: str
    spread_seen: bool = True

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def direction(self) -> int:
        """+1 when the interval lies above 0, -1 below, 0 when it contains 0 (or is NaN)."""
        if not self.has_interval:
            return 0
        if self.low > 0:
            return 1
        if self.high < 0:
            return -1
        return 0

    @property
    def resolved(self) -> bool:
        """True when the interval excludes 0: the seeds tell ``a`` and ``b`` apart."""
        return self.direction != 0


def no_spread(values: Sequence[float]) -> bool:
    """True when ``values`` are all equal up to floating-point rounding (their range at
    most :data:`ROUNDING` × their largest magnitude, or × 1): a spread of exactly zero,
    which estimates no noise.  False for an empty sequence."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return False
    scale = max(1.0, float(np.max(np.abs(v))))
    return float(np.ptp(v)) <= ROUNDING * scale


def t_quantile(df: float, level: float = LEVEL) -> float:
    """The two-sided Student-t critical value: ``t(1 - (1 - level)/2, df)``."""
    return float(stats.t.ppf(0.5 + level / 2, df))


def paired_difference(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Difference:
    """``a - b`` paired element by element (``a[i]`` and ``b[i]`` share seed i).

    Mean of the differences ± ``t(df = n-1) · sd / √n``; NaN bounds for one pair, and
    for differences without spread (``spread_seen`` False: module docstring).
    """
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size == 0:
        raise ValueError("paired_difference: no pairs")
    n = int(d.size)
    mean = float(np.mean(d))
    if n < 2:
        return Difference(mean, math.nan, math.nan, n, math.nan, PAIRED)
    if no_spread(d):
        return Difference(mean, math.nan, math.nan, n, math.nan, PAIRED, spread_seen=False)
    half = t_quantile(n - 1, level) * float(np.std(d, ddof=1)) / math.sqrt(n)
    return Difference(mean, mean - half, mean + half, n, float(n - 1), PAIRED)


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Difference:
    """``mean(a) - mean(b)`` for unpaired samples, with Welch's interval.

    NaN bounds when either sample has fewer than two values, and when neither sample
    varies (``spread_seen`` False: a zero-width interval would estimate no noise).
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("welch_interval: an empty sample")
    mean = float(np.mean(x) - np.mean(y))
    n = int(min(x.size, y.size))
    if n < 2:
        return Difference(mean, math.nan, math.nan, n, math.nan, WELCH)
    if no_spread(x) and no_spread(y):
        return Difference(mean, math.nan, math.nan, n, math.nan, WELCH, spread_seen=False)
    va, vb = float(np.var(x, ddof=1)) / x.size, float(np.var(y, ddof=1)) / y.size
    se2 = va + vb
    df = se2**2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = t_quantile(df, level) * math.sqrt(se2)
    return Difference(mean, mean - half, mean + half, n, float(df), WELCH)


def compare(
    a: Mapping[int, float],
    b: Mapping[int, float],
    *,
    pairable: bool = True,
    level: float = LEVEL,
) -> Difference:
    """``a - b`` from per-seed values (``{seed: accuracy points}``).

    Paired when ``pairable`` (the two cells share partitions) and both hold exactly the
    same seeds; otherwise Welch's interval on the two sets of values.
    """
    if pairable and set(a) == set(b):
        seeds = sorted(a)
        return paired_difference([a[s] for s in seeds], [b[s] for s in seeds], level)
    return welch_interval(list(a.values()), list(b.values()), level)


def pooled_sd(samples: Sequence[Sequence[float]]) -> tuple[float, int]:
    """(sd pooled over samples, each weighted by its size - 1; the largest size).

    ``s_p² = Σ (n_i - 1) s_i² / Σ (n_i - 1)`` over the samples of two or more values;
    NaN when there is none."""
    squares, dof, largest = 0.0, 0, 0
    for sample in samples:
        values = np.asarray(sample, dtype=float)
        largest = max(largest, int(values.size))
        if values.size >= 2:
            squares += float(np.var(values, ddof=1)) * (values.size - 1)
            dof += int(values.size - 1)
    return (math.sqrt(squares / dof) if dof else math.nan), largest


def resolvable_difference(
    paired_differences: Sequence[Sequence[float]],
    n: int | None = None,
    level: float = LEVEL,
) -> float:
    """The smallest paired difference a table's seeds could tell from 0 at ``level``.

    ``paired_differences``: for each compared cell, its per-seed differences to the cell
    it is compared with (accuracy points).  Their variances are pooled, each weighted by
    its seeds - 1: ``s_p² = Σ (n_i - 1) s_i² / Σ (n_i - 1)``; then
    ``t(1 - α/2, n - 1) · s_p / √n`` with ``n`` the table's seed count (default: the
    largest number of pairs).  NaN when no cell has two pairs.
    """
    sd, largest = pooled_sd(paired_differences)
    n = n or largest
    if math.isnan(sd) or n < 2:
        return math.nan
    return t_quantile(n - 1, level) * sd / math.sqrt(n)


def resolvable_unpaired(
    samples: Sequence[Sequence[float]], n: int | None = None, level: float = LEVEL
) -> float:
    """The counterpart of :func:`resolvable_difference` for unpaired cells.

    ``samples``: each cell's per-seed values.  The within-cell variance is pooled as
    above (``s_w``); two cells of ``n`` seeds each differ resolvably from
    ``t(1 - α/2, 2(n - 1)) · s_w · √(2/n)``.  NaN when no cell has two seeds.
    """
    sd, largest = pooled_sd(samples)
    n = n or largest
    if math.isnan(sd) or n < 2:
        return math.nan
    return t_quantile(2 * (n - 1), level) * sd * math.sqrt(2 / n)
