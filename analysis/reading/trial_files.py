"""Every file of a results folder read through one checker per file kind.

A results folder comes from disk, where anything can happen to it: a disk that filled
mid-write, a copy cut short, an editor that saved another encoding, a hand-made or
foreign folder.  Each kind of file the report reads has one function here that reads it
and checks it against what ``study.sweep`` writes, so that the rest of the analysis sees
only well-typed values:

``fedsweep_sweep.json`` (:func:`read_manifest`)
    a UTF-8 JSON object whose known fields have their types (``trials`` an object of
    objects, ``status`` a string, ``seeds`` a list, ...).  A manifest that fails is
    refused as a whole (:class:`DamagedFileError`): nothing of the sweep can be read safely
    without it.  A ``--rerun-best`` sweep's link to its search and record of the choice
    (``rerun_of``, ``selection``) are checked apart (:func:`read_rerun_record`): damaged,
    they leave the rerun's comparison with its search out, never the rerun's trials.
``params.json`` (:func:`read_params`)
    a UTF-8 JSON object of scalars whose :class:`~federated.config.run_config.RunConfig` fields
    have the field's type (``rounds`` a whole number >= 1, ``beta`` a number, ...).
``result.json`` (:func:`read_result_rows`)
    one JSON object per line with a whole ``round`` >= 1 and numbers (or null) for the
    metrics the report reads (every built-in task's ``test_``/``val_`` metrics: a score
    trial's ``test_srcc='abc'`` is damage); ``test_acc``, a score trial's
    ``test_bin_acc`` and the per-party accuracies in [0, 1].  A line that fails is
    skipped and described, so its trial is marked damaged.
``partitions.json`` (:func:`read_partitions`)
    a JSON list of partitions, each with a rectangular table of class counts.
``parties.csv`` (:func:`read_parties`)
    UTF-8 CSV ending in a line end, with the columns ``round``, ``party`` and a
    per-party metric (``party_acc``, a score trial's ``party_bin_acc``, a plug-in task's
    ``party_<metric>``; and those of federated/engine/run_files.py), every row complete:
    ``round`` a whole number >= 1, ``party`` a whole number >= 0 named once per round,
    the per-party accuracies (``party_acc``, ``party_val_acc``, ``party_bin_acc`` ...)
    fractions in [0, 1] or NaN (not scored that round), counts whole.  Runs append a
    round at a time: of a running or interrupted trial the report reads the file without
    an incomplete last append (a cut last line, a last round short of rows), and it
    names the rounds ``result.json`` scored per party that the file lacks.
``representations/round_NNNN.npz`` (:func:`read_representation`)
    a numpy archive (no pickled object) with ``round`` and ``party`` whole scalars,
    ``labels`` (n,) whole classes >= 0, ``global_z`` and ``local_z`` (n, d) finite
    floats, n >= :data:`MIN_CAPTURE_POINTS`; ``round`` the file name's.
``feature_examples.npz`` (:func:`read_feature_examples`)
    a numpy archive (no pickled object) with ``images`` (S, P, K, C, H, W) finite
    floats in [0, 1], C 1 or 3, ``settings`` (S,) text, ``parties`` (S, P) whole
    numbers and ``levels`` (S, P) finite numbers.

The per-trial files besides ``params.json`` and ``result.json`` are parts of a trial: a
damaged one leaves that part out ("not counted": its figure or data file without it)
and the rest of the trial counts.  Numpy archives are opened with
``allow_pickle=False``: an archive holding a pickled object is damaged, never unpickled.

A damaged file is never averaged in and never a traceback: the caller names it (the
report's "Trials not counted" and "Problems while reading") with its path and what is
wrong.  The field types come from the run's own config class (it imports neither torch
nor Ray), so this schema cannot drift from what runs write.

Older score trials recorded their binary accuracy as ``acc`` (``test_acc``,
``party_acc_mean``, parties.csv's ``party_acc`` ..., ``primary_metric = "acc"``): the
readers give them under today's name (``bin_acc``) through the one adapter for older
folders (:mod:`analysis.folder_task`), so the rest of the analysis sees one name per
metric.  Each column of a metric is checked against the range its task declares (the
trial's ``task_spec``; rows that name no task: classification's).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from analysis.folder_task import current_metric, current_name, rows_task
from federated.cli.error_reason import error_reason
from federated.config.run_config import RunConfig
from federated.contract.columns import RUN_COLUMNS
from federated.contract.metrics import LOSS, MetricSpec
from federated.contract.results import RESULT, representation_file

# result.json columns the report computes with whatever the task: a number or null (NaN)
# on every row where present
RUN_NUMERIC_COLUMNS = (
    "test_loss",
    "train_loss",
    "con_loss",
    "train_seconds",
    "eval_seconds",
    "round_seconds",
    "samples_per_second",
    "bytes_up",
    "bytes_down",
    "cum_bytes",
)
_METRIC_COLUMN = re.compile(
    r"^(?:search_test|party_test|party_val|test|val|party)_(?P<stem>[a-z0-9_]+?)"
    r"(?:_std|_mean|_min|_worst10)?(?:/.+)?$"
)


@cache  # asked for every row of every result.json the report reads
def task_numeric_columns(specs: tuple[MetricSpec, ...]) -> tuple[str, ...]:
    """The columns of a run of a task of ``specs`` that the report ranks and averages,
    so each must be a number or null where a row has it: every declared summary column
    (:data:`~federated.contract.columns.RUN_COLUMNS`: pooled, validation, per-party and
    own-split families) of each metric and, where a family records it, of the loss,
    with :data:`RUN_NUMERIC_COLUMNS`.  One party's own column (``party_acc/<party>``) is
    no summary: it is checked where the per-party values are read."""
    stems = tuple(dict.fromkeys(s.stem for s in specs))
    declared = tuple(
        family.column(stem)
        for family in RUN_COLUMNS
        if "<party>" not in family.pattern
        for stem in (stems if family.metrics_only else (LOSS, *stems))
    )
    return tuple(dict.fromkeys((*RUN_NUMERIC_COLUMNS, *declared)))


def _spec_of_column(column: str, specs: tuple[MetricSpec, ...]) -> MetricSpec | None:
    """The metric of ``specs`` a row's ``column`` holds a value of, or None."""
    match = _METRIC_COLUMN.match(column)
    if match is None:
        return None
    return next((spec for spec in specs if spec.stem == match["stem"]), None)


