"""Reading sweep results (as ``study.sweep`` writes them) into one tidy table.

:func:`load_results` takes one or more paths, each a sweep directory (it holds
``fedsweep_sweep.json``; layout in :mod:`study.sweep_folder`) or a folder of sweep directories
(e.g. ``./results``), and returns :class:`Results`:

``rounds``
    one row per (trial, round): ``sweep``, ``trial`` (the trial folder's name),
    ``status``, the trial's config (every column of its ``params.json``: all RunConfig
    fields plus the labels ``point``, ``study``, ``budget`` and joint-axis labels such
    as ``setting``), then the round's metrics (``round``, ``test_acc`` as a fraction in
    [0, 1], ...; see :mod:`federated.engine.round_loop`).
``trials``
    one row per trial, including trials with no round yet: ``status``, ``error``,
    ``rounds_done``, ``last_round``, its primary metric's columns named from its
    declared stem (``final_<stem>``: the test value at the last round, ``final_<stem>_std``:
    the spread over parties' own models there, ``best_<stem>`` / ``best_<stem>_round``:
    the best over rounds; ``final_acc`` for classification, ``final_map50`` for
    detection), ``execution_path`` (the path its parties trained on,
    as its rows recorded it: ``packed``, ``sequential``; None in older rows), ``order``
    (reading order: sweeps in the order given, within a sweep by trial id, as Tune
    numbers trials in the order it creates them, i.e. grid or Optuna order), and the
    config columns.

Trial status (nothing is silently dropped; tables count only ``completed`` trials): the
words and the one function that decides them are the results contract's
(:mod:`federated.contract.results`, the sweep's summary uses the same); this module adds
``damaged``: its files lost rounds (lines of ``result.json`` that do not parse, not the
last one of a running trial, or fewer rounds than the manifest recorded) or its
``params.json`` cannot be read; ``error`` says what.  A trial's other files
(``parties.csv``, ``representations/``) are checked when the report reads them
(:mod:`analysis.reading.trial_files`): a damaged one leaves that part of the trial out, named.

A sweep whose manifest says ``running`` but whose driver process (recorded in the
manifest) is gone from this host was killed: it is read as ``interrupted``.  Trials an
interrupted sweep never started are named in ``problems``.  Damaged files never stop the
reading: a sweep whose manifest does not parse is skipped (in ``problems``) when other
sweeps are read with it.

A sweep that is still being written is read safely: ``result.json`` is read line by
line and a last line that is not complete JSON (being appended) is ignored; a
``params.json`` that does not parse yet skips its trial (noted in ``problems``); the
manifest and ``partitions.json`` are written atomically by ``study``.  A round reported
twice (a trial restored from a checkpoint repeats rounds) keeps its last occurrence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.folder_task import TASK_SPEC, current_name, sweep_task, trial_task
from analysis.primary_metric import PrimaryMetricError, trial_metric
from analysis.reading.trial_files import (
    DamagedFileError,
    config_from_result_rows,
    read_manifest,
    read_params,
    read_partitions,
    read_result_rows,
)
from federated.contract.results import (
    COMPLETED,
    DAMAGED,
    DIVERGED,
    ERROR,
    FAILED,
    INTERRUPTED,
    MANIFEST,
    NOT_STARTED,
    PARAMS,
    PARTITIONS,
    RECORDED_ERROR,
    RESULT,
    RUNNING,
    STATUSES,
    STOPPED,
    SWEEP_FINISHED,
    SWEEP_INTERRUPTED,
    SWEEP_RUNNING,
    SWEEP_STATUSES,
    trial_status,
)
from federated.contract.task_spec import TaskSpec
from study.driver_liveness import driver_gone

# re-exported: read from here by the rest of analysis (the words are the contract's)
__all__ = [
    "COMPLETED",
    "DAMAGED",
    "DIVERGED",
    "FAILED",
    "INTERRUPTED",
    "NOT_STARTED",
    "RUNNING",
    "STATUSES",
    "STOPPED",
    "read_result_rows",
    "trial_status",
]


# Per-trial columns load_results adds (never config columns).
TRIAL_COLUMNS = [
    "sweep",
    "trial",
    "trial_id",
    "order",
    "status",
    "error",
    "rounds_done",
    "last_round",
    "execution_path",
    "sweep_started",
    TASK_SPEC,
]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# the trial's own primary metric's summary columns (:func:`_primary_columns`), beside
# the TRIAL_COLUMNS, never config columns
_PRIMARY_SUMMARY = re.compile(r"^(?:final|best)_[a-z0-9_]+$")


class NoResultsError(ValueError):
    """A path holds no sweep (the message is one line, for the command line)."""


@dataclass(frozen=True)
class Sweep:
    """One sweep directory: its manifest and the partitions it recorded.

    ``name`` is the directory's name (what ``study.sweep`` names it), prefixed with its
    parent folder's when two loaded sweeps share a name; ``task`` the task declaration
    its manifest carries (None: it names none, its trials' rows decide:
    :mod:`analysis.folder_task`).
    """

    path: Path
    manifest: dict[str, Any]
    partitions: list[dict[str, Any]]
    name: str
    task: TaskSpec | None = None

    @property
    def study(self) -> str:
        return str(self.manifest.get("study", ""))

    @property
    def search(self) -> str:
        """``grid``, ``optuna`` or ``rerun-best``."""
        return str(self.manifest.get("search", "grid"))

    @property
    def status(self) -> str:
        """``running``, ``finished`` or ``interrupted``."""
        return str(self.manifest.get("status", SWEEP_RUNNING))

    @property
    def started(self) -> str:
        return str(self.manifest.get("started") or "")


@dataclass
class Results:
    """Everything read from the given results directories (see the module docstring)."""

    rounds: pd.DataFrame
    trials: pd.DataFrame
    sweeps: list[Sweep]
    config_columns: list[str]
    problems: list[str] = field(default_factory=list)

    def usable(self, statuses: Iterable[str] = (COMPLETED,)) -> pd.DataFrame:
        """Trials whose status is one of ``statuses`` (by default completed only)."""
        return self.trials[self.trials["status"].isin(list(statuses))]


# ------------------------------------------------------------------------ discovery
def find_sweep_dirs(path: str | Path) -> list[Path]:
    """``path`` itself if it is a sweep directory, else its sweep sub-directories.

    Raises :class:`NoResultsError` when there are none.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise NoResultsError(f"{path} does not exist")
    if (path / MANIFEST).is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_dir() and (p / MANIFEST).is_file())
        if found:
            return found
    raise NoResultsError(
        f"{path} holds no sweep (no {MANIFEST} in it or in its sub-folders); "
        "pass a folder written by python -m study.sweep"
    )


