"""``python -m benchmarks.sweep_overhead SWEEP_DIR``: how much of a finished sweep's wall
time its trial slots spent outside the rounds.

    python -m benchmarks.sweep_overhead results/moon_mu-laptop-20261126-101500
    python -m benchmarks.sweep_overhead DIR --launched 1795686600.2   # count Ray's start too
    python -m benchmarks.sweep_overhead DIR --launched T0 --ended T1  # the command's wall time
    python -m benchmarks.sweep_overhead DIR --json                    # the numbers as JSON

Read from the files a sweep leaves (so the demo's folder can be measured afterwards):
each trial's rows give its start (Tune's ``timestamp`` and ``time_total_s``, pinned to a
fraction of a second by :func:`benchmarks.side_by_side.trial_origin`) and each round's end
and length (``round_seconds``: local training and the round's evaluation).  The sweep's
span runs from ``--launched`` (the command's start, epoch seconds) or else the
manifest's ``started`` (written once Ray is up, whole seconds) to ``--ended`` (the
command's end, epoch seconds) or else the last round's end;
its capacity is that span times the trial slots (the machine's CPUs over each trial's,
at most ``--max-concurrent``).  Everything in the capacity that is not a round is
outside training, split into:

* ``start``: before the first trial started (Ray's start-up, the plan, the first actor);
* ``set_up``: inside trials, from a trial's start to its first round (data, model);
* ``between_rounds``: inside trials, between rounds (reporting, checkpoints);
* ``between_trials``: a slot's gap from one trial's last round to its next trial's start
  (the actor's end, a new actor's process and imports);
* ``idle_end``: slots without a trial while the last ones finish (the last wave); the
  share equally long trials would leave, ``last_wave_floor``, is printed beside it;
* ``spare_cores``: of those, the core-seconds the lone trials' packs ran on side by side
  (the rows' ``spare_core_seconds``: :mod:`federated.runtime.idle_cores`); training,
  so it counts against ``idle_end`` in the outside share;
* ``after``: every slot from the last round's end to ``--ended`` (the trials' and
  Tune's end, the summary, Ray's stop).

Units: seconds; shares are fractions of the capacity (slots x span).  Timestamps are
whole seconds, so a trial boundary is known to about ±0.5 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.side_by_side import trial_origin, trial_rows
from study.sweep_folder import MANIFEST


@dataclass(frozen=True)
class TrialSpan:
    """One trial on the wall clock (epoch seconds)."""

    name: str
    start: float  # the trainable started
    first_round_start: float
    end: float  # its last round ended
    rounds_s: float  # sum of its rounds' seconds
    spare_s: float = 0.0  # core-seconds its packs ran beyond its rounds' wall time


@dataclass(frozen=True)
class Overhead:
    """A sweep's capacity and where it went (seconds), see the module docstring."""

    trials: int
    slots: int
    span_s: float
    capacity_s: float
    rounds_s: float
    start_s: float
    set_up_s: float
    between_rounds_s: float
    between_trials_s: float
    idle_end_s: float
    after_s: float = 0.0
    spare_cores_s: float = 0.0

    @property
    def outside_share(self) -> float:
        """Fraction of the capacity spent outside training: outside rounds, less the
        idle cores that lone trials trained on."""
        busy = self.rounds_s + self.spare_cores_s
        return 1.0 - busy / self.capacity_s if self.capacity_s > 0 else 0.0

    @property
    def last_wave_floor(self) -> float:
        """The ``idle_end`` share that equally long trials leave in any order, one trial
        per slot: ``waves = ceil(trials / slots)``, and the last wave's empty slots,
        ``slots * waves - trials`` trial lengths of the ``slots * waves`` the span holds
        at best (15 trials on 2 slots: 1/16 = 6.25%).  Measured, it differs by how long
        trials took: on a shared machine a trial left alone runs faster than one beside
        another.  A lone trial's packs side by side on the freed cores
        (``spare_cores_s``) use part of it."""
        waves = -(-self.trials // self.slots)
        return (self.slots * waves - self.trials) / (self.slots * waves)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "outside_share": self.outside_share,
            "last_wave_floor": self.last_wave_floor,
        }


def trial_spans(sweep_dir: Path) -> list[TrialSpan]:
    """Every trial with rows, by start; a resumed trial's repeated rounds count once."""
    spans = []
    for trial_dir in sorted(p for p in sweep_dir.iterdir() if (p / "params.json").is_file()):
        rows = trial_rows(trial_dir)
        if not rows:
            continue
        by_round = {row.get("round", i): row for i, row in enumerate(rows)}
        origin = trial_origin(rows)
        ends = [origin + r["time_total_s"] for r in rows]
        first_start = ends[0] - rows[0]["round_seconds"]
        spans.append(
            TrialSpan(
                trial_dir.name,
                origin,
                first_start,
                max(ends),
                sum(r["round_seconds"] for r in by_round.values()),
                sum(float(r.get("spare_core_seconds") or 0.0) for r in by_round.values()),
            )
        )
    return sorted(spans, key=lambda s: s.start)


