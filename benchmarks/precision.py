"""``python -m benchmarks.precision``: float32 against bf16-mixed, per round, side by side in
one process.

    python -m benchmarks.precision                                 # everything (long)
    python -m benchmarks.precision --cases cifar-shaped --threads 1 --rounds 1
    python -m benchmarks.precision --device cuda --cases cifar-shaped --algorithms moon \
        --threads 1                              # the GPU check (docs/gpu.md)

For each case, method, execution path and torch thread count it builds two runs that
differ only in ``precision`` (fp32, bf16-mixed), runs one warm-up round of each (MOON's
first round has no previous model, hence no contrastive term; first calls pay one-off
costs), then ``--rounds`` rounds of each, alternating (fp32 round 2, bf16 round 2, bf16
round 3, fp32 round 3, ...) so that a change in the machine's load falls on both alike.
The packed rows of :data:`CALIBRATED` cases also run the sweep's path calibration.
Per precision: the median of the rounds' local-training seconds (``train_seconds``:
local training and aggregation, no evaluation, wall clock) and of the rounds' CPU
seconds (the process's, the whole round: on a machine shared with other work the wall
clock counts the time others held the cores, the CPU seconds do not — with one torch
thread they are the round's work); each ratio is fp32's over bf16-mixed's (> 1:
bf16-mixed is faster).  Then the sweep's path calibration
(:func:`federated.engine.path_calibration.measure_paths`) in each precision, whose key
holds the precision: the path each would choose.

Cases (the issue's): ``fmnist-laptop`` (moon_mu's laptop-budget trial: simple-cnn on
Fashion-MNIST, 10 parties, batch 16, E = 2, 20% of the data), ``cifar-shaped`` (generated
3x32x32 data, simple-cnn, 10 parties, batch 64, E = 1, 20% of the data) and ``resnet50``
(ResNet-50, CIFAR-100-shaped generated data, 100 classes, ``RESNET_PARTIES`` parties of
``RESNET_BATCHES`` batches of ``RESNET_BATCH``).  Units: seconds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from federated.config.run_config import RunConfig
from federated.data import ImageData, load_dataset
from federated.data.catalog import dataset_spec
from federated.data.synthetic import synthetic_images
from federated.engine.path_calibration import faster_path, measure_paths
from federated.engine.round_loop import FederatedRun
from federated.runtime.cpu_name import cpu_identity, cpu_model

CASES = ("fmnist-laptop", "cifar-shaped", "resnet50")
ALGORITHMS = ("fedavg", "moon")
PATHS = ("packed", "sequential")
PRECISIONS = ("fp32", "bf16-mixed")
# the ResNet-50 round: a few batches a party (a paper-budget round at a laptop's cost)
RESNET_PARTIES = 2
RESNET_BATCHES = 2
RESNET_BATCH = 32
# cases whose packed rows also run the path calibration in both precisions (ResNet-50's
# takes minutes a precision: its three alternations of a few steps a party each)
CALIBRATED = ("fmnist-laptop", "cifar-shaped")


def case_config(name: str, algorithm: str) -> RunConfig:
    """The run a case times under ``algorithm`` (module docstring), fp32, 1 thread."""
    if name == "fmnist-laptop":
        from search_spaces import BUDGETS, STUDIES
        from study.plan import SweepPlan

        plan = SweepPlan.build(
            STUDIES["moon_mu"], BUDGETS["laptop"], dataset="fmnist", search="grid", seeds=[0]
        )
        laptop = plan.trials()[-1].run_config  # mu = 10
        return laptop if algorithm == "moon" else laptop.replace(algorithm=algorithm)
    common = dict(algorithm=algorithm, device="cpu", checkpoint_every=0, test_fraction=0.02)
    if name == "cifar-shaped":
        return RunConfig(dataset="synthetic", local_epochs=1, data_fraction=0.2, **common)
    if name == "resnet50":
        spec = dataset_spec("cifar100")
        samples = RESNET_PARTIES * RESNET_BATCHES * RESNET_BATCH
        return RunConfig(
            dataset="cifar100",
            model="resnet50",
            n_parties=RESNET_PARTIES,
            partition="iid",
            batch_size=RESNET_BATCH,
            local_epochs=1,
            data_fraction=samples / spec.train_size,
            **{**common, "test_fraction": 0.005},
        )
    raise ValueError(f"unknown case {name!r} (allowed: {', '.join(CASES)})")


@functools.lru_cache(maxsize=1)
def case_data(name: str, dataset: str, data_root: str | None) -> ImageData:
    """The case's data (kept for the next rows): generated CIFAR-100-shaped images for
    ``resnet50`` (no download), else ``dataset`` as a run loads it."""
    if name != "resnet50":
        return load_dataset(dataset, data_root)
    spec = dataset_spec("cifar100")
    x, y = synthetic_images(spec.train_size + spec.test_size, spec.n_classes, spec.shape)
    n = spec.train_size
    return ImageData(spec, x[:n], y[:n], x[n:], y[n:])


def time_precisions(
    config: RunConfig, data: ImageData, rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each precision's local-training seconds (wall) and whole-round CPU seconds of
    ``rounds`` rounds after one warm-up, rounds alternating between the precisions
    (module docstring)."""
    runs = {
        p: FederatedRun(replace(config, precision=p, rounds=rounds + 1), data) for p in PRECISIONS
    }
    seconds: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    cpu: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    for index in range(rounds + 1):
        for precision in PRECISIONS if index % 2 == 0 else reversed(PRECISIONS):
            began = time.process_time()
            row = runs[precision].run_round()
            if index > 0:
                seconds[precision].append(float(row["train_seconds"]))
                cpu[precision].append(time.process_time() - began)
    return seconds, cpu


