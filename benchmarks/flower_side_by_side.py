"""``python -m benchmarks.flower_side_by_side``: the Fashion-MNIST laptop FedAvg round in
Flower and in fedsweep, on the same partition, model, optimizer and batches.

    PYTHONPATH=/path/to/flwr:$PWD python -m benchmarks.flower_side_by_side \
        --threads 1,2 --rounds 3 --repeats 2

The round is moon_mu's laptop-budget trial with FedAvg
(:func:`benchmarks.precision.case_config`: simple-cnn, Fashion-MNIST, 10 parties,
Dir(0.5), batch 16, E = 2, 20% of the data, SGD lr 0.01, momentum 0.9, weight decay
1e-5). fedsweep builds its run first; its partition, initial weights and batch plan
(drawn from a fresh copy of the run's ``batches`` stream, so round r's batches are the
run's round r batches) go to a plan file that the Flower client reads
(:mod:`benchmarks.flower_round`). Per thread count and repeat: one Flower simulation (a
child process: Ray starts and stops with it), then fedsweep's four runs (fp32 and
bf16-mixed, sequential and packed) in this process, their rounds alternating (the order
reversed every round) so that a change in the machine's load falls on all alike. Ray's
workers run at niceness 0, as this process (Ray's default, 15, would leave Flower's
actor a small share of a loaded machine). Each run has one warm-up round; then
``--rounds`` rounds. Seconds per round: Flower's from sending the round's messages to
the aggregate; fedsweep's ``train_seconds`` (local training and aggregation, no
evaluation: Flower's round here evaluates nothing). CPU seconds per round as well (on a
machine shared with other work the wall clock counts the time others held the cores):
fedsweep's process over the whole round, its evaluation of the test subset included;
Flower's simulation process over the round plus its actor's while training
(:mod:`benchmarks.flower_round`). The table: medians over every measured round of every
repeat, the min-max spread, and Flower's median over each row's (> 1: the row took
less). The math check: after round 1 the global weights of fedsweep's fp32 runs against
Flower's (max abs difference).

Needs ``flwr`` importable (``pip install --target DIR flwr``, then ``PYTHONPATH=DIR:$PWD``);
without it the command stops in one line before any work.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.precision import case_config
from federated.config.run_config import RunConfig
from federated.data import load_dataset
from federated.engine.round_loop import FederatedRun
from federated.execution.batch_plan import draw_batches
from federated.runtime.cpu_name import cpu_identity, cpu_model
from federated.runtime.seeding import RunRandomness

#: fedsweep's runs: (label, precision, execution)
FEDSWEEP_ROWS = (
    ("fedsweep fp32 sequential", "fp32", "sequential"),
    ("fedsweep fp32 packed", "fp32", "packed"),
    ("fedsweep bf16-mixed sequential", "bf16-mixed", "sequential"),
    ("fedsweep bf16-mixed packed", "bf16-mixed", "packed"),
)
FLOWER = "Flower (simulation, Ray)"


def flower_version() -> str:
    """flwr's version; stops in one line when it is not importable."""
    if importlib.util.find_spec("flwr") is None:
        raise SystemExit(
            "error: flwr is not importable: install it (pip install --target DIR flwr) and "
            "run with PYTHONPATH=DIR:$PWD"
        )
    from importlib.metadata import version

    return version("flwr")


def write_plan(config: RunConfig, path: Path, rounds: int) -> None:
    """The plan file of :mod:`benchmarks.flower_round`: fedsweep's initial model, party
    sizes and the training rows of every step of ``rounds`` rounds."""
    run = FederatedRun(config, load_dataset(config.dataset))
    stream = RunRandomness.from_seed(config.seed).batches  # the run's, untouched
    parties = list(range(config.n_parties))
    plans = [
        draw_batches(
            parties,
            run.party_sizes,
            run.data.offsets,
            run.augmenter,
            config.batch_size,
            config.local_epochs,
            stream,
            run.data.rows,
        )
        for _ in range(rounds)
    ]
    plan = {
        "dataset": config.dataset,
        "model": run.global_model,
        "sizes": list(run.party_sizes),
        "batch": config.batch_size,
        "sgd": {"lr": config.lr, "momentum": config.momentum, "weight_decay": config.weight_decay},
        "rounds": [[p.index[: p.steps * p.batch] for p in plan] for plan in plans],
    }
    torch.save(plan, path)


