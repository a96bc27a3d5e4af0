"""``python -m benchmarks.gpu_trials``: Ray trials sharing one GPU by fractional allocation.

For k in ``--pack`` (default 1, 2, 4, 8) it runs one ``python -m study.sweep`` with
``--gpus-per-trial 1/k --max-concurrent k`` (one wave of k trials, so all of them train at
the same time; at least ``--min-trials`` trials for small k) and reads the trials' rows:

* ``trial-rounds/s (steady)``: k / the median round time while k trials share the GPU —
  the rate a long sweep settles at;
* ``trial-rounds/s (sweep)``: all reported rounds / the span from the first round's start
  to the last round's end (trial set-up between waves included);
* ``GPU MiB/trial``: the largest memory nvidia-smi saw held by one trial process (CUDA
  context, cuDNN workspace, the data set on the device, model and activations).

The default setting is CIFAR-shaped generated data, simple-cnn, 10 parties, Dir(0.5),
E=1 (``fedprox_mu`` study: 4 FedProx trials per seed).  Needs a CUDA machine and
``nvidia-smi``.  Units: seconds, MiB (2^20 bytes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from benchmarks.side_by_side import (
    SweepSetting,
    levels_for,
    run_sweep,
    sweep_throughput,
    trial_rows,
)
from benchmarks.table import Column, format_table


class GpuMemoryPoller:
    """Largest GPU memory per process, from ``nvidia-smi`` every ``period`` seconds."""

    def __init__(self, period: float = 0.5) -> None:
        self.period = period
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> GpuMemoryPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        query = [
            "nvidia-smi",
            "--query-compute-apps=pid,used_memory",
            "--format=csv,noheader,nounits",
        ]
        while not self._stop.is_set():
            out = subprocess.run(query, capture_output=True, text=True).stdout
            for line in out.splitlines():
                pid, mib = (part.strip() for part in line.split(","))
                if pid.isdigit() and mib.isdigit():
                    self.peak[int(pid)] = max(self.peak.get(int(pid), 0), int(mib))
            self._stop.wait(self.period)


def measure_level(setting: SweepSetting, level, storage: Path, name: str) -> dict[str, Any]:
    with GpuMemoryPoller() as memory:
        ran = run_sweep(setting, level, storage, name)
    result = sweep_throughput(ran["sweep_dir"], ran["launched"], ran["wall_s"])
    trials = [p for p in ran["sweep_dir"].iterdir() if (p / "params.json").is_file()]
    round_s = [r["round_seconds"] for t in trials for r in trial_rows(t)[1:]]  # after round 1
    k = level.max_concurrent or 1
    median = statistics.median(round_s)
    return {
        "level": level.label,
        "trials": result["trials"],
        "round_s": median,
        "steady": k / median,
        "sweep": result["rounds"] / result["span_s"],
        "concurrency": result["concurrency"],
        "gpu_mib": max(memory.peak.values(), default=float("nan")),
        "wall_s": result["wall_s"],
    }


COLUMNS = [
    Column("level", "trials per GPU"),
    Column("trials", "trials"),
    Column("round_s", "s/round per trial", "{:.2f}"),
    Column("steady", "trial-rounds/s (steady)", "{:.2f}"),
    Column("speedup", "x one (steady)", "{:.2f}x"),
    Column("sweep", "trial-rounds/s (sweep)", "{:.2f}"),
    Column("concurrency", "trials busy", "{:.2f}"),
    Column("gpu_mib", "GPU MiB/trial", "{:,.0f}"),
    Column("wall_s", "sweep wall s", "{:.1f}"),
]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_trials", description=__doc__)
    p.add_argument("--pack", default="1,2,4,8", help="trials per GPU, comma list")
    p.add_argument("--study", default="fedprox_mu")
    p.add_argument("--rounds", type=int, default=6, help="rounds per trial")
    p.add_argument("--data-fraction", type=float, default=0.2)
    p.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available() or shutil.which("nvidia-smi") is None:
        raise SystemExit("error: benchmarks.gpu_trials needs a CUDA device and nvidia-smi")
    setting = SweepSetting(
        study=args.study, rounds=args.rounds, data_fraction=args.data_fraction, seeds=1, waves=1
    )
    rows = []
    with tempfile.TemporaryDirectory() as storage:
        for i, level in enumerate(levels_for(args.pack, gpu=True)):
            rows.append(measure_level(setting, level, Path(storage), f"gpu-trials-{i}"))
    for row in rows:
        row["speedup"] = row["steady"] / rows[0]["steady"]
    print(
        f"{args.study}, synthetic CIFAR-shaped, E=1, {args.rounds} rounds, "
        f"data {args.data_fraction}"
    )
    print(format_table(rows, COLUMNS))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
