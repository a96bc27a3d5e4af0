"""A failed trial reaches the sweep's terminal as one line; its detail stays in its files.

Tune logs every trial failure with the whole traceback (a ``RayTaskError`` wrapping the
trial's own, 30 to 40 lines each), so a resume whose trials all fail on the same refused
checkpoint scrolled 150 lines of tracebacks past before the driver's one-line verdict.
The traceback is already in the trial's ``error.txt`` (Tune writes it, and the report
reads its last line), so :class:`OneLineTrialErrors` turns Tune's record into one line:
the trial and the last line of its error.  This module does not import Ray: the filter
attaches to Tune's logger by name, before Ray is imported.
"""

from __future__ import annotations

import logging

# the logger of ray/tune/execution/tune_controller.py (its module name)
TUNE_CONTROLLER_LOGGER = "ray.tune.execution.tune_controller"
TRIAL_FAILED = "Trial task failed for trial"


def last_error_line(error: BaseException) -> str:
    """The last non-empty line of ``error``'s message (a wrapped error's own message is
    last), or its type's name; whole, never cut."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


class OneLineTrialErrors(logging.Filter):
    """Rewrite Tune's "Trial task failed for trial T" record (with its traceback) as
    one line: ``Trial task failed for trial T: <last line> (full traceback in the trial's
    error.txt)``.  Every other record passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and str(record.msg).startswith(TRIAL_FAILED):
            error = record.exc_info[1]
            detail = last_error_line(error) if error is not None else "failed"
            record.msg = f"{record.getMessage()}: {detail} (full traceback in its error.txt)"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


def install_one_line_trial_errors() -> None:
    """Attach :class:`OneLineTrialErrors` to Tune's logger (once)."""
    logger = logging.getLogger(TUNE_CONTROLLER_LOGGER)
    if not any(isinstance(f, OneLineTrialErrors) for f in logger.filters):
        logger.addFilter(OneLineTrialErrors())
