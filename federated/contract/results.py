"""The results contract: the names of a sweep's files and the words for a trial's state.

Defined once, here, and read by every side: ``federated`` writes a trial's own files
(``parties.csv``, ``representations/``), ``study`` writes the sweep's (manifest,
partitions, feature examples) and prints the end-of-sweep summary, ``analysis`` reads
them all and writes the report.  It lives in ``federated`` because that is the package
both ``study`` and ``analysis`` may import (``federated`` imports neither), and it
imports nothing but the standard library: no torch, no Ray, so the report can read it.

A sweep folder (details in :mod:`study.sweep_folder`)::

    fedsweep_sweep.json          MANIFEST
    partitions.json              PARTITIONS
    feature_examples.npz         FEATURE_EXAMPLES
    <trial dir>/params.json      PARAMS
    <trial dir>/result.json      RESULT
    <trial dir>/error.txt        ERROR
    <trial dir>/parties.csv      PARTIES
    <trial dir>/representations/round_NNNN.npz   REPRESENTATIONS, representation_file()

A trial's status is decided by :func:`trial_status` alone, from what is known of it at
the end (the sweep's summary) or later (the report); both print the same words:

``completed``    its last round is the config's ``rounds``
``diverged``     a round reported ``diverged`` (the loss became NaN/inf; the run stopped)
``error``        it failed (Tune recorded an error, or ``error.txt``) before completing
``stopped``      the sweep finished, the trial ran fewer rounds without error (a
                 scheduler such as ASHA stopped it)
``damaged``      its files lost rounds or cannot be read (the report only: it decides
                 from the files, see :mod:`analysis.reading.trial_files`)
``interrupted``  the sweep was interrupted after the trial reported a round
``not started``  the sweep was interrupted before the trial reported any round
``running``      the sweep is still running and the trial has not finished
"""

from __future__ import annotations

MANIFEST = "fedsweep_sweep.json"
PARTITIONS = "partitions.json"
FEATURE_EXAMPLES = "feature_examples.npz"
PARAMS = "params.json"
RESULT = "result.json"
ERROR = "error.txt"
PARTIES = "parties.csv"
REPRESENTATIONS = "representations"
# the parties' own states a trial's checkpoints index (federated/engine/party_store.py)
PARTY_STATES = "party_states"

COMPLETED = "completed"
DIVERGED = "diverged"
FAILED = "error"
STOPPED = "stopped"
DAMAGED = "damaged"
INTERRUPTED = "interrupted"
NOT_STARTED = "not started"
RUNNING = "running"
# every trial status, in the order tables and summaries list them
STATUSES = (COMPLETED, STOPPED, DIVERGED, FAILED, DAMAGED, INTERRUPTED, NOT_STARTED, RUNNING)

# a sweep's status, as its manifest records it
SWEEP_RUNNING = "running"
SWEEP_FINISHED = "finished"
SWEEP_INTERRUPTED = "interrupted"
SWEEP_FAILED = "failed"
SWEEP_STATUSES = (SWEEP_RUNNING, SWEEP_FINISHED, SWEEP_INTERRUPTED, SWEEP_FAILED)

# a trial's final state in the manifest's ``trials`` (what Tune said at the end)
RECORDED_DONE = "TERMINATED"
RECORDED_ERROR = "ERROR"
RECORDED_INTERRUPTED = "INTERRUPTED"


def representation_file(round_number: int) -> str:
    """The name of round ``round_number``'s capture inside ``REPRESENTATIONS``."""
    return f"round_{int(round_number):04d}.npz"


def trial_status(
    *,
    last_round: int,
    planned_rounds: int,
    diverged: bool,
    failed: bool,
    sweep_status: str,
    damaged: bool = False,
) -> str:
    """A trial's status word (module docstring) from what is known of it.

    ``last_round``: the last round it reported (0: none); ``planned_rounds``: its
    config's ``rounds`` (0: unknown); ``diverged``: a round said so; ``failed``: Tune
    recorded an error or the trial left ``error.txt``; ``sweep_status``: the sweep's
    (``running``, ``finished``, ``interrupted``; ``failed`` reads as interrupted: the
    driver stopped and ``--resume`` continues it); ``damaged``: its files lost rounds or
    cannot be read (only a reader of the files knows: the report)."""
    if diverged:
        return DIVERGED
    if damaged:
        return DAMAGED
    if planned_rounds and last_round >= planned_rounds:
        return COMPLETED
    if failed:
        return FAILED
    if sweep_status == SWEEP_FINISHED:
        return STOPPED
    if sweep_status in (SWEEP_INTERRUPTED, SWEEP_FAILED):
        return INTERRUPTED if last_round > 0 else NOT_STARTED
    return RUNNING