def slots_of(manifest: dict[str, Any], spans: list[TrialSpan]) -> int:
    """Trials the sweep could run at once: the machine's CPUs over a trial's, at most
    ``max_concurrent``; a manifest without the machine: the most trials seen starting
    while others ran (a reused actor's next trial may seem to start a fraction of a
    second before its last one ended, so this is only the fallback)."""
    cpus = float((manifest.get("resources") or {}).get("cpu") or 1)
    threads = (manifest.get("machine") or {}).get("threads")
    if threads:
        slots = max(1, int(int(threads) // cpus)) if cpus > 0 else 1
    else:
        slots = max((sum(1 for o in spans if o.start <= s.start < o.end) for s in spans), default=1)
    if manifest.get("max_concurrent"):
        slots = min(slots, int(manifest["max_concurrent"]))
    return max(1, slots)


def overhead(
    sweep_dir: Path, launched: float | None = None, ended: float | None = None
) -> Overhead:
    """Where a finished sweep's capacity went (see the module docstring)."""
    manifest = json.loads((sweep_dir / MANIFEST).read_text())
    spans = trial_spans(sweep_dir)
    if not spans:
        raise ValueError(f"{sweep_dir}: no trial has reported a round")
    if launched is None:
        launched = time.mktime(time.strptime(manifest["started"], "%Y-%m-%dT%H:%M:%S"))
    end = max(s.end for s in spans)
    slots = slots_of(manifest, spans)
    # each trial to the slot that freed first (Tune starts a trial when a slot frees)
    free = [launched] * slots
    between = 0.0
    first_of_slot = [True] * slots
    for span in spans:
        slot = min(range(slots), key=lambda i: free[i])
        if not first_of_slot[slot]:
            between += max(0.0, span.start - free[slot])
        first_of_slot[slot] = False
        free[slot] = max(free[slot], span.end)
    ended = end if ended is None else max(ended, end)
    span_s = ended - launched
    first_start = min(s.start for s in spans)
    return Overhead(
        trials=len(spans),
        slots=slots,
        span_s=span_s,
        capacity_s=slots * span_s,
        rounds_s=sum(s.rounds_s for s in spans),
        start_s=slots * (first_start - launched),
        set_up_s=sum(s.first_round_start - s.start for s in spans),
        between_rounds_s=sum((s.end - s.first_round_start) - s.rounds_s for s in spans),
        between_trials_s=between,
        idle_end_s=sum(end - f for f in free),
        after_s=slots * (ended - end),
        spare_cores_s=sum(s.spare_s for s in spans),
    )


def describe(result: Overhead, sweep_dir: Path) -> str:
    """The benchmark's printed table."""
    cap = result.capacity_s
    lines = [
        f"{sweep_dir.name}: {result.trials} trials on {result.slots} slots, "
        f"span {result.span_s:.1f} s, capacity {cap:.1f} slot-s",
        f"{'part':<16}{'slot-s':>9}{'share':>8}",
    ]
    parts = [
        ("rounds", result.rounds_s),
        ("start", result.start_s),
        ("set_up", result.set_up_s),
        ("between_rounds", result.between_rounds_s),
        ("between_trials", result.between_trials_s),
        ("idle_end", result.idle_end_s),
        ("after", result.after_s),
    ]
    for name, value in parts:
        lines.append(f"{name:<16}{value:>9.1f}{value / cap if cap else 0:>8.1%}")
    lines.append(
        f"{'spare_cores':<16}{result.spare_cores_s:>9.1f}"
        f"{result.spare_cores_s / cap if cap else 0:>8.1%}  (idle cores lone trials trained on)"
    )
    lines.append(f"outside training: {result.outside_share:.1%} of the capacity")
    lines.append(
        f"the last wave's empty slots, for {result.trials} equally long trials on "
        f"{result.slots} slots (one thread each): {result.last_wave_floor:.1%}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sweep_overhead", description=__doc__)
    p.add_argument("sweep_dir", type=Path, help="a finished sweep's folder")
    p.add_argument(
        "--launched", type=float, default=None, help="the command's start, epoch seconds"
    )
    p.add_argument("--ended", type=float, default=None, help="the command's end, epoch seconds")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = p.parse_args(argv)
    if not (args.sweep_dir / MANIFEST).is_file():
        print(f"error: {args.sweep_dir}: not a sweep folder (no {MANIFEST})", file=sys.stderr)
        return 2
    try:
        result = overhead(args.sweep_dir, args.launched, args.ended)
    except (ValueError, KeyError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result.to_dict(), indent=1) if args.json else describe(result, args.sweep_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
