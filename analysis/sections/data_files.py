"""The report's data files (``data/rounds.csv``, ``data/trials.csv``, ``data/parties.csv``)
and the closing paragraph that points to them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.reading.loading import Results


def data_files_section() -> list[str]:
    """The closing paragraph naming the data files."""
    return [
        "Other files: [data/rounds.csv](data/rounds.csv) (one row per trial and round) and "
        "[data/trials.csv](data/trials.csv) (one row per trial, with its status); "
        "data/parties.csv (one row per trial, scored round and party) where trials "
        "recorded per-party accuracies.",
        "",
    ]


def write_data_files(results: Results, party_rows: pd.DataFrame, out: Path) -> None:
    """The rounds and trials frames into ``out/data``, and the per-party rows where trials
    recorded any."""
    data = out / "data"
    data.mkdir(exist_ok=True)
    results.rounds.to_csv(data / "rounds.csv", index=False)
    results.trials.to_csv(data / "trials.csv", index=False)
    if not party_rows.empty:
        party_rows.to_csv(data / "parties.csv", index=False)
