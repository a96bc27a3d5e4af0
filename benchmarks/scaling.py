"""The scaling table: seconds per round and memory as parties and local epochs grow.

One axis at a time around the base setting (N = 10, E = 1): parties N in {10, 50, 100
with fraction 0.2} at E = 1, then E in {2, 5} at N = 10.  Cost should be linear in the
samples trained per round — :func:`linear_fit` fits train seconds = a + b·samples per
algorithm — and MOON's memory linear in N: every party keeps its previous model on the
CPU between rounds, so state bytes per party is constant (one model's state) and the
total grows with the parties that have trained.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from benchmarks.cases import Case


def parse_parties(text: str) -> list[tuple[int, float]]:
    """``"10,50,100:0.2"`` -> [(10, 1.0), (50, 1.0), (100, 0.2)]: N and sample fraction."""
    out = []
    for item in text.split(","):
        n, _, fraction = item.strip().partition(":")
        out.append((int(n), float(fraction) if fraction else 1.0))
    return out


def scaling_cases(
    base: Case, algorithms: list[str], parties: list[tuple[int, float]], epochs: list[int]
) -> list[Case]:
    """Each algorithm: every (N, fraction) at the first E, then every other E at the first N."""
    cases: list[Case] = []
    n0, f0 = parties[0]
    for algorithm in algorithms:
        points = [(n, f, epochs[0]) for n, f in parties]
        points += [(n0, f0, e) for e in epochs[1:]]
        for n, f, e in dict.fromkeys(points):  # ordered and without repeats
            cases.append(
                replace(base, algorithm=algorithm, n_parties=n, sample_fraction=f, local_epochs=e)
            )
    return cases


def linear_fit(rows: list[dict[str, Any]], x: str, y: str) -> dict[str, float]:
    """Least-squares y = a + b·x over ``rows``: intercept ``a``, slope ``b``, ``r2``."""
    xs = np.array([r[x] for r in rows], dtype=float)
    ys = np.array([r[y] for r in rows], dtype=float)
    if len(rows) < 2 or np.ptp(xs) == 0:
        return {"a": math.nan, "b": math.nan, "r2": math.nan}
    b, a = np.polyfit(xs, ys, 1)
    residual = ys - (a + b * xs)
    total = ((ys - ys.mean()) ** 2).sum()
    r2 = 1.0 - (residual**2).sum() / total if total > 0 else math.nan
    return {"a": float(a), "b": float(b), "r2": float(r2)}