# ----------------------------------------------------------------------- file reading
def _error_line(trial_dir: Path, manifest_entry: dict[str, Any] | None) -> str | None:
    """The failure's one-line message: the manifest's, else error.txt's last line."""
    if manifest_entry and manifest_entry.get("error"):
        return str(manifest_entry["error"])
    error_file = trial_dir / ERROR
    if not error_file.is_file():
        return None
    text = error_file.read_text(errors="replace")
    lines = [_ANSI.sub("", ln).strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not set(ln) <= {"^", "~", " "}]
    return lines[-1] if lines else "error.txt (empty)"


def _trial_failed(trial_dir: Path, entry: dict[str, Any] | None, sweep_status: str) -> bool:
    if entry and entry.get("status") == RECORDED_ERROR:
        return True
    error_file = trial_dir / ERROR
    if not error_file.is_file():
        return False
    # A retried trial (max_failures, or --resume) keeps its old error.txt; while the
    # sweep runs, a result.json written after the error means it is going again.
    result = trial_dir / RESULT
    retried = (
        sweep_status == SWEEP_RUNNING
        and result.is_file()
        and result.stat().st_mtime > error_file.stat().st_mtime
    )
    return not retried


def _is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _number(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _trial_order(trial_dir: Path) -> tuple[float, str]:
    """Creation order of a sweep's trials.

    Grid trial ids end in a running number (``29f30_00012``); Optuna's are random hex
    (``3421ea70``), so those fall back to when ``params.json`` was written (at the
    trial's start, in the order the searcher suggested them).
    """
    match = re.match(r"^[0-9a-f]+_(\d+)_", trial_dir.name)
    if match:
        return (float(match.group(1)), trial_dir.name)
    try:
        return (1e12 + (trial_dir / PARAMS).stat().st_mtime, trial_dir.name)
    except OSError:
        return (math.inf, trial_dir.name)


# -------------------------------------------------------------------------- loading
def load_sweep(path: str | Path, problems: list[str] | None = None, name: str | None = None):
    """One sweep directory -> (Sweep, trial records, round rows)."""
    path = Path(path)
    problems = problems if problems is not None else []
    sweep = _read_sweep(path, problems, name or path.name)
    trial_dirs = sorted(
        (p for p in path.iterdir() if p.is_dir() and (p / PARAMS).exists()),
        key=_trial_order,
    )
    trials: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for order, trial_dir in enumerate(trial_dirs):
        record, trial_rows = _load_trial(sweep, trial_dir, order, problems)
        if record is not None:
            trials.append(record)
        rows += trial_rows
    _current_selection_names(sweep.manifest, trials)
    if sweep.status == SWEEP_INTERRUPTED and sweep.manifest.get("not_started"):
        problems.append(
            f"{sweep.name}: {sweep.manifest['not_started']} trial(s) never started "
            "(interrupted; python -m study.sweep ... --resume runs them)"
        )
    return sweep, trials, rows


def _read_sweep(path: Path, problems: list[str], label: str) -> Sweep:
    """The sweep's manifest (with its status and trial entries settled) and partitions;
    an unreadable manifest is no sweep (:class:`NoResultsError`)."""
    try:
        manifest = dict(read_manifest(path / MANIFEST))
    except DamagedFileError as err:
        raise NoResultsError(f"unreadable sweep manifest: {err}") from None
    manifest["status"] = _sweep_status(manifest, label, problems)
    manifest["trials"] = manifest.get("trials") or {}
    partitions, partitions_problem = read_partitions(path / PARTITIONS)
    if partitions_problem:
        problems.append(f"{label}: {partitions_problem}")
    return Sweep(path, manifest, partitions, label, sweep_task(manifest))


def _current_selection_names(manifest: dict[str, Any], trials: list[dict[str, Any]]) -> None:
    """An older score sweep's ranking metric and record of the choice under today's
    names (``val_acc`` -> ``val_bin_acc``, ``search_test_acc`` -> ``search_test_bin_acc``),
    the task read from the manifest or its trials' params.json."""
    task = manifest.get("task") or next((t.get("task") for t in trials if t.get("task")), None)
    if isinstance(manifest.get("metric"), str):
        manifest["metric"] = current_name(manifest["metric"], task)
    if isinstance(manifest.get("selection"), dict):
        selection = manifest["selection"]
        manifest["selection"] = {current_name(k, task): v for k, v in selection.items()}
        if isinstance(selection.get("metric"), str):
            manifest["selection"]["metric"] = current_name(selection["metric"], task)


def _load_trial(
    sweep: Sweep, trial_dir: Path, order: int, problems: list[str]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """One trial folder -> (its record, or None while Tune may still be writing its
    params.json; its round rows).  What is damaged goes to ``problems``."""
    config, unread = _trial_config(sweep, trial_dir, order, problems)
    if config is None:
        return unread, []
    task = trial_task(sweep.task, config.get("task"))
    skipped: list[str] = []
    result_rows = read_result_rows(
        trial_dir / RESULT,
        skipped,
        complete=sweep.status == SWEEP_FINISHED,
        task=config.get("task"),
        specs=task.metrics if task else (),
    )
    record = _trial_record(sweep, trial_dir, config, result_rows, skipped, problems)
    record.update(order=order, **{TASK_SPEC: task}, **_primary_columns(task, config, result_rows))
    rows = []
    for row in result_rows:
        # A metric never overwrites a config column of the same name.
        metrics = {(f"{k}_metric" if k in config else k): v for k, v in row.items()}
        rows.append({"sweep": sweep.name, "trial": trial_dir.name, **config, **metrics})
    return {**record, **config}, rows


def _trial_config(
    sweep: Sweep, trial_dir: Path, order: int, problems: list[str]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A trial's config (its ``params.json``, or, cut short by an interruption, the one
    its round rows carry), else None and the record of a trial whose config is lost
    (None while Tune may still be writing it)."""
    try:
        return read_params(trial_dir / PARAMS), None
    except (DamagedFileError, FileNotFoundError) as err:
        where = f"{sweep.name}/{trial_dir.name}"
        if sweep.status == SWEEP_RUNNING:  # Tune may be writing it right now
            problems.append(f"{where}: params.json not readable yet; skipped ({err})")
            return None, None
        if sweep.status != SWEEP_INTERRUPTED:
            problems.append(f"{where}: damaged: {err}; not counted")
            return None, _damaged_trial(sweep, trial_dir, order, f"damaged: {err}")
        # Tune copies a trial's files into the sweep folder every second, each rewritten
        # in place: a kill during a copy cuts one short.  That is the interruption, and
        # every round row carries the trial's config (Tune's "config" entry).
        recovered = config_from_result_rows(trial_dir / RESULT)
        cut = f"params.json cut short by the interruption ({err})"
        if recovered is None:
            problems.append(f"{where}: {cut}; no round to read")
            return None, _damaged_trial(sweep, trial_dir, order, cut, interrupted=True)
        problems.append(f"{where}: {cut}; its config read from {RESULT}")
        return recovered, None


def _trial_record(
    sweep: Sweep,
    trial_dir: Path,
    config: dict[str, Any],
    result_rows: list[dict[str, Any]],
    skipped: list[str],
    problems: list[str],
) -> dict[str, Any]:
    """A trial's status and summary columns from its round rows (``skipped``: what
    reading them found damaged; what else its files lack is added and named in
    ``problems``)."""
    entry = sweep.manifest["trials"].get(trial_dir.name)
    failed = _trial_failed(trial_dir, entry, sweep.status)
    last = result_rows[-1] if result_rows else {}
    last_round = int(last.get("round", 0))
    planned = _whole(config.get("rounds"))
    diverged = any(_is_true(r.get("diverged")) for r in result_rows)
    skipped += _missing_rounds(
        sweep, entry, (last_round, planned), stopped=failed or diverged, damaged=bool(skipped)
    )
    if skipped:
        problems.append(f"{sweep.name}/{trial_dir.name}: damaged: " + "; ".join(skipped))
    status = trial_status(
        last_round=last_round,
        planned_rounds=planned,
        diverged=diverged,
        failed=failed,
        sweep_status=sweep.status,
        damaged=bool(skipped),
    )
    error = _error_line(trial_dir, entry) if failed or status == FAILED else None
    if status == DAMAGED:
        error = "damaged: " + "; ".join(skipped)
    return {
        "sweep": sweep.name,
        "trial": trial_dir.name,
        "trial_id": str(last.get("trial_id") or "_".join(trial_dir.name.split("_")[:2])),
        "status": status,
        "error": error,
        "rounds_done": len(result_rows),
        "last_round": last_round,
        "execution_path": _execution_path(result_rows),
        "sweep_started": sweep.started,
        **_privacy_columns(result_rows),
    }


def _missing_rounds(
    sweep: Sweep,
    entry: dict[str, Any] | None,
    rounds: tuple[int, int],
    *,
    stopped: bool,
    damaged: bool,
) -> list[str]:
    """Why a trial's result file lacks rounds it should hold (``rounds``: its last round
    and the planned count): fewer than the manifest recorded, or, in a finished sweep
    without a scheduler, fewer than planned (not when reading it already found damage,
    or the trial ``stopped`` by failing or diverging)."""
    last_round, planned = rounds
    recorded = entry.get("last_round") if entry else None
    if isinstance(recorded, int) and recorded > last_round:
        return [f"{RESULT} ends at round {last_round}, the manifest recorded {recorded}"]
    if not damaged and _cut_short(sweep, last_round, planned) and not stopped:
        # Only a scheduler stops a trial early; without one, missing rounds were lost.
        return [
            f"{RESULT} ends at round {last_round} of {planned}, and the finished sweep "
            "had no early-stopping scheduler"
        ]
    return []


def _privacy_columns(result_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A DP trial's ε spent by its last round (``final_dp_epsilon``, from the rows'
    ``dp_epsilon``; inf without noise) and what computed it (``dp_accounting``: the
    rows' accountant, neighbouring relation and sampling, where they record them);
    nothing for a trial whose rows record no ε."""
    spent = [r for r in result_rows if "dp_epsilon" in r]
    if not spent:
        return {}
    last = spent[-1]
    out: dict[str, Any] = {"final_dp_epsilon": _number(last.get("dp_epsilon"))}
    how = [last.get(f"dp_epsilon_{k}") for k in ("accountant", "neighbours", "sampling")]
    if all(isinstance(v, str) for v in how):
        out["dp_accounting"] = "{}, {} neighbours, {} sampling".format(*how)
    return out


