"""A sweep whose driver was killed reads as interrupted, not as running forever."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from analysis.reading.loading import load_results
from study.driver_liveness import driver_gone
from tests.analysis_fakes import plan_configs, write_sweep


def test_a_running_manifest_whose_driver_is_gone_reads_as_interrupted(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    configs = plan_configs("moon_mu", seeds=1)[:2]
    driver = {"host": os.uname().nodename, "pid": dead.pid}
    sweep_dir = write_sweep(
        tmp_path,
        "killed",
        "moon_mu",
        [(configs[0], [0.2, 0.3])],
        status="running",
        driver=driver,
    )
    assert driver_gone(json.loads((sweep_dir / "fedsweep_sweep.json").read_text()))
    results = load_results(sweep_dir)
    assert results.sweeps[0].status == "interrupted"
    assert any("driver process is gone" in p for p in results.problems)
    alive = {"status": "running", "driver": {"host": os.uname().nodename, "pid": os.getpid()}}
    assert not driver_gone(alive)
