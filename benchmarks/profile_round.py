"""``python -m benchmarks.profile_round``: where one fedsweep round spends its time.

    python -m benchmarks.profile_round --algorithm moon --dataset synthetic --threads 1
    python -m benchmarks.profile_round --algorithm moon --ops      # + torch op table
    python -m benchmarks.profile_round --algorithm moon --execution sequential

Runs warm-up rounds, then one round with a timer around each phase of the round loop,
and prints each phase's exclusive seconds and share of the round: loading the global
weights, party state (MOON's previous models), augmentation (parameter draw; gather and
normalise), the trained model's forward, frozen forwards (MOON's global and previous
projections), the loss, backward, gradient hooks (FedProx's proximal gradient),
optimizer step and zero_grad, aggregation, evaluation, and what is left in the local
loop (batch indexing, loss bookkeeping, Python) and in the round.  With ``--ops`` one
more round runs under :mod:`torch.profiler` and the top operators by self CPU time are
printed.

Packed execution (the default) times the packed network's forward (all parties at
once), the frozen forwards, per-party losses and hooks, the fused step over all
parties, the fold of the parties' batches into one, and what is left of the packed
loop; ``--execution sequential`` the per-party loop.

The engine has no phase hooks, so the timers wrap its functions and methods for the
duration of the profiled round only (``unittest.mock.patch``; nothing on disk changes).
Each timer costs about a microsecond per call, small beside millisecond steps; on CUDA
each timer synchronises the device, which serialises the work it times.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import torch

import federated.engine.round_loop as round_loop
import federated.execution.packed as packed_training
from benchmarks.cases import Case, dataset
from benchmarks.table import Column, format_table
from federated.data import Augmenter
from federated.execution.packed import PackedTrainer
from federated.execution.packed_model import PackedModel
from federated.execution.sequential import SequentialTrainer
from federated.models import FedConModel
from federated.server import WeightedAverage
from federated.sgd_rule import SgdRule


class PhaseTimer:
    """Exclusive wall time per phase: a phase entered inside another is not counted twice."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []  # [start, seconds spent in nested phases]

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._sync()
        self._stack.append([time.perf_counter(), 0.0])
        try:
            yield
        finally:
            self._sync()
            start, nested = self._stack.pop()
            elapsed = time.perf_counter() - start
            self.seconds[name] += elapsed - nested
            self.calls[name] += 1
            if self._stack:
                self._stack[-1][1] += elapsed

    def wrap(self, name: str, function: Callable) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name):
                return function(*args, **kwargs)

        return timed


def _patch_method(stack: contextlib.ExitStack, owner: Any, attr: str, timer: PhaseTimer, name: str):
    stack.enter_context(mock.patch.object(owner, attr, timer.wrap(name, getattr(owner, attr))))


def timed_round(run: round_loop.FederatedRun, device: torch.device) -> tuple[PhaseTimer, float]:
    """Run one round with every phase timed; returns the timer and the round's seconds."""
    timer = PhaseTimer(device)
    algorithm = run.algorithm
    with contextlib.ExitStack() as stack:
        patches = [
            (FedConModel, "project", "frozen forwards (projection)"),
            (algorithm, "begin_local", "party state in (begin_local)"),
            (algorithm, "end_local", "party state out (end_local)"),
            (algorithm, "loss", "loss (CE, contrastive)"),
            (algorithm, "after_backward", "gradient hooks (after_backward)"),
            (algorithm, "after_step", "weight hooks (after_step)"),
            (Augmenter, "draw", "augment: draw parameters"),
            (Augmenter, "train_batch", "augment: gather + normalise"),
            (torch.Tensor, "backward", "backward"),
            (WeightedAverage, "add", "aggregation"),
            (WeightedAverage, "result", "aggregation"),
            (run.server, "step", "aggregation"),
            (round_loop, "evaluate", "evaluation (test set)"),
        ]
        if not isinstance(run.trainer, PackedTrainer):
            patches += [
                (run.trainer.model, "load_state_dict", "load global weights"),
                (run.trainer.model, "forward", "forward (trained model)"),
                (SgdRule, "step", "optimizer step"),
                (SequentialTrainer, "train_one", "local loop (indexing, bookkeeping, Python)"),
            ]
        else:
            patches += [
                (FedConModel, "load_state_dict", "load global weights"),
                (FedConModel, "forward", "forward (packed network)"),
                (packed_training, "fold_images", "fold batches side by side"),
                (packed_training, "unfold_output", "unfold outputs per party"),
                (PackedModel, "link_gradients", "gradient views per party"),
                (run.trainer, "_step", "optimizer step (all parties)"),
                (round_loop, "draw_batches", "draw every party's batches"),
                (run.trainer, "_train_pack", "packed loop (indexing, bookkeeping, Python)"),
            ]
        for owner, attr, name in patches:
            _patch_method(stack, owner, attr, timer, name)
        start = time.perf_counter()
        with timer.phase("round (sampling, set-up, metrics)"):
            run.run_round()
        total = time.perf_counter() - start
    return timer, total


def op_table(run: round_loop.FederatedRun, rows: int) -> str:
    """torch.profiler's top operators by self CPU time over one more round."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if run.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        run.run_round()
    return prof.key_averages().table(
        sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=48
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_round",
        description="Time each phase of one fedsweep round (after warm-up).",
    )
    p.add_argument("--algorithm", default="moon", choices=("fedavg", "fedprox", "moon"))
    p.add_argument("--dataset", default="synthetic", choices=("synthetic", "fmnist"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--execution", default="packed", choices=("packed", "sequential"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--parties", type=int, default=10)
    p.add_argument("--local-epochs", type=int, default=1)
    p.add_argument("--data-fraction", type=float, default=1.0)
    p.add_argument("--test-fraction", type=float, default=1.0)
    p.add_argument("--warmup-rounds", type=int, default=1)
    p.add_argument("--ops", action="store_true", help="also print torch.profiler's op table")
    p.add_argument("--op-rows", type=int, default=25)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rounds = 1 + args.ops
    case = Case.from_flags(args, args.algorithm, args.dataset, rounds, execution=args.execution)
    torch.set_num_threads(args.threads)
    run = round_loop.FederatedRun(case.run_config(), dataset(case.dataset))
    for _ in range(case.warmup_rounds):
        run.run_round()
    timer, total = timed_round(run, run.device)
    rows = [
        {"phase": name, "seconds": s, "share": s / total, "calls": timer.calls[name]}
        for name, s in sorted(timer.seconds.items(), key=lambda item: -item[1])
    ]
    rows.append({"phase": "total", "seconds": total, "share": 1.0, "calls": 1})
    print(
        f"one {case.algorithm} round on {case.dataset} ({case.device}, {case.execution}, "
        f"{case.threads} thread(s), "
        f"N={case.n_parties}, E={case.local_epochs}, data {case.data_fraction:g}), "
        f"after {case.warmup_rounds} warm-up round(s)"
    )
    columns = (
        Column("phase", "phase"),
        Column("seconds", "seconds", "{:.3f}"),
        Column("share", "share", "{:.1%}"),
        Column("calls", "calls", "{:,d}"),
    )
    print(format_table(rows, columns))
    if args.ops:
        print()
        print(op_table(run, args.op_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
