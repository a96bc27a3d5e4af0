"""A command's process ends as the interpreter would end it, less the teardown:
its threads finish, its exit hooks run, what it printed arrives, its status is kept."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from pathlib import Path
    from federated.runtime.process_exit import exit_process

    out = Path(sys.argv[1])
    def late_work():
        time.sleep(0.3)
        out.with_suffix(".thread").write_text("thread done")
    threading.Thread(target=late_work).start()  # not a daemon: it is waited for
    # the hook sees the thread's file: threads first, then hooks, as Python does
    atexit.register(lambda: out.write_text(out.with_suffix(".thread").read_text() + ", hook ran"))
    sys.stdout.write("printed without a newline")
    sys.stderr.write("and to stderr")
    exit_process(7)
    """
)


def test_threads_then_exit_hooks_run_output_arrives_and_the_status_is_kept(tmp_path: Path):
    marker = tmp_path / "marker.txt"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(marker)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 7
    assert done.stdout == "printed without a newline"
    assert done.stderr == "and to stderr"
    assert marker.read_text() == "thread done, hook ran"
