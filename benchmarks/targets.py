"""Issue 6's and issue 14's (packed execution) targets, checked against the measured
tables: one row per target and scope.

Each row reads "target / measured / met or missed"; a target whose measurement was
skipped (``--skip-straightforward``, side by side not run) says ``not measured``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from benchmarks.side_by_side import DEFAULT_LEVEL

MET, MISSED, NOT_MEASURED, NOT_APPLICABLE = "met", "missed", "not measured", "n/a"


@dataclass(frozen=True)
class Target:
    text: str  # the wording
    column: str  # the main-table column (or side-by-side key) it reads
    op: str  # ">=" or "<="
    bound: float
    algorithms: tuple[str, ...] = ()  # empty: every algorithm

    def status(self, value: float) -> str:
        if value is None or math.isnan(value):
            return NOT_MEASURED
        ok = value >= self.bound if self.op == ">=" else value <= self.bound
        return MET if ok else MISSED


ROW_TARGETS = (
    # training samples/s, the measure; the whole-round ratio (evaluations
    # included) is the table's "x plain (round)" column, shown for information
    Target(
        "training samples/s >= 5x the straightforward loop (MOON)",
        "train_speedup",
        ">=",
        5.0,
        ("moon",),
    ),
    Target(
        "training samples/s >= 3x the straightforward loop (FedAvg)",
        "train_speedup",
        ">=",
        3.0,
        ("fedavg",),
    ),
    Target("samples/s >= 85% of the bare model step", "bare_fraction", ">=", 0.85),
    Target("MOON round <= 1.8x FedAvg's", "vs_fedavg", "<=", 1.8, ("moon",)),
    Target("evaluation <= 10% of a round at E = 1", "eval_fraction", "<=", 0.10),
    # issue 14: a round's parties trained together (packed) against one by one
    Target("packed MOON round >= 1.5x the sequential path", "packed_speedup", ">=", 1.5, ("moon",)),
    Target(
        "packed FedAvg round >= 1.4x the sequential path", "packed_speedup", ">=", 1.4, ("fedavg",)
    ),
)
SIDE_BY_SIDE = Target(
    "2 single-thread trials side by side >= 1.6x one trial (study.sweep)", "speedup", ">=", 1.6
)


def _row(target: Target, scope: str, value: float, status: str | None = None) -> dict[str, Any]:
    return {
        "target": target.text,
        "scope": scope,
        "required": f"{target.op} {target.bound:g}",
        "measured": value,
        "status": status or target.status(value),
    }


def check_targets(
    main_rows: list[dict[str, Any]], side_rows: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Target rows for every (dataset, algorithm) row the target applies to."""
    out = []
    for target in ROW_TARGETS:
        for row in main_rows:
            if target.algorithms and row["algorithm"] not in target.algorithms:
                continue
            scope = f"{row['dataset']} {row['algorithm']}"
            value = row.get(target.column, math.nan)
            if target.column == "eval_fraction" and row["local_epochs"] != 1:
                out.append(_row(target, scope, value, NOT_APPLICABLE))
            else:
                out.append(_row(target, scope, value))
    if side_rows:
        # the case: the sweep's default resources (two trials at once on 2 cores),
        # or an explicit level of two at once, against the first level (one at a time)
        two = [r for r in side_rows[1:] if r["level"] == DEFAULT_LEVEL or r["max_concurrent"] == 2]
        for row in two:
            out.append(_row(SIDE_BY_SIDE, row["level"], row["speedup"]))
    else:
        out.append(_row(SIDE_BY_SIDE, "-", math.nan))
    return out
