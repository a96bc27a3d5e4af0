"""A failure of fedsweep's own (a bug, not a bad input): one line on the terminal, the
traceback kept in a file.

Bad inputs are refused in one line before any work by the checks that know them; what
escapes every check is a fault in fedsweep itself.  A command line still shows no
traceback: it prints one ``error:`` line naming the exception and the file holding the
traceback (``$FEDSWEEP_DATA/../errors/`` by default ``~/.cache/fedsweep/errors/``), and
exits with :data:`~federated.cli.exit_codes.INTERNAL_ERROR`.  What a sweep had written
before the failure stays as it was (its manifest says how far it got).
"""

from __future__ import annotations

import errno
import os
import sys
import time
import traceback
from pathlib import Path

from federated.cli.error_reason import error_reason
from federated.cli.exit_codes import BROKEN_PIPE, INTERNAL_ERROR
from federated.runtime.atomic_file import atomic_open

ERRORS_FOLDER = Path.home() / ".cache" / "fedsweep" / "errors"
# what writing standard output fails with on a full or broken device
OUTPUT_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EPIPE)


def _silence_stdout() -> None:
    """Point standard output at /dev/null: what is still buffered for a gone reader or a
    full device must not fail again when Python flushes it at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def report_internal_error(error: BaseException, command: str) -> int:
    """Print ``error`` as one line on stderr with where its traceback was saved;
    returns the exit status (:data:`INTERNAL_ERROR`).  Standard output that cannot be
    written is no fault of fedsweep's: a reader that went away (``| head -1``) ends the
    command quietly with status 141 (128 + SIGPIPE, as the shell's own commands do); a
    full or failing device (``> /dev/full``) is one line saying so."""
    if isinstance(error, BrokenPipeError):
        _silence_stdout()
        return BROKEN_PIPE
    if isinstance(error, OSError) and error.filename is None and error.errno in OUTPUT_ERRNOS:
        _silence_stdout()
        print(
            f"error: {command} could not write its standard output ({error.strerror}); "
            "nothing else was affected",
            file=sys.stderr,
        )
        return INTERNAL_ERROR
    text = "".join(traceback.format_exception(error))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    where = ERRORS_FOLDER / f"{command}-{stamp}.txt"
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(where) as fh:
            fh.write(text)
        kept = f"traceback in {where}"
    except OSError:  # an unwritable home: the line still says what failed
        kept = "traceback not saved (its folder cannot be written)"
    message = error_reason(error, default="")
    print(
        f"error: {command} failed inside fedsweep ({type(error).__name__}: {message}); "
        f"a bug, please report it with the command line; {kept}",
        file=sys.stderr,
    )
    return INTERNAL_ERROR
