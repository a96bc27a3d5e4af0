"""fedsweep's own round loop, timed as a user runs it (:class:`FederatedRun`); and its
two execution paths side by side (:func:`measure_executions`).

The engine reports per-round ``train_seconds`` (local training, aggregation and
bookkeeping), ``eval_seconds`` (the global model on the test set) and
``samples_this_round``; this module runs warm-up rounds, then the measured rounds, and
keeps the median of each.  Memory: peak RSS of the process (after a reset, so the
measurement's own), RSS once the dataset is loaded, peak CUDA memory, and the bytes of
party state the run keeps between rounds (MOON's previous models).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import replace
from typing import Any

import torch

from benchmarks.cases import Case, dataset
from benchmarks.memory import (
    device_peak_bytes,
    minor_faults,
    peak_rss_bytes,
    reset_device_peak,
    reset_peak_rss,
    rss_bytes,
    tensor_bytes,
)
from federated.engine.round_loop import FederatedRun
from federated.execution.packed import PackedTrainer
from federated.runtime.device import resolve_device


def measure_fedsweep(case: Case) -> dict[str, Any]:
    """Median per-round timings (s), samples/s and memory (bytes) of ``case``."""
    config = case.run_config()
    torch.set_num_threads(case.threads)
    data = dataset(case.dataset)
    device = resolve_device(case.device)
    reset_peak_rss()
    reset_device_peak(device)
    rss_data = rss_bytes()

    start = time.perf_counter()
    run = FederatedRun(config, data)
    setup_seconds = time.perf_counter() - start
    rows, walls, faults = [], [], []
    for _ in range(config.rounds):
        began, faulted = time.perf_counter(), minor_faults()
        rows.append(run.run_round())
        walls.append(time.perf_counter() - began)
        faults.append(minor_faults() - faulted)
    if any(row["diverged"] for row in rows):
        raise RuntimeError(f"{case}: the run diverged; timings would be meaningless")
    measured = rows[case.warmup_rounds :]
    measured_walls = walls[case.warmup_rounds :]
    steps = sum(row["samples_this_round"] for row in measured) / config.batch_size

    def median(key: str) -> float:
        return float(statistics.median(row[key] for row in measured))

    holders = [s for s in run.party_states if tensor_bytes(s) > 0]
    state = tensor_bytes(run.party_states)
    negatives = [row["negatives"] for row in measured if "negatives" in row]
    return {
        "round_s": median("round_seconds"),
        "train_s": median("train_seconds"),
        "eval_s": median("eval_seconds"),
        # the call's own wall time: shows work the engine's timers would leave out
        "wall_round_s": float(statistics.median(measured_walls)),
        "samples_round": round(median("samples_this_round")),
        # minor page faults per local SGD step (evaluation's included): memory the
        # allocator returned to the kernel and had to fault in again
        "faults_per_step": sum(faults[case.warmup_rounds :]) / max(steps, 1.0),
        "samples_per_s": median("samples_per_second"),
        "setup_s": setup_seconds,
        "rounds_measured": len(measured),
        "rss_data_bytes": rss_data,
        "peak_rss_bytes": peak_rss_bytes(),
        "device_peak_bytes": device_peak_bytes(device),
        "model_bytes": run.model_bytes,
        "state_bytes": state,
        "parties_with_state": len(holders),
        "state_bytes_per_party": state / len(holders) if holders else 0.0,
        # MOON: mean previous models per drawn party in the measured rounds (1.0 once
        # every drawn party has trained before; lower when few had, e.g. fraction 0.2)
        "negatives": float(statistics.mean(negatives)) if negatives else math.nan,
    }


def measure_executions(case: Case) -> dict[str, Any]:
    """Packed and sequential execution of ``case`` in one process, their rounds
    alternating (packed, sequential, packed, ...) after each one's warm-up rounds, so
    that a machine whose speed drifts (a shared VM) slows both alike.  Median seconds
    per round of each and their ratio (sequential over packed)."""
    torch.set_num_threads(case.threads)
    data = dataset(case.dataset)
    runs = {
        execution: FederatedRun(replace(case, execution=execution).run_config(), data)
        for execution in ("packed", "sequential")
    }
    for run in runs.values():
        for _ in range(case.warmup_rounds):
            run.run_round()
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    for _ in range(case.rounds):
        for name, run in runs.items():
            rounds[name].append(run.run_round())
    fell_back = not isinstance(runs["packed"].trainer, PackedTrainer)
    out: dict[str, Any] = {"packed_fell_back": fell_back}
    for name, rows in rounds.items():
        out[f"{name}_round_s"] = float(statistics.median(r["round_seconds"] for r in rows))
        out[f"{name}_train_s"] = float(statistics.median(r["train_seconds"] for r in rows))
    out["speedup"] = out["sequential_round_s"] / out["packed_round_s"]
    out["train_speedup"] = out["sequential_train_s"] / out["packed_train_s"]
    return out
