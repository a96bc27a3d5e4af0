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
    without it.
``params.json`` (:func:`read_params`)
    a UTF-8 JSON object of scalars whose :class:`~federated.config.RunConfig` fields
    have the field's type (``rounds`` a whole number >= 1, ``beta`` a number, ...).
``result.json`` (:func:`read_result_rows`)
    one JSON object per line with a whole ``round`` >= 1 and numbers (or null) for the
    metrics the report reads; ``test_acc`` and the per-party accuracies in [0, 1].  A
    line that fails is skipped and described, so its trial is marked damaged.
``partitions.json`` (:func:`read_partitions`)
    a JSON list of partitions, each with a rectangular table of class counts.

A damaged file is never averaged in and never a traceback: the caller names it (the
report's "Trials not counted" and "Problems while reading") with its path and what is
wrong.  The field types come from the run's own config class (it imports neither torch
nor Ray), so this schema cannot drift from what runs write.
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Iterable
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any

from federated.config import RunConfig
from federated.results_contract import RESULT

# result.json metrics the report computes with: a number or null (NaN) on every row.
NUMERIC_METRICS = (
    "test_acc",
    "test_acc_std",
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
    "party_acc_mean",
    "party_acc_std",
    "party_acc_min",
    "party_acc_worst10",
)
# ... of which these are fractions of the test set: a value outside [0, 1] is garbage.
FRACTION_METRICS = (
    "test_acc",
    "test_acc_std",
    "party_acc_mean",
    "party_acc_std",
    "party_acc_min",
    "party_acc_worst10",
)

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


def read_json(path: Path) -> Any:
    """The parsed content of ``path``; :class:`DamagedFileError` when it is not UTF-8 JSON.

    NaN and Infinity are accepted, as Tune writes them.  A missing file raises
    :class:`FileNotFoundError` (the caller decides whether that is damage)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise DamagedFileError(f"{path}: cannot be read ({err.strerror or err})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DamagedFileError(f"{path}: not UTF-8 text (byte {err.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        where = "empty" if not text.strip() else f"line {err.lineno}: {err.msg}"
        raise DamagedFileError(f"{path}: not JSON ({where}; truncated or garbage)") from None
    except RecursionError:
        raise DamagedFileError(f"{path}: not JSON (nested too deeply)") from None


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
    """A trial's config, checked; :class:`DamagedFileError` (naming ``path``) otherwise."""
    config = read_json(path)
    problem = params_problem(config)
    if problem:
        raise DamagedFileError(f"{path}: {problem}")
    return config


# -------------------------------------------------------------------------- result
def row_problem(row: Any) -> str | None:
    """What is wrong with one parsed line of ``result.json``, or None.

    A line without ``round`` is not a round's report (Tune writes none such today, but
    a checkpoint-only report would be one): it is passed over, not damage."""
    if not isinstance(row, dict):
        return f"a JSON {_json_kind(row)}, not an object"
    number = row.get("round")
    if not _is_number(number) or not float(number).is_integer() or number < 1:
        return f"round={_shown(number)}"
    for key in NUMERIC_METRICS:
        value = row.get(key)
        if value is None:
            continue
        if not _is_number(value):
            return f"{key}={_shown(value)} is not a number"
        if key in FRACTION_METRICS and math.isfinite(value) and not 0.0 <= value <= 1.0:
            return f"{key}={_shown(value)} is not a fraction in [0, 1]"
    diverged = row.get("diverged")
    if diverged is not None and not isinstance(diverged, bool) and diverged not in TRUTH_WORDS:
        return f"diverged={_shown(diverged)} is not true/false"
    return None


def read_result_rows(
    path: str | Path, skipped: list[str] | None = None, *, complete: bool = False
) -> list[dict[str, Any]]:
    """The rows of a ``result.json``, one per round, the last occurrence of a round kept.

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
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            if number - 1 != last or complete:
                what = "not JSON (cut short?)" if number - 1 == last else "not JSON"
                skipped.append(f"line {number} of {RESULT} is {what}")
            continue  # the last line: half-written by a running trial
        if isinstance(row, dict) and "round" not in row:
            continue
        problem = row_problem(row)
        if problem:
            skipped.append(f"line {number} of {RESULT}: {problem}")
            continue
        row.pop("config", None)  # params.json holds the config
        by_round[int(row["round"])] = row  # a restore repeats rounds: the last wins
    return [by_round[r] for r in sorted(by_round)]


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