def _execution_path(result_rows: list[dict[str, Any]]) -> str | None:
    """The path(s) the trial's parties trained on, as its rows recorded them
    (``packed``, ``sequential``: what ran, which a method that cannot pack makes
    sequential whatever ``execution`` asked), in order of first use; None where no row
    says (older rows)."""
    paths = [str(r["execution_path"]) for r in result_rows if r.get("execution_path")]
    return ", ".join(dict.fromkeys(paths)) or None


def _primary_columns(
    task: TaskSpec | None, config: dict[str, Any], result_rows: list[dict[str, Any]]
) -> dict:
    """The trial's own primary metric at its last round and its best over rounds, as
    ``final_<stem>``, ``final_<stem>_std`` (its spread over parties' own models, where
    recorded), ``best_<stem>`` and ``best_<stem>_round`` (the earliest on a tie; best by
    the metric's direction) — ``final_map50`` for a detection trial, ``final_acc`` for
    a classification one; nothing for a task no manifest declared."""
    try:
        metric = trial_metric(task, config.get("primary_metric"), config.get("task"))
    except PrimaryMetricError:
        return {}
    last = result_rows[-1] if result_rows else {}
    values = [(_number(r.get(metric.column)), int(r["round"])) for r in result_rows]
    finite = [(v, r) for v, r in values if not math.isnan(v)]
    best = max(finite, key=lambda t: (metric.sign * t[0], -t[1])) if finite else (math.nan, 0)
    return {
        f"final_{metric.stem}": _number(last.get(metric.column)),
        f"final_{metric.stem}_std": _number(last.get(f"{metric.column}_std")),
        f"best_{metric.stem}": best[0],
        f"best_{metric.stem}_round": best[1],
    }


