"""``python -m benchmarks.personalised_rounds``: a packed round of each personalised
method beside FedAvg's packed round (issue 40).

    python -m benchmarks.personalised_rounds                  # laptop settings, Fashion-MNIST
    python -m benchmarks.personalised_rounds --quick          # seconds (the test's size)
    python -m benchmarks.personalised_rounds --json out.json  # the numbers as JSON too
    python -m benchmarks.personalised_rounds --personal-test-every 1 --rounds 7

Settings: the ``personalisation`` study's at the laptop budget — Fashion-MNIST, 10
parties, Dir(0.5), 20% of the training data, half the test set, a 20% local test split
per party, E=2, batch 16 — on ``simple-cnn``.  Each personalised method that packs is
timed against its own FedAvg baseline on the same model: FedPer and LG-FedAvg against
FedAvg on ``simple-cnn``, FedBN against FedAvg on ``simple-cnn-bn`` (FedBN needs
BatchNorm layers).  All runs live in one process; after each run's warm-up rounds their
rounds alternate (FedAvg, FedPer, LG-FedAvg, ..., FedAvg, FedPer, ...) so a machine
whose speed drifts (a shared VM) slows every run alike.  The ratio is the method's
round over its baseline's (``round_seconds``: local training, aggregation and
evaluation, which for a personalised method scores every party's own model on its own
test split every round and, every k-th round, on the pooled test set too: N evaluations
where FedAvg makes one); ``train ratio`` is the same over the training seconds alone.
The done-when is a round ratio of at most 1.10.

``--personal-test-every k`` sets the runs' ``personal_test_every``; its default is the
personalised methods' own (:data:`~federated.algorithms.base.PERSONALISED_POOLED_TEST_EVERY`),
what a run of them does when nobody sets it.  With k > 1 a figure is the *mean* over
the measured rounds (use a multiple of k), so a scored round's cost is spread over k,
and each run has one round more than is measured, so that the run's last round, which
is always scored, is not among them; with k = 1 it is the median.  A party model that
shares the global model's encoder (FedPer) is scored through it: the encoder runs once
per test batch for all parties (:mod:`federated.evaluation.shared_stages`).

FedRep, Ditto and APFL cannot pack: the benchmark builds each one's run, checks that it
trains on the sequential path, and prints the method's own reason instead of a ratio.
Units: seconds per round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.table import Column, format_table
from federated.algorithms.party_own_state import PERSONALISED_POOLED_TEST_EVERY
from federated.config.run_config import RunConfig
from federated.data import load_dataset
from federated.engine.round_loop import FederatedRun
from federated.execution.choice import PackingFallback
from federated.execution.packed import PackedTrainer
from federated.runtime.cpu_name import cpu_model

# (method, model, baseline's model): each packed method and the FedAvg it is timed against
PACKED_METHODS: tuple[tuple[str, str], ...] = (
    ("fedper", "simple-cnn"),
    ("lg-fedavg", "simple-cnn"),
    ("fedbn", "simple-cnn-bn"),
)
SEQUENTIAL_METHODS: tuple[str, ...] = ("fedrep", "ditto", "apfl")
BASELINE = "fedavg"
TARGET_RATIO = 1.10  # the done-when: within 10% of FedAvg's packed round


@dataclass(frozen=True)
class MethodRound:
    """One method's packed round beside its FedAvg baseline (seconds are medians, or
    means with ``personal_test_every`` > 1)."""

    algorithm: str
    model: str
    path: str  # "packed", or "sequential" when the method cannot pack
    path_reason: str  # the method's reason for the sequential path ("" when packed)
    round_seconds: float | None
    train_seconds: float | None
    eval_seconds: float | None
    baseline_round_seconds: float | None
    baseline_train_seconds: float | None
    baseline_eval_seconds: float | None
    ratio: float | None  # round_seconds / baseline_round_seconds
    within_target: bool | None  # ratio <= TARGET_RATIO
    # train_seconds / baseline_train_seconds: the packed training alone (a personalised
    # method's evaluation scores every party's own model on the pooled test set)
    train_ratio: float | None


@dataclass(frozen=True)
class Benchmark:
    """The benchmark's settings and its rows."""

    machine: str
    device: str
    threads: int
    dataset: str
    parties: int
    local_epochs: int
    batch_size: int
    rounds_measured: int
    warmup_rounds: int
    target_ratio: float
    personal_test_every: int  # own models scored on the pooled test set every k-th round
    statistic: str  # "median" (k = 1) or "mean" (k > 1) over the measured rounds
    methods: list[MethodRound]


