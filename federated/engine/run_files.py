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
                                  federated/tasks/); under dp_level=record also
                                  party_dp_epsilon (the party's record-level epsilon
                                  so far, docs/privacy.md); each scored round's rows
                                  are appended after the round
    representations/round_NNNN.npz   federated/evaluation/representations.py

``parties.csv`` grows by appending: a scored round costs its N rows, not the whole file
again (O(N) per round, where rewriting was O(N x rounds)).  Its first round (header and
rows) is written with :func:`federated.runtime.atomic_file.atomic_open`; each later
round's rows are one block written with one call and ending in a line end, so a run
killed in the middle of an append leaves complete rows and at most one last line
without its line end: the report's reader leaves such an append out of a running or
interrupted trial (:func:`analysis.reading.trial_files.read_parties`), and a restored
run drops it before it appends.  Representations are written whole (atomic_open).

**A restored run continues the file.**  A trial restored from a checkpoint at round r
keeps the header and the complete rows of rounds <= r of the file it finds (rounds
after r are run again; a cut last line is dropped) and appends from round r + 1, so the
file holds every round once and, run on the same machine, equals an uninterrupted
run's byte for byte.  The file it continues is the trial folder's own, or, when the
folder is new (Tune's ``Tuner.restore`` gives a resumed trial a fresh staging folder
without the trial's CSV files), ``previous``: the copy the trial's storage holds
(:func:`federated.trainable.stored_parties`).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from federated.contract.columns import PARTY_FILE_OWN_TEST, PARTY_FILE_SCORE, PARTY_FILE_VALIDATION
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
    columns: tuple[str, ...] = ("round", "party", PARTY_FILE_SCORE.column(stem), "party_samples")
    if run.validator is not None and run.config.val_split == "party":
        validation = PARTY_FILE_VALIDATION.column
        columns += (validation(stem), validation(LOSS), "party_val_samples")
        columns += tuple(validation(m) for m in extra)
    if run.local_tester is not None:
        columns += LOCAL_TEST_COLUMNS + tuple(PARTY_FILE_OWN_TEST.column(m) for m in (stem, *extra))
    # the round's hooks' own (record-level DP: each party's epsilon, party_dp_epsilon)
    return columns + tuple(run.hooks.party_values())


class RunFiles:
    """Writes one run's per-party and representation files (see the module docstring)."""

    def __init__(
        self,
        parties: str | os.PathLike,
        representations: str | os.PathLike,
        start_round: int = 0,
        previous: Callable[[], bytes | None] | None = None,
    ) -> None:
        """``start_round``: the round a restored run's checkpoint holds (0: a new run);
        ``previous``: reads an earlier copy of ``parties.csv`` to continue when the
        folder holds none (called only then; None: there is none)."""
        self.parties = Path(parties)
        self.representations = Path(representations)
        self._written = start_round
        # the header of the file being appended to; None: the next scored round starts it
        self._columns: tuple[str, ...] | None = None
        if start_round > 0:
            self._columns = self._continue(start_round, previous)

    @classmethod
    def in_folder(
        cls,
        folder: str | os.PathLike,
        start_round: int = 0,
        previous: Callable[[], bytes | None] | None = None,
    ) -> RunFiles:
        """A trial folder's ``parties.csv`` and ``representations/``."""
        return cls(Path(folder) / PARTIES, Path(folder) / FOLDER, start_round, previous)

    @classmethod
    def beside(cls, rows_file: str | os.PathLike) -> RunFiles:
        """``X.parties.csv`` and ``X.representations/`` next to the rows file ``X.csv``."""
        rows_file = Path(rows_file)
        stem = rows_file.parent / rows_file.stem
        return cls(f"{stem}.{PARTIES}", f"{stem}.{FOLDER}")

    def _continue(
        self, start_round: int, previous: Callable[[], bytes | None] | None
    ) -> tuple[str, ...] | None:
        """Cut the file to continue to its rows of rounds <= ``start_round`` (written
        atomically) and return its header's columns; None when there is no file to
        continue (the next scored round starts one)."""
        if self.parties.is_file():
            data: bytes | None = self.parties.read_bytes()
        else:
            data = previous() if previous is not None else None
        kept = rows_through(data or b"", start_round)
        if kept is None:
            return None
        with atomic_open(self.parties, "wb") as fh:
            fh.write(kept)
        header = kept.split(b"\n", 1)[0].decode("utf-8").rstrip("\r")
        return tuple(next(csv.reader([header])))

    def record(self, run: Any) -> list[Path]:
        """Write what ``run`` (a FederatedRun) produced in its latest round: its per-party
        scores when it scored them (appended to ``parties.csv``), its representations
        when it captured them; returns the files written."""
        written = []
        scorer, probe = run.party_scorer, run.probe
        scored = scorer.last_round if scorer.last is not None else 0
        validated = run.last_validation[0] if run.last_validation is not None else 0
        latest = max(scored, validated)
        if latest > self._written:
            self._written = latest
            rows = party_rows(run, latest, scored == latest, validated == latest)
            self._append(party_columns(run), rows)
            written.append(self.parties)
        if probe is not None and probe.last is not None:
            written.append(save_representations(self.representations, probe.last))
            probe.last = None
        return written

    def _append(self, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
        """Add ``rows`` to ``parties.csv``: one appended block, or, for the file's first
        round (or a continued file whose columns differ), the whole file atomically."""
        if self._columns == columns:
            # one write of whole lines: a kill leaves at most a cut last line
            with self.parties.open("a", newline="", encoding="utf-8") as fh:
                fh.write(csv_text(columns, rows, header=False))
            return
        earlier: list[dict[str, Any]] = []
        if self._columns is not None:  # a continued file of other columns: rewritten once
            with self.parties.open(newline="", encoding="utf-8") as fh:
                earlier = list(csv.DictReader(fh))
        with atomic_open(self.parties, newline="", encoding="utf-8") as fh:
            fh.write(csv_text(columns, earlier + rows, header=True))
        self._columns = columns


def csv_text(columns: tuple[str, ...], rows: list[dict[str, Any]], *, header: bool) -> str:
    """``rows`` as ``parties.csv`` lines (csv's ``\\r\\n`` line ends; a column a row lacks
    is empty), after the header line when ``header``."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns)
    if header:
        writer.writeheader()
    writer.writerows({k: row.get(k, "") for k in columns} for row in rows)
    return buf.getvalue()


def rows_through(data: bytes, last_round: int) -> bytes | None:
    """The part of a ``parties.csv`` (its bytes, ``data``) a run restored at round
    ``last_round`` keeps: the header and the complete lines (ending in a line end) of
    rounds <= ``last_round``, up to the first line of a later round or one without a
    round number; None when ``data`` has no complete header starting with ``round``."""
    lines = data.split(b"\n")[:-1]  # what follows the last line end is a cut line
    if not lines or not lines[0].startswith(b"round,"):
        return None
    kept = 1
    for line in lines[1:]:
        first = line.split(b",", 1)[0]
        if not first.isdigit() or int(first) > last_round:
            break
        kept += 1
    return b"".join(line + b"\n" for line in lines[:kept])


def party_rows(run: Any, round_number: int, scored: bool, validated: bool) -> list[dict]:
    """``parties.csv``'s rows of ``round_number``: each party's score (NaN when the
    round was validated but not scored) and its held-out values."""
    columns = party_columns(run)
    stem, extra = run.evaluation.spread_stem, run.evaluation.extra_stems
    rows = []
    hooked = run.hooks.party_values()
    for party in range(len(run.party_sizes)):
        row = {
            "round": round_number,
            "party": party,
            PARTY_FILE_SCORE.column(stem): float(run.party_scorer.last[party]) if scored else NAN,
            "party_samples": run.party_sizes[party],
        }
        if "party_val_samples" in columns:
            scores = run.last_validation[1] if validated else None
            for m in (stem, LOSS, *extra):
                values = scores.party_values.get(m) if scores else None
                value = float(values[party]) if values is not None else NAN
                row[PARTY_FILE_VALIDATION.column(m)] = value
            row["party_val_samples"] = run.validator.split.sizes[party]
        if "party_test_samples" in columns:
            row["party_test_samples"] = run.local_tester.split.sizes[party]
            for m in (stem, *extra):
                values = run.local_test_metrics.get(m) if scored else None
                value = float(values[party]) if values is not None else NAN
                row[PARTY_FILE_OWN_TEST.column(m)] = value
        row.update({name: values[party] for name, values in hooked.items()})
        rows.append(row)
    return rows
