"""A run's files besides its rows: per-party accuracies and Fig. 2's representations.

For a Tune trial they live in its trial folder (``study/layout.py``), for
``python -m federated.run --out X.csv`` next to the rows as ``X.parties.csv`` and
``X.representations/``::

    parties.csv                   one row per (scored round, party): round (1-based),
                                  party, party_acc (fraction in [0, 1]), party_samples
                                  (its training samples); rewritten after each scored
                                  round
    representations/round_NNNN.npz   federated/representations.py

Every file is written with :func:`federated.atomic_file.atomic_open`.  A trial restored
from a checkpoint at round r keeps the rows of rounds <= r it finds and writes the
rounds it runs again, so the file never holds a round twice.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from federated.atomic_file import atomic_open
from federated.representations import FOLDER, save_representations
from federated.results_contract import PARTIES

PARTY_COLUMNS = ("round", "party", "party_acc", "party_samples")


class RunFiles:
    """Writes one run's per-party and representation files (see the module docstring)."""

    def __init__(
        self, parties: str | os.PathLike, representations: str | os.PathLike, start_round: int = 0
    ) -> None:
        self.parties = Path(parties)
        self.representations = Path(representations)
        self.rows: list[dict[str, Any]] = []
        if start_round > 0 and self.parties.is_file():  # a restored trial: keep what it ran
            with self.parties.open(newline="") as fh:
                self.rows = [r for r in csv.DictReader(fh) if int(r["round"]) <= start_round]
        self._written = start_round

    @classmethod
    def in_folder(cls, folder: str | os.PathLike, start_round: int = 0) -> RunFiles:
        """A trial folder's ``parties.csv`` and ``representations/``."""
        return cls(Path(folder) / PARTIES, Path(folder) / FOLDER, start_round)

    @classmethod
    def beside(cls, rows_file: str | os.PathLike) -> RunFiles:
        """``X.parties.csv`` and ``X.representations/`` next to the rows file ``X.csv``."""
        rows_file = Path(rows_file)
        stem = rows_file.parent / rows_file.stem
        return cls(f"{stem}.{PARTIES}", f"{stem}.{FOLDER}")

    def record(self, run: Any) -> list[Path]:
        """Write what ``run`` (a FederatedRun) produced in its latest round: its per-party
        scores when it scored them, its representations when it captured them; returns
        the files written."""
        written = []
        scorer, probe = run.party_scorer, run.probe
        if scorer.last is not None and scorer.last_round > self._written:
            self._written = scorer.last_round
            for party, acc in enumerate(scorer.last):
                self.rows.append(
                    {
                        "round": scorer.last_round,
                        "party": party,
                        "party_acc": float(acc),
                        "party_samples": run.party_sizes[party],
                    }
                )
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=PARTY_COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows)
            with atomic_open(self.parties) as fh:
                fh.write(buf.getvalue())
            written.append(self.parties)
        if probe is not None and probe.last is not None:
            written.append(save_representations(self.representations, probe.last))
            probe.last = None
        return written