def time_flower(
    plan: Path, threads: int, rounds: int, folder: Path
) -> tuple[list[float], list[float], dict]:
    """One Flower simulation of ``rounds`` rounds (a child process): each round's wall
    and CPU seconds and round 1's global weights."""
    out = folder / f"flower-{threads}.json"
    env = {
        **os.environ,
        "FLWR_TELEMETRY_ENABLED": "0",
        "OMP_NUM_THREADS": str(threads),
        # Ray starts its workers (Flower's actor) at niceness 15; fedsweep's runs here are
        # at 0, and on a machine others load the scheduler would give the actor a small
        # fraction of their share: the same priority for both
        "RAY_worker_niceness": "0",
    }
    command = [sys.executable, "-m", "benchmarks.flower_round", str(plan), str(threads)]
    done = subprocess.run(
        [*command, str(rounds), str(out)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise SystemExit("error: the Flower run failed: " + " | ".join(tail))
    timed = json.loads(out.read_text())
    return timed["round_s"], timed["cpu_s"], torch.load(out.with_suffix(".pt"))


def time_fedsweep(
    config: RunConfig, threads: int, rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, dict]]:
    """fedsweep's four runs (:data:`FEDSWEEP_ROWS`), rounds alternating: each run's
    ``train_seconds`` and the process's CPU seconds of the whole round (its evaluation
    included) per measured round, and its global weights after round 1."""
    data = load_dataset(config.dataset)
    runs = {
        label: FederatedRun(
            replace(config, precision=p, execution=e, threads=threads, rounds=rounds + 1), data
        )
        for label, p, e in FEDSWEEP_ROWS
    }
    seconds: dict[str, list[float]] = {label: [] for label in runs}
    cpu: dict[str, list[float]] = {label: [] for label in runs}
    first: dict[str, dict] = {}
    for index in range(rounds + 1):
        order = list(runs) if index % 2 == 0 else list(reversed(runs))
        for label in order:
            began = time.process_time()
            row = runs[label].run_round()
            if index == 0:
                state = runs[label].global_model.state_dict()
                first[label] = {k: v.clone() for k, v in state.items()}
            else:
                seconds[label].append(float(row["train_seconds"]))
                cpu[label].append(time.process_time() - began)
    return seconds, cpu, first


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The largest absolute difference over every entry of two state dicts."""
    if a.keys() != b.keys():
        raise SystemExit(f"error: the models' entries differ: {sorted(a.keys() ^ b.keys())}")
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def describe(
    seconds: dict[tuple[str, int], list[float]], cpu: dict[tuple[str, int], list[float]]
) -> str:
    """The table: per loop and thread count, the median wall and CPU seconds per round,
    their min-max spread, and Flower's median over the row's."""
    lines = [
        "| loop | threads | rounds timed | wall s/round | wall min–max | Flower ÷ this (wall) "
        "| CPU s/round | CPU min–max | Flower ÷ this (CPU) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key, values in seconds.items():
        label, threads = key
        wall, used = statistics.median(values), statistics.median(cpu[key])
        flower = statistics.median(seconds[(FLOWER, threads)])
        flower_cpu = statistics.median(cpu[(FLOWER, threads)])
        lines.append(
            f"| {label} | {threads} | {len(values)} | {wall:.2f} | "
            f"{min(values):.2f}–{max(values):.2f} | {flower / wall:.2f}× | {used:.2f} | "
            f"{min(cpu[key]):.2f}–{max(cpu[key]):.2f} | {flower_cpu / used:.2f}× |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.flower_side_by_side", description=__doc__
    )
    p.add_argument("--threads", default="1,2", help="comma list of torch thread counts (1,2)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per run (3)")
    p.add_argument("--repeats", type=int, default=2, help="runs of each loop per thread count (2)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        p.error("--rounds and --repeats must be >= 1")
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        p.error(f"--threads {args.threads!r}: a comma list of positive integers")
    if not threads or min(threads) < 1:
        p.error(f"--threads {args.threads!r}: a comma list of positive integers")
    version = flower_version()
    config = case_config("fmnist-laptop", "fedavg").replace(checkpoint_every=0, device="cpu")
    loads = [os.getloadavg()[0]]
    seconds: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    differences: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the runs' own notices (inert settings)
        folder = Path(tmp)
        plan = folder / "plan.pt"
        write_plan(config.replace(rounds=args.rounds + 1), plan, args.rounds + 1)
        for repeat in range(args.repeats):
            for n in threads:
                print(f"repeat {repeat + 1}, {n} thread(s): Flower ...", file=sys.stderr)
                flower_s, flower_cpu, flower_first = time_flower(plan, n, args.rounds + 1, folder)
                seconds.setdefault((FLOWER, n), []).extend(flower_s[1:])
                cpu.setdefault((FLOWER, n), []).extend(flower_cpu[1:])
                print(f"  Flower {flower_s} (CPU {flower_cpu}); fedsweep ...", file=sys.stderr)
                ours, ours_cpu, first = time_fedsweep(config, n, args.rounds)
                for label, values in ours.items():
                    seconds.setdefault((label, n), []).extend(values)
                    cpu.setdefault((label, n), []).extend(ours_cpu[label])
                    differences.setdefault((label, n), []).append(
                        max_difference(first[label], flower_first)
                    )
                print(f"  fedsweep {ours} (CPU {ours_cpu})", file=sys.stderr)
                loads.append(os.getloadavg()[0])
    print(
        f"flwr {version}, torch {torch.__version__}, {cpu_model()} ({cpu_identity()}); "
        f"load average (1 min) {min(loads):.2f}–{max(loads):.2f} over the run; "
        f"{args.rounds} timed round(s) per run after one warm-up, {args.repeats} run(s) each"
    )
    rows = dict(sorted(seconds.items(), key=lambda item: (item[0][1], item[0][0] != FLOWER)))
    print(describe(rows, cpu))
    print("after round 1, max |fedsweep − Flower| over the global weights:")
    for (label, n), values in differences.items():
        print(f"  {label}, {n} thread(s): {max(values):.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