def _cut_short(sweep: Sweep, last_round: int, planned: int) -> bool:
    """A finished sweep that recorded no scheduler (``"scheduler": null``) ran every
    trial to its last round, so a trial that ends before it lost rounds on disk."""
    manifest = sweep.manifest
    no_scheduler = "scheduler" in manifest and manifest["scheduler"] is None
    return sweep.status == SWEEP_FINISHED and no_scheduler and planned > 0 and last_round < planned


def _damaged_trial(
    sweep: Sweep, trial_dir: Path, order: int, error: str, *, interrupted: bool = False
) -> dict[str, Any]:
    """The record of a trial whose params.json is damaged (or, ``interrupted``, cut short
    by a kill before it reported a round): listed, never counted.

    Its config is unknown; the manifest's study and dataset place it in its sweep's
    tables' group (so it is named beside its siblings, not in a group of its own)."""
    return {
        "sweep": sweep.name,
        "trial": trial_dir.name,
        "trial_id": "_".join(trial_dir.name.split("_")[:2]),
        "order": order,
        "status": trial_status(
            last_round=0,
            planned_rounds=0,
            diverged=False,
            failed=False,
            sweep_status=SWEEP_INTERRUPTED if interrupted else "",
            damaged=not interrupted,
        ),
        "error": error,
        "rounds_done": 0,
        "last_round": 0,
        "execution_path": None,
        "sweep_started": sweep.started,
        TASK_SPEC: sweep.task,
        **{k: sweep.manifest[k] for k in ("study", "dataset") if sweep.manifest.get(k)},
    }