def run_config(args: argparse.Namespace, algorithm: str, model: str) -> RunConfig:
    """The laptop-budget ``personalisation`` setting for ``algorithm`` on ``model``."""
    return RunConfig.from_dict(
        dict(
            algorithm=algorithm,
            dataset=args.dataset,
            model=model,
            # k > 1: the always-scored last round is not measured (module docstring)
            rounds=args.warmup_rounds + args.rounds + (args.personal_test_every > 1),
            n_parties=args.parties,
            beta=0.5,
            local_epochs=args.local_epochs,
            batch_size=args.batch_size,
            data_fraction=args.data_fraction,
            test_fraction=args.test_fraction,
            party_test_fraction=0.2,
            execution="packed",
            device=args.device,
            threads=args.threads,
            seed=args.seed,
            checkpoint_every=0,
            personal_test_every=args.personal_test_every,
        )
    ).resolved()


def build_run(config: RunConfig, data: Any) -> tuple[FederatedRun, str]:
    """The run and, when it fell back to the sequential path, the method's own reason."""
    with warnings.catch_warnings():
        # the fallback is what this benchmark reports, in its own line
        warnings.simplefilter("ignore", PackingFallback)
        run = FederatedRun(config, data)
    if isinstance(run.trainer, PackedTrainer):
        return run, ""
    reason = run.algorithm.task.packing_obstacle() or run.algorithm.packing_obstacle()
    return run, reason or "the model cannot pack"


def median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(row[key] for row in rows))


def mean(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.fmean(row[key] for row in rows))


def measure(args: argparse.Namespace) -> Benchmark:
    """Every packed method and its baseline, rounds alternating; the sequential methods'
    reasons."""
    torch.set_num_threads(args.threads)
    data = load_dataset(args.dataset)
    runs = packed_runs(args, data)
    rows = alternating_rows(args, runs)
    # with scoring every k-th round, a round's cost is the mean over k rounds
    typical = median if args.personal_test_every == 1 else mean
    methods = [
        packed_method(algorithm, model, rows, typical) for algorithm, model in PACKED_METHODS
    ]
    for algorithm in SEQUENTIAL_METHODS:
        _, reason = build_run(run_config(args, algorithm, "simple-cnn"), data)
        path = "sequential" if reason else "packed"
        methods.append(MethodRound(algorithm, "simple-cnn", path, reason, *([None] * 9)))
    first = next(iter(runs.values()))
    return Benchmark(
        machine=(torch.cuda.get_device_name() if args.device.startswith("cuda") else cpu_model()),
        device=args.device,
        threads=torch.get_num_threads(),
        dataset=args.dataset,
        parties=len(first.party_sizes),
        local_epochs=args.local_epochs,
        batch_size=args.batch_size,
        rounds_measured=args.rounds,
        warmup_rounds=args.warmup_rounds,
        target_ratio=TARGET_RATIO,
        personal_test_every=args.personal_test_every,
        statistic="median" if args.personal_test_every == 1 else "mean",
        methods=methods,
    )


def packed_runs(args: argparse.Namespace, data: Any) -> dict[tuple[str, str], FederatedRun]:
    """Each packed method's run and each model's baseline run, built; a method that does
    not pack is an error (its timing would be another path's)."""
    pairs = [(BASELINE, model) for model in sorted({m for _, m in PACKED_METHODS})]
    pairs += list(PACKED_METHODS)
    runs: dict[tuple[str, str], FederatedRun] = {}
    for algorithm, model in pairs:
        run, reason = build_run(run_config(args, algorithm, model), data)
        if reason:
            raise RuntimeError(f"{algorithm} on {model} did not pack: {reason}")
        runs[(algorithm, model)] = run
    return runs


