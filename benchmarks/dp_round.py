"""``python -m benchmarks.dp_round``: a DP-FedAvg round beside the FedAvg round it wraps,
timed in one run on this machine (issue 54, item 5).

    python -m benchmarks.dp_round                      # packed and sequential, 5 rounds each
    python -m benchmarks.dp_round --rounds 8 --out docs/results/dp-round.json

Per execution path, two runs of the same trial — moon_mu's laptop-budget FedAvg trial on
Fashion-MNIST (simple-cnn, 10 parties all drawn, batch 16, E = 2, 20% of the data, one
torch thread) — one plain, one under DP-FedAvg (``dp_noise_multiplier=0.1``,
``dp_clip_norm=1``: every party's update clipped, Gaussian noise on the sum; the noise's
cost does not depend on σ, and with 10 parties a round σ = 1 diverges within a few
rounds, docs/privacy.md).  The two
alternate round by round (plain round 1, DP round 1, plain round 2, ...) after one
warm-up round each, so a change in the machine's load falls on both alike.  Reported per
path: the median ``round_seconds`` (local training, aggregation and the server step,
clipping and noise included; evaluation left out, which DP does not change) of each run,
their ratio DP / plain, and the spread (max - min) of each, the noise the ratio must be
read against.  Units: seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.path_choice import case_config
from federated.config.run_config import RunConfig, field_types
from federated.data import load_dataset
from federated.engine.round_loop import FederatedRun
from federated.runtime.cpu_name import cpu_identity, cpu_model

PATHS = ("packed", "sequential")
DP_FIELDS = {"dp_noise_multiplier": 0.1, "dp_clip_norm": 1.0}


def plain_config(threads: int) -> RunConfig:
    """moon_mu's laptop-budget trial (:func:`benchmarks.path_choice.case_config`) run as
    FedAvg (module docstring): its run-level fields only, so MOON's parameters do not
    follow."""
    moon = case_config("fmnist-laptop", threads).to_dict()
    values = {k: v for k, v in moon.items() if k in field_types() and k != "algorithm"}
    return RunConfig.from_dict({**values, "algorithm": "fedavg", "checkpoint_every": 0})


def round_seconds(row: dict[str, Any]) -> float:
    """A round's seconds without its evaluation (which DP leaves alone)."""
    return float(row["round_seconds"]) - float(row.get("eval_seconds") or 0.0)


def measure(path: str, rounds: int, threads: int) -> dict[str, Any]:
    """Plain and DP rounds of one path, alternating (module docstring)."""
    base = replace(plain_config(threads), execution=path, rounds=rounds + 1)
    data = load_dataset(base.dataset, base.data_root)
    runs = {
        "plain": FederatedRun(RunConfig.from_dict(base.to_dict()).resolved(), data),
        "dp": FederatedRun(RunConfig.from_dict({**base.to_dict(), **DP_FIELDS}).resolved(), data),
    }
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for index in range(rounds + 1):
        for name, run in runs.items():
            if run.finished:  # diverged: its later rounds would time nothing
                raise SystemExit(f"error: the {name} run diverged at round {run.round}")
            row = run.run_round()
            if index > 0:  # the first round of each is the warm-up
                seconds[name].append(round_seconds(row))
    median = {name: statistics.median(values) for name, values in seconds.items()}
    return {
        "path": path,
        "ran": {name: run.trainer.path for name, run in runs.items()},
        "rounds": rounds,
        "plain_s": median["plain"],
        "dp_s": median["dp"],
        "ratio": median["dp"] / median["plain"],
        "plain_spread_s": max(seconds["plain"]) - min(seconds["plain"]),
        "dp_spread_s": max(seconds["dp"]) - min(seconds["dp"]),
        "dp_epsilon_last": runs["dp"].privacy.epsilon() if runs["dp"].privacy else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.dp_round", description=__doc__)
    p.add_argument("--rounds", type=int, default=5, help="measured rounds per run (5)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1, as a trial)")
    p.add_argument("--paths", default=",".join(PATHS), help="packed,sequential (both)")
    p.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = p.parse_args(argv)
    paths = [s.strip() for s in args.paths.split(",") if s.strip()]
    bad = [s for s in paths if s not in PATHS]
    if bad or args.rounds < 1 or args.threads < 1:
        print(
            f"error: --paths={args.paths!r}, --rounds={args.rounds}, --threads={args.threads} "
            f"(allowed: paths among {', '.join(PATHS)}; rounds and threads >= 1)",
            file=sys.stderr,
        )
        return 2
    rows = [measure(path, args.rounds, args.threads) for path in paths]
    print(f"machine: {cpu_model()} ({cpu_identity()}), {args.threads} torch thread(s)")
    print("| path | plain s/round | DP s/round | DP / plain | spread plain / DP (s) |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['path']} (ran {r['ran']['dp']}) | {r['plain_s']:.3f} | {r['dp_s']:.3f} | "
            f"{r['ratio']:.3f} | {r['plain_spread_s']:.3f} / {r['dp_spread_s']:.3f} |"
        )
    if args.out is not None:
        machine = {"cpu": cpu_model(), "cpu_identity": cpu_identity(), "threads": args.threads}
        args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
