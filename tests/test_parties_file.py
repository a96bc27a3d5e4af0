"""``parties.csv`` grows by appending, a restored run continues it (issue 56): after a
kill and a restore from a checkpoint the file equals an uninterrupted run's byte for
byte, whether the trial folder still holds it or only Tune's storage does; the report's
reader leaves out a cut last append and names the scored rounds a file lacks."""

from __future__ import annotations

import json

import pytest

from analysis.reading.loading import load_results
from analysis.reading.trial_files import DamagedFileError, read_parties
from analysis.tables.party_tables import party_frame
from federated.engine.round_loop import FederatedRun
from federated.engine.run_files import RunFiles, rows_through
from federated.trainable import (
    checkpoint_parties,
    load_run_state,
    save_run_state,
    stored_parties,
)
from tests.conftest import tiny
from tests.test_report_damaged_files import ROUNDS, make_sweep

ROUNDS_RUN = 4
CHECKPOINT = 2  # the round the checkpoint holds; round 3 then runs again after the kill


def _config():
    # a personalised method, every party's own model scored every round
    return tiny(rounds=ROUNDS_RUN, algorithm="fedper", personal_test_every=1)


def _run_to_the_end(run: FederatedRun, files: RunFiles) -> None:
    while not run.finished:
        run.run_round()
        files.record(run)


def test_a_restored_run_continues_its_parties_csv_byte_for_byte(synthetic, tmp_path):
    straight = tmp_path / "straight"
    _run_to_the_end(FederatedRun(_config(), synthetic), RunFiles.in_folder(straight))
    expected = (straight / "parties.csv").read_bytes()
    per_round = expected.count(b"\n") - 1
    assert per_round == 4 * ROUNDS_RUN  # 4 parties, every round

    # the interrupted trial: checkpoint after round 2, round 3 appended, then killed in
    # the middle of round 4's append (a line without its end)
    killed = tmp_path / "killed"
    run = FederatedRun(_config(), synthetic)
    files = RunFiles.in_folder(killed)
    for _ in range(CHECKPOINT + 1):
        run.run_round()
        files.record(run)
        if run.round == CHECKPOINT:
            save_run_state(run, tmp_path / "checkpoint")
    with (killed / "parties.csv").open("ab") as fh:
        fh.write(b"4,0,0.12")
    at_kill = (killed / "parties.csv").read_bytes()

    # restored in the same folder (Tune's retry after a failure)
    restored = FederatedRun(_config(), synthetic)
    restored.load_state_dict(load_run_state(tmp_path / "checkpoint"))
    _run_to_the_end(restored, RunFiles.in_folder(killed, start_round=restored.round))
    assert (killed / "parties.csv").read_bytes() == expected

    # resumed in a fresh folder (Tuner.restore): the copy in storage is continued
    fresh = tmp_path / "fresh"
    resumed = FederatedRun(_config(), synthetic)
    resumed.load_state_dict(load_run_state(tmp_path / "checkpoint"))
    files = RunFiles.in_folder(fresh, start_round=resumed.round, previous=lambda: at_kill)
    _run_to_the_end(resumed, files)
    assert (fresh / "parties.csv").read_bytes() == expected


def test_each_scored_round_appends_its_rows_to_the_same_file(synthetic, tmp_path):
    run = FederatedRun(tiny(rounds=3), synthetic)
    files = RunFiles.in_folder(tmp_path)
    path = tmp_path / "parties.csv"
    before: bytes | None = None
    inode = None
    for _ in range(3):
        run.run_round()
        assert files.record(run) == [path]
        data = path.read_bytes()
        if before is not None:  # appended in place, never rewritten
            assert data.startswith(before) and path.stat().st_ino == inode
            assert data[len(before) :].count(b"\n") == 4  # this round's 4 rows only
        before, inode = data, path.stat().st_ino


def test_the_rows_a_restored_run_keeps():
    data = b"round,party,party_acc\r\n1,0,0.5\r\n1,1,0.5\r\n2,0,0.6\r\n2,1,0.6\r\n3,0,0.7\r\n3,1"
    assert (
        rows_through(data, 2)
        == b"round,party,party_acc\r\n1,0,0.5\r\n1,1,0.5\r\n2,0,0.6\r\n2,1,0.6\r\n"
    )
    assert rows_through(data, 9) == data[: data.rfind(b"\n") + 1]  # the cut line dropped
    assert rows_through(b"", 2) is None and rows_through(b"round,par", 2) is None
    assert rows_through(b"garbage\n1,0,0.5\n", 2) is None


