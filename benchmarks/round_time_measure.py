"""``python -m benchmarks.round_time``'s measurements: one row per (dataset, algorithm)
of fedsweep's packed and sequential rounds beside the straightforward loop, the bare
model step and the matmul peak; the scaling rows; the side-by-side sweeps.  Each
measurement runs through :func:`benchmarks.isolation.measure` (its own process under
``--isolation process``) and is announced on stderr (:class:`Progress`), so stdout holds
only the tables (:mod:`benchmarks.round_time_render`).
"""

from __future__ import annotations

import math
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks.cases import Case
from benchmarks.flops import forward_flops_per_sample, train_flops_per_sample
from benchmarks.isolation import measure
from benchmarks.memory import MIB
from benchmarks.round_time_options import Options
from benchmarks.scaling import linear_fit, parse_parties, scaling_cases
from benchmarks.side_by_side import SweepSetting, levels_for, measure_side_by_side


def machine_info(options: Options) -> dict[str, Any]:
    """The machine the timings belong to (CPU model, cores, versions, device, load)."""
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


def base_case(options: Options, algorithm: str, dataset: str) -> Case:
    """The benchmark's setting of one (algorithm, dataset) as a :class:`Case`."""
    return Case.from_flags(options, algorithm, dataset, options.rounds)


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


def matmul_peak(options: Options, progress: Progress, iso: dict[str, Any]) -> float:
    """The matmul peak of ``options``' device and threads (GFLOP/s)."""
    return progress(
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


def straightforward_columns(
    options: Options, progress: Progress, case: Case, fed: dict[str, Any], iso: dict[str, Any]
) -> dict[str, Any]:
    """The straightforward loop of ``case`` beside fedsweep's measurement ``fed``."""
    plain_case = replace(case, rounds=options.straightforward_rounds, warmup_rounds=0)
    plain = progress(
        f"straightforward {case.dataset} {case.algorithm}",
        lambda: measure("straightforward", plain_case.to_dict(), **iso),
    )
    return {
        "sf_round_s": plain["round_s"],
        "sf_eval_s": plain["eval_s"],
        "sf_samples_per_s": plain["samples_per_s"],
        "sf_peak_mem_mib": plain["peak_rss_bytes"] / MIB,
        # the target: training samples/s (local training and aggregation)
        # against the plain loop's
        "train_speedup": fed["samples_per_s"] / plain["samples_per_s"],
        # what a researcher waits for, shown beside it: samples trained per second of a
        # whole round, the plain loop's evaluations included
        "speedup": (fed["samples_round"] / fed["round_s"])
        / (plain["samples_round"] / plain["round_s"]),
    }


def bare_columns(
    options: Options,
    progress: Progress,
    case: Case,
    fed: dict[str, Any],
    peak: float,
    iso: dict[str, Any],
) -> dict[str, Any]:
    """The bare model step of ``case`` and the FLOP rates: fedsweep's against the bare
    step's and the matmul ``peak``."""
    bare = progress(
        f"bare step {case.dataset} {case.algorithm}",
        lambda: measure(
            "bare_step",
            {
                "algorithm": case.algorithm,
                "dataset": case.dataset,
                "device": options.device,
                "threads": options.threads,
                "seconds": options.bare_seconds,
            },
            **iso,
        ),
    )
    flops = forward_flops_per_sample(case.dataset)
    train_flops = train_flops_per_sample(case.algorithm, flops["forward"], flops["projection"])
    gflops = train_flops * fed["samples_per_s"] / 1e9
    return {
        "bare_samples_per_s": bare["samples_per_s"],
        "bare_faults_per_step": bare["faults_per_step"],
        "bare_fraction": fed["samples_per_s"] / bare["samples_per_s"],
        "fwd_mflop": flops["forward"] / 1e6,
        "train_mflop": train_flops / 1e6,
        "gflops": gflops,
        "peak_gflops": peak,
        "peak_fraction": gflops / peak,
    }


def main_row(
    options: Options, progress: Progress, case: Case, peak: float, iso: dict[str, Any]
) -> dict[str, Any]:
    """One (dataset, algorithm) row: fedsweep packed and sequential, the paths
    alternating, the straightforward loop (unless skipped) and the bare step."""
    name = f"{case.dataset} {case.algorithm}"
    fed = progress(f"fedsweep packed {name}", lambda: measure("fedsweep", case.to_dict(), **iso))
    seq_case = replace(case, execution="sequential")
    seq = progress(
        f"fedsweep sequential {name}", lambda: measure("fedsweep", seq_case.to_dict(), **iso)
    )
    paths = progress(
        f"packed and sequential alternating {name}",
        lambda: measure("executions", case.to_dict(), **iso),
    )
    row: dict[str, Any] = {
        "dataset": case.dataset,
        "algorithm": case.algorithm,
        "device": options.device,
        "threads": options.threads,
        "parties": options.parties,
        "local_epochs": options.local_epochs,
        **fedsweep_columns(fed),
        **sequential_columns(paths, fed, seq, options.parties),
    }
    if options.straightforward:
        row.update(straightforward_columns(options, progress, case, fed, iso))
    row.update(bare_columns(options, progress, case, fed, peak, iso))
    return row


def main_rows(options: Options, progress: Progress) -> tuple[list[dict[str, Any]], float]:
    """One row per (dataset, algorithm), and the matmul peak (GFLOP/s)."""
    iso = {"threads": options.threads, "isolation": options.isolation}
    peak = matmul_peak(options, progress, iso)
    rows = [
        main_row(options, progress, base_case(options, algorithm, dataset), peak, iso)
        for dataset in options.datasets
        for algorithm in options.algorithms
    ]
    for row in rows:
        fedavg = [r for r in rows if r["dataset"] == row["dataset"] and r["algorithm"] == "fedavg"]
        row["vs_fedavg"] = row["round_s"] / fedavg[0]["round_s"] if fedavg else math.nan
    return rows, peak


def scaling_rows(options: Options, progress: Progress) -> list[dict[str, Any]]:
    """One row per scaling case (parties, fraction or epochs varied one at a time)."""
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


def scaling_fits(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per algorithm: train seconds = a + b·samples (b in µs/sample)."""
    fits = {}
    for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
        fits[algorithm] = linear_fit(
            [r for r in rows if r["algorithm"] == algorithm], "samples_round", "train_s"
        )
    return fits


def side_rows(options: Options, progress: Progress) -> list[dict[str, Any]]:
    """Real sweeps of ``--sbs-study`` at each ``--pack`` level, in a temporary folder."""
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


def count_measurements(options: Options) -> int:
    """How many measurements :func:`measure_all` makes (the progress lines' ``[i/n]``)."""
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


def measure_all(options: Options) -> dict[str, Any]:
    """Measure everything ``options`` asks for; returns the JSON payload that
    :func:`benchmarks.round_time_render.report` prints and writes (``round_time.json``)."""
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
    return payload
