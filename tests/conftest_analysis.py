"""Real sweeps that several tests read, each made once per test session.

Registered for every test module by ``tests/conftest.py`` (``pytest_plugins``); a
session-scoped fixture runs once however many modules use it.  All of them start Ray,
so their tests are in the slow "ray" group that runs on one pytest-xdist worker: one
worker, one session, one sweep.  Each sweep is no larger than what its readers assert.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.stack_on_signal import run_or_show_stacks

REPO = Path(__file__).resolve().parent.parent


def run_sweep(storage: Path, *args: str, timeout: int = 600) -> Path:
    """``python -m study.sweep ARGS --storage-path STORAGE --quiet``; returns the sweep dir."""
    return SweepRun.run(storage, *args, timeout=timeout).sweep_dir


@dataclass(frozen=True)
class SweepRun:
    """A finished ``python -m study.sweep`` run: its folder, exit status and output."""

    sweep_dir: Path
    returncode: int
    stdout: str
    stderr: str

    @classmethod
    def run(
        cls, storage: Path, *args: str, timeout: int = 600, exit_codes: tuple[int, ...] = (0,)
    ) -> SweepRun:
        cmd = [sys.executable, "-m", "study.sweep", *args, "--storage-path", str(storage)]
        cmd.append("--quiet")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
        assert proc.returncode in exit_codes, proc.stdout[-3000:] + proc.stderr[-3000:]
        # the sweep's folder; a --rerun-best rerun's folder is its name + "-best"
        written = (p for p in storage.iterdir() if (p / "fedsweep_sweep.json").is_file())
        sweep_dir, *_ = sorted(written)
        return cls(sweep_dir, proc.returncode, proc.stdout, proc.stderr)


#: the session-scoped sweeps below: a session fixture lives in one xdist worker, so every
#: test module that reads one runs in the same xdist group (tests/conftest.py)
SHARED_SWEEPS = frozenset(
    {"moon_mu_smoke", "moon_mu_smoke_sweep", "all_errored_sweep", "killed_sweep", "optuna_search"}
)


@pytest.fixture(scope="session")
def moon_mu_smoke(tmp_path_factory) -> SweepRun:
    """``python -m study.sweep moon_mu --budget smoke`` (5 trials, 2 rounds, 1 seed): what
    a user's first sweep is.  Read by tests/test_sweep_ray.py's smoke test and the
    analysis tests."""
    return SweepRun.run(tmp_path_factory.mktemp("moon_mu_smoke"), "moon_mu", "--budget", "smoke")


@pytest.fixture(scope="session")
def moon_mu_smoke_sweep(moon_mu_smoke) -> Path:
    """The folder of :func:`moon_mu_smoke`."""
    return moon_mu_smoke.sweep_dir


# Every trial fails after its first round, with no retries (tests/test_sweep_ray.py: the
# trials' records; tests/test_local_ray_network.py: the exit status and the one line).
# Two trials on the machine's two slots: one wave (a failed trial's actor is not reused).
ALL_ERRORED_ARGS = (
    *("--vary", "tau=0.1,0.5", "--set", "algorithm=moon"),
    *("--budget", "smoke", "--set", "data_fraction=0.02"),
    *("--set", "test_fraction=0.05", "--set", "rounds=2", "--set", "fail_at_round=1"),
    *("--set", "checkpoint_every=0", "--max-failures", "0", "--max-concurrent", "2"),
)


@pytest.fixture(scope="session")
def all_errored_sweep(tmp_path_factory) -> SweepRun:
    """A sweep whose 2 trials all errored (``error: all 2 trials errored``, exit 4)."""
    storage = tmp_path_factory.mktemp("all_errored")
    return SweepRun.run(storage, *ALL_ERRORED_ARGS, exit_codes=(0, 1, 2, 3, 4, 130))


# The SIGKILL drill: three of moon_mu's trials one at a time, a checkpoint every round, killed
# (driver and all it started) once one trial has finished and the next has checkpointed
# at least one round, then resumed (tests/test_sweep_ray.py, tests/test_fault_drill.py).
#: the drills' mu values (moon_mu's axis cut to three): one trial finished, one cut
#: mid-trial and one not yet started when the signal comes
DRILL_MUS = (0.1, 1.0, 5.0)
KILLED_ROUNDS = 8  # a window of rounds 2-7 of the second trial to kill in
KILLED_ARGS = (
    *("moon_mu", "--budget", "smoke", "--set", f"rounds={KILLED_ROUNDS}"),
    *("--set", "checkpoint_every=1", "--set", "data_fraction=0.02"),
    *("--set", "test_fraction=0.05", "--max-concurrent", "1", "--name", "kill-9"),
    # three trials: one finished, one killed mid-trial, one never started
    *("--set", f"mu={','.join(map(str, DRILL_MUS))}"),
    # DP-FedAvg's state (the accountant, the noise stream) across the kill, too
    *("--set", "dp_noise_multiplier=0.1", "--set", "dp_clip_norm=1.0"),
)


@dataclass(frozen=True)
class KilledSweep:
    """The SIGKILL drill's record: what the folder said between the kill and the resume,
    and the resumed run."""

    sweep_dir: Path
    manifest_after_kill: dict[str, Any]
    results_after_kill: Any  # analysis.reading.loading's SweepResults, read after the kill
    rows_of_finished: dict[str, int]  # trial folder -> its result.json lines, after the kill
    resumed: subprocess.CompletedProcess


def wait_until(predicate, timeout: float) -> None:
    """Poll ``predicate`` every 0.1 s (cheap: a few small files read) until it holds;
    fail after ``timeout`` seconds.  The mid-trial windows the drills kill in are a few
    rounds of a fraction of a second each, so a coarse poll can step over them."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s")


