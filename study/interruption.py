"""Telling an interrupted sweep from a finished one.

Ctrl-C (SIGINT) and SIGTERM: :class:`StopSignals` records which signal came and asks
Tune to stop the way it stops on its own SIGINT (one last snapshot of the experiment
state, then ``Tuner.fit`` returns), through SIGUSR1, the other signal Tune listens to.
Tune's own SIGINT handler is turned off (``TUNE_DISABLE_SIGINT_HANDLER``) so that the
driver, not Tune, decides: the manifest says ``interrupted``, the driver prints the
resume command and exits 130 (SIGINT) or 143 (SIGTERM).  A second signal stops at once.

A killed driver (kill -9, a reboot) cannot write anything: the manifest keeps saying
``running``.  It records the driver's host and process id, and :func:`driver_gone`
tells, on the next read, that the process is no longer there (on the same host), so
readers show the sweep as interrupted (:mod:`study.driver_liveness`).  This module does
not import Ray.
"""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Any

from federated.cli import exit_codes

EXIT_CODES = {signal.SIGINT: exit_codes.INTERRUPTED, signal.SIGTERM: exit_codes.TERMINATED}


class StopSignals:
    """While active, SIGINT/SIGTERM stop Tune gracefully and are remembered in ``received``."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for sig in EXIT_CODES:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, sig: int, frame: FrameType | None) -> None:
        tune_listens = signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, signal.SIG_IGN)
        first = self.received is None
        self.received = self.received or sig
        if first and tune_listens:
            os.kill(os.getpid(), signal.SIGUSR1)  # Tune: snapshot, stop trials, return
        else:  # a second signal, or Tune's loop is not running yet: stop now
            raise KeyboardInterrupt

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.received, exit_codes.INTERRUPTED)
