"""The report's data files (``data/rounds.csv``, ``data/trials.csv``, ``data/parties.csv``)
and the closing paragraph that points to them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from analysis.folder_task import TASK_SPEC
from analysis.primary_metric import ACCURACY, Metric
from analysis.reading.loading import Results
from federated.contract.columns import COLUMN_FIELDS, PRIVACY_COLUMNS, declared_columns


def data_files_section(primaries: Sequence[Metric] = ()) -> list[str]:
    """The closing paragraph naming the data files; the per-party values in the words of
    ``primaries`` (each study group's primary metric: a score task's are no accuracies)."""
    metrics = list(dict.fromkeys(primaries)) or [ACCURACY]
    party = (
        "accuracies" if metrics == [ACCURACY] else f"values ({', '.join(m.name for m in metrics)})"
    )
    return [
        "Other files: [data/rounds.csv](data/rounds.csv) (one row per trial and round) and "
        "[data/trials.csv](data/trials.csv) (one row per trial, with its status; "
        "final_/best_ columns of each trial's primary metric); "
        "[data/columns.csv](data/columns.csv) says what each metric column of rounds.csv "
        "holds (its metric, split, model and cadence); "
        "data/parties.csv (one row per trial, scored round and party) where trials "
        f"recorded per-party {party}.",
        "",
    ]


#: the accuracy column loading always adds to the rounds: left out of the file where no
#: trial recorded accuracy (the trials' columns are each trial's own metric's already)
ACCURACY_ROUND_COLUMNS = ("test_acc",)


def exported(results: Results) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rounds and trials frames as ``data/`` holds them: where no trial recorded
    an accuracy, the rounds' ``test_acc`` (all NaN) is left out; each trial's primary
    metric has its own columns (``final_<stem>``, ``best_<stem>``:
    :mod:`analysis.reading.loading`).
    The trials' task declarations (the manifests') stay out: ``data/columns.csv`` says
    what their columns hold."""
    rounds, trials = results.rounds, results.trials.drop(columns=[TASK_SPEC], errors="ignore")
    recorded = "test_acc" in rounds and rounds["test_acc"].notna().any()
    if recorded or rounds.empty:
        return rounds, trials
    return rounds.drop(columns=[c for c in ACCURACY_ROUND_COLUMNS if c in rounds]), trials


def write_data_files(results: Results, party_rows: pd.DataFrame, out: Path) -> None:
    """The rounds and trials frames into ``out/data`` (:func:`exported`), what each of
    their metric columns holds (``columns.csv``, the results contract's declaration:
    :func:`column_declarations`), and the per-party rows where trials recorded any."""
    data = out / "data"
    data.mkdir(exist_ok=True)
    rounds, trials = exported(results)
    rounds.to_csv(data / "rounds.csv", index=False)
    trials.to_csv(data / "trials.csv", index=False)
    declared = column_declarations(results, rounds.columns)
    if not declared.empty:
        declared.to_csv(data / "columns.csv", index=False)
    if not party_rows.empty:
        party_rows.to_csv(data / "parties.csv", index=False)


def column_declarations(results: Results, columns: Iterable[str]) -> pd.DataFrame:
    """What each metric column of ``columns`` (rounds.csv's) holds, as the sweeps'
    manifests declared it (``columns``: :mod:`federated.contract.columns`); a sweep
    written before that is declared from its task's declaration, and the privacy
    columns from today's contract where its manifest has none.  One row per column
    (``party_acc/<party>`` stands for ``party_acc/0``, ``party_acc/1`` ...)."""
    declared: dict[str, dict] = {}
    for sweep in results.sweeps:
        recorded = sweep.manifest.get("columns")
        if not isinstance(recorded, list):
            specs = results.trials.loc[results.trials["sweep"] == sweep.name, TASK_SPEC]
            spec = sweep.task or next((s for s in specs if s is not None), None)
            recorded = declared_columns(spec) if spec else []
        for row in recorded:
            if isinstance(row, dict) and isinstance(row.get("column"), str):
                declared.setdefault(row["column"], row)
    # task-independent: a sweep recorded before a privacy column was declared (or
    # written) reads it in today's words
    for column in PRIVACY_COLUMNS:
        declared.setdefault(column.column, column.row())
    present = set(columns)
    prefixes = {c.split("/", 1)[0] + "/<party>" for c in present if "/" in c}
    rows = [row for name, row in declared.items() if name in present or name in prefixes]
    return pd.DataFrame(rows, columns=list(COLUMN_FIELDS))