def _whole(value: Any) -> int:
    """An integer from a JSON value, 0 when it is not one."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0


def _sweep_status(manifest: dict[str, Any], label: str, problems: list[str]) -> str:
    """The sweep's status: an unknown word reads as running, a dead driver as interrupted."""
    status = manifest.get("status") or SWEEP_RUNNING
    if status not in SWEEP_STATUSES:
        problems.append(f"{label}: manifest status={status!r:.60} unknown; read as running")
        status = SWEEP_RUNNING
    if status == SWEEP_RUNNING and driver_gone(manifest):
        problems.append(f"{label}: its driver process is gone (killed): read as interrupted")
        status = SWEEP_INTERRUPTED
    return status


def load_results(paths: str | Path | Iterable[str | Path]) -> Results:
    """Read every sweep under ``paths`` into :class:`Results` (see the module docstring).

    Raises :class:`NoResultsError` when a path holds no sweep.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    sweep_dirs: list[Path] = []
    for path in paths:
        for found in find_sweep_dirs(path):
            if found.resolve() not in {d.resolve() for d in sweep_dirs}:
                sweep_dirs.append(found)
    problems: list[str] = []
    sweeps: list[Sweep] = []
    trial_records: list[dict[str, Any]] = []
    round_rows: list[dict[str, Any]] = []
    config_columns: list[str] = []
    summary_columns: list[str] = []
    names: set[str] = set()
    for sweep_dir in sweep_dirs:
        name = sweep_dir.name
        if name in names:
            name = f"{sweep_dir.parent.name}/{sweep_dir.name}"
        names.add(name)
        try:
            sweep, trials, rows = load_sweep(sweep_dir, problems, name)
        except NoResultsError as err:
            if len(sweep_dirs) == 1:
                raise
            problems.append(f"{name}: skipped: {err}")  # the other sweeps are still read
            continue
        for record in trials:  # one running order over everything loaded
            record["order"] += len(trial_records)
        sweeps.append(sweep)
        trial_records.extend(trials)
        round_rows.extend(rows)
        for record in trials:
            for key in record:
                if key in TRIAL_COLUMNS or key in config_columns or key in summary_columns:
                    continue
                if _PRIMARY_SUMMARY.match(key):
                    summary_columns.append(key)
                else:
                    config_columns.append(key)

    if not sweeps:
        raise NoResultsError(f"no readable sweep in {', '.join(map(str, paths))}")
    trials_frame = pd.DataFrame(
        trial_records, columns=[*TRIAL_COLUMNS, *summary_columns, *config_columns]
    )
    status_of = dict(zip(zip(trials_frame["sweep"], trials_frame["trial"]), trials_frame["status"]))
    rounds_frame = pd.DataFrame(round_rows)
    if rounds_frame.empty:
        columns = ["sweep", "trial", *config_columns, "round", "test_acc"]
        rounds_frame = pd.DataFrame(columns=columns)
    statuses = [status_of[key] for key in zip(rounds_frame["sweep"], rounds_frame["trial"])]
    rounds_frame.insert(2, "status", pd.Series(statuses, index=rounds_frame.index, dtype=object))
    for column in ("round", "test_acc"):
        # a task that records no accuracy (a user's own) has no test_acc: NaN, never read
        # as a value (its tables are on its own primary metric)
        values = rounds_frame.get(column, math.nan)
        rounds_frame[column] = pd.to_numeric(values, errors="coerce")
    rounds_frame["round"] = rounds_frame["round"].astype("Int64")
    for column in summary_columns:
        whole = column.endswith("_round")  # best_<stem>_round: a round number
        trials_frame[column] = (
            trials_frame[column].fillna(0).astype(int)
            if whole
            else (trials_frame[column].astype(float))
        )
    trials_frame["last_round"] = trials_frame["last_round"].astype(int)
    trials_frame["rounds_done"] = trials_frame["rounds_done"].astype(int)
    return Results(
        rounds=rounds_frame.reset_index(drop=True),
        trials=trials_frame.reset_index(drop=True),
        sweeps=sweeps,
        config_columns=config_columns,
        problems=problems,
    )


def status_counts(trials: pd.DataFrame) -> dict[str, int]:
    """``{status: count}`` in :data:`STATUSES` order, statuses with no trial left out."""
    counts = trials["status"].value_counts()
    return {s: int(counts[s]) for s in STATUSES if s in counts.index}


def is_number_column(values: pd.Series) -> bool:
    """True when every non-missing value is a real number (not a bool or string)."""
    present = [v for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    return bool(present) and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        for v in present
    )
