"""Ctrl-C (SIGINT) and SIGTERM stop a sweep at every moment of its life, not only once
Tune's loop runs (study/interruption.py): while Python imports the driver, while Ray
starts, as the folder appears, and as the last trial ends.  Each case: the right exit
status (130 or 143), no traceback, and nothing written or a manifest that says
``interrupted`` (``finished`` only when every trial had finished before the signal).

The signals go to the driver alone, started as a shell starts a background job (SIGINT
ignored: ``cmd &`` in a script), the case in which a signal before Tune's loop used to
be lost.  Each moment is waited for by what the driver has done (a library mapped, a
line printed, a file written), never by a fixed delay, so a loaded machine moves the
moment but not what it is."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from federated.cli import exit_codes
from tests.conftest_analysis import wait_until
from tests.test_sweep_ray import rounds, trial_dirs

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 2
# Two MOON trials one after the other on 2% of Fashion-MNIST: a few seconds of Tune.
ARGS = (
    *("--vary", "tau=0.1,0.5", "--set", "algorithm=moon", "--budget", "smoke"),
    *("--set", "data_fraction=0.02", "--set", "test_fraction=0.05"),
    *("--set", f"rounds={ROUNDS}", "--set", "execution=packed", "--max-concurrent", "1"),
)


def ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a shell does to a background job


def start(storage: Path, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "study.sweep", *ARGS, "--name", "stop"]
    with out.open("w") as sink:
        return subprocess.Popen(
            [*cmd, "--storage-path", str(storage)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            preexec_fn=ignoring_sigint,
        )


def imports_torch(pid: int) -> bool:
    """The driver is importing its modules (torch is mapped: the package's handler is
    installed, study/__init__.py runs before them)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def printed(out: Path, text: str) -> bool:
    return text in out.read_text()


def last_trial_ended(sweep_dir: Path) -> bool:
    trials = trial_dirs(sweep_dir) if sweep_dir.is_dir() else []
    return len(trials) == 2 and all(len(rounds(t)) == ROUNDS for t in trials)


MOMENTS = {
    # (signal, what the driver has done when it comes)
    "importing": (signal.SIGINT, lambda pid, out, d: imports_torch(pid)),
    "starting Ray": (signal.SIGTERM, lambda pid, out, d: printed(out, "execution: ")),
    "folder written": (signal.SIGINT, lambda pid, out, d: (d / "fedsweep_sweep.json").is_file()),
    "last trial's end": (signal.SIGINT, lambda pid, out, d: last_trial_ended(d)),
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_signal_stops_the_sweep(tmp_path, moment):
    sig, reached = MOMENTS[moment]
    out = tmp_path / "out.txt"
    sweep_dir = tmp_path / "stop"
    driver = start(tmp_path, out)
    try:
        wait_until(lambda: reached(driver.pid, out, sweep_dir) or driver.poll() is not None, 300)
        assert driver.poll() is None, f"ended before the {moment} moment: " + out.read_text()
        driver.send_signal(sig)
        driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
    text = out.read_text()
    expected = exit_codes.INTERRUPTED if sig == signal.SIGINT else exit_codes.TERMINATED
    assert driver.returncode == expected, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    manifest_path = sweep_dir / "fedsweep_sweep.json"
    if not manifest_path.is_file():
        assert not sweep_dir.exists()  # nothing written: not even an empty folder
        assert "nothing was written" in text
        assert moment != "last trial's end"  # its trials had run: their files stay
        return
    manifest = json.loads(manifest_path.read_text())
    trials = manifest.get("trials") or {}
    if manifest["status"] == "finished":  # the signal came after the sweep recorded its end
        assert moment == "last trial's end"
        assert [t["status"] for t in trials.values()] == ["TERMINATED", "TERMINATED"]
        # the signal came after the sweep recorded its end (as the driver summed up or
        # left): the sweep did finish, and the command still ends as the user asked
        assert "stopped after the sweep finished" in text
        return
    assert manifest["status"] == "interrupted", manifest
    assert "sweep finished" not in text
    assert "continue it with: python -m study.sweep" in text


UNRAISABLE = """
import signal, sys, weakref
from study.interruption import DRIVING, StopSignals

stops = StopSignals()
stops.install()
stops.phase = DRIVING


class Thing:
    pass


def signal_inside(_):
    signal.raise_signal(signal.SIGINT)  # the handler runs inside this callback


def fail_inside(_):
    raise ValueError("another failure")


first, second = Thing(), Thing()
refs = [weakref.ref(first, signal_inside), weakref.ref(second, fail_inside)]
del first  # Python cannot raise from a weakref callback: it reports what leaves one
print("received", stops.received, flush=True)
del second
"""


def test_a_signal_inside_a_callback_python_cannot_raise_from_prints_no_traceback():
    """Ctrl-C landing while Python runs a weakref callback (the import system's
    module-lock one, as Ray started in a loaded run): the handler's KeyboardInterrupt
    cannot leave it, and Python printed "Exception ignored in" with a traceback.  The
    stop is recorded and nothing is printed; another exception there is reported."""
    proc = subprocess.run(
        [sys.executable, "-c", UNRAISABLE], capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.splitlines() == [f"received {int(signal.SIGINT)}"], proc.stderr
    assert "KeyboardInterrupt" not in proc.stderr
    assert "ValueError: another failure" in proc.stderr
