"""One federated run from the command line.

    python -m federated.run --algorithm moon --dataset fmnist --rounds 5 --local-epochs 1

Every :class:`~federated.config.run_config.RunConfig` field is a flag (``--n-parties``, ``--beta``,
``--mu``, ``--server-optimizer fedavgm`` ...).  Prints one line per round and writes the
rows (metrics plus the resolved config) to ``--out`` (CSV, or JSON lines for ``.jsonl``),
rewritten atomically after every round so the file is always complete.  A run whose
loss becomes NaN/inf stops at that round, prints ``status: diverged`` and exits with
status 3; per-party accuracies go to ``X.parties.csv`` beside the rows file ``X.csv``
(and Fig. 2's representations, with ``--representations-at``, to ``X.representations/``);
bad values are rejected with one line before any data loads, and values the data or
the model refuse once the data are loaded, before any round or file (exit status 2);
settings that have no effect on the run are named in ``warning:`` lines.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

from federated.cli import exit_codes
from federated.cli.hub_source import early_hub_refusal
from federated.config.checks import ExecutionAliasWarning

if __name__ == "__main__" and (_refusal := early_hub_refusal(sys.argv[1:])):
    # an hf: Hub data set that can be had neither online nor from the cache: refused
    # before torch and torchvision are imported (seconds; tens on a loaded machine)
    print(_refusal, file=sys.stderr)
    sys.exit(exit_codes.BAD_INPUT)

# the engine's imports come after the torch-free check above
from federated.cli.input_checks import InputError, OneLineParser, check_output_file
from federated.config.inert_settings import inert_settings
from federated.config.protocol_notices import protocol_notices
from federated.config.run_config import (
    ConfigError,
    RunConfig,
    field_help,
    field_types,
    registered_params,
)
from federated.contract.columns import console_words
from federated.data import DatasetUnavailableError
from federated.data.folder_layout import dataset_slug
from federated.data.party_field import left_out_words
from federated.engine.party_store import SpillSpaceError
from federated.engine.round_loop import FederatedRun, PackingFallback
from federated.engine.run_files import RunFiles
from federated.heterogeneity.partition import FloorNotice, PartitionError, size_statistics
from federated.models.pretrained_start import StartNotice
from federated.registry import is_plugin, load_method
from federated.runtime.atomic_file import atomic_open
from federated.runtime.device import DeviceUnavailableError
from federated.runtime.owned_temp_files import remove_stale
from federated.runtime.precision_names import EmulatedPrecisionWarning

ROW_FORMATS = (".csv", ".jsonl")  # what write_rows writes, chosen by --out's suffix


def _plugin_params(argv: list[str]) -> dict[str, type]:
    """Parameters of a plug-in named on the command line (``--algorithm pkg.mod:Class``,
    ``--task pkg.mod:Class``), so that its own flags exist; a name that does not load is
    reported by RunConfig."""
    out = {}
    for kind in ("algorithm", "server_optimizer", "task"):
        flag = "--" + kind.replace("_", "-")
        for i, arg in enumerate(argv):
            name = arg.split("=", 1)[1] if arg.startswith(flag + "=") else None
            if arg == flag and i + 1 < len(argv):
                name = argv[i + 1]
            if name and is_plugin(name):
                # a name that does not load: RunConfig names it in its one-line error
                with contextlib.suppress(ConfigError):
                    out[f"{kind} {name}"] = load_method(kind, name).Params
    return out


# RunConfig fields for the test suite's fault drills (Python, a sweep's --set), not for
# users: no flag offers them.
TEST_HOOKS = ("fail_at_round",)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Flags: every RunConfig field, then each method's own parameters (one group per
    method; a plug-in's appear when ``--algorithm pkg.mod:Class`` is on ``argv``)."""
    parser = OneLineParser(
        prog="python -m federated.run",
        description="Run one federated-learning experiment and report per-round accuracy.",
    )
    helps = field_help()
    for name in field_types():
        if name in TEST_HOOKS:
            continue
        default = getattr(RunConfig, name, None)
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=argparse.SUPPRESS,
            metavar=name.upper(),
            help=f"{helps[name]} (default: {default})",
        )
    # each method parameter once, its help and default from every Params declaring it
    seen = set(field_types())
    methods = {**registered_params(), **_plugin_params(sys.argv[1:] if argv is None else argv)}
    declared: dict[str, list[str]] = {}
    for owner, params in methods.items():
        defaults, helps_ = params.defaults(), params.field_help()
        for name in params.field_types():
            if name not in seen:
                line = f"{owner.split(' ', 1)[1]}: {helps_[name]} (default: {defaults.get(name)})"
                declared.setdefault(name, []).append(line)
    group = parser.add_argument_group(
        "method parameters (each declared by its method's Params; set only with a method "
        "that declares it)"
    )
    for name, lines in declared.items():
        group.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=argparse.SUPPRESS,
            metavar=name.upper(),
            help="; ".join(dict.fromkeys(lines)),
        )
    parser.add_argument(
        "--out", default=None, help="rows file (.csv or .jsonl); default results/runs/<name>.csv"
    )
    parser.add_argument("--quiet", action="store_true", help="no per-round lines")
    return parser


