"""``python -m benchmarks.round_time``'s options: the command line and :class:`Options`,
everything a run measures once ``--quick`` has filled in the defaults that depend on the
mode (:data:`MODE_DEFAULTS`).  A bad value is an ``argparse.ArgumentTypeError``, which
the CLI turns into its usage error.  Nothing here measures anything.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.isolation import ISOLATIONS, ROOT
from benchmarks.scaling import parse_parties
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
    """A comma list's items, each one of ``allowed`` when given."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if allowed is not None:
        bad = [t for t in items if t not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad[0]!r} (allowed: {', '.join(allowed)})")
    return items


def _scaling_epochs(text: str) -> list[int]:
    """``--scaling-epochs``: a comma list of local epochs, each >= 1."""
    try:
        epochs = [int(e) for e in _list(text)]
    except ValueError:
        epochs = []
    if not epochs or min(epochs) < 1:
        raise argparse.ArgumentTypeError(f"--scaling-epochs {text!r} (allowed: e.g. 1,2,5)")
    return epochs


def _scaling_parties(text: str) -> str:
    """``--scaling-parties``, checked and kept as text (:func:`parse_parties` reads it)."""
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
    """``--device``: cpu, cuda or cuda:N (whether CUDA is there is checked by the CLI)."""
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"{text!r} (allowed: cpu, cuda, cuda:N)")
    return text


def _add_round_options(p: argparse.ArgumentParser) -> None:
    """What the main table measures: device, methods, data, rounds and their sizes."""
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


def _add_scaling_and_side_options(p: argparse.ArgumentParser) -> None:
    """The scaling table's cases and the side-by-side sweeps'."""
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


def _add_mode_options(p: argparse.ArgumentParser) -> None:
    """How it runs and where its files go: isolation, output, rendering, the mode and
    what it skips."""
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


def build_parser() -> argparse.ArgumentParser:
    """The command line; a mode-dependent option left out is ``None`` until
    :func:`resolve_options` fills it in."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.round_time",
        description="Time fedsweep's rounds against the straightforward loop, the bare model "
        "step and the matmul peak; check issue 6's targets.",
    )
    _add_round_options(p)
    _add_scaling_and_side_options(p)
    _add_mode_options(p)
    return p


def resolve_options(args: argparse.Namespace) -> Options:
    """The :class:`Options` of a run: the mode's defaults (full or ``--quick``) where an
    option was left out, then the checks that need them (counts >= 1)."""
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
