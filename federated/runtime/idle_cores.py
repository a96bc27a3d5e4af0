"""Cores of a trial's Ray machine that no trial holds: a lone trial may use them.

A sweep of 15 trials on 2 slots ends with one trial alone for a trial's length: one
core idle, 1/16 of the sweep.  Packed execution trains a round's packs independently, so
a trial on one torch thread can train them side by side on more threads without
changing a number (:mod:`federated.execution.packed`, "Packs side by side"); this says
how many it may use.

A core counts as idle when Ray's free CPUs include it at the start of two rounds in a
row, or at every look of a background poll over the last :data:`SETTLE_S` seconds: Tune
starts a waiting trial as soon as a slot frees, so a core free at one look only may be
between one trial's end and the next one's start (using it then costs speed, never a
result).  The poll lets a trial whose rounds are long (seconds each) take a core freed
during one round from the next one on, not the round after.  Only a single-node Ray is
asked: on a cluster the free CPUs may be on other machines.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

# How long a core must have been free at every poll to count as idle (s): longer than the
# gap between one trial's end and the next one's start (none with a reused actor, which
# takes the next trial at once; with an actor per trial, Tune asks for the next one's
# resources in the step that ends the last one), shorter than a laptop-budget round.
SETTLE_S = 1.0
# How often the background poll looks (s): two calls to Ray's control store per look.
POLL_PERIOD_S = 0.25
# The poll starts after a round this long (s): with shorter rounds the round-start rule
# takes a freed core within a second anyway, and a sweep of quick trials (a test suite's)
# is spared four calls a second per trial.
POLL_AFTER_ROUND_S = 2.0


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
    """How many threads a trial's next round may train its packs on: its own core and the
    cores seen free at this round's start and either the last one's or every poll of the
    last ``settle_s`` seconds.

    The poll runs in a daemon thread from the first :meth:`threads` call that comes at
    least ``poll_after_round_s`` after the one before (a round that long) until
    :meth:`close` (a reused actor runs many trials: each closes its own); ``poll_period_s``
    None polls nothing (the round-start rule alone)."""

    def __init__(
        self,
        free: Callable[[], int] = free_cpus,
        settle_s: float = SETTLE_S,
        poll_period_s: float | None = POLL_PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
        poll_after_round_s: float = POLL_AFTER_ROUND_S,
    ) -> None:
        self._free = free  # the CPUs free now
        self._settle_s = settle_s
        self._period_s = poll_period_s
        self._clock = clock
        self._poll_after_s = poll_after_round_s
        self._round_start: float | None = None  # when threads() was last called (s)
        self._before = 0  # free at the previous round's start
        self._looks: deque[tuple[float, int]] = deque()  # (time s, free), oldest first
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poll: threading.Thread | None = None

    def look(self) -> int:
        """The CPUs free now, remembered for :meth:`threads`."""
        now, free = self._clock(), self._free()
        with self._lock:
            self._looks.append((now, free))
            # keep the newest look at least settle_s old: it tells how long the window is covered
            while len(self._looks) > 1 and self._looks[1][0] <= now - self._settle_s:
                self._looks.popleft()
        return free

    def settled(self) -> int:
        """The fewest CPUs free at any look of the last ``settle_s`` seconds; 0 unless
        the looks cover that whole window."""
        with self._lock:
            looks = list(self._looks)
        if not looks or looks[0][0] > looks[-1][0] - self._settle_s:
            return 0
        return min(free for _, free in looks)

    def threads(self) -> int:
        """1 + the cores free now and at the previous call, or throughout the poll's window."""
        started, self._round_start = self._round_start, self._clock()
        long_round = started is not None and self._round_start - started >= self._poll_after_s
        if self._poll is None and self._period_s is not None and long_round:
            self._poll = threading.Thread(target=self._keep_looking, daemon=True)
            self._poll.start()
        now = self.look()
        idle = max(min(now, self._before), min(now, self.settled()))
        self._before = now
        return 1 + idle

    def __enter__(self) -> IdleCores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the poll (idempotent)."""
        self._stop.set()
        if self._poll is not None:
            self._poll.join()

    def _keep_looking(self) -> None:
        while not self._stop.wait(self._period_s):
            self.look()
