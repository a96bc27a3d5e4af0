"""``python -m benchmarks.round_time``: fedsweep's round time against its yardsticks (issue 6).

    python -m benchmarks.round_time                       # the full benchmark on this CPU
    python -m benchmarks.round_time --quick               # reduced mode (CI): seconds
    python -m benchmarks.round_time --render benchmarks/out/round_time.json  # reprint a run
    python -m benchmarks.round_time --algorithms moon --datasets synthetic --skip-scaling
    python -m benchmarks.round_time --device cuda --algorithms moon --local-epochs 10 \\
        --skip-straightforward --skip-scaling             # the paper's CIFAR-10 setting on a GPU
                                                          # (+ 1, 2, 4, 8 trials packed per GPU)

For FedAvg, FedProx and MOON (simple-cnn, 10 parties, Dir(0.5), batch 64) on CIFAR-shaped
generated data (``synthetic``: 50,000 3x32x32 uint8 images, offline) and on
Fashion-MNIST, it prints one table — seconds per round, training samples per second,
evaluation seconds, peak memory — of packed execution (the default: a round's parties
trained together) beside the sequential path (parties one by one, in its own process:
``x seq``, and the memory packing adds per party), the straightforward loop
(:mod:`benchmarks.straightforward`), the bare model step (:mod:`benchmarks.bare_step`)
and the matmul peak (:mod:`benchmarks.flops`); then the scaling table
(:mod:`benchmarks.scaling`), trials side by side through ``study.sweep``
(:mod:`benchmarks.side_by_side`), and every target of the issue as a row "target /
measured / met or missed" (:mod:`benchmarks.targets`).  The tables are written to
``--out`` (default ``benchmarks/out/``) as ``round_time.csv``, ``scaling.csv``,
``side_by_side.csv``, ``targets.csv`` and everything together as ``round_time.json``.

Units: seconds (s), samples per second, MiB (2^20 bytes), MFLOP (10^6 floating-point
operations) per sample, GFLOP/s (10^9 per second).  fedsweep's numbers are medians over
``--rounds`` rounds after ``--warmup-rounds``; each configuration runs in a fresh
process (``--isolation process``) so its peak memory and thread count are its own.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.cases import Case
from benchmarks.flops import forward_flops_per_sample, train_flops_per_sample
from benchmarks.isolation import ISOLATIONS, ROOT, MeasurementError, measure
from benchmarks.memory import MIB
from benchmarks.scaling import linear_fit, parse_parties, scaling_cases
from benchmarks.side_by_side import SweepSetting, levels_for, measure_side_by_side
from benchmarks.table import Column, format_table, write_csv, write_json
from benchmarks.targets import check_targets
from search_spaces import STUDIES

ALGORITHMS = ("fedavg", "fedprox", "moon")
DATASETS = ("synthetic", "fmnist")


@dataclass(frozen=True)
class Options:
    """Everything the benchmark runs, after ``--quick`` has filled in its defaults."""

    device: str
    algorithms: list[str]
    datasets: list[str]
    rounds: int
    warmup_rounds: int
    local_epochs: int
    parties: int
    threads: int
    data_fraction: float
    test_fraction: float
    straightforward_rounds: int
    bare_seconds: float
    matmul_size: int
    matmul_repeats: int
    scaling_algorithms: list[str]
    scaling_dataset: str
    scaling_parties: str
    scaling_epochs: list[int]
    scaling_rounds: int
    sbs_study: str
    sbs_dataset: str
    sbs_rounds: int
    sbs_data_fraction: float
    sbs_seeds: int
    pack: str
    isolation: str
    out: Path
    straightforward: bool
    scaling: bool
    side_by_side: bool
    quick: bool


# (full run, --quick) defaults of the options whose value depends on the mode
MODE_DEFAULTS: dict[str, tuple[Any, Any]] = {
    "rounds": (3, 1),
    "data_fraction": (1.0, 0.02),
    "test_fraction": (1.0, 0.02),
    "bare_seconds": (3.0, 0.2),
    "matmul_size": (2048, 256),
    "matmul_repeats": (5, 2),
    "scaling_parties": ("10,50,100:0.2", "4,8,16:0.25"),
    "scaling_epochs": ("1,2,5", "1,2"),
    "sbs_rounds": (5, 2),
    "sbs_data_fraction": (0.2, 0.02),
    "sbs_seeds": (2, 1),
    "isolation": ("process", "inline"),
}


AT_LEAST_ONE = (
    "rounds",
    "local_epochs",
    "parties",
    "threads",
    "straightforward_rounds",
    "scaling_rounds",
    "sbs_rounds",
    "sbs_seeds",
)


def _list(text: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if allowed is not None:
        bad = [t for t in items if t not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad[0]!r} (allowed: {', '.join(allowed)})")
    return items


def _scaling_epochs(text: str) -> list[int]:
    try:
        epochs = [int(e) for e in _list(text)]
    except ValueError:
        epochs = []
    if not epochs or min(epochs) < 1:
        raise argparse.ArgumentTypeError(f"--scaling-epochs {text!r} (allowed: e.g. 1,2,5)")
    return epochs


def _scaling_parties(text: str) -> str:
    try:
        parties = parse_parties(text)
    except ValueError:
        parties = []
    if not parties or any(n < 1 or not 0 < f <= 1 for n, f in parties):
        raise argparse.ArgumentTypeError(
            f"--scaling-parties {text!r} (allowed: e.g. 10,50,100:0.2)"
        )
    return text


def _device(text: str) -> str:
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"{text!r} (allowed: cpu, cuda, cuda:N)")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.round_time",
        description="Time fedsweep's rounds against the straightforward loop, the bare model "
        "step and the matmul peak; check issue 6's targets.",
    )
    p.add_argument("--device", type=_device, default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument(
        "--algorithms",
        type=lambda s: _list(s, ALGORITHMS),
        default=list(ALGORITHMS),
        help="comma list (default fedavg,fedprox,moon)",
    )
    p.add_argument(
        "--datasets",
        type=lambda s: _list(s, DATASETS),
        default=list(DATASETS),
        help="comma list (default synthetic,fmnist)",
    )
    p.add_argument("--rounds", type=int, help="measured rounds, after the warm-up (3; quick 1)")
    p.add_argument("--warmup-rounds", type=int, default=1, help="rounds run first, not reported")
    p.add_argument("--local-epochs", type=int, default=1, help="local epochs E (default 1)")
    p.add_argument("--parties", type=int, default=10, help="parties N (default 10)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--data-fraction", type=float, help="training set used (1.0; quick 0.02)")
    p.add_argument("--test-fraction", type=float, help="test set evaluated (1.0; quick 0.02)")
    p.add_argument(
        "--straightforward-rounds", type=int, default=1, help="rounds of the plain loop (1)"
    )
    p.add_argument("--bare-seconds", type=float, help="timing of each bare step (3; quick 0.2)")
    p.add_argument("--matmul-size", type=int, help="matmul peak: n of n x n (2048; quick 256)")
    p.add_argument("--matmul-repeats", type=int, help="matmul peak: best of (5; quick 2)")
    p.add_argument(
        "--scaling-algorithms",
        type=lambda s: _list(s, ALGORITHMS),
        default=["fedavg", "moon"],
        help="scaling table's algorithms (default fedavg,moon)",
    )
    p.add_argument("--scaling-dataset", choices=DATASETS, default="synthetic")
    p.add_argument("--scaling-parties", help="N[:fraction] list (10,50,100:0.2; quick 4,8,16:0.25)")
    p.add_argument("--scaling-epochs", help="E list (1,2,5; quick 1,2)")
    p.add_argument("--scaling-rounds", type=int, default=1, help="measured rounds per row (1)")
    p.add_argument(
        "--sbs-study", choices=sorted(STUDIES), default="temperature", help="side by side: study"
    )
    p.add_argument("--sbs-dataset", choices=DATASETS, help="side by side: dataset (first of)")
    p.add_argument("--sbs-rounds", type=int, help="side by side: rounds per trial (5; quick 2)")
    p.add_argument(
        "--sbs-data-fraction", type=float, help="side by side: training set (0.2; quick 0.02)"
    )
    p.add_argument("--sbs-seeds", type=int, help="side by side: seeds at least (2; quick 1)")
    p.add_argument(
        "--pack",
        help="side by side levels: 'default' = the sweep's default resources, k = at most k "
        "trials at once; on cuda k trials per GPU with --gpus-per-trial 1/k "
        "(default: cpu 1,default; cuda 1,2,4,8)",
    )
    p.add_argument("--isolation", choices=ISOLATIONS, help="process (default) or inline (quick)")
    p.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "out",
        help="folder for the CSV/JSON files",
    )
    p.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="measure nothing: print the tables of a saved round_time.json, targets checked "
        "again, and write them to --out",
    )
    p.add_argument("--quick", action="store_true", help="reduced mode for CI (seconds)")
    p.add_argument("--skip-straightforward", action="store_true")
    p.add_argument("--skip-scaling", action="store_true")
    p.add_argument("--skip-side-by-side", action="store_true")
    p.add_argument(
        "--side-by-side", action="store_true", help="run the side-by-side sweeps in --quick too"
    )
    return p


def resolve_options(args: argparse.Namespace) -> Options:
    mode = 1 if args.quick else 0
    values = {k: getattr(args, k) for k in MODE_DEFAULTS}
    for key, defaults in MODE_DEFAULTS.items():
        if values[key] is None:
            values[key] = defaults[mode]
    gpu = args.device.startswith("cuda")
    options = Options(
        device=args.device,
        algorithms=args.algorithms,
        datasets=args.datasets,
        rounds=values["rounds"],
        warmup_rounds=args.warmup_rounds,
        local_epochs=args.local_epochs,
        parties=args.parties,
        threads=args.threads,
        data_fraction=values["data_fraction"],
        test_fraction=values["test_fraction"],
        straightforward_rounds=args.straightforward_rounds,
        bare_seconds=values["bare_seconds"],
        matmul_size=values["matmul_size"],
        matmul_repeats=values["matmul_repeats"],
        scaling_algorithms=args.scaling_algorithms,
        scaling_dataset=args.scaling_dataset,
        scaling_parties=_scaling_parties(values["scaling_parties"]),
        scaling_epochs=_scaling_epochs(values["scaling_epochs"]),
        scaling_rounds=args.scaling_rounds,
        sbs_study=args.sbs_study,
        sbs_dataset=args.sbs_dataset or args.datasets[0],
        sbs_rounds=values["sbs_rounds"],
        sbs_data_fraction=values["sbs_data_fraction"],
        sbs_seeds=values["sbs_seeds"],
        pack=args.pack or ("1,2,4,8" if gpu else "1,default"),
        isolation=values["isolation"],
        out=args.out,
        straightforward=not args.skip_straightforward,
        scaling=not args.skip_scaling,
        side_by_side=not args.skip_side_by_side and (args.side_by_side or not args.quick),
        quick=args.quick,
    )
    for name in AT_LEAST_ONE:
        if getattr(options, name) < 1:
            raise argparse.ArgumentTypeError(f"--{name.replace('_', '-')} must be >= 1")
    if options.warmup_rounds < 0:
        raise argparse.ArgumentTypeError("--warmup-rounds must be >= 0")
    return options


# --------------------------------------------------------------------------- machine
def machine_info(options: Options) -> dict[str, Any]:
    import torch

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "device": options.device,
        "threads": options.threads,
        "load_average_start": os.getloadavg()[0],
    }
    if options.device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(options.device))
    return info


class Progress:
    """One line per measurement on stderr, so stdout holds only the tables."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.start = time.perf_counter()

    def __call__(self, what: str, run):
        self.done += 1
        began = time.perf_counter()
        print(f"[{self.done}/{self.total}] {what} ...", end="", file=sys.stderr, flush=True)
        result = run()
        took = time.perf_counter() - began
        print(f" {took:.1f} s", file=sys.stderr, flush=True)
        return result


