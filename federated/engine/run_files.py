"""A run's files besides its rows: per-party accuracies and Fig. 2's representations.

For a Tune trial they live in its trial folder (``study/sweep_folder.py``), for
``python -m federated.run --out X.csv`` next to the rows as ``X.parties.csv`` and
``X.representations/``::

    parties.csv                   one row per (scored round, party): round (1-based),
                                  party, party_<p> (the task's per-party metric p:
                                  party_acc, a fraction in [0, 1], for classification;
                                  party_bin_acc for a score task), party_samples (its
                                  training samples); with validation on the parties'
                                  own data (val_split=party) also party_val_<p>,
                                  party_val_loss (NaN for a party not evaluated that
                                  round), party_val_samples; with local test splits
                                  party_test_samples (then party_<p> is on the party's
                                  own test images, not the class re-weighted test set);
                                  for a task's other metrics m (a score task's mae,
                                  rmse, srcc, plcc) also party_val_<m> and
                                  party_test_<m> (the party's own images;
                                  federated/tasks/); rewritten after each scored round
    representations/round_NNNN.npz   federated/evaluation/representations.py

Every file is written with :func:`federated.runtime.atomic_file.atomic_open`.  A trial restored
from a checkpoint at round r keeps the rows of rounds <= r it finds and writes the
rounds it runs again, so the file never holds a round twice.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from federated.contract.metrics import LOSS
from federated.contract.results import PARTIES
from federated.evaluation.representations import FOLDER, save_representations
from federated.runtime.atomic_file import atomic_open

LOCAL_TEST_COLUMNS = ("party_test_samples",)
NAN = float("nan")


def party_columns(run: Any) -> tuple[str, ...]:
    """``parties.csv``'s columns for ``run`` (a FederatedRun): the base ones, and those
    of its per-party validation and local test splits when it has them."""
    # the task's per-party metric (classification's acc) and its others (a score
    # task's mae, rmse, srcc, plcc)
    stem, extra = run.evaluation.spread_stem, run.evaluation.extra_stems
    columns: tuple[str, ...] = ("round", "party", f"party_{stem}", "party_samples")
    if run.validator is not None and run.config.val_split == "party":
        columns += (f"party_val_{stem}", f"party_val_{LOSS}", "party_val_samples")
        columns += tuple(f"party_val_{m}" for m in extra)
    if run.local_tester is not None:
        columns += LOCAL_TEST_COLUMNS + tuple(f"party_test_{m}" for m in extra)
    return columns


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
        scored = scorer.last_round if scorer.last is not None else 0
        validated = run.last_validation[0] if run.last_validation is not None else 0
        latest = max(scored, validated)
        if latest > self._written:
            self._written = latest
            self.rows.extend(party_rows(run, latest, scored == latest, validated == latest))
            columns = party_columns(run)
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=columns)
            writer.writeheader()
            writer.writerows({k: row.get(k, "") for k in columns} for row in self.rows)
            with atomic_open(self.parties) as fh:
                fh.write(buf.getvalue())
            written.append(self.parties)
        if probe is not None and probe.last is not None:
            written.append(save_representations(self.representations, probe.last))
            probe.last = None
        return written


def party_rows(run: Any, round_number: int, scored: bool, validated: bool) -> list[dict]:
    """``parties.csv``'s rows of ``round_number``: each party's score (NaN when the
    round was validated but not scored) and its held-out values."""
    columns = party_columns(run)
    stem, extra = run.evaluation.spread_stem, run.evaluation.extra_stems
    rows = []
    for party in range(len(run.party_sizes)):
        row = {
            "round": round_number,
            "party": party,
            f"party_{stem}": float(run.party_scorer.last[party]) if scored else NAN,
            "party_samples": run.party_sizes[party],
        }
        if "party_val_samples" in columns:
            scores = run.last_validation[1] if validated else None
            for m in (stem, LOSS, *extra):
                values = scores.party_values.get(m) if scores else None
                row[f"party_val_{m}"] = float(values[party]) if values is not None else NAN
            row["party_val_samples"] = run.validator.split.sizes[party]
        if "party_test_samples" in columns:
            row["party_test_samples"] = run.local_tester.split.sizes[party]
            for m in extra:
                values = run.local_test_metrics.get(m) if scored else None
                row[f"party_test_{m}"] = float(values[party]) if values is not None else NAN
        rows.append(row)
    return rows