def thread_warnings(config: RunConfig) -> list[str]:
    """A ``warning:`` line for more torch threads than this machine has cores.

    RunConfig refuses only absurd counts (its bound holds on every machine, as a config
    may run elsewhere); here the run is about to use this machine, whose cores are known.
    Threads beyond them only contend for the same cores: slower, same results."""
    cores = os.cpu_count() or 1
    if config.threads is not None and config.threads > cores:
        return [
            f"warning: threads={config.threads} is more than this machine's {cores} CPU "
            f"cores (the threads would share them: slower, same results)"
        ]
    return []


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The resolved config of the flags (flat names,
    :func:`~federated.config.run_config.flat_names`): its values checked, no file read;
    :class:`~federated.engine.round_loop.FederatedRun` checks it against its data."""
    values = {k: v for k, v in vars(args).items() if k not in ("out", "quiet")}
    return RunConfig.from_dict(values).resolved()


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write all rows atomically (a temp file renamed over the target)."""
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(r, default=str) + "\n" for r in rows)
    else:
        columns: list[str] = []
        for row in rows:
            columns.extend(k for k in row if k not in columns)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
        text = buf.getvalue()
    with atomic_open(path) as fh:
        fh.write(text)


def own_split_columns(row: dict[str, Any]) -> list[str]:
    """The row's means over parties of each party's own test split
    (``party_test_<stem>_mean``), in the row's order; empty where none was scored."""
    return [k for k in row if k.startswith("party_test_") and k.endswith("_mean") and "/" not in k]


def end_line(status: str, rows: list[dict[str, Any]], primary: str, out: Path) -> str:
    """The run's last line: the final pooled ``primary`` (``test_acc``) and, where the
    parties were scored on their own test splits, that mean first (what a personalised
    method is judged by); a pooled value not scored at the last round is the latest
    scored one, named with its round."""
    last = rows[-1]
    words = []
    stem = primary.removeprefix("test_")
    own = f"party_test_{stem}_mean"
    if isinstance(last.get(own), float) and not math.isnan(last[own]):
        words.append(f"final own-split {stem} (mean over parties) {last[own]:.4f}")
    scored = [r for r in rows if isinstance(r.get(primary), float) and not math.isnan(r[primary])]
    if not scored:
        words.append(f"{primary} not scored")
    elif scored[-1] is last:
        words.append(f"final {primary} {last[primary]:.4f}")
    else:
        words.append(f"{primary} {scored[-1][primary]:.4f} (round {scored[-1]['round']})")
    return f"status: {status}; {'; '.join(words)}; rows in {out}"


def format_row(row: dict[str, Any], rounds: int, hidden: Collection[str] = ()) -> str:
    """The console line of one round; the columns in ``hidden`` are the rows' only."""

    def num(key: str, fmt: str) -> str:
        value = row.get(key)
        return (
            "-"
            if value is None or (isinstance(value, float) and math.isnan(value))
            else fmt % value
        )

    # the task's test metrics in the row's order (classification's test_acc; a score
    # task's test_bin_acc, then its errors and correlations after the loss).  A
    # breakdown column (``stem/name``: detection's AP of each class) stays in the rows
    # and the CSV only: one per class would make the line as long as the class list
    metrics = [
        k
        for k in row
        if k.startswith("test_") and not k.endswith("_std") and "/" not in k and k not in hidden
    ]
    scores = "  ".join(f"{k} {num(k, '%.4f')}" for k in metrics)
    # a run that scores each party on its own test split is judged by that mean (a
    # personalised method's number): first, before the pooled test_ values
    own = own_split_columns(row)
    if own:
        scores = "  ".join(f"{k} {num(k, '%.4f')}" for k in own) + "  pooled " + scores
    text = f"round {row['round']:>3}/{rounds}  {scores}  train_loss {num('train_loss', '%.4f')}"
    if not math.isnan(row.get("con_loss", float("nan"))):
        text += f"  con_loss {row['con_loss']:.4f}"
    if "tau_end" in row:
        text += f"  tau_end {row['tau_end']:.4f}"
    spread = next((k for k in row if k.startswith("test_") and k.endswith("_std")), None)
    # a personal-model method's spread over parties, on the rounds that scored them
    # (NaN between its personal_test_every rounds: nothing to say, so nothing said)
    if spread is not None and num(spread, "%.4f") != "-":
        text += f"  (std over parties {row[spread]:.4f})"
    # the declared columns a round's line shows where the row has them (a DP run's
    # epsilon spent so far); nothing for a run without them
    text += console_words(row)
    return text + (
        f"  {num('round_seconds', '%.2f')} s  {num('samples_per_second', '%.0f')} samples/s"
    )