def test_a_fresh_folder_without_an_earlier_copy_starts_a_new_file(synthetic, tmp_path):
    run = FederatedRun(tiny(rounds=3), synthetic)
    run.run_round()
    run.run_round()  # as if restored from round 2, with no file anywhere
    files = RunFiles.in_folder(tmp_path, start_round=2, previous=lambda: None)
    run.run_round()
    files.record(run)
    rows = read_parties(tmp_path / "parties.csv")
    assert sorted({r["round"] for r in rows}) == [3]


PARTIES = "round,party,party_acc\n" + "".join(
    f"{r},{p},0.5\n" for r in range(6, 31) for p in range(3)
)


def test_the_reader_leaves_out_a_cut_append_and_says_so(tmp_path):
    path = tmp_path / "parties.csv"
    path.write_text(PARTIES + "31,0,0.5\n31,1,0.")  # killed mid-way through round 31
    with pytest.raises(DamagedFileError, match="cut short"):  # a finished trial's: damage
        read_parties(path, problems=[])
    problems: list[str] = []
    rows = read_parties(path, appending=True, problems=problems)
    assert max(r["round"] for r in rows) == 30 and len(rows) == 3 * 25
    assert problems == [
        f"{path}: its last append is incomplete (the trial was writing it, or was stopped "
        "mid-write); left out: the cut last line and round 31's 1 of 3 rows"
    ]


def test_the_reader_names_the_scored_rounds_a_file_lacks(tmp_path):
    path = tmp_path / "parties.csv"
    path.write_text(PARTIES)
    problems: list[str] = []
    rows = read_parties(path, problems=problems, scored_rounds=range(1, 31))
    assert len(rows) == 3 * 25
    assert problems == [
        f"{path}: lacks rounds 1-5 (5 of the 30 rounds result.json scored per party); those "
        "rounds are not counted"
    ]
    problems.clear()
    read_parties(path, problems=problems, scored_rounds=[6, 30])
    assert problems == []


def test_the_report_names_a_per_party_file_with_missing_rounds(tmp_path):
    folder, trials = make_sweep(tmp_path)
    # trial 0's result.json scored round 2 per party; its parties.csv kept round 1 only
    (trials[0] / "parties.csv").write_text("round,party,party_acc\n1,0,0.5\n1,1,0.5\n")
    not_counted: list[str] = []
    frame = party_frame(load_results(folder), not_counted)
    assert len(not_counted) == 1 and not_counted[0].startswith(str(trials[0] / "parties.csv"))
    assert f"lacks round {ROUNDS} (1 of the 1 rounds result.json" in not_counted[0]
    assert set(frame["trial"]) == {t.name for t in trials}  # its round 1 still counts


def test_the_report_reads_an_interrupted_trials_file_without_its_cut_append(tmp_path):
    folder, trials = make_sweep(tmp_path)
    manifest_file = folder / "fedsweep_sweep.json"
    manifest = json.loads(manifest_file.read_text())
    manifest_file.write_text(json.dumps({**manifest, "status": "interrupted"}))
    result = trials[0] / "result.json"  # trial 0 stopped after round 1 ...
    result.write_text(result.read_text().splitlines()[0] + "\n")
    parties = trials[0] / "parties.csv"  # ... in the middle of appending round 2
    parties.write_text(parties.read_text()[:-4])
    results = load_results(folder)
    assert results.trials.set_index("trial").loc[trials[0].name, "status"] == "interrupted"
    not_counted: list[str] = []
    frame = party_frame(results, not_counted)
    assert not_counted == [
        f"{parties}: its last append is incomplete (the trial was writing it, or was stopped "
        "mid-write); left out: the cut last line"
    ]
    assert len(frame[frame["trial"] == trials[0].name]) == 2  # its complete rows count


def test_a_resumed_trial_reads_the_file_beside_its_checkpoint_in_storage(tmp_path):
    from ray import tune

    trial = tmp_path / "storage" / "sweep" / "trial_00000"
    (trial / "checkpoint_000002").mkdir(parents=True)
    checkpoint = tune.Checkpoint(str(trial / "checkpoint_000002"))
    assert stored_parties(checkpoint) is None  # the storage holds no parties.csv
    (trial / "parties.csv").write_bytes(PARTIES.encode())
    assert stored_parties(checkpoint) == PARTIES.encode()


def test_a_checkpoint_holds_the_rows_written_before_it(tmp_path):
    """A restored trial takes parties.csv from its checkpoint, which holds the rows up to
    the checkpoint's round exactly (the storage copy may lag a killed driver); a
    checkpoint written before it held one gives None, and the storage copy is read."""
    assert checkpoint_parties(tmp_path) is None
    rows = b"round,party,party_acc,party_samples\n1,0,0.5,10\n"
    (tmp_path / "parties.csv").write_bytes(rows)
    assert checkpoint_parties(tmp_path) == rows
