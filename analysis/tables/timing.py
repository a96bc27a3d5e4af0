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
from analysis.tables.table import Table, key_order, no_bold, row_label

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
    ran = "execution_path" in done and done["execution_path"].notna().any()
    labels, cells, data = [], [], []
    for key in key_order(done, rows):
        part = timed[[tuple(v) == key for v in timed[rows].itertuples(index=False)]]
        if part.empty:
            continue
        labels.append(row_label(rows, key))
        mine = done[[tuple(v) == key for v in done[rows].itertuples(index=False)]]
        paths = _paths(mine) if ran else ""
        cells.append([_mean_std(part[p]) for p in phases] + ([paths] if ran else []))
        record = {**dict(zip(rows, key)), "row": labels[-1], "rounds_timed": len(part)}
        if ran:
            record["execution_path"] = paths
        for p in phases:
            values = pd.to_numeric(part[p], errors="coerce").dropna()
            record[f"{p}_mean"] = float(values.mean()) if len(values) else math.nan
            record[f"{p}_std"] = float(values.std(ddof=1)) if len(values) > 1 else math.nan
        data.append(record)
    if not labels:
        return None
    headers = [PHASES[p] for p in phases] + (["ran"] if ran else [])
    display = pd.DataFrame(cells, index=labels, columns=headers, dtype=object)
    bold = no_bold(display)
    machine = machines_text(manifests)
    frame = pd.DataFrame(data)
    frame["machine"] = machine
    notes = [
        "Seconds per round: mean ± std over rounds, pooled over each row's completed trials "
        "(all seeds), each trial's first round left out (one-time loading and warm-up).",
        "Training = local training and aggregation; "
        + _evaluation_words(done, rows, timed)
        + "; round = the whole round.",
        f"Machine: {machine}" + _devices(done) + ".",
    ]
    if ran:
        notes.append(
            "Ran: the path each row's parties trained on, as its rounds recorded it "
            "(packed: parties trained together in one pass; sequential: one after "
            "another — a method or model that cannot pack runs sequentially whatever "
            "execution asked)."
        )
    header = " · ".join(parameter_name(k) for k in rows)
    return Table(name, f"{title} — {machine}", display, bold, frame, header, notes)


def _paths(trials: pd.DataFrame) -> str:
    """The distinct execution paths of ``trials``' rounds (``packed``, ``sequential``)."""
    found = [p.strip() for v in trials["execution_path"].dropna() for p in str(v).split(",")]
    return "/".join(dict.fromkeys(found)) or "–"


def _evaluation_words(trials: pd.DataFrame, rows: Sequence[str], rounds: pd.DataFrame) -> str:
    """What a row's evaluation time holds, from what its trials evaluated: the global
    model on the test set; and, where trials did, each party's own test split, the
    parties' own models (their rounds record a spread over parties, ``test_<m>_std``),
    or fine-tuning before each party's own scores (which takes most of its evaluation
    time), naming the rows."""

    def named(mask: pd.Series) -> str:
        chosen = trials[mask.to_numpy(dtype=bool)]
        return ", ".join(row_label(rows, key) for key in key_order(chosen, rows))

    words = "evaluation = the global model on the test set"
    extra = []
    tuned = pd.to_numeric(trials.get("finetune_epochs"), errors="coerce").fillna(0) > 0
    if "finetune_epochs" in trials and tuned.any():
        extra.append(
            "fine-tuning a copy of each party's model on its own training data before "
            f"scoring its own splits, most of the evaluation time ({named(tuned)})"
        )
    own = pd.to_numeric(trials.get("party_test_fraction"), errors="coerce").fillna(0) > 0
    if "party_test_fraction" in trials and own.any():
        extra.append(f"scoring each party's own test split ({named(own)})")
    spread = [c for c in rounds if c.startswith("test_") and c.endswith("_std")]
    if spread:
        scored = rounds[rounds[spread].notna().any(axis=1)]
        keys = set(zip(scored["sweep"], scored["trial"]))
        personal = pd.Series([k in keys for k in zip(trials["sweep"], trials["trial"])])
        if personal.any():
            extra.append(f"each party's own model on the test set ({named(personal)})")
    if extra:
        words += "; it also holds " + "; ".join(extra)
    return words


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
