"""The report's data files (``data/rounds.csv``, ``data/trials.csv``, ``data/parties.csv``)
and the closing paragraph that points to them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.primary_metric import ACCURACY, Metric
from analysis.reading.loading import Results


def data_files_section(primaries: Sequence[Metric] = ()) -> list[str]:
    """The closing paragraph naming the data files; the per-party values in the words of
    ``primaries`` (each study group's primary metric: a score task's are no accuracies)."""
    metrics = list(dict.fromkeys(primaries)) or [ACCURACY]
    party = (
        "accuracies" if metrics == [ACCURACY] else f"values ({', '.join(m.name for m in metrics)})"
    )
    return [
        "Other files: [data/rounds.csv](data/rounds.csv) (one row per trial and round) and "
        "[data/trials.csv](data/trials.csv) (one row per trial, with its status); "
        "data/parties.csv (one row per trial, scored round and party) where trials "
        f"recorded per-party {party}.",
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
