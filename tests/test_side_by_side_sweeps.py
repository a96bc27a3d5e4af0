"""Two sweeps side by side on one machine, each with its own local Ray, the first watched
with ``--dashboard`` (real Ray, real trials, no mocks):

* neither prints an ERROR or warning line, and nothing failed to bind a port: the
  unwatched sweep never reaches for the dashboard's port 8265 nor Ray's fixed agent port
  52365 nor its client server's 10001 (study/local_ray.py gives every Ray port of a local
  sweep a free one);
* both finish, their manifests say so;
* once the watched sweep is over, while its dashboard stays up for Ctrl-C, the
  dashboard's Jobs API reports its job SUCCEEDED, not RUNNING.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from federated.cli import exit_codes
from tests.listening_sockets import listening_sockets

pytestmark = pytest.mark.slow

SWEEP = [
    "--vary", "mu=0,1", "--set", "algorithm=moon", "--budget", "smoke",
    "--dataset", "synthetic", "--set", "rounds=1", "--max-concurrent", "1", "--quiet",
]  # fmt: skip
# the dashboard's, Ray's dashboard agent's and Ray's client server's defaults
FIXED_PORTS = {8265, 52365, 10001}


def start(tmp_path: Path, name: str, *extra: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{name}.log"
    cmd = [sys.executable, "-m", "study.sweep", *SWEEP, "--name", name]
    cmd += ["--storage-path", str(tmp_path / name), *extra]
    with log.open("w") as out:
        driver = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return driver, log


def wait_for(predicate, what: str, timeout: float, driver: subprocess.Popen, log: Path):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        if driver.poll() is not None:
            raise AssertionError(
                f"the sweep ended ({driver.returncode}) before {what}: {log.read_text()[-3000:]}"
            )
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def dashboard_url(log: Path) -> str | None:
    for line in log.read_text().splitlines():
        if line.startswith("Ray dashboard: http"):
            return line.split()[2]
    return None


def jobs(url: str) -> list[dict]:
    """The dashboard's Jobs API, authenticated as the web page is (Ray's token)."""
    token = (Path.home() / ".ray" / "auth_token").read_text().strip()
    request = urllib.request.Request(
        f"{url}/api/jobs/", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def test_two_sweeps_side_by_side_finish_quietly_and_the_dashboard_says_finished(tmp_path):
    watched, watched_log = start(tmp_path, "watched", "--dashboard")
    other = None
    try:
        url = wait_for(
            lambda: dashboard_url(watched_log), "the dashboard", 300, watched, watched_log
        )
        other, other_log = start(tmp_path, "other")
        # while the unwatched sweep's trial reports, every Ray process of it is up
        wait_for(
            lambda: list((tmp_path / "other" / "other").glob("*/result.json")),
            "the unwatched sweep's first result",
            300,
            other,
            other_log,
        )
        ports = {port for _, _, port in listening_sockets(other.pid)}
        # a fixed port would be the first sweep's, and fail the second's bind quietly
        first_ports = {port for _, _, port in listening_sockets(watched.pid)} - {8265}
        assert other.wait(timeout=600) == exit_codes.OK, other_log.read_text()[-3000:]
        wait_for(
            lambda: "stays up" in watched_log.read_text(),
            "the watched sweep's end",
            600,
            watched,
            watched_log,
        )
        listed = jobs(url)
        watched.send_signal(signal.SIGINT)  # the user is done looking
        assert watched.wait(timeout=180) == exit_codes.OK
    finally:
        for driver in (watched, other):
            if driver is not None and driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()

    assert not ports & FIXED_PORTS, sorted(ports)
    assert not first_ports & FIXED_PORTS, sorted(first_ports)
    # the sweep's driver job (Ray's own jobs aside) ended when the sweep did
    drivers = [job for job in listed if job["type"] == "DRIVER"]
    assert drivers and all(job["status"] == "SUCCEEDED" for job in drivers), listed
    for name, log in (("watched", watched_log), ("other", other_log)):
        text = log.read_text()
        bad = [
            line
            for line in text.splitlines()
            if "ERROR" in line or "Failed to bind" in line or "WARN" in line.upper()
        ]
        assert not bad, f"{name}:\n{text[-3000:]}"
        manifest = json.loads((tmp_path / name / name / "fedsweep_sweep.json").read_text())
        assert manifest["status"] == "finished", name