# ---------------------------------------------------------------------- main table
def base_case(options: Options, algorithm: str, dataset: str) -> Case:
    return Case(
        algorithm=algorithm,
        dataset=dataset,
        n_parties=options.parties,
        local_epochs=options.local_epochs,
        rounds=options.rounds,
        warmup_rounds=options.warmup_rounds,
        data_fraction=options.data_fraction,
        test_fraction=options.test_fraction,
        threads=options.threads,
        device=options.device,
    )


def sequential_columns(
    paths: dict[str, Any], packed: dict[str, Any], sequential: dict[str, Any] | None, parties: int
) -> dict[str, Any]:
    """The sequential path beside packed execution: seconds per round of both from one
    process, rounds alternating (``paths``), their ratio, and — with an isolated
    sequential measurement — the memory packing adds per party (the packed run's MiB
    above the sequential run's, / parties)."""
    extra = math.nan
    if sequential is not None:
        extra = (packed["peak_rss_bytes"] - packed["rss_data_bytes"]) - (
            sequential["peak_rss_bytes"] - sequential["rss_data_bytes"]
        )
    return {
        "pk_round_s": paths["packed_round_s"],
        "seq_round_s": paths["sequential_round_s"],
        "seq_train_s": paths["sequential_train_s"],
        "packed_speedup": paths["speedup"],
        "packed_train_speedup": paths["train_speedup"],
        "packed_mib_per_party": extra / parties / MIB,
    }


