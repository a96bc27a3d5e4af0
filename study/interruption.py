"""Telling an interrupted sweep from a finished one, at any moment of the driver's life.

Ctrl-C (SIGINT) and SIGTERM stop a sweep wherever it is: while Python imports the
driver (about 2 s: torch), while it plans, times the execution paths, starts Ray,
starts the first trials, runs them, or writes the last trial's end.  One handler,
:data:`DRIVER_SIGNALS`, owns both signals from the first line of the package
(``study/__init__.py`` installs it when the process is the sweep command) to the
process's exit, and it acts by phase:

* **importing** (before :func:`study.sweep.main` runs): the signal is recorded and
  ``main`` stops at its first line, exit 130 (143), nothing written.  Raising here
  would print a traceback from the middle of an import.
* **driving** (planning, checks, path timing, Ray's start, the folder's creation, the
  summary): ``KeyboardInterrupt`` is raised; the driver catches it, removes a folder it
  was still creating, and ends with exit 130 (143) — nothing written, or the manifest
  ``interrupted``.
* **ending** (after ``main``'s work: the dashboard's wait, the exit hooks): recorded;
  the exit status read as the process leaves (:meth:`StopSignals.final_code`) is 130
  (143).
* **Tune's loop** (:meth:`StopSignals.tune_loop`): Tune is asked to stop the way it
  stops on its own SIGINT (one last snapshot of the experiment state, then
  ``Tuner.fit`` returns) through SIGUSR1, the other signal it listens to; the manifest
  says ``interrupted`` and the driver prints the resume command.  Tune's own SIGINT
  handler is turned off (``TUNE_DISABLE_SIGINT_HANDLER``) so that the driver decides.

A second signal stops at once.  The handler is installed whatever the signal's
disposition was: a shell starts a background job (``cmd &`` in a script) with SIGINT
ignored, and such a sweep must stop on ``kill -INT`` like one in a terminal.

A killed driver (kill -9, a reboot) cannot write anything: the manifest keeps saying
``running``.  It records the driver's host and process id, and :func:`driver_gone`
tells, on the next read, that the process is no longer there (on the same host), so
readers show the sweep as interrupted (:mod:`study.driver_liveness`).  This module does
not import Ray.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

from federated.cli import exit_codes

EXIT_CODES = {signal.SIGINT: exit_codes.INTERRUPTED, signal.SIGTERM: exit_codes.TERMINATED}

# The handler's phases (module docstring).
IMPORTING = "importing"
DRIVING = "driving"
TUNE_LOOP = "tune loop"
ENDING = "ending"


class StopSignals:
    """SIGINT/SIGTERM for a sweep driver: recorded in ``received``, acted on by phase."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.phase = IMPORTING
        self._previous: dict[int, Any] = {}
        self._previous_unraisable: Any = None

    @property
    def installed(self) -> bool:
        return bool(self._previous)

    def install(self) -> None:
        """Own SIGINT and SIGTERM from now on (a no-op when already installed, or when
        called from a thread other than the main one, where Python allows no handler)."""
        if self.installed:
            return
        with contextlib.suppress(ValueError):  # not the main thread: nothing to own
            for sig in EXIT_CODES:
                self._previous[sig] = signal.signal(sig, self._handle)
        if self.installed:
            self._previous_unraisable = sys.unraisablehook
            sys.unraisablehook = self._unraisable

    def _unraisable(self, unraisable: Any) -> None:
        """Python's report of an exception it cannot raise, less this handler's stop.

        A signal that lands while Python runs a callback no exception can leave (a
        weakref's, such as the import system's module-lock callback, or a ``__del__``)
        turns the handler's KeyboardInterrupt into "Exception ignored in: ..." and a
        traceback on the user's terminal (seen once under load, Ctrl-C as Ray started).
        The stop is recorded (``received``) and acted on where the driver next looks
        (:meth:`driving`, :meth:`tune_loop`), so the report says nothing new; any other
        exception is reported as before."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.received is not None:
            return
        (self._previous_unraisable or sys.__unraisablehook__)(unraisable)

    def reclaim(self) -> None:
        """Take both signals back where a library took them after :meth:`install`:
        ``ray.init`` sets a SIGTERM handler of its own (``sys.exit``, and its core
        worker's crash logger), under which SIGTERM would end a sweep as ``failed``."""
        if not self.installed:
            return
        with contextlib.suppress(ValueError):
            for sig in EXIT_CODES:
                if signal.getsignal(sig) != self._handle:
                    signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        """Give the signals back their dispositions from before :meth:`install`."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self._previous_unraisable or sys.__unraisablehook__
        self._previous_unraisable = None

    @contextlib.contextmanager
    def driving(self) -> Iterator[StopSignals]:
        """The driver's body (``main``): a signal raises ``KeyboardInterrupt``.  One
        that came while the driver was still being imported is raised at once."""
        installed_here = not self.installed
        self.install()
        self.phase = DRIVING
        try:
            if self.received is not None:
                raise KeyboardInterrupt
            yield self
        finally:
            self.phase = ENDING
            if installed_here:  # main() called as a function (tests): leave no handler
                self.uninstall()
                self.received = None
                self.phase = IMPORTING

    @contextlib.contextmanager
    def tune_loop(self) -> Iterator[None]:
        """``Tuner.fit``: a first signal asks Tune to stop (SIGUSR1) once Tune listens;
        one that came just before Tune's loop started stops it at its first step."""
        previous = self.phase
        # An earlier Tuner.fit in this process (a seed batch, --rerun-best) left its
        # handler, whose loop is over: SIGUSR1 is Tune's again only once this one listens.
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        self.reclaim()
        self.phase = TUNE_LOOP
        try:
            if self.received is not None:
                raise KeyboardInterrupt
            yield
        finally:
            self.phase = previous

    def _handle(self, sig: int, frame: FrameType | None) -> None:
        first = self.received is None
        self.received = self.received or sig
        if self.phase == ENDING:
            return  # the command's work is done: final_code() says it was stopped
        if self.phase == IMPORTING:
            if first:
                return  # main() stops at its first line
            # a second signal while importing: nothing was written, leave now
            print("error: interrupted; nothing was written", file=sys.stderr, flush=True)
            os._exit(self.exit_code)
        tune_listens = signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, signal.SIG_IGN)
        if first and self.phase == TUNE_LOOP and tune_listens:
            os.kill(os.getpid(), signal.SIGUSR1)  # Tune: snapshot, stop trials, return
            return
        raise KeyboardInterrupt  # a second signal, or Tune's loop is not running

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.received, exit_codes.INTERRUPTED)

    def final_code(self, code: int) -> int:
        """The command's exit status, read as the process leaves (after its exit hooks):
        a signal that came once its work was done (the sweep's end recorded, the summary
        printed) still ends it with 130 (143), and says so."""
        if self.received is None or code in EXIT_CODES.values():
            return code
        print("stopped after the sweep finished (its end is in the manifest)", file=sys.stderr)
        return self.exit_code


#: The sweep driver's one handler (``study/__init__.py`` installs it first thing).
DRIVER_SIGNALS = StopSignals()


def launched_as_sweep_command() -> bool:
    """True in the process of ``python -m study.sweep`` or the ``fedsweep-sweep`` script
    (``sys.orig_argv``: the interpreter's own command line, as typed)."""
    argv = list(getattr(sys, "orig_argv", []))
    as_module = any(argv[i : i + 2] == ["-m", "study.sweep"] for i in range(len(argv) - 1))
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return as_module or script == "fedsweep-sweep"
