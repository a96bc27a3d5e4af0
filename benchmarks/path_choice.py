"""``python -m benchmarks.path_choice``: the execution path a sweep's calibration chooses
beside the other, timed over whole rounds in one run on this machine.

    python -m benchmarks.path_choice                       # both cases, 3 rounds per path
    python -m benchmarks.path_choice --cases fmnist-laptop --rounds 5

For each case it first runs the sweep's calibration (:func:`federated.engine.
path_calibration.measure_paths`: a few local steps of each path, not cached here) and
notes the path it picks; then it trains the same run on both paths, alternating round by
round (packed round 1, sequential round 1, packed round 2, ...) after one warm-up round
each, so a change in the machine's load falls on both alike.  Per path: the median of the
rounds' local-training seconds (``train_seconds``) and their spread (max - min, the
noise); the verdict says whether the chosen path is the faster one, or slower by no more
than the noise.

Cases: ``fmnist-laptop`` (moon_mu's laptop-budget trial: simple-cnn on Fashion-MNIST, 10
parties, batch 16, E = 2, 20% of the data) and ``cifar-shaped`` (issue 42's CIFAR-shaped
MOON round: generated 3x32x32 data, 10 parties, batch 64, E = 1, 20% of the data).  One
torch thread, as a sweep's trials.  Units: seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from federated.config.run_config import RunConfig
from federated.data import load_dataset
from federated.engine.path_calibration import PATHS, faster_path, measure_paths
from federated.engine.round_loop import FederatedRun
from federated.runtime.cpu_name import cpu_model


def case_config(name: str, threads: int) -> RunConfig:
    """The run a case times (see the module docstring)."""
    if name == "fmnist-laptop":
        from search_spaces import BUDGETS, STUDIES
        from study.plan import SweepPlan

        plan = SweepPlan.build(
            STUDIES["moon_mu"],
            BUDGETS["laptop"],
            dataset="fmnist",
            search="grid",
            seeds=[0],
            overrides={"threads": threads},
        )
        return plan.trials()[-1].run_config  # mu = 10
    if name == "cifar-shaped":
        return RunConfig(
            algorithm="moon",
            dataset="synthetic",
            local_epochs=1,
            data_fraction=0.2,
            threads=threads,
            device="cpu",
        ).resolved()
    raise ValueError(f"unknown case {name!r} (allowed: fmnist-laptop, cifar-shaped)")


def measure_case(name: str, rounds: int, threads: int) -> dict[str, Any]:
    """The calibration's choice and both paths' round times for one case."""
    config = case_config(name, threads)
    data = load_dataset(config.dataset, config.data_root)
    calibration = measure_paths(config, data=data)
    if calibration is None:
        raise ValueError(f"{name}: packed execution does not apply")
    chosen = faster_path(calibration)
    runs = {p: FederatedRun(replace(config, execution=p, rounds=rounds + 1), data) for p in PATHS}
    seconds: dict[str, list[float]] = {p: [] for p in PATHS}
    for index in range(rounds + 1):
        for path in PATHS if index % 2 == 0 else reversed(PATHS):
            row = runs[path].run_round()
            if index > 0:  # the first round of each path warms up
                seconds[path].append(float(row["train_seconds"]))
    median = {p: statistics.median(s) for p, s in seconds.items()}
    noise = max(max(s) - min(s) for s in seconds.values())
    other = "sequential" if chosen == "packed" else "packed"
    if median[chosen] <= median[other]:
        verdict = "chosen path faster"
    elif median[chosen] - median[other] <= noise:
        verdict = "chosen path slower, within the noise"
    else:
        verdict = "chosen path slower than the noise"
    return {
        "case": name,
        "chosen": chosen,
        "calibration_s": calibration,
        "round_train_s": seconds,
        "median_s": median,
        "noise_s": noise,
        "speedup_packed": median["sequential"] / median["packed"],
        "verdict": verdict,
    }


def describe(results: list[dict[str, Any]], threads: int) -> str:
    lines = [
        f"{cpu_model()}, {threads} torch thread(s); local-training seconds per round, median "
        "over alternating rounds",
        f"{'case':<15}{'chosen':<12}{'calib p/s':>14}{'packed':>9}{'seq':>9}{'p speedup':>11}"
        f"{'noise':>8}  verdict",
    ]
    for r in results:
        cal = r["calibration_s"]
        lines.append(
            f"{r['case']:<15}{r['chosen']:<12}"
            f"{cal['packed']:>6.2f}/{cal['sequential']:<6.2f}  "
            f"{r['median_s']['packed']:>7.2f}{r['median_s']['sequential']:>9.2f}"
            f"{r['speedup_packed']:>10.2f}x{r['noise_s']:>8.2f}  {r['verdict']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.path_choice", description=__doc__)
    p.add_argument("--cases", default="fmnist-laptop,cifar-shaped")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per path (default 3)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.threads < 1:
        p.error("--rounds and --threads must be >= 1")
    try:
        results = [
            measure_case(c.strip(), args.rounds, args.threads) for c in args.cases.split(",")
        ]
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(describe(results, args.threads))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"cpu": cpu_model(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