def fedsweep_columns(result: dict[str, Any]) -> dict[str, Any]:
    """fedsweep's measurement as table columns (MiB, fractions)."""
    return {
        "samples_round": result["samples_round"],
        "round_s": result["round_s"],
        "wall_round_s": result["wall_round_s"],
        "train_s": result["train_s"],
        "eval_s": result["eval_s"],
        "eval_fraction": result["eval_s"] / result["round_s"],
        "samples_per_s": result["samples_per_s"],
        "faults_per_step": result["faults_per_step"],
        "peak_mem_mib": result["peak_rss_bytes"] / MIB,
        "run_mem_mib": (result["peak_rss_bytes"] - result["rss_data_bytes"]) / MIB,
        "device_peak_mib": result["device_peak_bytes"] / MIB,
        "state_kib_per_party": result["state_bytes_per_party"] / 1024,
        "negatives": result["negatives"],
    }


def main_rows(options: Options, progress: Progress) -> tuple[list[dict[str, Any]], float]:
    """One row per (dataset, algorithm), and the matmul peak (GFLOP/s)."""
    iso = {"threads": options.threads, "isolation": options.isolation}
    peak = progress(
        f"matmul peak ({options.matmul_size}^2, {options.threads} thread(s))",
        lambda: measure(
            "matmul_peak",
            {
                "device": options.device,
                "threads": options.threads,
                "size": options.matmul_size,
                "repeats": options.matmul_repeats,
            },
            **iso,
        ),
    )["gflops"]
    rows = []
    for dataset in options.datasets:
        flops = forward_flops_per_sample(dataset)
        for algorithm in options.algorithms:
            case = base_case(options, algorithm, dataset)
            name = f"{dataset} {algorithm}"
            fed = progress(
                f"fedsweep packed {name}", lambda c=case: measure("fedsweep", c.to_dict(), **iso)
            )
            seq_case = replace(case, execution="sequential")
            seq = progress(
                f"fedsweep sequential {name}",
                lambda c=seq_case: measure("fedsweep", c.to_dict(), **iso),
            )
            paths = progress(
                f"packed and sequential alternating {name}",
                lambda c=case: measure("executions", c.to_dict(), **iso),
            )
            row: dict[str, Any] = {
                "dataset": dataset,
                "algorithm": algorithm,
                "device": options.device,
                "threads": options.threads,
                "parties": options.parties,
                "local_epochs": options.local_epochs,
                **fedsweep_columns(fed),
                **sequential_columns(paths, fed, seq, options.parties),
            }
            if options.straightforward:
                plain_case = replace(case, rounds=options.straightforward_rounds, warmup_rounds=0)
                plain = progress(
                    f"straightforward {name}",
                    lambda c=plain_case: measure("straightforward", c.to_dict(), **iso),
                )
                row.update(
                    sf_round_s=plain["round_s"],
                    sf_eval_s=plain["eval_s"],
                    sf_samples_per_s=plain["samples_per_s"],
                    sf_peak_mem_mib=plain["peak_rss_bytes"] / MIB,
                    # the target: training samples/s (local training and
                    # aggregation) against the plain loop's
                    train_speedup=fed["samples_per_s"] / plain["samples_per_s"],
                    # what a researcher waits for, shown beside it: samples trained per
                    # second of a whole round, the plain loop's evaluations included
                    speedup=(fed["samples_round"] / fed["round_s"])
                    / (plain["samples_round"] / plain["round_s"]),
                )
            bare = progress(
                f"bare step {name}",
                lambda a=algorithm, d=dataset: measure(
                    "bare_step",
                    {
                        "algorithm": a,
                        "dataset": d,
                        "device": options.device,
                        "threads": options.threads,
                        "seconds": options.bare_seconds,
                    },
                    **iso,
                ),
            )
            train_flops = train_flops_per_sample(algorithm, flops["forward"], flops["projection"])
            gflops = train_flops * fed["samples_per_s"] / 1e9
            row.update(
                bare_samples_per_s=bare["samples_per_s"],
                bare_faults_per_step=bare["faults_per_step"],
                bare_fraction=fed["samples_per_s"] / bare["samples_per_s"],
                fwd_mflop=flops["forward"] / 1e6,
                train_mflop=train_flops / 1e6,
                gflops=gflops,
                peak_gflops=peak,
                peak_fraction=gflops / peak,
            )
            rows.append(row)
    for row in rows:
        fedavg = [r for r in rows if r["dataset"] == row["dataset"] and r["algorithm"] == "fedavg"]
        row["vs_fedavg"] = row["round_s"] / fedavg[0]["round_s"] if fedavg else math.nan
    return rows, peak


