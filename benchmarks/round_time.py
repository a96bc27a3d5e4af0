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

This module is the command; the options are :mod:`benchmarks.round_time_options`, the
measurements :mod:`benchmarks.round_time_measure`, the tables and files
:mod:`benchmarks.round_time_render`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from benchmarks.isolation import MeasurementError
from benchmarks.round_time_measure import measure_all
from benchmarks.round_time_options import Options, build_parser, resolve_options
from benchmarks.round_time_render import report


def run(options: Options) -> dict[str, Any]:
    """Measure everything, print the tables, write the files; returns the JSON payload."""
    return report(measure_all(options), options.out)


def main(argv: list[str] | None = None) -> int:
    """Measure (or with ``--render`` reprint a saved run); exit status 1 when a
    measurement failed, 2 for a bad option (argparse's usage error)."""
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