def calibrated_paths(config: RunConfig, data: ImageData) -> dict[str, Any]:
    """The sweep's path calibration in each precision: its timings and the chosen path
    (None where packed execution does not apply)."""
    out: dict[str, Any] = {}
    for precision in PRECISIONS:
        timings = measure_paths(replace(config, precision=precision), data=data)
        out[precision] = (
            None if timings is None else {"timings_s": timings, "chosen": faster_path(timings)}
        )
    return out


def measure(
    name: str, algorithm: str, path: str, threads: int, rounds: int, device: str = "cpu"
) -> dict[str, Any]:
    """One row: a case's rounds in both precisions on ``device``, and (packed rows on a
    CPU, where a sweep calibrates) the path calibration."""
    base = case_config(name, algorithm)
    config = base.replace(execution=path, threads=threads, checkpoint_every=0, device=device)
    data = case_data(name, config.dataset, config.data_root)
    seconds, cpu = time_precisions(config, data, rounds)
    median = {p: statistics.median(s) for p, s in seconds.items()}
    cpu_median = {p: statistics.median(s) for p, s in cpu.items()}
    return {
        "case": name,
        "algorithm": algorithm,
        "path": path,
        "threads": threads,
        "round_train_s": seconds,
        "median_s": median,
        "ratio": median["fp32"] / median["bf16-mixed"],
        "noise_s": max(max(s) - min(s) for s in seconds.values()),
        "round_cpu_s": cpu,
        "cpu_median_s": cpu_median,
        "cpu_ratio": cpu_median["fp32"] / cpu_median["bf16-mixed"],
        "calibration": (
            calibrated_paths(config, data)
            if path == "packed" and name in CALIBRATED and device == "cpu"
            else None
        ),
    }


def describe(rows: list[dict[str, Any]]) -> str:
    """The table: one line per row, the calibration's choice per precision."""
    lines = [
        "| case | method | path | threads | fp32 s/round | bf16-mixed s/round | ratio | "
        "noise s | fp32 CPU s | bf16 CPU s | CPU ratio | calibration fp32 → | "
        "calibration bf16 → |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        cal = r["calibration"] or {}

        def chosen(precision: str, cal: dict[str, Any] = cal) -> str:
            entry = cal.get(precision)
            if entry is None:
                return ""
            t = entry["timings_s"]
            return f"{entry['chosen']} ({t['packed']:.2f}/{t['sequential']:.2f})"

        lines.append(
            f"| {r['case']} | {r['algorithm']} | {r['path']} | {r['threads']} | "
            f"{r['median_s']['fp32']:.2f} | {r['median_s']['bf16-mixed']:.2f} | "
            f"{r['ratio']:.2f}× | {r['noise_s']:.2f} | {r['cpu_median_s']['fp32']:.2f} | "
            f"{r['cpu_median_s']['bf16-mixed']:.2f} | {r['cpu_ratio']:.2f}× | {chosen('fp32')} | "
            f"{chosen('bf16-mixed')} |"
        )
    return "\n".join(lines)


def _list(text: str, allowed: tuple[str, ...], flag: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise SystemExit(f"error: {flag} {text!r} (allowed: {', '.join(allowed)})")
    return items


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.precision", description=__doc__)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--algorithms", default=",".join(ALGORITHMS))
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument("--threads", default="1,2", help="comma list of torch thread counts")
    p.add_argument("--rounds", type=int, default=2, help="timed rounds per precision (2)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="cpu or cuda")
    p.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)
    cases = _list(args.cases, CASES, "--cases")
    algorithms = _list(args.algorithms, ALGORITHMS, "--algorithms")
    paths = _list(args.paths, PATHS, "--paths")
    threads = [int(t) for t in _list(args.threads, ("1", "2", "4", "8", "16"), "--threads")]
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    load = os.getloadavg()[0]
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the runs' own notices (inert settings)
        for name in cases:
            for algorithm in algorithms:
                for n in threads:
                    for path in paths:
                        print(f"{name} {algorithm} {path} {n} thread(s) ...", file=sys.stderr)
                        rows.append(measure(name, algorithm, path, n, args.rounds, args.device))
                        print(describe(rows[-1:]).splitlines()[-1], file=sys.stderr)
    machine = f"{cpu_model()} ({cpu_identity()})"
    if args.device == "cuda":
        machine = f"{torch.cuda.get_device_name()} beside {machine}"
    head = (
        f"{machine}, torch {torch.__version__}; load average "
        f"{load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; median over "
        f"{args.rounds} alternating round(s) after one warm-up; local-training seconds "
        "per round (train_seconds); ratio = fp32 / bf16-mixed"
    )
    print(head)
    print(describe(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"head": head, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
