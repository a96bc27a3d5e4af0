"""``python -m benchmarks.detection_throughput``: detection training and evaluation
images per second (issue 39).

    python -m benchmarks.detection_throughput                     # a generated Street-like tree
    python -m benchmarks.detection_throughput --dataset folder:trees/street-like
    python -m benchmarks.detection_throughput --quick             # seconds (the test's size)
    python -m benchmarks.detection_throughput --json out.json     # the numbers as JSON too

Without ``--dataset`` it builds a small Street-like tree (``examples/build_street_task.py``:
real photographs and Fashion-MNIST objects) in a temporary folder, removed afterwards.
It trains FedAvg with ``--model`` (default ``fcos-tiny``) on the tree's natural parties
(``--partition-by``, default ``device2_id``: Street-20's cameras) for ``--warmup-rounds``
then ``--rounds`` rounds, each repeat a fresh run with its own seed, and reports:

* training images/s: the images the round's parties trained on (their samples times
  local epochs) over the round's local-training seconds;
* evaluation images/s: the test images over the round's evaluation seconds (the
  detector's forward pass, box decoding and COCO AP).

Each figure is the median over every measured round of every repeat.  Detection always
trains on the sequential path (one party after another): a detector's per-image box
targets have no packed (vmapped) form, so there is no packed figure to report and the
output says so with the task's own reason.  Units: images per second, seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun
from federated.runtime.cpu_name import cpu_model

ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = ROOT / "examples" / "build_street_task.py"


@dataclass(frozen=True)
class Throughput:
    """One benchmark's result (images per second are medians over measured rounds)."""

    machine: str
    device: str
    threads: int
    dataset: str
    model: str
    parties: int
    train_images: int  # in the federation (all parties)
    test_images: int
    rounds_measured: int
    repeats: int
    path: str  # always "sequential" for detection
    path_reason: str
    train_images_per_s: float
    eval_images_per_s: float
    round_seconds: float  # median
    train_seconds: float  # median local-training seconds per round
    eval_seconds: float  # median evaluation seconds per round


def build_tree(out: Path, size: int, train_images: int, cameras: int) -> Path:
    """A Street-like tree at ``out`` (``size`` x ``size`` pixels, ``train_images``
    training images over ``cameras`` cameras); raises ``RuntimeError`` with the
    builder's error line when it fails."""
    done = subprocess.run(
        [
            sys.executable,
            str(BUILD_SCRIPT),
            str(out),
            "--size",
            str(size),
            "--cameras",
            str(cameras),
            "--unseen-cameras",
            "1",
            "--train-images",
            str(train_images),
            "--test-images",
            str(max(10, train_images // 4)),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"building the Street-like tree failed: {done.stderr.strip()}")
    return out


def measure(args: argparse.Namespace, dataset: str) -> Throughput:
    """Train ``args.repeats`` fresh FedAvg runs on ``dataset`` and time their rounds."""
    train_rates, eval_rates, rounds_s, train_s, eval_s = [], [], [], [], []
    run = None
    for repeat in range(args.repeats):
        config = RunConfig(
            dataset=dataset,
            data_root=args.data_root,
            model=args.model,
            algorithm="fedavg",
            partition="natural",
            partition_by=args.partition_by,
            rounds=args.warmup_rounds + args.rounds,
            local_epochs=args.local_epochs,
            batch_size=args.batch_size,
            lr=0.01,
            execution="sequential",
            device=args.device,
            threads=args.threads,
            seed=repeat,
        )
        run = FederatedRun(config)
        for index in range(config.rounds):
            row = run.run_round()
            if index < args.warmup_rounds:
                continue
            # every party trains every round (no sampling): all images, each local epoch
            trained = sum(run.party_sizes) * config.local_epochs
            train_rates.append(trained / row["train_seconds"])
            eval_rates.append(run.spec.test_size / row["eval_seconds"])
            rounds_s.append(row["round_seconds"])
            train_s.append(row["train_seconds"])
            eval_s.append(row["eval_seconds"])
    assert run is not None  # repeats >= 1 (argparse)
    return Throughput(
        machine=(torch.cuda.get_device_name() if args.device.startswith("cuda") else cpu_model()),
        device=args.device,
        threads=torch.get_num_threads(),
        dataset=dataset,
        model=args.model,
        parties=len(run.party_sizes),
        train_images=int(sum(run.party_sizes)),
        test_images=run.spec.test_size,
        rounds_measured=len(train_rates),
        repeats=args.repeats,
        path="sequential",
        path_reason=run.task.packing_obstacle() or "",
        train_images_per_s=statistics.median(train_rates),
        eval_images_per_s=statistics.median(eval_rates),
        round_seconds=statistics.median(rounds_s),
        train_seconds=statistics.median(train_s),
        eval_seconds=statistics.median(eval_s),
    )


def render(result: Throughput) -> str:
    """The benchmark's printed lines."""
    return "\n".join(
        [
            f"detection throughput: {result.model}, FedAvg, {result.parties} parties, "
            f"{result.train_images} training / {result.test_images} test images "
            f"({result.dataset})",
            f"machine: {result.machine}, device {result.device}, {result.threads} torch "
            f"thread(s); medians over {result.rounds_measured} rounds "
            f"({result.repeats} repeat(s))",
            f"path: {result.path}; detection cannot pack, so no packed figure "
            f"({result.path_reason})",
            f"training images/s: {result.train_images_per_s:.1f}  "
            f"(local training {result.train_seconds:.2f} s per round)",
            f"evaluation images/s: {result.eval_images_per_s:.1f}  "
            f"(evaluation {result.eval_seconds:.2f} s per round)",
            f"round seconds: {result.round_seconds:.2f}",
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.detection_throughput",
        description="Detection training and evaluation images per second (sequential path).",
    )
    parser.add_argument("--dataset", help="folder:PATH of a detection tree (default: build one)")
    parser.add_argument("--data-root", help="where decoded folders are cached (default: temp)")
    parser.add_argument("--partition-by", default="device2_id", help="the parties' image field")
    parser.add_argument("--model", default="fcos-tiny")
    parser.add_argument("--size", type=int, default=64, help="generated tree's image side (px)")
    parser.add_argument("--train-images", type=int, default=240, help="generated tree's images")
    parser.add_argument("--cameras", type=int, default=8, help="generated tree's cameras")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per repeat")
    parser.add_argument("--warmup-rounds", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--local-epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (seconds): the test's")
    parser.add_argument("--json", type=Path, help="also write the numbers here as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Measure and print; exit status 1 when the tree could not be built or loaded,
    2 for a bad option."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("rounds", "repeats", "local_epochs", "batch_size", "size", "train_images"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup_rounds < 0:
        parser.error("--warmup-rounds must be 0 or more")
    if args.quick:
        args.size, args.train_images, args.cameras = 32, 60, 5
        args.rounds, args.warmup_rounds, args.repeats = 1, 0, 1
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: CUDA is not available on this machine")
    with tempfile.TemporaryDirectory(prefix="detection-throughput-") as scratch:
        if args.data_root is None:
            args.data_root = str(Path(scratch) / "cache")
        dataset = args.dataset
        try:
            if dataset is None:
                started = time.perf_counter()
                tree = build_tree(
                    Path(scratch) / "street", args.size, args.train_images, args.cameras
                )
                print(f"built a Street-like tree in {time.perf_counter() - started:.1f} s")
                dataset = f"folder:{tree}"
            result = measure(args, dataset)
        except (RuntimeError, ValueError) as err:  # ConfigError is a ValueError
            print(f"error: {err}", file=sys.stderr)
            return 1
    print(render(result))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