def _task_specs(specs: tuple[MetricSpec, ...] | None) -> tuple[MetricSpec, ...]:
    """``specs``, or those of rows that name no task where none are given."""
    untasked = rows_task(None)
    return (untasked.metrics if untasked else ()) if specs is None else specs


# ``diverged`` as a word (rows converted from CSV by other tools) reads as a bool.
TRUTH_WORDS = ("true", "false", "True", "False")

# Manifest fields the report reads, with the JSON type each must have when present.
MANIFEST_TYPES: dict[str, tuple[type, ...]] = {
    "trials": (dict,),
    "study": (str,),
    "paper": (str,),
    "search": (str,),
    "budget": (str,),
    "dataset": (str,),
    "started": (str,),
    "status": (str,),
    "scheduler": (str,),
    "seeds": (list,),
    "axes": (list,),
    "label_columns": (list,),
    "overrides": (dict,),
    "definition": (dict,),
    "n_trials": (int,),
    "not_started": (int,),
}
# ... and the fields of each trial's entry in ``trials``.
MANIFEST_TRIAL_TYPES: dict[str, tuple[type, ...]] = {
    "status": (str,),
    "error": (str,),
    "last_round": (int,),
}


class DamagedFileError(ValueError):
    """A file of a results folder that cannot be read as what it should be.

    The message is one line naming the path and what is wrong with it."""


