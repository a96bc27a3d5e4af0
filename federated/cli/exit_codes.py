"""The exit statuses of fedsweep's command lines (documented in docs/sweeps-and-studies.md).

Scripts can tell the outcomes apart: ``0`` done, ``1`` a failure inside fedsweep itself
(a bug: one line, the traceback in a file, federated/cli/internal_error.py), ``2`` a bad
input refused before any work, ``3`` a run that diverged (``federated.run``), ``4`` a
sweep in which at least one trial errored (retries spent; some or all of them: a sweep
is "finished" only when every trial is), ``130`` interrupted by Ctrl-C (SIGINT), ``143``
stopped by SIGTERM, ``141`` the reader of standard output went away (``| head``); the
errored and the two interrupted cases print the command that resumes the sweep.
"""

from __future__ import annotations

import signal

OK = 0
INTERNAL_ERROR = 1
BAD_INPUT = 2
DIVERGED = 3
# Any errored trial, not only all of them (the name predates partial failures).
ALL_TRIALS_FAILED = 4
# The shell's convention: 128 + the signal's number.
INTERRUPTED = 128 + signal.SIGINT
TERMINATED = 128 + signal.SIGTERM
# standard output's reader went away (``| head -1``): quiet, as the shell's commands are
BROKEN_PIPE = 128 + signal.SIGPIPE
