"""``python -m benchmarks.memory_layouts``: memory layout and packing of the bare training step.

    python -m benchmarks.memory_layouts                 # CIFAR-shaped and Fashion-MNIST-shaped
    python -m benchmarks.memory_layouts --parties 20 --repeats 9
    python -m benchmarks.memory_layouts --threads 2     # one run using both cores

One SGD step (forward, cross-entropy, backward, fused SGD with momentum) of simple-cnn
with its projection head, for ``--parties`` parties each on its own batch of 64 random
images already in memory — no data pipeline, no method hooks: the ceiling each
execution can reach.  Variants, timed interleaved in one process (best of
``--repeats``, ``--threads`` torch threads, default one):

* ``per party, NCHW`` — the sequential path as it runs (one model, parties in turn);
* ``per party, channels-last`` — the same with channels-last weights and inputs;
* ``packed, channels-last`` — all parties as one packed network (packed execution);
* ``packed, NCHW`` — the same packed network in the default layout.

It decides the layouts fedsweep uses (README, "Speed"): the sequential path keeps NCHW
unless channels-last measures faster, packed execution uses channels-last.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from benchmarks.table import Column, format_table
from federated.data.catalog import dataset_spec
from federated.execution.packed_model import PackedModel, fold_images, unfold_output
from federated.models import FedConModel, build_model
from federated.runtime.allocator import keep_freed_memory

BATCH = 64


def _optimizer(parameters) -> torch.optim.Optimizer:
    return torch.optim.SGD(parameters, lr=0.01, momentum=0.9, weight_decay=1e-5, fused=True)


def per_party_step(
    model: FedConModel, xs: torch.Tensor, ys: torch.Tensor, channels_last: bool
) -> Callable[[], None]:
    model = copy.deepcopy(model)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=layout)
    batches = [x.contiguous(memory_format=layout) for x in xs]
    optimizer = _optimizer(model.parameters())

    def step() -> None:
        for x, y in zip(batches, ys):
            loss = F.cross_entropy(model(x).logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    return step


def packed_step(
    model: FedConModel, xs: torch.Tensor, ys: torch.Tensor, channels_last: bool
) -> Callable[[], None]:
    packed = PackedModel(model, xs.shape[0])
    folded = fold_images(xs)
    if not channels_last:
        packed.net.to(memory_format=torch.contiguous_format)
        folded = folded.contiguous()
    optimizer = _optimizer(packed.parameters)

    def step() -> None:
        outputs = unfold_output(packed.net(folded), xs.shape[0])
        loss = torch.stack([F.cross_entropy(o.logits, y) for o, y in zip(outputs, ys)]).sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


VARIANTS = {
    "per party, NCHW": (per_party_step, False),
    "per party, channels-last": (per_party_step, True),
    "packed, channels-last": (packed_step, True),
    "packed, NCHW": (packed_step, False),
}


def measure(dataset: str, parties: int, repeats: int) -> list[dict]:
    """Best seconds per step of each variant, interleaved so drift hits all alike."""
    spec = dataset_spec(dataset)
    torch.manual_seed(0)
    model = build_model("simple-cnn", spec)
    xs = torch.randn(parties, BATCH, *spec.shape)
    ys = torch.randint(0, spec.n_classes, (parties, BATCH))
    steps = {name: make(model, xs, ys, cl) for name, (make, cl) in VARIANTS.items()}
    best = dict.fromkeys(steps, float("inf"))
    for step in steps.values():  # warm-up: first calls pick kernels, allocate
        step()
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            best[name] = min(best[name], time.perf_counter() - start)
    base = best["per party, NCHW"]
    return [
        {
            "dataset": dataset,
            "variant": name,
            "ms_per_step": 1e3 * seconds,
            "samples_per_s": parties * BATCH / seconds,
            "speedup": base / seconds,
        }
        for name, seconds in best.items()
    ]


COLUMNS = (
    Column("dataset", "shape"),
    Column("variant", "variant"),
    Column("ms_per_step", "ms / step (all parties)", "{:.1f}"),
    Column("samples_per_s", "samples/s", "{:,.0f}"),
    Column("speedup", "x per party NCHW", "{:.2f}x"),
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory_layouts", description=__doc__)
    p.add_argument("--parties", type=int, default=10)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--datasets", default="synthetic,fmnist", help="shapes to time")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = p.parse_args(argv)
    if min(args.parties, args.repeats, args.threads) < 1:
        p.error("--parties, --repeats and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    rows = []
    for dataset in args.datasets.split(","):
        rows += measure(dataset.strip(), args.parties, args.repeats)
    print(
        f"one SGD step of simple-cnn for {args.parties} parties x batch {BATCH}, "
        f"{args.threads} thread(s), "
        f"best of {args.repeats} (synthetic = CIFAR-shaped 3x32x32, fmnist = 1x28x28)"
    )
    print(format_table(rows, COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