def _shown(value: Any) -> str:
    """A value for a one-line message, cut short (a garbage file may hold megabytes)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_text(path: Path) -> str:
    """``path``'s UTF-8 text; :class:`DamagedFileError` naming it when it cannot be read
    or is not UTF-8.  A missing file raises :class:`FileNotFoundError` (the caller decides
    whether that is damage)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise DamagedFileError(f"{path}: cannot be read ({err.strerror or err})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DamagedFileError(f"{path}: not UTF-8 text (byte {err.start})") from None


def read_json(path: Path) -> Any:
    """The parsed content of ``path``; :class:`DamagedFileError` when it is not UTF-8 JSON.

    NaN and Infinity are accepted, as Tune writes them.  A missing file raises
    :class:`FileNotFoundError` (the caller decides whether that is damage)."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        where = "empty" if not text.strip() else f"line {err.lineno}: {err.msg}"
        raise DamagedFileError(f"{path}: not JSON ({where}; truncated or garbage)") from None
    except RecursionError:
        raise DamagedFileError(f"{path}: not JSON (nested too deeply)") from None
    except ValueError:  # an integer beyond Python's 4,300-digit int-str limit
        raise DamagedFileError(f"{path}: not JSON (an integer of over 4,300 digits)") from None


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ----------------------------------------------------------------------- manifest
def read_manifest(path: Path) -> dict[str, Any]:
    """A sweep's manifest, checked; :class:`DamagedFileError` (naming ``path``) otherwise."""
    try:
        manifest = read_json(path)
    except FileNotFoundError:
        raise DamagedFileError(f"{path}: missing") from None
    if not isinstance(manifest, dict):
        raise DamagedFileError(f"{path}: not a sweep manifest (a JSON {_json_kind(manifest)})")
    for key, kinds in MANIFEST_TYPES.items():
        value = manifest.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise DamagedFileError(
                f"{path}: field {key}={_shown(value)} is not a {_kind_words(kinds)}"
            )
    for name, entry in (manifest.get("trials") or {}).items():
        if not isinstance(entry, dict):
            raise DamagedFileError(f"{path}: trials[{name!r}]={_shown(entry)} is not an object")
        for key, kinds in MANIFEST_TRIAL_TYPES.items():
            value = entry.get(key)
            if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
                raise DamagedFileError(
                    f"{path}: trials[{name!r}].{key}={_shown(value)} is not a {_kind_words(kinds)}"
                )
    for key in ("n_trials", "not_started"):
        if _is_whole(manifest.get(key)) and manifest[key] < 0:
            raise DamagedFileError(f"{path}: field {key}={manifest[key]} is negative")
    return manifest


@dataclass(frozen=True)
class RerunRecord:
    """A ``--rerun-best`` sweep's link to the search it repeats a choice of, checked.

    Attributes:
        rerun_of: the search sweep's folder name (None: missing or damaged).
        selection: the record of the choice (``metric``, ``point``, the search's test
            values and seeds; None: missing or damaged).
        problems: one line per damaged part, naming the manifest's path and what of the
            report it leaves out.
    """

    rerun_of: str | None
    selection: dict[str, Any] | None
    problems: tuple[str, ...]


def read_rerun_record(manifest: dict[str, Any], path: Path) -> RerunRecord:
    """The ``rerun_of`` and ``selection`` of a rerun sweep's manifest (``path``: the
    manifest, for the messages).  A missing or garbled part is None and described: a
    rerun without its link is not compared with any search, one without its record of
    the choice is shown without the search's numbers (no optimism)."""
    problems = []
    rerun_of = manifest.get("rerun_of")
    if not isinstance(rerun_of, str) or not rerun_of.strip():
        what = "no rerun_of" if rerun_of in (None, "") else f"rerun_of={_shown(rerun_of)}"
        problems.append(
            f"{path}: {what} (the search whose choice this sweep reruns is not named); the "
            "rerun is shown on its own, not beside its search's choice"
        )
        rerun_of = None
    selection = manifest.get("selection")
    problem = selection_problem(selection)
    if problem:
        problems.append(
            f"{path}: {problem}; the rerun's comparison with its search (what the search "
            "saw, the optimism) is left out"
        )
        selection = None
    return RerunRecord(rerun_of, selection, tuple(problems))


def selection_problem(selection: Any) -> str | None:
    """What is wrong with a rerun's ``selection`` record, or None: an object with the
    ranking ``metric`` and the chosen ``point`` as text, ``search_seeds`` a list of whole
    numbers and each ``search_test_<metric>`` a list of numbers (null where a trial had
    none)."""
    if selection is None:
        return "no selection record (the configuration the rerun repeats)"
    if not isinstance(selection, dict):
        return f"selection={_shown(selection)} is not an object"
    for key in ("metric", "point"):
        value = selection.get(key)
        if not isinstance(value, str) or not value:
            return f"selection.{key}={_shown(value)} is not a name"
    seeds = selection.get("search_seeds")
    if seeds is not None and not (isinstance(seeds, list) and all(map(_is_whole, seeds))):
        return f"selection.search_seeds={_shown(seeds)} is not a list of seeds"
    for key, values in selection.items():
        if not key.startswith("search_test_"):
            continue
        if not isinstance(values, list) or not all(v is None or _is_number(v) for v in values):
            return f"selection.{key}={_shown(values)} is not a list of numbers"
    return None


def _json_kind(value: Any) -> str:
    names = {list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _kind_words(kinds: Iterable[type]) -> str:
    words = {dict: "JSON object", list: "list", str: "string", int: "whole number"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


# -------------------------------------------------------------------------- params
@cache
def _config_types() -> dict[str, tuple[str, bool]]:
    """RunConfig field -> (``int``/``float``/``bool``/``str``, whether None is allowed)."""
    hints = typing.get_type_hints(RunConfig)
    out: dict[str, tuple[str, bool]] = {}
    for f in fields(RunConfig):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        base = [a for a in args if a is not type(None)]
        if len(base) == 1 and base[0] in (int, float, bool, str):
            out[f.name] = (base[0].__name__, type(None) in args)
    return out


def params_problem(config: Any) -> str | None:
    """What is wrong with a parsed ``params.json``, or None when it is well-typed."""
    if not isinstance(config, dict):
        return f"not a JSON object (a JSON {_json_kind(config)})"
    expected = _config_types()
    for key, value in config.items():
        if value is not None and not isinstance(value, (str, int, float, bool)):
            return f"{key}={_shown(value)} is not a single value"
        if key not in expected:
            continue  # labels (point, study, setting) and method options: any scalar
        kind, optional = expected[key]
        if value is None:
            if not optional:
                return f"{key}=null (a {kind} is required)"
            continue
        ok = {
            "int": _is_whole(value),
            "float": _is_number(value),
            "bool": isinstance(value, bool),
            "str": isinstance(value, str),
        }[kind]
        if not ok:
            words = {"int": "whole number", "float": "number", "bool": "true/false"}
            return f"{key}={_shown(value)} is not a {words.get(kind, 'string')}"
    rounds = config.get("rounds")
    if rounds is None:
        return "no rounds field"
    if rounds < 1:
        return f"rounds={rounds} (a trial runs at least 1)"
    return None


def read_params(path: Path) -> dict[str, Any]:
    """A trial's config, checked; :class:`DamagedFileError` (naming ``path``) otherwise.
    An older score trial's ``primary_metric = "acc"`` reads as today's ``bin_acc``."""
    config = read_json(path)
    problem = params_problem(config)
    if problem:
        raise DamagedFileError(f"{path}: {problem}")
    primary = config.get("primary_metric")
    if isinstance(primary, str):
        config["primary_metric"] = current_metric(primary, config.get("task"))
    return config


# -------------------------------------------------------------------------- result
def row_problem(row: Any, specs: tuple[MetricSpec, ...] | None = None) -> str | None:
    """What is wrong with one parsed line of ``result.json`` of a run of a task of
    ``specs`` (None: rows that name no task), or None.

    A line without ``round`` is not a round's report (Tune writes none such today, but
    a checkpoint-only report would be one): it is passed over, not damage."""
    if not isinstance(row, dict):
        return f"a JSON {_json_kind(row)}, not an object"
    number = row.get("round")
    if not _is_number(number) or not float(number).is_integer() or number < 1:
        return f"round={_shown(number)}"
    specs = _task_specs(specs)
    for key in task_numeric_columns(specs):
        value = row.get(key)
        if value is None:
            continue
        if not _is_number(value):
            return f"{key}={_shown(value)} is not a number"
    for key, value in row.items():
        spec = _spec_of_column(key, specs)
        if spec is None or not _is_number(value) or not math.isfinite(value):
            continue
        if not spec.holds(value):
            low, high = spec.bounds
            return f"{key}={_shown(value)} is outside {spec.name}'s range [{low:g}, {high:g}]"
    diverged = row.get("diverged")
    if diverged is not None and not isinstance(diverged, bool) and diverged not in TRUTH_WORDS:
        return f"diverged={_shown(diverged)} is not true/false"
    return None


def read_result_rows(
    path: str | Path,
    skipped: list[str] | None = None,
    *,
    complete: bool = False,
    task: object = None,
    specs: tuple[MetricSpec, ...] | None = None,
) -> list[dict[str, Any]]:
    """The rows of a ``result.json``, one per round, the last occurrence of a round kept;
    ``task``: the trial's (its ``params.json``'s), whose older column names read as
    today's (a score trial's ``test_acc`` as ``test_bin_acc``); ``specs``: its task's
    metrics, whose columns are checked by their ranges (None: rows that name no task).

    Lines are JSON objects (NaN allowed, as Tune writes them).  A last line that does not
    parse is the one being appended by a running trial and is ignored, unless
    ``complete`` (the sweep ended, nothing is appending: it is a truncated file); any
    other line that is not UTF-8 JSON or fails :func:`row_problem` is skipped and
    described in ``skipped`` (the caller marks the trial damaged).
    """
    path = Path(path)
    skipped = skipped if skipped is not None else []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        skipped.append(f"{RESULT} cannot be read ({err.strerror or err})")
        return []
    by_round: dict[int, dict[str, Any]] = {}
    lines = data.split(b"\n")
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError):
            if number - 1 != last or complete:
                what = "not JSON (cut short?)" if number - 1 == last else "not JSON"
                skipped.append(f"line {number} of {RESULT} is {what}")
            continue  # the last line: half-written by a running trial
        if isinstance(row, dict) and "round" not in row:
            continue
        if isinstance(row, dict):
            row = {current_name(k, task): v for k, v in row.items()}
        problem = row_problem(row, specs)
        if problem:
            skipped.append(f"line {number} of {RESULT}: {problem}")
            continue
        row.pop("config", None)  # params.json holds the config
        by_round[int(row["round"])] = row  # a restore repeats rounds: the last wins
    return [by_round[r] for r in sorted(by_round)]


def config_from_result_rows(path: str | Path) -> dict[str, Any] | None:
    """The trial's config as Tune wrote it into its last round row (``"config"``), checked
    as ``params.json`` is; None when no whole row carries one that passes."""
    try:
        lines = Path(path).read_bytes().split(b"\n")
    except OSError:
        return None
    for raw in reversed(lines):
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            continue  # the line cut short, or an empty one
        config = row.get("config") if isinstance(row, dict) else None
        if isinstance(config, dict) and params_problem(config) is None:
            return config
    return None


# ---------------------------------------------------------------------- partitions
def partition_problem(entry: Any) -> str | None:
    """What is wrong with one entry of ``partitions.json``, or None."""
    if not isinstance(entry, dict):
        return f"an entry is a JSON {_json_kind(entry)}, not an object"
    counts = entry.get("class_counts")
    if not isinstance(counts, list) or not counts:
        return "an entry has no class_counts table"
    if not all(isinstance(row, list) and row for row in counts):
        return "class_counts has a row that is not a list of counts"
    if not all(_is_number(v) and math.isfinite(v) and v >= 0 for row in counts for v in row):
        return "class_counts holds a value that is not a count"
    if len({len(row) for row in counts}) != 1:
        return "class_counts has rows of different lengths"
    n_parties = entry.get("n_parties", len(counts))
    if n_parties != len(counts):
        return f"n_parties={_shown(n_parties)} but class_counts has {len(counts)} rows"
    return None


def read_partitions(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The well-formed entries of ``partitions.json`` and what was wrong, if anything.

    A missing file is no partitions and no problem (sweeps of old versions wrote none);
    a file that is not a JSON list of well-formed entries gives the entries that are
    and a one-line problem naming ``path`` (their figures are skipped)."""
    try:
        value = read_json(path)
    except FileNotFoundError:
        return [], None
    except DamagedFileError as err:
        return [], f"{err}; no partition figure drawn"
    if not isinstance(value, list):
        return [], f"{path}: not a list of partitions; no partition figure drawn"
    good, problems = [], []
    for entry in value:
        problem = partition_problem(entry)
        if problem:
            problems.append(problem)
        else:
            good.append(entry)
    if problems:
        return good, (
            f"{path}: {problems[0]} ({len(problems)} of {len(value)} entries damaged; "
            "their figures are skipped)"
        )
    return good, None


# ------------------------------------------------------------------------- parties
PARTY_COLUMNS = ("round", "party")  # and a per-party metric; the rest optional
# columns of whole counts, and of fractions (NaN, or empty, where a round was not scored
# or a party not validated: federated/engine/run_files.py)
PARTY_COUNT_COLUMNS = ("party_samples", "party_val_samples", "party_test_samples")


def read_parties(
    path: Path,
    task: object = None,
    *,
    appending: bool = False,
    problems: list[str] | None = None,
    scored_rounds: Iterable[int] | None = None,
    specs: tuple[MetricSpec, ...] | None = None,
) -> list[dict[str, Any]]:
    """A trial's ``parties.csv`` as rows of numbers (``round``, ``party``, a per-party
    metric such as ``party_acc`` and whatever other columns it has; NaN where a value is
    not recorded), checked; :class:`DamagedFileError` (naming ``path``) otherwise.
    ``task``: the trial's, whose older column names read as today's (a score trial's
    ``party_acc`` as ``party_bin_acc``).  A missing file raises
    :class:`FileNotFoundError` (the trial scored no party).

    A run appends each scored round's rows (federated/engine/run_files.py), so while it
    runs, or after it was stopped mid-write, the file may end in a last line without
    its line end and a last round short of rows.  With ``appending`` (the trial is
    running or was interrupted) such an append is left out and described in
    ``problems``; otherwise a cut file is damage, as it is for a finished trial (a
    restored trial drops the cut line before it appends again).  ``scored_rounds``: the
    rounds whose per-party scores ``result.json`` reports; those the file lacks (a run
    restored without its earlier file) are described in ``problems``.  ``specs``: the
    trial's task's metrics, whose columns are checked by their ranges (None: rows that
    name no task)."""
    text = read_text(path)
    if not text.strip():
        raise DamagedFileError(f"{path}: empty")
    cut = not text.endswith("\n")  # the writer ends every row: a cut file loses rows
    if cut and not appending:
        raise DamagedFileError(f"{path}: cut short (its last line has no line end)")
    if cut:
        text = text[: text.rfind("\n") + 1]
        if not text.strip():
            raise DamagedFileError(f"{path}: cut short (no complete header line)")
    reader = csv.reader(io.StringIO(text))
    header = [current_name(c, task) for c in next(reader)]
    missing = [c for c in PARTY_COLUMNS if c not in header]
    if not [c for c in header if c.startswith("party_") and c not in PARTY_COUNT_COLUMNS]:
        missing.append("party_<metric>")
    if missing:
        raise DamagedFileError(f"{path}: no {', '.join(missing)} column (header {_shown(header)})")
    rows: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    for number, cells in enumerate(reader, 2):
        if not cells:
            continue
        if len(cells) != len(header):
            raise DamagedFileError(
                f"{path}: line {number} has {len(cells)} fields, the header {len(header)}"
            )
        values: dict[str, Any] = {}
        for column, cell in zip(header, cells):
            value, problem = _party_value(column, cell, _task_specs(specs))
            if problem:
                raise DamagedFileError(f"{path}: line {number}: {column}={_shown(cell)} {problem}")
            values[column] = value
        key = (values["round"], values["party"])
        if key in seen:
            raise DamagedFileError(f"{path}: line {number}: party {key[1]} twice in round {key[0]}")
        seen.add(key)
        rows.append(values)
    if appending:
        rows = _complete_rounds(path, rows, cut, problems if problems is not None else [])
    if not rows:
        raise DamagedFileError(f"{path}: a header and no rows")
    if problems is not None and scored_rounds is not None:
        scored = sorted(set(scored_rounds))
        lacking = sorted(set(scored) - {row["round"] for row in rows})
        if lacking:
            one = len(lacking) == 1
            problems.append(
                f"{path}: lacks {'round' if one else 'rounds'} {_round_ranges(lacking)} "
                f"({len(lacking)} of the {len(scored)} rounds {RESULT} scored per party); "
                f"{'that round is' if one else 'those rounds are'} not counted"
            )
    return rows


def _complete_rounds(
    path: Path, rows: list[dict[str, Any]], cut: bool, problems: list[str]
) -> list[dict[str, Any]]:
    """``rows`` without an unfinished last round (fewer rows than another round: an
    append cut short; every round holds a row per party), saying in ``problems`` what
    was left out (with the cut line)."""
    counts: dict[int, int] = {}
    for row in rows:
        counts[row["round"]] = counts.get(row["round"], 0) + 1
    last = rows[-1]["round"] if rows else None
    short = last is not None and counts[last] < max(counts.values())
    if short:
        rows = [row for row in rows if row["round"] != last]
    left = ["the cut last line"] if cut else []
    if short:
        left.append(f"round {last}'s {counts[last]} of {max(counts.values())} rows")
    if left:
        problems.append(
            f"{path}: its last append is incomplete (the trial was writing it, or was "
            f"stopped mid-write); left out: {' and '.join(left)}"
        )
    return rows


def _round_ranges(rounds: list[int]) -> str:
    """Sorted round numbers as ranges: ``[1, 2, 3, 5]`` -> ``1-3, 5``."""
    spans: list[list[int]] = []
    for r in rounds:
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


_WHOLE = re.compile(r"[0-9]+")


def _party_value(column: str, cell: str, specs: tuple[MetricSpec, ...]) -> tuple[Any, str | None]:
    """One cell of ``parties.csv`` of a run of a task of ``specs`` as its number, or
    what is wrong with it (a metric's value outside its declared range)."""
    if column in ("round", "party"):
        if not _WHOLE.fullmatch(cell) or (column == "round" and int(cell) < 1):
            return None, f"is not a whole number >= {1 if column == 'round' else 0}"
        return int(cell), None
    if cell == "":
        return math.nan, None  # a value this row does not record
    if column in PARTY_COUNT_COLUMNS:
        if not _WHOLE.fullmatch(cell):
            return None, "is not a whole number"
        return int(cell), None
    try:
        value = float(cell)
    except ValueError:
        if column.startswith("party_"):
            return None, "is not a number"
        return cell, None  # a column of another tool: kept as text
    spec = _spec_of_column(column, specs)
    if spec is not None and math.isfinite(value) and not spec.holds(value):
        low, high = spec.bounds
        if (low, high) == (0.0, 1.0):
            return None, "is not a fraction in [0, 1]"
        return None, f"is outside {spec.name}'s range [{low:g}, {high:g}]"
    if math.isinf(value):
        return None, "is infinite"
    return value, None


# ------------------------------------------------------------------ numpy archives
MIN_CAPTURE_POINTS = 4  # fewer points than this draw no t-SNE map
CAPTURE_KEYS = ("round", "party", "labels", "global_z", "local_z")
EXAMPLE_KEYS = ("images", "settings", "parties", "levels")
ZIP_MAGIC = b"PK\x03\x04"  # a .npz is a zip archive


def _read_npz(path: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``keys`` of the numpy archive ``path``, never unpickling; :class:`DamagedFileError`
    (naming ``path``) when it is not an archive holding each of them as a plain array."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise DamagedFileError(f"{path}: cannot be read ({err.strerror or err})") from None
    if magic != ZIP_MAGIC:  # np.load would try it as a pickle (refused) or a lone array
        raise DamagedFileError(f"{path}: not a numpy archive (.npz); garbage or emptied")
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in keys if k not in npz.files]
            if missing:
                raise DamagedFileError(f"{path}: no {', '.join(missing)} array in it")
            return {k: npz[k] for k in keys}
    except DamagedFileError:
        raise
    except FileNotFoundError:
        raise
    except ValueError as err:
        if "allow_pickle" in str(err):
            raise DamagedFileError(
                f"{path}: holds a pickled object (never unpickled: numpy arrays only)"
            ) from None
        raise DamagedFileError(f"{path}: not a numpy archive ({_first_line(err)})") from None
    except Exception as err:  # zipfile, zlib, EOF errors: a cut or garbage file
        raise DamagedFileError(
            f"{path}: not a complete numpy archive ({type(err).__name__}: {_first_line(err)};"
            " truncated?)"
        ) from None


def _first_line(err: BaseException) -> str:
    return error_reason(err, default="")


def _whole_scalar(value: np.ndarray) -> bool:
    return value.shape == () and value.dtype.kind in "iu"


def read_representation(path: Path) -> dict[str, np.ndarray]:
    """One ``representations/round_NNNN.npz``, checked (module docstring);
    :class:`DamagedFileError` (naming ``path``) otherwise."""
    arrays = _read_npz(path, CAPTURE_KEYS)
    for key in ("round", "party"):
        if not _whole_scalar(arrays[key]):
            raise DamagedFileError(
                f"{path}: {key} is a {arrays[key].dtype} array of shape "
                f"{arrays[key].shape}, not a whole number"
            )
    if int(arrays["round"]) < 1 or representation_file(int(arrays["round"])) != path.name:
        raise DamagedFileError(f"{path}: round={int(arrays['round'])} does not match its name")
    if int(arrays["party"]) < 0:
        raise DamagedFileError(f"{path}: party={int(arrays['party'])} is negative")
    labels = arrays["labels"]
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise DamagedFileError(
            f"{path}: labels is a {labels.dtype} array of shape {labels.shape}, "
            "not a list of whole classes"
        )
    if labels.size and labels.min() < 0:
        raise DamagedFileError(f"{path}: labels holds a negative class")
    for key in ("global_z", "local_z"):
        z = arrays[key]
        if z.ndim != 2 or z.dtype.kind != "f":
            raise DamagedFileError(
                f"{path}: {key} is a {z.dtype} array of shape {z.shape}, not (n, d) floats"
            )
        if z.shape[0] != len(labels) or z.shape[1] < 1:
            raise DamagedFileError(
                f"{path}: {key} has shape {z.shape}, but there are {len(labels)} labels"
            )
        if not np.isfinite(z).all():
            raise DamagedFileError(f"{path}: {key} holds NaN or infinite values")
    if arrays["global_z"].shape != arrays["local_z"].shape:
        raise DamagedFileError(
            f"{path}: global_z {arrays['global_z'].shape} and local_z "
            f"{arrays['local_z'].shape} differ in shape"
        )
    if len(labels) < MIN_CAPTURE_POINTS:
        raise DamagedFileError(
            f"{path}: {len(labels)} points (a map needs at least {MIN_CAPTURE_POINTS})"
        )
    return arrays


def read_feature_examples(path: Path) -> dict[str, np.ndarray]:
    """A sweep's ``feature_examples.npz``, checked (module docstring);
    :class:`DamagedFileError` (naming ``path``) otherwise, :class:`FileNotFoundError`
    when it has none."""
    arrays = _read_npz(path, EXAMPLE_KEYS)
    images, settings = arrays["images"], arrays["settings"]
    if images.ndim != 6 or images.dtype.kind != "f":
        raise DamagedFileError(
            f"{path}: images is a {images.dtype} array of shape {images.shape}, "
            "not (settings, parties, images, C, H, W) floats"
        )
    n_settings, n_parties = images.shape[:2]
    if 0 in images.shape or images.shape[3] not in (1, 3):
        raise DamagedFileError(f"{path}: images has shape {images.shape} (C must be 1 or 3)")
    if not np.isfinite(images).all() or images.min() < 0 or images.max() > 1:
        raise DamagedFileError(f"{path}: images holds values outside [0, 1] (or NaN)")
    if settings.shape != (n_settings,) or settings.dtype.kind != "U":
        raise DamagedFileError(
            f"{path}: settings is a {settings.dtype} array of shape {settings.shape}, "
            f"not {n_settings} names"
        )
    for key, kinds in (("parties", "iu"), ("levels", "iuf")):
        value = arrays[key]
        if value.shape != (n_settings, n_parties) or value.dtype.kind not in kinds:
            raise DamagedFileError(
                f"{path}: {key} is a {value.dtype} array of shape {value.shape}, "
                f"not ({n_settings}, {n_parties}) numbers"
            )
        if not np.isfinite(value).all():
            raise DamagedFileError(f"{path}: {key} holds NaN or infinite values")
    return arrays
