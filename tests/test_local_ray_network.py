"""Impossible resources and all-errored sweeps end with one clear line and their own exit
status (real local Ray, no mocks).  That a local sweep's Ray listens on loopback only is
checked on the running sweep of tests/test_fault_drill.py's Ctrl-C drill."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from federated.cli import exit_codes

pytestmark = pytest.mark.slow

SMALL = ["--budget", "smoke", "--set", "data_fraction=0.02", "--set", "test_fraction=0.05"]


def sweep_cmd(storage: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "study.sweep", *args, "--storage-path", str(storage), "--quiet"]


def test_a_trial_larger_than_every_node_is_refused_in_one_line(tmp_path):
    proc = subprocess.run(
        sweep_cmd(tmp_path / "results", "moon_mu", *SMALL, "--cpus-per-trial", "512"),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == exit_codes.BAD_INPUT
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--cpus-per-trial=512" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_a_sweep_whose_every_trial_errored_exits_non_zero_with_the_errors(all_errored_sweep):
    # 2 trials (MOON's tau), each failing after round 1, --max-failures 0: one sweep for
    # this test and tests/test_sweep_ray.py's (tests/conftest_analysis.py)
    proc = all_errored_sweep
    assert proc.returncode == exit_codes.ALL_TRIALS_FAILED, proc.stdout[-2000:] + proc.stderr
    assert "error: all 2 trials errored" in proc.stderr
    assert "injected failure after round 1" in proc.stderr
    assert "report:" not in proc.stdout