def partition_words(config: RunConfig) -> str:
    """``dirichlet partition (beta=0.5)``; natural partitions name their parties' source."""
    if config.partition == "natural" and config.partition_by:
        return f"natural partition (by column {config.partition_by})"
    if config.partition == "natural":
        return "natural partition (one folder per party)"
    if config.partition == "labels":
        return f"labels partition ({config.labels_per_party} per party)"
    if config.partition == "iid":
        return "iid partition"
    return f"{config.partition} partition (beta={config.beta})"


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    # the run says so in its own notice line (protocol_notices), once
    warnings.simplefilter("ignore", ExecutionAliasWarning)
    try:
        config = config_from_args(args)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"{config.algorithm}-{dataset_slug(config.dataset)}-seed{config.seed}-{stamp}"
        out = args.out or str(Path("results") / "runs" / f"{name}.csv")
        out = check_output_file(out, "--out")  # before any data loads (a str keeps a final /)
        if out.suffix not in ROW_FORMATS:  # write_rows would quietly write CSV under it
            raise InputError(
                f"--out={args.out!r}: the rows file must end in .csv or .jsonl "
                + (f"(not {out.suffix!r})" if out.suffix else "(it has no suffix)")
            )
    except (ConfigError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    remove_stale([config.party_state_dir])  # what killed runs left behind
    try:
        with warnings.catch_warnings(record=True) as notices:
            warnings.simplefilter("always", PackingFallback)
            # loads the data and checks the config against them and the model, first
            run = FederatedRun(config)
    except (ConfigError, DatasetUnavailableError, DeviceUnavailableError, PartitionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    config = run.config  # complete: what the data decide filled in
    given = [k for k in vars(args) if k not in ("out", "quiet")]
    written = {k: v for k, v in vars(args).items() if k in given}
    notices_before = [*inert_settings(config, given), *protocol_notices(config, written)]
    for line in [*notices_before, *thread_warnings(config)]:
        print(line, file=sys.stderr)
    left_out = left_out_words(config.partition_by or "", run.spec.left_out_parties)
    if left_out:
        print(left_out, file=sys.stderr)
    for notice in notices:
        one_line = (PackingFallback, StartNotice, FloorNotice, EmulatedPrecisionWarning)
        if issubclass(notice.category, one_line):  # one line each
            print(f"notice: {notice.message}", file=sys.stderr)
        else:
            warnings.showwarning(notice.message, notice.category, notice.filename, notice.lineno)
    if not args.quiet:
        stats = size_statistics(run.class_counts)
        print(
            f"{config.algorithm} on {config.dataset} ({config.model}), {config.n_parties} parties, "
            f"{partition_words(config)}, party size mean "
            f"{stats['mean']:.0f} std {stats['std']:.0f}, device {run.device}"
        )
    settings = config.to_dict()
    # a loss the task's evaluation never records (NaN in every row) stays in the rows only
    hidden = () if run.task.evaluates_loss else ("test_loss",)
    rows: list[dict[str, Any]] = []
    files = RunFiles.beside(out)  # X.parties.csv, X.representations/ next to the rows
    while not run.finished:
        try:
            row = run.run_round()
        except SpillSpaceError as err:  # the machine's disk, not fedsweep: one line
            print(f"error: {err}", file=sys.stderr)
            return exit_codes.INTERNAL_ERROR
        rows.append({**row, **{k: v for k, v in settings.items() if k not in row}})
        write_rows(out, rows)
        files.record(run)
        if not args.quiet:
            print(format_row(row, config.rounds, hidden), flush=True)
    status = (
        f"diverged at round {run.round} (non-finite loss){run.hooks.divergence_words()}"
        if run.diverged
        else "completed"
    )
    print(end_line(status, rows, f"test_{run.config.primary_metric}", out))
    return exit_codes.DIVERGED if run.diverged else exit_codes.OK


if __name__ == "__main__":
    from federated.runtime.process_exit import exit_process

    exit_process(main())
