"""A sweep survives its trials: a real Ray sweep whose learning rate makes a trial diverge
(NaN loss), interrupted with Ctrl-C after the divergence, resumes to the end and reruns
only the point that ran all its rounds.  (An Optuna search with ASHA whose learning-rate
range makes some trials diverge: the session's search, tests/conftest_analysis.py, read
by tests/test_sweep_ray.py.)

The learning rate is real: FedAvg on the smoke budget's Fashion-MNIST (momentum 0.9)
diverges in its first rounds from lr ~2.4 (4.42: round 1, 2.45: round 2) and trains at
lr = 0.05.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest_analysis import wait_until
from tests.test_sweep_ray import (
    manifest,
    params,
    raw_rows,
    reference_accuracies,
    rounds,
    sweep,
    trial_dirs,
)

pytestmark = pytest.mark.slow


def outcomes(sweep_dir) -> dict[str, str]:
    """Each trial's outcome as the manifest records it."""
    return {name: t["outcome"] for name, t in manifest(sweep_dir)["trials"].items()}


LONG_ROUNDS = 14


def test_a_sweep_interrupted_after_a_divergence_resumes_to_the_end(tmp_path):
    """Ctrl-C once the lr=4.42 trial diverged and the next runs; ``--resume`` finishes the
    grid, then ``--rerun-best 1`` reruns the best complete point only (the diverged one
    is never ranked).  The trials ask for half a GPU on a CPU-only cluster: every one
    runs on CPU, said once, before and after the resume."""
    args = [
        *("--vary", "lr=4.42,0.05", "--set", "algorithm=fedavg", "--budget", "smoke"),
        *("--rerun-best", "1", "--gpus-per-trial", "0.5"),
        # 14 rounds: the lr=0.05 trial, on an actor the diverged one leaves warm, runs a
        # smoke round in about a quarter of a second; 4 rounds ended before the poll saw
        # them and the wait timed out (CI, 2026-11-26)
        *("--set", f"rounds={LONG_ROUNDS}", "--set", "checkpoint_every=1"),
        *("--max-concurrent", "1"),
        *("--name", "diverged"),
    ]
    cmd = [sys.executable, "-m", "study.sweep", *args, "--storage-path", str(tmp_path), "--quiet"]
    cpu_only = {"CUDA_VISIBLE_DEVICES": ""}  # a CPU-only cluster, also on a GPU machine
    driver = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **cpu_only},
    )
    sweep_dir = tmp_path / "diverged"

    def diverged_and_next_started() -> bool:
        trials = trial_dirs(sweep_dir) if sweep_dir.is_dir() else []
        diverged = [t for t in trials if any(r.get("diverged") for r in raw_rows(t))]
        started = [t for t in trials if t not in diverged and 1 <= len(rounds(t)) < LONG_ROUNDS]
        return bool(diverged) and bool(started)

    try:
        wait_until(diverged_and_next_started, timeout=300)
    finally:
        os.killpg(driver.pid, signal.SIGINT)
        driver.wait(timeout=120)
    assert manifest(sweep_dir)["status"] == "interrupted"
    assert not (tmp_path / "diverged-best").exists()  # interrupted: nothing rerun yet

    proc = sweep(tmp_path, *args, "--resume", env=cpu_only)
    assert "the Ray cluster has no GPU: running every trial on CPU" in proc.stderr
    assert manifest(sweep_dir)["status"] == "finished"
    assert manifest(sweep_dir)["resources"] == {"cpu": 1.0, "gpu": 0.0}
    by_lr = {params(t)["lr"]: t for t in trial_dirs(sweep_dir)}
    assert outcomes(sweep_dir)[by_lr[4.42].name] == "diverged"
    assert outcomes(sweep_dir)[by_lr[0.05].name] == "completed"
    trained = by_lr[0.05]
    assert sorted(rounds(trained)) == list(range(1, LONG_ROUNDS + 1))
    accuracies = [rounds(trained)[r]["test_acc"] for r in range(1, LONG_ROUNDS + 1)]
    assert accuracies == reference_accuracies(trained)
    # the rerun: the complete point, on a fresh seed; the diverged one was never a choice
    best_dir = tmp_path / "diverged-best"
    (rerun,) = trial_dirs(best_dir)
    assert params(rerun)["lr"] == 0.05 and params(rerun)["seed"] == 10_000
    assert sorted(rounds(rerun)) == list(range(1, LONG_ROUNDS + 1))
    selection = manifest(best_dir)["selection"]
    assert selection["point"] == "lr=0.05" and selection["compared_trials"] == 1
