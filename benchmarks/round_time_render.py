"""``python -m benchmarks.round_time``'s output: the tables (main, scaling, side by side,
targets) with their columns and legend, printed to stdout and written as CSV and JSON.
:func:`report` takes the payload a run measured or a saved ``round_time.json``
(``--render``) and checks the targets again, so both print the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.round_time_options import Options
from benchmarks.table import Column, format_table, write_csv, write_json
from benchmarks.targets import check_targets

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


def heading(options: Options, info: dict[str, Any]) -> str:
    """The line above the main table: the device, machine and setting measured."""
    where = info.get("gpu") or info["cpu"]
    return (
        f"fedsweep round time on {options.device} ({where}, {info['cpus']} CPUs), "
        f"{options.threads} torch thread(s); simple-cnn, {options.parties} parties, Dir(0.5), "
        f"batch 64, E={options.local_epochs}, data {options.data_fraction:g} / test "
        f"{options.test_fraction:g}; median of {options.rounds} round(s) after "
        f"{options.warmup_rounds} warm-up" + ("  [quick mode]" if options.quick else "")
    )


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
