"""The report's *Runs* section: one line per sweep (study, search, dataset, budget, seeds,
settings, trial counts, state) and how to read the numbers."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from analysis.naming import dataset_name, format_value, partition_label
from analysis.primary_metric import ACCURACY, Metric
from analysis.reading.loading import Results, status_counts
from federated.contract.task_spec import TaskSpec


def _budget_words(trials: pd.DataFrame) -> str:
    """The trials' budget in words: rounds, epochs, parties, data fractions, partition."""
    if trials.empty:
        return "no trial started yet"

    def values(column: str) -> str:
        if column not in trials:
            return "?"
        return "/".join(format_value(v) for v in sorted(set(trials[column].dropna())))

    def shares(column: str) -> str:
        """A fraction of a split as a percentage (``1`` reads ``100%``, never "1 of")."""
        if column not in trials:
            return "?"
        fractions = sorted(set(pd.to_numeric(trials[column], errors="coerce").dropna()))
        return "/".join(f"{100 * v:g}%" for v in fractions) or "?"

    scheme = ", ".join(_partition_labels(trials))
    return (
        f"{values('rounds')} rounds, E={values('local_epochs')}, N={values('n_parties')}, "
        f"{shares('data_fraction')} of the training data and {shares('test_fraction')} of "
        "the test data" + (f", {scheme} partition" if scheme else "")
    )


def _partition_labels(trials: pd.DataFrame) -> list[str]:
    """Each partition scheme of the trials once; a natural partition by an ``hf:`` data
    set's column names the column (``natural (by writer_id)``)."""
    if "partition" not in trials:
        return []
    by = trials["partition_by"] if "partition_by" in trials else pd.Series(None, trials.index)
    pairs = {(str(p), None if pd.isna(c) else str(c)) for p, c in zip(trials["partition"], by)}
    pairs = {(p, c) for p, c in pairs if p != "nan"}
    return [partition_label(p, c) for p, c in sorted(pairs, key=lambda pc: (pc[0], pc[1] or ""))]


def global_test_set_words(
    sweep_name: str, manifest: dict, trials: pd.DataFrame, task: TaskSpec | None = None
) -> str:
    """A sentence for a sweep on a data set with one split (FEMNIST): its global test set is
    the union of the parties' local test splits; empty for any other sweep."""
    identity = manifest.get("dataset_identity") or {}
    if identity.get("test_set") != "parties":
        return ""
    given = trials["party_test_fraction"] if "party_test_fraction" in trials else pd.Series()
    shares = "/".join(format_value(v) for v in sorted(set(given.dropna())))
    share = f" (party_test_fraction={shares} of each party's images)" if shares else ""
    return (
        f"`{sweep_name}`: {_dataset(manifest, task)} has one split, so the "
        f"global test set is the union of the parties' local test splits{share}; it holds "
        "the drawn parties' images only, and the per-party outcomes are scored on the same "
        "splits."
    )


def study_cell(manifest: dict) -> str:
    """The runs table's study cell: ``moon_mu (Table 9)``, or the study alone when it
    reproduces no paper table (a user's own study: no empty parentheses)."""
    paper = str(manifest.get("paper") or "").strip()
    study = manifest.get("study", "?")
    return f"{study} ({paper})" if paper else str(study)


def reading_words(primaries: Sequence[Metric]) -> str:
    """How to read the numbers, in each reported metric's own words (``primaries``: each
    study group's primary metric): classification keeps its sentence on accuracies; a
    score task's report names its metric, never "accuracies"."""
    metrics = list(dict.fromkeys(primaries)) or [ACCURACY]
    names = " / ".join(m.name for m in metrics)
    stopped = (
        "Trials stopped early by ASHA appear only in the Optuna search history (with the "
        f"{names} they had when stopped). "
    )
    if metrics == [ACCURACY]:
        values = (
            "Accuracies are percentages of the test set (the fraction evaluated by the budget)."
        )
    else:
        shown = "; ".join(m.words for m in metrics)
        values = f"Values are on the test set (the fraction evaluated by the budget): {shown}."
    notes = "".join(dict.fromkeys(m.reading_note for m in metrics))
    return stopped + values + notes


def runs_section(results: Results, primaries: Sequence[Metric] = ()) -> list[str]:
    """The runs' table and how to read the numbers (``primaries``: each study group's
    primary metric, :func:`reading_words`)."""
    lines = [
        "## Runs",
        "",
        "| sweep | study (paper) | search | dataset | budget | seeds | settings | trials | state |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes = []
    for sweep in results.sweeps:
        m = sweep.manifest
        trials = results.trials[results.trials["sweep"] == sweep.name]
        notes.append(global_test_set_words(sweep.name, m, trials, sweep.task))
        counts = status_counts(trials)
        found = ", ".join(f"{n} {s}" for s, n in counts.items()) or "none yet"
        planned = m.get("n_trials")
        state = sweep.status
        if state == "running":
            state = "**still running** (read as far as complete)"
        seeds = ", ".join(str(s) for s in m.get("seeds", []))
        lines.append(
            f"| `{sweep.name}` | {study_cell(m)} | "
            f"{sweep.search}{' + ' + str(m['scheduler']) if m.get('scheduler') else ''} | "
            f"{_dataset(m, sweep.task)} | {m.get('budget', '?')} | {seeds} | "
            f"{_budget_words(trials)} | {found} (of {planned}) | {state} |"
        )
    lines += [
        "",
        "Tables and curves count **completed** trials only (every planned round run). "
        "Errored, diverged and unfinished trials are never averaged in; they are listed "
        "under *Trials not counted*. " + reading_words(primaries),
        "",
    ]
    lines += [line for note in notes if note for line in (note, "")]
    return lines


def _dataset(manifest: dict, task: TaskSpec | None) -> str:
    """The sweep's data set by its display name, read from the source its data was
    loaded from (``dataset_identity``: a saved folder's resolved path) where recorded,
    as the tables and figures read it from the trials, else as the command gave it."""
    identity = manifest.get("dataset_identity")
    source = identity.get("source") if isinstance(identity, dict) else None
    return dataset_name(source or manifest.get("dataset", "?"), task)
