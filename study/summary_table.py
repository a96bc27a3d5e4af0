"""The end-of-sweep table on the terminal: one row per trial, its status in the
report's words and its primary metric on test (the ranking metric beside it)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from federated.contract.columns import OWN_TEST_MEAN, TEST_VALUE
from federated.contract.results import (
    RECORDED_ERROR,
    RECORDED_INTERRUPTED,
    SWEEP_FINISHED,
    SWEEP_INTERRUPTED,
    trial_status,
)
from study.selection import VALIDATION_PREFIX, primary_stem

#: a DP run's row column: the epsilon spent so far (federated/server/privacy.py)
EPSILON = "dp_epsilon"


def summary_rows(
    results: Iterable[Any], manifest: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """One row per trial of ``results`` (Tune's ResultGrid), its status in the report's words
    (:func:`federated.contract.results.trial_status`); ``manifest`` (as :func:`fit` left
    it) tells interrupted and never-started trials from finished ones."""
    manifest = manifest or {}
    recorded = manifest.get("trials") or {}
    rows = []
    for result in results:
        config = result.config or {}
        metrics = result.metrics or {}
        entry = recorded.get(Path(result.path).name) or {}
        stem = primary_stem(config)
        reported = TEST_VALUE.column(stem)
        own = OWN_TEST_MEAN.column(stem)
        sweep_status = manifest.get("status") or SWEEP_FINISHED
        if entry.get("status") == RECORDED_INTERRUPTED:
            sweep_status = SWEEP_INTERRUPTED
        rows.append(
            {
                "trial": metrics.get("trial_id") or Path(result.path).name[:11],
                "point": config.get("point", ""),
                "seed": config.get("seed"),
                "status": trial_status(
                    last_round=int(metrics.get("round") or 0),
                    planned_rounds=int(config.get("rounds") or 0),
                    diverged=bool(metrics.get("diverged")),
                    failed=result.error is not None or entry.get("status") == RECORDED_ERROR,
                    sweep_status=sweep_status,
                ),
                "rounds": metrics.get("round"),
                "test_acc": metrics.get("test_acc"),
                # the trial's primary metric on test (a score task's test_srcc ...)
                "reported": reported,
                "reported_value": metrics.get(reported),
                # a trial scoring each party on its own test split is judged by their mean
                "own": own,
                "own_value": metrics.get(own),
                # a DP trial's epsilon spent by its last round (inf: clipping, no noise)
                EPSILON: metrics.get(EPSILON),
                **{k: v for k, v in metrics.items() if k.startswith("val_")},
            }
        )
    return sorted(rows, key=lambda r: str(r["trial"]))  # trial ids follow the grid order


def format_summary(
    rows: list[dict[str, Any]], not_started: int = 0, metric: str | None = None
) -> str:
    """The end-of-sweep table; ``not_started``: trials Tune never created (an
    interrupted sweep), named in a last line since they have no row.  ``metric``: what
    ranks the trials (a validation metric gets a column of its own and a first line
    saying so)."""
    shown = metric if metric and metric.startswith(VALIDATION_PREFIX) else None
    reported = rows[0].get("reported", "test_acc") if rows else "test_acc"
    own = next((str(r["own"]) for r in rows if _cell(r.get("own_value")) != "-"), None)
    # as wide as the longest point: a cut label makes different points' rows look alike
    width = max([34, *(len(str(r["point"])) for r in rows)])
    head = f"{'trial':<14} {'point':<{width}} {'seed':>4} {'status':<11} {'rounds':>6}"
    head += f" {shown:>8}" if shown else ""
    head += f" {own:>8}" if own else ""
    private = any(_epsilon(r.get(EPSILON)) != "-" for r in rows)
    head += f" {EPSILON:>10}" if private else ""
    lines = [head + f" {reported:>8}"]
    if private:
        spent = "the ε each trial spent by its last round, at its δ (inf: no noise)"
        lines.insert(0, f"{EPSILON}: {spent}")
    if own:
        lines.insert(0, f"{own}: the mean over parties of each one's own test split")
    if shown:
        lines.insert(0, f"trials ranked by {shown} (validation); {reported} is reported")
    unscored = 0
    for r in rows:
        acc = _cell(r.get("reported_value", r.get("test_acc")))
        unscored += acc == "-" and r["rounds"] is not None
        rounds = "-" if r["rounds"] is None else str(r["rounds"])
        seed = "-" if r["seed"] is None else str(r["seed"])
        ranked = " " + _cell(r.get(shown)).rjust(8) if shown else ""
        ranked += " " + _cell(r.get("own_value")).rjust(len(own)) if own else ""
        ranked += " " + _epsilon(r.get(EPSILON)).rjust(10) if private else ""
        lines.append(
            f"{r['trial']:<14} {r['point']!s:<{width}} {seed:>4} "
            f"{r['status']:<11} {rounds:>6}{ranked} {acc:>8}"
        )
    if unscored:
        # a personalised method scores the pooled test every personal_test_every-th round
        # (and the last): a trial stopped between two such rounds has no value to show
        lines.append(
            f"(-: {reported} not scored at the trial's last round; the report reads the "
            "rounds that were)"
        )
    if not_started:
        lines.append(f"({not_started} more trial(s) not started)")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """A metric's cell: four decimals, or "-" for a value that is missing or NaN (a round
    that did not score it), never "nan"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.4f}"
    return "-"


def _epsilon(value: Any) -> str:
    """An epsilon's cell: three significant digits, ``inf`` where no noise was added,
    "-" for a trial without DP (no value)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return "inf" if math.isinf(value) else f"{value:.3g}"
    return "-"
