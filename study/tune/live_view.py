"""The sweep's live view: one summary line plus one line per running trial.

A Tune progress reporter (``ray.tune.ProgressReporter``, the legacy reporter interface
that ``study`` selects with ``RAY_AIR_NEW_OUTPUT=0``)::

    moon_mu 0:01:23 | 15 trials: 6 done, 2 running, 7 pending, 0 errored | best test_acc ...
      mu=1 seed=0                    round   4/10  test_acc 0.5231
      mu=1 seed=1                    round   2/10  test_acc 0.4412

(the summary line ends ``best test_acc 0.6990 | ~0:03:10 left``).  A score task's sweep
(image assessment) shows its primary metric instead (``best test_srcc 0.8120``; the
lowest for ``test_mae``, ``test_rmse``), and a selecting sweep its ranking metric
(``best val_srcc ...``).  A trial is named by its point's label, as in its folder name
and the summary: floats at 4 significant digits (``mu=0.02055, lr=0.1342``).

On a terminal the block is redrawn in place (ANSI cursor-up and erase) at most every
``tty_period_s``.  When the output is a file or CI it is printed again only when the
trials' states change (one starts, ends or errors) or ``file_period_s`` (30 s) have
passed, so a 15-trial sweep prints a few hundred lines at most instead of Tune's full
table every few seconds.

The time left is estimated from the rounds still to run at the rate rounds have been
completed so far (every trial counted at the study's round count; a trial stopped early
by ASHA counts as complete).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from ray.tune import ProgressReporter

from federated.contract.columns import OWN_TEST_MEAN, TEST_VALUE, console_words
from study.selection import mode_of

FILE_PERIOD_S = 30.0
TTY_PERIOD_S = 2.0
DONE = ("TERMINATED",)
FAILED = ("ERROR",)


def clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class LiveView(ProgressReporter):
    """Compact progress of a sweep (see the module docstring)."""

    def __init__(
        self,
        title: str,
        total_trials: int,
        rounds_per_trial: int,
        label_keys: list[str],
        stream: TextIO | None = None,
        file_period_s: float = FILE_PERIOD_S,
        tty_period_s: float = TTY_PERIOD_S,
        metric: str | None = None,
        primary: str = "acc",
        task: str | None = None,
    ) -> None:
        #: the trials' primary metric (``acc``; a score task's ``srcc``, ``mae`` ...)
        self.primary = primary
        #: the trials' task, whose declared metrics say which way is better
        self.task = task
        #: what ranks the trials (a validation metric; None: nothing ranks, test shown)
        self.metric = metric or TEST_VALUE.column(primary)
        self.title = title
        self.total_trials = total_trials
        self.rounds_per_trial = rounds_per_trial
        self.label_keys = label_keys
        self._stream = stream
        self.file_period_s = file_period_s
        self.tty_period_s = tty_period_s
        self._start = time.monotonic()
        self._last_print = -float("inf")
        self._last_state: tuple | None = None
        self._drawn_lines = 0
        self._last_lines: list[str] = []

    # Tune pickles the run config (reporter included) for --resume: no stream in the state.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_stream"] = None
        return state

    # --resume unpickles the view the sweep started with: one saved before the view knew
    # its ranking metric (or its primary metric) shows test accuracy, as it did then.
    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("metric", "test_acc")
        state.setdefault("primary", "acc")
        self.__dict__.update(state)

    @property
    def stream(self) -> TextIO:
        return self._stream or sys.stdout

    @property
    def interactive(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    # ---------------------------------------------------------------- Tune's interface
    def setup(self, start_time: float | None = None, *args: Any, **kwargs: Any) -> None:
        self._start = time.monotonic()

    def should_report(self, trials: list, done: bool = False) -> bool:
        if done:
            return True
        state = self._state(trials)
        period = self.tty_period_s if self.interactive else self.file_period_s
        return state != self._last_state or time.monotonic() - self._last_print >= period

    def report(self, trials: list, done: bool, *sys_info: str) -> None:
        self._last_state = self._state(trials)
        self._last_print = time.monotonic()
        lines = self.lines(trials, time.monotonic() - self._start)
        if done and lines == self._last_lines:  # Tune reports the end twice
            return
        self._last_lines = lines
        out = self.stream
        if self.interactive and self._drawn_lines:
            out.write(f"\x1b[{self._drawn_lines}F\x1b[J")  # back to the block's start, erase
        out.write("\n".join(lines) + "\n")
        out.flush()
        self._drawn_lines = len(lines) if self.interactive else 0

    # ------------------------------------------------------------------------ content
    def _state(self, trials: list) -> tuple:
        return tuple(sorted((t.trial_id, t.status) for t in trials))

    def lines(self, trials: list, elapsed_s: float) -> list[str]:
        """The summary line and one line per running trial."""
        running = [t for t in trials if t.status == "RUNNING"]
        done = sum(t.status in DONE for t in trials)
        errored = sum(t.status in FAILED for t in trials)
        pending = max(0, self.total_trials - done - errored - len(running))
        metric = self.metric
        values = [
            (t.last_result or {}).get(metric)
            for t in trials
            if isinstance((t.last_result or {}).get(metric), float)
        ]
        values = [a for a in values if a == a]  # NaN (diverged) never counts as best
        pick = min if mode_of(metric, self.task) == "min" else max
        best = f"best {metric} {pick(values):.4f}" if values else f"best {metric} -"
        summary = (
            f"{self.title} {clock(elapsed_s)} | {self.total_trials} trials: {done} done, "
            f"{len(running)} running, {pending} pending, {errored} errored | {best}"
            f"{self._time_left(trials, done + errored, elapsed_s)}"
        )
        return [summary, *(self._trial_line(t) for t in running)]

    def _time_left(self, trials: list, finished: int, elapsed_s: float) -> str:
        total = self.total_trials * self.rounds_per_trial
        rounds = finished * self.rounds_per_trial + sum(
            int((t.last_result or {}).get("round") or 0) for t in trials if t.status == "RUNNING"
        )
        if rounds <= 0 or elapsed_s <= 0:
            return ""
        left = (total - rounds) * elapsed_s / rounds
        return f" | ~{clock(left)} left" if rounds < total else ""

    def _label(self, config: dict[str, Any]) -> str:
        """The trial's point as the plan labelled it (floats at 4 significant digits,
        kept distinct: ``mu=0.02055, lr=0.1342``), and its seed when seeds vary."""
        point = config.get("point")
        if point is None:  # a config without the plan's label: its values as written
            keys = self.label_keys
        else:
            keys = [k for k in self.label_keys if k == "seed"]
        parts = [str(point)] if point is not None else []
        parts += [f"{k}={config.get(k)}" for k in keys if k in config]
        return " ".join(parts)

    def _trial_line(self, trial) -> str:
        label = self._label(trial.config or {})
        result = trial.last_result or {}
        round_ = result.get("round")
        test = TEST_VALUE.column(self.primary)
        acc = result.get(test)
        progress = f"round {round_:>3}/{self.rounds_per_trial}" if round_ else "starting"
        acc_text = f"  {test} {acc:.4f}" if isinstance(acc, float) else ""
        # a trial scoring each party on its own test split is judged by that mean (a
        # personalised method's pooled test_ value is NaN between its scored rounds)
        own_key = OWN_TEST_MEAN.column(self.primary)
        own = result.get(own_key)
        if isinstance(own, float) and not math.isnan(own):
            pooled = acc_text if isinstance(acc, float) and not math.isnan(acc) else ""
            acc_text = f"  {own_key} {own:.4f}{pooled}"
        ranked = result.get(self.metric) if self.metric != test else None
        if isinstance(ranked, float):
            acc_text = f"  {self.metric} {ranked:.4f}{acc_text}"
        # the declared columns a round's line shows (a DP trial's epsilon spent so far)
        return f"  {label or trial.trial_id:<30} {progress}{acc_text}{console_words(result)}"
