"""Trials side by side, measured through the real ``python -m study.sweep`` path.

The same small study (by default ``temperature --budget smoke --seeds 2``: 6 MOON trials,
with more rounds and data set by ``--set`` so each trial runs long enough to time) is
swept once per concurrency level: on CPU with ``--max-concurrent 1`` and with the
sweep's default resources (one CPU and one torch thread per trial, so two at once on
2 cores); on a GPU with ``k`` trials packed per GPU (``--gpus-per-trial 1/k
--max-concurrent k``).

Throughput is read from the result files the sweep writes (:mod:`study.sweep_folder`): the
training samples of every reported round, divided by the wall-clock span from the
first round's start to the last round's end over all trials.  That excludes Ray's
start-up and the first trial's set-up; the sweep's whole wall time, which includes
them, is reported as well.  Tune stamps each row with ``timestamp`` (whole seconds) and
``time_total_s`` (seconds since the trial started, precise), so a trial's start is
pinned to within a fraction of a second by intersecting ``timestamp - time_total_s``
over its rows (:func:`trial_origin`).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.isolation import ROOT, MeasurementError
from search_spaces import STUDIES
from study.sweep_folder import MANIFEST

DEFAULT_LEVEL = "default resources"


@dataclass(frozen=True)
class SweepSetting:
    """The study every level sweeps (``--set`` overrides make each trial long enough)."""

    study: str = "temperature"
    budget: str = "smoke"
    dataset: str = "synthetic"
    rounds: int = 5
    data_fraction: float = 0.2
    local_epochs: int = 1
    seeds: int = 2
    waves: int = 2  # trials per level = at least waves x the level's concurrency


@dataclass(frozen=True)
class Level:
    """One way of running the sweep; ``None`` leaves the sweep's default in place."""

    label: str
    max_concurrent: int | None = None
    gpus_per_trial: float = 0.0
    cpus_per_trial: float | None = None

    def args(self) -> list[str]:
        out = []
        if self.max_concurrent is not None:
            out += ["--max-concurrent", str(self.max_concurrent)]
        if self.gpus_per_trial:
            out += ["--gpus-per-trial", f"{self.gpus_per_trial:g}"]
        if self.cpus_per_trial is not None:
            out += ["--cpus-per-trial", f"{self.cpus_per_trial:g}"]
        return out


def levels_for(pack: str, gpu: bool) -> list[Level]:
    """``"1,default"`` (CPU) or ``"1,2,4,8"`` (trials per GPU) -> the levels to sweep."""
    levels = []
    for item in pack.split(","):
        item = item.strip()
        if item == "default":
            levels.append(Level(DEFAULT_LEVEL))
        elif gpu:
            k = int(item)
            levels.append(Level(f"{k} per GPU", max_concurrent=k, gpus_per_trial=1.0 / k))
        else:
            k = int(item)
            levels.append(Level(f"max {k} at once", max_concurrent=k))
    return levels


def seeds_for(setting: SweepSetting, level: Level) -> int:
    """Enough seeds for at least ``setting.waves`` waves of trials at the level's concurrency."""
    waves = setting.waves * (level.max_concurrent or 1)
    return max(setting.seeds, math.ceil(waves / STUDIES[setting.study].grid_size))


def run_sweep(setting: SweepSetting, level: Level, storage: Path, name: str) -> dict[str, Any]:
    """Run one sweep as a user would; returns its folder and wall-clock times."""
    cmd = [
        sys.executable,
        "-m",
        "study.sweep",
        setting.study,
        "--budget",
        setting.budget,
        "--dataset",
        setting.dataset,
        "--seeds",
        str(seeds_for(setting, level)),
        "--set",
        f"rounds={setting.rounds}",
        "--set",
        f"data_fraction={setting.data_fraction}",
        "--set",
        f"local_epochs={setting.local_epochs}",
        "--storage-path",
        str(storage),
        "--name",
        name,
        "--quiet",
        *level.args(),
    ]
    launched = time.time()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise MeasurementError(f"sweep {' '.join(cmd[2:])} failed:\n" + "\n".join(tail))
    return {"sweep_dir": storage / name, "launched": launched, "wall_s": wall}


def trial_rows(trial_dir: Path) -> list[dict[str, Any]]:
    """The trial's reported rounds, one per round (the last wins after a restore)."""
    rows: dict[int, dict[str, Any]] = {}
    path = trial_dir / "result.json"
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["round"]] = row
    return [rows[k] for k in sorted(rows)]


def trial_origin(rows: list[dict[str, Any]]) -> float:
    """Wall-clock start of a trial (s since the epoch), from whole-second timestamps.

    Each row says origin + time_total_s falls within [timestamp, timestamp + 1); the
    intersection over the rows is usually much narrower than a second; its middle is
    returned."""
    low = max(r["timestamp"] - r["time_total_s"] for r in rows)
    high = min(r["timestamp"] + 1 - r["time_total_s"] for r in rows)
    return (low + high) / 2 if high >= low else low


def sweep_throughput(sweep_dir: Path, launched: float, wall_s: float) -> dict[str, Any]:
    """Aggregate training throughput of a finished sweep (samples/s) and how it ran."""
    manifest = json.loads((sweep_dir / MANIFEST).read_text())
    starts, ends = [], []
    samples = busy = train = 0.0
    trials = 0
    for trial_dir in sorted(p for p in sweep_dir.iterdir() if (p / "params.json").is_file()):
        rows = trial_rows(trial_dir)
        if not rows:
            continue
        trials += 1
        origin = trial_origin(rows)
        for row in rows:
            end = origin + row["time_total_s"]
            ends.append(end)
            starts.append(end - row["round_seconds"])
            samples += row["samples_this_round"]
            busy += row["round_seconds"]
            train += row["train_seconds"]
    if not trials:
        raise MeasurementError(f"sweep {sweep_dir} reported no rounds")
    span = max(ends) - min(starts)
    return {
        "trials": trials,
        "rounds": len(ends),
        "cpus_per_trial": manifest["resources"]["cpu"],
        "gpus_per_trial": manifest["resources"]["gpu"],
        "max_concurrent": manifest["max_concurrent"],
        "samples": samples,
        "span_s": span,
        "samples_per_s": samples / span,
        "wall_s": wall_s,
        "wall_samples_per_s": samples / wall_s,
        "startup_s": min(starts) - launched,
        # mean trials busy in rounds over the span (2.0: two trials computing all along)
        "concurrency": busy / span,
        # one trial's own rate while it trains (drops when trials contend for cores)
        "trial_samples_per_s": samples / train,
    }


def measure_side_by_side(
    setting: SweepSetting, levels: list[Level], storage: Path
) -> list[dict[str, Any]]:
    """One row per level, with its throughput relative to the first level's."""
    rows = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i, level in enumerate(levels):
        ran = run_sweep(setting, level, storage, f"side-by-side-{stamp}-{i}")
        result = sweep_throughput(ran["sweep_dir"], ran["launched"], ran["wall_s"])
        rows.append({"level": level.label, **result})
    base = rows[0]
    for row in rows:
        row["speedup"] = row["samples_per_s"] / base["samples_per_s"]
        row["wall_speedup"] = row["wall_samples_per_s"] / base["wall_samples_per_s"]
    return rows
