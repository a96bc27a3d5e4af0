"""A sweep's own local Ray, held by a child process (:mod:`study.tune.ray_head`, what
``ray start --head --block`` does without Ray's command line).

Why not ``ray.init(address="local")``, which starts Ray inside the driver:

* **Two sweeps side by side.**  ``ray.init`` cannot choose the dashboard agent's HTTP
  port (Ray's fixed 52365: the second cluster's agent fails to bind it and runs without
  its HTTP service, with ERROR lines in its log), and it asks for the dashboard's
  port even without a dashboard (a sweep without ``--dashboard`` printed ``ERROR
  services.py … Failed to bind to 127.0.0.1:8265`` beside a watched one).  The holder
  takes every port: here the GCS and the API server get free ports the OS picks, the
  agent port 0 (Ray picks), and only ``--dashboard`` asks for 8265 (another free port
  when 8265 is taken, e.g. by another watched sweep; the printed URL says which).
* **A truthful dashboard.**  Ray marks a driver's job SUCCEEDED when the driver
  disconnects (``is_dead`` in the GCS job table); a cluster ``ray.init`` started ends
  with that disconnection.  With the cluster held by this child, the driver disconnects
  when the sweep is over (its job says SUCCEEDED on the Jobs and Overview pages) while
  the dashboard stays up for ``--dashboard`` until Ctrl-C.

The child runs in a session of its own (the terminal's Ctrl-C reaches the driver only,
which stops Tune in order first) and, on Linux, is told to terminate when the driver
dies, even by ``kill -9``; the holder then takes its Ray processes down with it.  This
module does not import Ray.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from federated.runtime.owned_temp_files import RAY_START_PREFIX, owned_prefix

DASHBOARD_PORT = 8265
LOOPBACK = "127.0.0.1"
# The holder prints this once every Ray process is up and the address is written.
READY_LINE = "Ray runtime started"
# A loaded 2-core machine took 31 s to start a head node; a stuck start is said, not awaited.
START_TIMEOUT_S = 300.0
# The holder stops its node's processes when terminated (each gets 1 s to exit; a
# drain, up to 30 s, only where the user's environment asks Ray for one).
STOP_TIMEOUT_S = 60.0
# A port the OS named free may be taken before Ray binds it: try again with new ones.
START_ATTEMPTS = 3
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when its parent dies


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on now (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def dashboard_port(dashboard: bool) -> int:
    """8265 for ``--dashboard`` when it is free; otherwise a free port.  A sweep without
    ``--dashboard`` never asks for 8265: Ray's API server (jobs, state) still runs."""
    if dashboard and port_is_free(DASHBOARD_PORT):
        return DASHBOARD_PORT
    return free_port()


def _die_with_parent() -> None:
    # runs in the child between fork and exec: SIGTERM when the driver's thread ends
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


# The code root this driver imports `study` from: the holder imports the same code, not
# whatever `study` package the current folder may hold.
CODE_ROOT = str(Path(__file__).resolve().parents[1])


def start_command(gcs_port: int, api_port: int, dashboard: bool) -> list[str]:
    """The command line of a loopback-only head node (:mod:`study.tune.ray_head`)."""
    run_holder = (
        f"import sys; sys.path.insert(0, {CODE_ROOT!r}); "
        "from study.tune.ray_head import main; sys.exit(main())"
    )
    return [
        sys.executable, "-c", run_holder,
        f"--port={gcs_port}",
        f"--dashboard-port={api_port}",
        *(["--dashboard"] if dashboard else []),
    ]  # fmt: skip


@dataclass
class LocalRay:
    """A running local head node: its GCS address, its dashboard's URL (``--dashboard``),
    the holding process and the file its output goes to."""

    process: subprocess.Popen
    address: str
    dashboard_url: str | None
    log: Path

    @classmethod
    def start(cls, dashboard: bool, meanwhile: Callable[[], object] | None = None) -> LocalRay:
        """Start the head node and wait until it is up; ConnectionError (one line) if it
        does not come up.

        ``meanwhile`` runs once the holder is launched and before it is
        awaited: the node takes seconds to come up (tens on a loaded machine) in its own
        processes, and the driver's own work (its Tune imports) fits in that wait.  It
        runs in this thread, once, whatever the attempts: the holder is forked here
        with a ``preexec_fn``, which is not safe while another thread of the driver
        imports (a child forked during a ``dlopen`` can hang).  If it raises, the launched
        node is awaited, then stopped, and the exception propagates: a holder stopped
        half-way could leave the Ray processes it had started running."""
        problem = "no attempt"
        for attempt in range(START_ATTEMPTS):
            holder = cls._launch(dashboard)
            if attempt == 0 and meanwhile is not None:
                try:
                    meanwhile()
                except BaseException:
                    holder._wait_until_ready()
                    holder.stop()
                    raise
            problem = holder._wait_until_ready()
            if problem is None:
                atexit.register(holder.stop)
                return holder
            holder.stop()
        raise ConnectionError(f"could not start a local Ray: {problem}")

    @classmethod
    def _launch(cls, dashboard: bool) -> LocalRay:
        """One holder on ports free now, not awaited."""
        gcs_port, api_port = free_port(), dashboard_port(dashboard)
        # named after this driver: a later start removes it if the driver was killed
        fd, name = tempfile.mkstemp(prefix=owned_prefix(RAY_START_PREFIX), suffix=".log")
        with os.fdopen(fd, "w") as out:
            process = subprocess.Popen(
                start_command(gcs_port, api_port, dashboard),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        return cls(
            process,
            f"{LOOPBACK}:{gcs_port}",
            f"http://{LOOPBACK}:{api_port}" if dashboard else None,
            Path(name),
        )

    def _wait_until_ready(self) -> str | None:
        """None once the holder says the node is up; else what went wrong (one line)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            if READY_LINE in text:
                return None
            if self.process.poll() is not None:
                lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
                errors = [ln for ln in lines if "Error" in ln or "error" in ln]
                return (errors or lines or [f"exit status {self.process.returncode}"])[-1]
            time.sleep(0.2)
        return f"the local Ray did not come up within {START_TIMEOUT_S:.0f} s"

    def stop(self) -> None:
        """End the node (the holder stops its Ray processes); idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.unlink(missing_ok=True)
