"""``python -m tests.stack_on_signal MODULE ARGS``: ``python -m MODULE ARGS``, with every
thread's Python stack written to stderr on SIGUSR1 (:mod:`faulthandler`), so that a test
which gives up waiting for a command can say where the command stood
(:func:`run_or_show_stacks`)."""

from __future__ import annotations

import faulthandler
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path


def run_or_show_stacks(
    module_args: list[str], timeout: float, cwd: Path
) -> subprocess.CompletedProcess:
    """``python -m MODULE_ARGS...`` run to its end; if it is still running after
    ``timeout`` seconds, its threads' stacks are asked for, it is killed and the test
    fails with them (a hang seen once under load, the SIGKILL drill's resume, could not
    be told apart from a slow machine without them)."""
    cmd = [sys.executable, "-m", __name__, *module_args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"{' '.join(module_args)} still ran after {timeout:.0f} s; its output:\n"
            f"{out[-2000:]}\nits threads:\n{err[-12000:]}"
        ) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def main() -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    module, *args = sys.argv[1:]
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
