"""Where a measurement runs: a fresh Python process (default) or this one.

A fresh process per measurement makes its peak RSS its own and sets its CPU threads
before torch starts (``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` as well as
``torch.set_num_threads``), at the cost of about 4 s of start-up (importing torch,
loading the dataset) that is not part of any timing.  ``inline`` runs in this process:
seconds instead of minutes for the reduced CI mode; peak RSS is then reset before each
measurement (:func:`benchmarks.memory.reset_peak_rss`) but also holds what earlier
measurements left allocated, and the allocator setting that every fedsweep run and the
bare step apply (:func:`federated.runtime.allocator.keep_freed_memory`) then also holds for the
straightforward loop measured after them; in its own process the plain loop runs with
glibc's defaults, as plain code would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.worker import RESULT_PREFIX, run_job

ROOT = Path(__file__).resolve().parents[1]
ISOLATIONS = ("process", "inline")


class MeasurementError(RuntimeError):
    """A measurement failed; the message ends with the tail of its output."""


def measure(
    kind: str, params: dict[str, Any], *, threads: int, isolation: str = "process"
) -> dict[str, Any]:
    """Run one measurement (see :mod:`benchmarks.worker`) and return its result dict."""
    if isolation == "inline":
        return run_job(kind, params)
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    job = json.dumps({"kind": kind, "params": params})
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.worker", job],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise MeasurementError(
            f"{kind} {params} failed (exit {proc.returncode}):\n" + "\n".join(tail)
        )
    return json.loads(lines[-1][len(RESULT_PREFIX) :])