MAIN_COLUMNS = (
    Column("dataset", "dataset"),
    Column("algorithm", "method"),
    Column("round_s", "s/round", "{:.2f}"),
    Column("pk_round_s", "packed s/round*", "{:.2f}"),
    Column("seq_round_s", "seq s/round*", "{:.2f}"),
    Column("packed_speedup", "x seq", "{:.2f}x"),
    Column("packed_mib_per_party", "packed MiB/party", "{:.1f}"),
    Column("train_s", "train s", "{:.2f}"),
    Column("eval_s", "eval s", "{:.2f}"),
    Column("eval_fraction", "eval %", "{:.0%}"),
    Column("samples_per_s", "samples/s", "{:,.0f}"),
    Column("faults_per_step", "faults/step", "{:,.0f}"),
    Column("peak_mem_mib", "peak MiB", "{:,.0f}"),
    Column("run_mem_mib", "run MiB", "{:,.0f}"),
    Column("sf_round_s", "plain s/round", "{:.2f}"),
    Column("sf_samples_per_s", "plain samples/s", "{:,.0f}"),
    Column("train_speedup", "x plain (train)", "{:.1f}x"),
    Column("speedup", "x plain (round)", "{:.1f}x"),
    Column("bare_samples_per_s", "bare samples/s", "{:,.0f}"),
    Column("bare_fraction", "% bare", "{:.0%}"),
    Column("train_mflop", "MFLOP/sample", "{:.2f}"),
    Column("gflops", "GFLOP/s", "{:.1f}"),
    Column("peak_fraction", "% peak", "{:.1%}"),
    Column("vs_fedavg", "x FedAvg", "{:.2f}x"),
)


