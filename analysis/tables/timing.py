"""The paper's Table 11, time per round: training vs evaluation, per method, on the machine
the sweep ran on.

Definitions:

- Seconds come from the trials' per-round rows: ``train_seconds`` (local training and
  aggregation), ``eval_seconds`` (the global model on the test set) and ``round_seconds``
  (the whole round), as :mod:`federated.engine.round_row` reports them.
- Each cell is the mean ± sample std over rounds, pooled over the completed trials (all
  seeds) of its method.  A trial's first round is left out when it ran more than one:
  it pays one-time costs (data loading, warm-up) that later rounds do not.
- The machine is the sweep manifest's ``machine`` (:mod:`study.machine`: CPU model and
  thread count, GPU names); manifests written before it existed say
  "machine not recorded".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from analysis.naming import parameter_name
from analysis.reading.loading import COMPLETED
from analysis.tables.table import Table, key_order, row_label

PHASES = {
    "train_seconds": "training (s)",
    "eval_seconds": "evaluation (s)",
    "round_seconds": "round (s)",
}
NOT_RECORDED = "machine not recorded"


def machine_text(manifest: Mapping[str, Any]) -> str:
    """``AMD EPYC 7763 (16 threads), GPU: NVIDIA H100`` from a manifest's ``machine``."""
    machine = manifest.get("machine")
    if not isinstance(machine, Mapping) or not machine.get("cpu"):
        return NOT_RECORDED
    text = str(machine["cpu"])
    if machine.get("threads"):
        text += f" ({machine['threads']} threads)"
    gpus = [str(g) for g in machine.get("gpus") or []]
    if gpus:
        names = {g: gpus.count(g) for g in dict.fromkeys(gpus)}
        text += ", GPU: " + ", ".join(f"{n}× {g}" if n > 1 else g for g, n in names.items())
    return text


def machines_text(manifests: Iterable[Mapping[str, Any]]) -> str:
    """The distinct machines of several sweeps, ``; ``-separated."""
    return "; ".join(dict.fromkeys(machine_text(m) for m in manifests)) or NOT_RECORDED


def _mean_std(values: pd.Series) -> str:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        return "–"
    text = f"{values.mean():.3g}"
    if len(values) > 1:
        text += f" ± {values.std(ddof=1):.2g}"
    return text


def time_per_round_table(
    rounds: pd.DataFrame,
    trials: pd.DataFrame,
    manifests: Sequence[Mapping[str, Any]],
    *,
    rows: Sequence[str],
    name: str,
    title: str,
) -> Table | None:
    """Table 11 for the completed trials of one study group; None when no completed
    trial has a timed round."""
    rows = [r for r in rows if r in trials] or ["algorithm"]
    done = trials[trials["status"] == COMPLETED]
    if done.empty or "round_seconds" not in rounds:
        return None
    keys = set(zip(done["sweep"], done["trial"]))
    timed = rounds[[k in keys for k in zip(rounds["sweep"], rounds["trial"])]]
    longest = timed.groupby(["sweep", "trial"])["round"].transform("max")
    # the first round pays one-time costs (loading, warm-up): left out where there are more
    timed = timed[(timed["round"] > 1) | (longest <= 1)]
    if timed.empty:
        return None
    phases = [p for p in PHASES if p in timed]
    labels, cells, data = [], [], []
    for key in key_order(done, rows):
        part = timed[[tuple(v) == key for v in timed[rows].itertuples(index=False)]]
        if part.empty:
            continue
        labels.append(row_label(rows, key))
        cells.append([_mean_std(part[p]) for p in phases])
        record = {**dict(zip(rows, key)), "row": labels[-1], "rounds_timed": len(part)}
        for p in phases:
            values = pd.to_numeric(part[p], errors="coerce").dropna()
            record[f"{p}_mean"] = float(values.mean()) if len(values) else math.nan
            record[f"{p}_std"] = float(values.std(ddof=1)) if len(values) > 1 else math.nan
        data.append(record)
    if not labels:
        return None
    display = pd.DataFrame(cells, index=labels, columns=[PHASES[p] for p in phases], dtype=object)
    bold = pd.DataFrame(False, index=display.index, columns=display.columns)
    machine = machines_text(manifests)
    frame = pd.DataFrame(data)
    frame["machine"] = machine
    notes = [
        "Seconds per round: mean ± std over rounds, pooled over each row's completed trials "
        "(all seeds), each trial's first round left out (one-time loading and warm-up).",
        "Training = local training and aggregation; evaluation = the global model on the "
        "test set; round = the whole round.",
        f"Machine: {machine}" + _devices(done) + ".",
    ]
    header = " · ".join(parameter_name(k) for k in rows)
    return Table(name, f"{title} — {machine}", display, bold, frame, header, notes)


def _devices(trials: pd.DataFrame) -> str:
    """``; trials on cpu, 1 thread each`` from the trials' ``device`` and ``threads``."""
    parts = []
    if "device" in trials:
        devices = ", ".join(str(d) for d in dict.fromkeys(trials["device"]))
        parts.append(f"trials on {devices}")
    if "threads" in trials:
        threads = "/".join(str(t) for t in dict.fromkeys(trials["threads"]))
        parts.append(f"{threads} thread(s) each")
    return "; " + ", ".join(parts) if parts else ""