def alternating_rows(
    args: argparse.Namespace, runs: dict[tuple[str, str], FederatedRun]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each run's rows of ``args.rounds`` measured rounds, after the warm-up rounds, the
    runs taking turns round by round (so the machine's drift falls on all alike)."""
    for run in runs.values():
        for _ in range(args.warmup_rounds):
            run.run_round()
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in runs}
    for _ in range(args.rounds):
        for key, run in runs.items():
            row = run.run_round()
            if row["diverged"]:
                raise RuntimeError(f"{key[0]} on {key[1]} diverged; its timing is meaningless")
            rows[key].append(row)
    return rows


def packed_method(
    algorithm: str,
    model: str,
    rows: dict[tuple[str, str], list[dict[str, Any]]],
    typical: Any,
) -> MethodRound:
    """A packed method's round beside its model's baseline (seconds; their ratio)."""
    own, base = rows[(algorithm, model)], rows[(BASELINE, model)]
    ratio = typical(own, "round_seconds") / typical(base, "round_seconds")
    return MethodRound(
        algorithm,
        model,
        "packed",
        "",
        typical(own, "round_seconds"),
        typical(own, "train_seconds"),
        typical(own, "eval_seconds"),
        typical(base, "round_seconds"),
        typical(base, "train_seconds"),
        typical(base, "eval_seconds"),
        ratio,
        ratio <= TARGET_RATIO,
        typical(own, "train_seconds") / typical(base, "train_seconds"),
    )


COLUMNS = (
    Column("algorithm", "method"),
    Column("model", "model"),
    Column("round_seconds", "round s", "{:.3f}"),
    Column("train_seconds", "train s", "{:.3f}"),
    Column("eval_seconds", "eval s", "{:.3f}"),
    Column("baseline_round_seconds", "FedAvg round s", "{:.3f}"),
    Column("baseline_train_seconds", "FedAvg train s", "{:.3f}"),
    Column("baseline_eval_seconds", "FedAvg eval s", "{:.3f}"),
    Column("ratio", "ratio", "{:.3f}"),
    Column("verdict", "<= 1.10"),
    Column("train_ratio", "train ratio", "{:.3f}"),
)


def render(result: Benchmark) -> str:
    """The benchmark's printed lines: the settings, the packed table, the sequential
    methods' reasons."""
    packed = [asdict(m) for m in result.methods if m.path == "packed"]
    for row in packed:
        row["verdict"] = "met" if row["within_target"] else "MISSED"
    lines = [
        f"personalised rounds: {result.dataset}, {result.parties} parties, "
        f"E={result.local_epochs}, batch {result.batch_size}; packed rounds beside "
        f"FedAvg's packed round on the same model",
        f"machine: {result.machine}, device {result.device}, {result.threads} torch "
        f"thread(s); {result.statistic}s over {result.rounds_measured} alternating rounds "
        f"after {result.warmup_rounds} warm-up round(s); own models scored on the pooled "
        f"test set every {result.personal_test_every} round(s)",
        format_table(packed, COLUMNS),
    ]
    for method in result.methods:
        if method.path == "sequential":
            lines.append(
                f"{method.algorithm}: sequential path, no packed ratio ({method.path_reason})"
            )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.personalised_rounds",
        description="Packed rounds of personalised methods beside FedAvg's (issue 40).",
    )
    parser.add_argument("--dataset", default="fmnist")
    parser.add_argument("--parties", type=int, default=10)
    parser.add_argument("--local-epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--data-fraction", type=float, default=0.2)
    parser.add_argument("--test-fraction", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=10, help="measured rounds per run")
    parser.add_argument("--warmup-rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument(
        "--personal-test-every",
        type=int,
        default=PERSONALISED_POOLED_TEST_EVERY,
        help="the runs' personal_test_every: own models on the pooled test set every k "
        "rounds (default: the personalised methods' default, "
        f"{PERSONALISED_POOLED_TEST_EVERY}; use a multiple of it for --rounds)",
    )
    parser.add_argument("--quick", action="store_true", help="a tiny run (seconds): the test's")
    parser.add_argument("--json", type=Path, help="also write the numbers here as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Measure and print; exit status 1 when a run could not be built or diverged,
    2 for a bad option."""
    parser = build_parser()
    args = parser.parse_args(argv)
    counts = ("rounds", "parties", "local_epochs", "batch_size", "threads", "personal_test_every")
    for name in counts:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup_rounds < 0:
        parser.error("--warmup-rounds must be 0 or more")
    for name in ("data_fraction", "test_fraction"):
        if not 0.0 < getattr(args, name) <= 1.0:
            parser.error(f"--{name.replace('_', '-')} must be in (0, 1]")
    if args.quick:
        args.parties, args.local_epochs, args.data_fraction, args.test_fraction = 4, 1, 0.01, 0.05
        args.rounds, args.warmup_rounds = 1, 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: CUDA is not available on this machine")
    try:
        result = measure(args)
    except (RuntimeError, ValueError) as err:  # ConfigError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(render(result))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