# --------------------------------------------------------------------------- scaling
def scaling_rows(options: Options, progress: Progress) -> list[dict[str, Any]]:
    base = replace(
        base_case(options, options.scaling_algorithms[0], options.scaling_dataset),
        rounds=options.scaling_rounds,
    )
    cases = scaling_cases(
        base,
        options.scaling_algorithms,
        parse_parties(options.scaling_parties),
        options.scaling_epochs,
    )
    iso = {"threads": options.threads, "isolation": options.isolation}
    rows = []
    for case in cases:
        what = (
            f"scaling {case.algorithm} N={case.n_parties} "
            f"fraction={case.sample_fraction:g} E={case.local_epochs}"
        )
        fed = progress(what, lambda c=case: measure("fedsweep", c.to_dict(), **iso))
        paths = progress(
            f"{what}, packed and sequential alternating",
            lambda c=case: measure("executions", c.to_dict(), **iso),
        )
        rows.append(
            {
                "dataset": case.dataset,
                "algorithm": case.algorithm,
                "parties": case.n_parties,
                "fraction": case.sample_fraction,
                "local_epochs": case.local_epochs,
                **fedsweep_columns(fed),
                **sequential_columns(paths, fed, None, 1),
                "us_per_sample": 1e6 * fed["train_s"] / fed["samples_round"],
                "state_mib": fed["state_bytes"] / MIB,
                "parties_with_state": fed["parties_with_state"],
            }
        )
    return rows


