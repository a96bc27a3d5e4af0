"""Cores of a trial's Ray machine that no trial holds: a lone trial may use them.

A sweep of 15 trials on 2 slots ends with one trial alone for a trial's length: one
core idle, 1/16 of the sweep.  Packed execution trains a round's packs independently, so
a trial on one torch thread can train them side by side on more threads without
changing a number (:mod:`federated.execution.packed`, "Packs side by side"); this says
how many it may use.

A core counts as idle when Ray's free CPUs include it at the start of two rounds in a
row: Tune starts a waiting trial as soon as a slot frees, so a core free at one check
only may be between one trial's end and the next one's start (using it then costs
speed, never a result).  Only a single-node Ray is asked: on a cluster the free CPUs
may be on other machines.
"""

from __future__ import annotations

from collections.abc import Callable


def free_cpus() -> int:
    """Whole CPUs of this single-node Ray that no task or actor holds; 0 on a cluster
    of several nodes or without a running Ray."""
    import ray

    if not ray.is_initialized():
        return 0
    try:
        if sum(1 for node in ray.nodes() if node.get("Alive")) != 1:
            return 0
        return int(ray.available_resources().get("CPU", 0.0))
    except Exception:  # a question Ray cannot answer now never fails a trial
        return 0


class IdleCores:
    """How many threads a trial's next round may train its packs on: its own core and
    the cores seen free at this round's start and the last one's."""

    def __init__(self, free: Callable[[], int] = free_cpus) -> None:
        self._free = free  # the CPUs free now
        self._before = 0

    def threads(self) -> int:
        """1 + the cores free now and at the previous call."""
        now = self._free()
        idle = min(now, self._before)
        self._before = now
        return 1 + idle