@pytest.fixture(scope="session")
def killed_sweep(tmp_path_factory) -> KilledSweep:
    from analysis.reading.loading import load_results
    from tests.test_sweep_ray import raw_rows, rounds, trial_dirs

    storage = tmp_path_factory.mktemp("killed")
    sweep = ["study.sweep", *KILLED_ARGS, "--storage-path", str(storage)]
    driver = subprocess.Popen(
        [sys.executable, "-m", *sweep, "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the signal reaches all of it
        cwd=REPO,
    )
    sweep_dir = storage / "kill-9"

    def one_done_next_checkpointed() -> bool:
        trials = trial_dirs(sweep_dir) if sweep_dir.is_dir() else []
        done = [t for t in trials if len(rounds(t)) == KILLED_ROUNDS]
        started = [t for t in trials if 2 <= len(rounds(t)) < KILLED_ROUNDS]
        return bool(done) and bool(started)

    try:
        wait_until(one_done_next_checkpointed, timeout=300)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and everything it started
        driver.wait()
    time.sleep(1)
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    results = load_results(sweep_dir)
    finished = {
        t.name: len(raw_rows(t)) for t in trial_dirs(sweep_dir) if len(rounds(t)) == KILLED_ROUNDS
    }
    resumed = run_or_show_stacks([*sweep, "--resume", "--quiet"], timeout=600, cwd=REPO)
    return KilledSweep(sweep_dir, manifest, results, finished, resumed)


# An ad hoc Optuna search of FedProx's mu and lr with ASHA, one trial at a time, quiet, and
# the chosen point rerun on two fresh seeds.  Its learning-rate range makes some trials
# diverge (NaN loss): FedProx on the smoke budget's Fashion-MNIST (momentum 0.9) diverges
# in its first rounds from lr ~2.4 (the prox term is small beside such steps), and Optuna
# proposes, with the sweeps' fixed seed, lr = 4.42, 1.04, 2.45, 19.9, 0.26, 0.90 (its
# first ten proposals are random, whatever the trials learn).  Read by
# tests/test_sweep_ray.py (ASHA's stops, divergence, what Optuna is told, the rerun and its
# report), tests/test_sweep_labels_and_hparams.py (labels, TensorBoard HPARAMS, no library
# line through --quiet) and tests/test_study_file_sweep.py (the study in the sweep's folder).
OPTUNA_SEARCH_NAME = "labelled"
OPTUNA_SEARCH_TRIALS = 6
OPTUNA_SEARCH_ROUNDS = 4
OPTUNA_SEARCH_ARGS = (
    *("--vary", "mu=loguniform:0.01:10", "--vary", "lr=loguniform:0.01:50"),
    *("--set", "algorithm=fedprox", "--search", "optuna"),
    *("--num-samples", str(OPTUNA_SEARCH_TRIALS), "--scheduler", "asha", "--rerun-best", "2"),
    *("--budget", "smoke", "--set", f"rounds={OPTUNA_SEARCH_ROUNDS}"),
    *("--max-concurrent", "1", "--name", OPTUNA_SEARCH_NAME),
)


@pytest.fixture(scope="session")
def optuna_search(tmp_path_factory) -> SweepRun:
    """The search (its ``sweep_dir``); the rerun is ``<sweep_dir>-best`` beside it."""
    return SweepRun.run(tmp_path_factory.mktemp("optuna_search"), *OPTUNA_SEARCH_ARGS, timeout=900)