SCALING_COLUMNS = (
    Column("algorithm", "method"),
    Column("parties", "N", "{:d}"),
    Column("fraction", "fraction", "{:g}"),
    Column("local_epochs", "E", "{:d}"),
    Column("samples_round", "samples/round", "{:,.0f}"),
    Column("round_s", "s/round", "{:.2f}"),
    Column("pk_round_s", "packed s/round*", "{:.2f}"),
    Column("seq_round_s", "seq s/round*", "{:.2f}"),
    Column("packed_speedup", "x seq", "{:.2f}x"),
    Column("train_s", "train s", "{:.2f}"),
    Column("eval_s", "eval s", "{:.2f}"),
    Column("us_per_sample", "us/sample", "{:.0f}"),
    Column("peak_mem_mib", "peak MiB", "{:,.0f}"),
    Column("run_mem_mib", "run MiB", "{:,.1f}"),
    Column("state_mib", "state MiB", "{:.1f}"),
    Column("parties_with_state", "parties w/ state", "{:d}"),
    Column("state_kib_per_party", "KiB/party", "{:.0f}"),
    Column("negatives", "negatives", "{:.2f}"),
)


def scaling_fits(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per algorithm: train seconds = a + b·samples (b in µs/sample)."""
    fits = {}
    for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
        fits[algorithm] = linear_fit(
            [r for r in rows if r["algorithm"] == algorithm], "samples_round", "train_s"
        )
    return fits


# ---------------------------------------------------------------------- side by side
SIDE_COLUMNS = (
    Column("level", "level"),
    Column("trials", "trials", "{:d}"),
    Column("cpus_per_trial", "CPU/trial", "{:g}"),
    Column("gpus_per_trial", "GPU/trial", "{:g}"),
    Column("concurrency", "trials busy", "{:.2f}"),
    Column("trial_samples_per_s", "samples/s per trial", "{:,.0f}"),
    Column("samples_per_s", "samples/s (rounds)", "{:,.0f}"),
    Column("speedup", "x one", "{:.2f}x"),
    Column("startup_s", "start-up s", "{:.1f}"),
    Column("wall_s", "sweep wall s", "{:.1f}"),
    Column("wall_samples_per_s", "samples/s (wall)", "{:,.0f}"),
    Column("wall_speedup", "x one (wall)", "{:.2f}x"),
)

TARGET_COLUMNS = (
    Column("target", "target"),
    Column("scope", "scope"),
    Column("required", "required"),
    Column("measured", "measured", "{:.3f}"),
    Column("status", "status"),
)


def side_rows(options: Options, progress: Progress) -> list[dict[str, Any]]:
    setting = SweepSetting(
        study=options.sbs_study,
        dataset=options.sbs_dataset,
        rounds=options.sbs_rounds,
        data_fraction=options.sbs_data_fraction,
        local_epochs=options.local_epochs,
        seeds=options.sbs_seeds,
    )
    levels = levels_for(options.pack, options.device.startswith("cuda"))
    with tempfile.TemporaryDirectory(prefix="fedsweep-side-by-side-") as storage:
        return progress(
            f"side by side: {len(levels)} sweeps of {setting.study} ({options.pack})",
            lambda: measure_side_by_side(setting, levels, Path(storage)),
        )


# ------------------------------------------------------------------------------ main
def heading(options: Options, info: dict[str, Any]) -> str:
    where = info.get("gpu") or info["cpu"]
    return (
        f"fedsweep round time on {options.device} ({where}, {info['cpus']} CPUs), "
        f"{options.threads} torch thread(s); simple-cnn, {options.parties} parties, Dir(0.5), "
        f"batch 64, E={options.local_epochs}, data {options.data_fraction:g} / test "
        f"{options.test_fraction:g}; median of {options.rounds} round(s) after "
        f"{options.warmup_rounds} warm-up" + ("  [quick mode]" if options.quick else "")
    )


def count_measurements(options: Options) -> int:
    per_row = 4 + options.straightforward
    n = 1 + per_row * len(options.algorithms) * len(options.datasets)
    if options.scaling:
        n += 2 * len(
            scaling_cases(
                Case("fedavg", options.scaling_dataset),
                options.scaling_algorithms,
                parse_parties(options.scaling_parties),
                options.scaling_epochs,
            )
        )
    return n + options.side_by_side


def run(options: Options) -> dict[str, Any]:
    """Measure everything, print the tables, write the files; returns the JSON payload."""
    info = machine_info(options)
    progress = Progress(count_measurements(options))
    main, peak = main_rows(options, progress)
    scaling = scaling_rows(options, progress) if options.scaling else []
    side = side_rows(options, progress) if options.side_by_side else []
    info["load_average_end"] = os.getloadavg()[0]
    payload = {
        "machine": info,
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()},
        "matmul_peak_gflops": peak,
        "main": main,
        "scaling": scaling,
        "scaling_fits": scaling_fits(scaling) if scaling else {},
        "side_by_side": side,
    }
    return report(payload, options.out)


def report(payload: dict[str, Any], out: Path) -> dict[str, Any]:
    """Check the targets, print every table of ``payload`` and write the files to ``out``.

    ``payload`` is what :func:`run` measured, or a saved ``round_time.json`` (``--render``):
    the targets are checked again, so a saved run is judged by the current targets."""
    options = Options(**{**payload["options"], "out": Path(payload["options"]["out"])})
    info, peak = payload["machine"], payload["matmul_peak_gflops"]
    main, scaling, side = payload["main"], payload["scaling"], payload["side_by_side"]
    fits = payload["scaling_fits"]
    targets = check_targets(main, side or None)
    payload = {**payload, "targets": targets}

    print(heading(options, info))
    print(format_table(main, MAIN_COLUMNS))
    print(
        f"s/round = packed execution (a round's parties trained together), in its own "
        f"process; * = packed and the sequential path (one party after another) in one "
        f"process, rounds alternating, x seq = the sequential s/round over the packed one; "
        f"packed MiB/party = the packed run's memory above the sequential run's (each in its "
        f"own process), per party; "
        f"plain = the straightforward loop (DataLoader, per-sample torchvision transforms, "
        f"full train+test evaluation every round); x plain (train) = training samples/s "
        f"over the plain loop's, x plain (round) = samples trained per second of a whole "
        f"round, evaluations included; bare = forward+backward+SGD step on a "
        f"batch in memory; % peak = achieved GFLOP/s of the {peak:.1f} GFLOP/s matmul peak; "
        f"peak MiB = the process's peak RSS, run MiB = that above the loaded dataset; "
        f"faults/step = minor page faults per SGD step (the bare step keeps freed memory: 0)"
    )
    if scaling:
        print()
        print(f"scaling ({options.scaling_dataset}; median of {options.scaling_rounds} round(s))")
        print(format_table(scaling, SCALING_COLUMNS))
        for algorithm, fit in fits.items():
            print(
                f"{algorithm}: train s = {fit['a']:.2f} + {1e6 * fit['b']:.0f} us x samples "
                f"(R^2 {fit['r2']:.3f})"
            )
    if side:
        print()
        print(
            f"trials side by side (python -m study.sweep {options.sbs_study} --budget smoke, "
            f"{options.sbs_rounds} rounds, data {options.sbs_data_fraction:g})"
        )
        print(format_table(side, SIDE_COLUMNS))
    print()
    print(format_table(targets, TARGET_COLUMNS))
    loads = (info["load_average_start"], info["load_average_end"])
    if max(loads) > 0.5 * (info["cpus"] or 1):
        print(
            f"note: load average {loads[0]:.1f} at start, {loads[1]:.1f} at end: other work "
            "shared this machine, so timings are noisy"
        )

    write_csv(out / "round_time.csv", main)
    write_csv(out / "targets.csv", targets)
    if scaling:
        write_csv(out / "scaling.csv", scaling)
    if side:
        write_csv(out / "side_by_side.csv", side)
    write_json(out / "round_time.json", payload)
    print(
        f"wrote {out}/round_time.csv, targets.csv"
        + (", scaling.csv" if scaling else "")
        + (", side_by_side.csv" if side else "")
        + ", round_time.json"
    )
    return payload


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        options = resolve_options(args)
    except argparse.ArgumentTypeError as err:
        parser.error(str(err))
    if options.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            parser.error(f"--device {options.device}: CUDA is not available on this machine")
    try:
        if args.render is not None:
            report(json.loads(args.render.read_text()), options.out)
        else:
            run(options)
    except MeasurementError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
