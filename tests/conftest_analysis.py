"""A real sweep for the analysis tests, made once per test session.

Modules load it with ``pytest_plugins = ["tests.conftest_analysis"]`` (a session-scoped
fixture registered that way runs once however many modules use it).  It could move to
``tests/conftest.py`` to be shared with the study tests.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_sweep(storage: Path, *args: str, timeout: int = 600) -> Path:
    """``python -m study.sweep ARGS --storage-path STORAGE --quiet``; returns the sweep dir."""
    cmd = [sys.executable, "-m", "study.sweep", *args, "--storage-path", str(storage), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sweep_dir,) = [p for p in storage.iterdir() if (p / "fedsweep_sweep.json").is_file()]
    return sweep_dir


@pytest.fixture(scope="session")
def moon_mu_smoke_sweep(tmp_path_factory) -> Path:
    """``python -m study.sweep moon_mu --budget smoke`` (5 trials, 2 rounds, 1 seed; ~30 s)."""
    storage = tmp_path_factory.mktemp("analysis_sweep")
    return run_sweep(storage, "moon_mu", "--budget", "smoke")
