"""The parties' own state off the heap (federated/engine/party_store.py): a run's rows are
the same whether its parties' states stay in memory or wait on disk, a checkpoint
writes only the parties that changed since the previous one, the archive keeps what
the last two checkpoints name, and a run restored from the archive continues exactly."""

from __future__ import annotations

import os

import pytest
import torch

from federated.config.data_checks import with_data_checked
from federated.engine import round_loop
from federated.engine.party_store import INITIAL, PartyArchive, PartyStates, state_bytes
from federated.engine.round_loop import FederatedRun
from federated.models import party_memory
from federated.params import ConfigError
from federated.trainable import load_run_state, save_run_state
from tests.conftest import batchnorm_model_for, tiny
from tests.test_round_loop import results

# 8 parties, 3 drawn a round: most rounds leave most parties' states as they were
CROSS_DEVICE = dict(n_parties=8, sample_fraction=0.375, rounds=4)


def archive_files(root) -> set[str]:
    return {name for _, _, names in os.walk(root) for name in names if name.endswith(".pt")}


@pytest.mark.filterwarnings("ignore:packed execution does not apply")
@pytest.mark.parametrize("algorithm", ["scaffold", "moon", "ditto", "solo"])
def test_rows_are_the_same_when_states_wait_on_disk(algorithm, synthetic):
    # a 1 MiB budget holds about two parties' states of this CNN: the rest go to disk
    # and are read back when drawn or scored
    config = tiny(algorithm=algorithm, **CROSS_DEVICE, **batchnorm_model_for(algorithm))
    in_memory = FederatedRun(config, synthetic)
    on_disk = FederatedRun(config.replace(party_memory_mib=1), synthetic)
    assert results([in_memory.run_round() for _ in range(4)]) == results(
        [on_disk.run_round() for _ in range(4)]
    )
    assert on_disk.party_states.spilled_bytes > 0
    assert on_disk.party_states.resident_bytes <= 2**20
    for mine, theirs in zip(on_disk.party_states, in_memory.party_states):
        assert mine.keys() == theirs.keys()
        assert state_bytes(mine) == state_bytes(theirs)
        for key in mine:
            a, b = mine[key], theirs[key]
            if isinstance(a, dict):
                assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_writes_the_changed_parties_and_the_archive_keeps_two(synthetic, tmp_path):
    config = tiny(algorithm="scaffold", **{**CROSS_DEVICE, "rounds": 5})
    straight = results(list(round_loop.run_rounds(config, synthetic)))
    run = FederatedRun(config, synthetic)
    archive = PartyArchive(tmp_path / "party_states")
    indexes = []
    for k in range(1, 5):
        run.run_round()
        changed = run.party_states.changed_since_checkpoint
        assert len(changed) == 3
        save_run_state(run, tmp_path / f"checkpoint_{k}", archive)
        saved = load_run_state(tmp_path / f"checkpoint_{k}")["parties"]
        index = saved["index"].tolist()
        indexes.append(index)
        # this checkpoint's files: exactly the parties drawn since the last one
        assert {p for p, v in enumerate(index) if v == k} == changed
        assert saved["previous"].tolist() == (indexes[-2] if k > 1 else [INITIAL] * 8)
        # the archive holds what this checkpoint and the one before name, nothing else
        named = {f"{p}-{v}.pt" for idx in indexes[-2:] for p, v in enumerate(idx) if v != INITIAL}
        assert archive_files(tmp_path / "party_states") == named
    # a fresh run restored from the third checkpoint reads its parties from the archive
    # (the fourth's files are there too: it never reads them, and writes them again)
    restored = FederatedRun(config, synthetic)
    restored.load_state_dict(load_run_state(tmp_path / "checkpoint_3"), archive)
    assert results([restored.run_round() for _ in range(2)]) == straight[3:]


def test_a_restored_run_with_states_on_disk_continues_exactly(synthetic, tmp_path):
    config = tiny(algorithm="moon", party_memory_mib=1, **CROSS_DEVICE)
    straight = results(list(round_loop.run_rounds(config, synthetic)))
    first = FederatedRun(config, synthetic)
    archive = PartyArchive(tmp_path / "states")
    head = []
    for k in (1, 2):
        head += results([first.run_round()])
        save_run_state(first, tmp_path / f"c{k}", archive)
    restored = FederatedRun(config, synthetic)
    restored.load_state_dict(load_run_state(tmp_path / "c2"), archive)
    assert head + results([restored.run_round() for _ in range(2)]) == straight
    # and it checkpoints on from there: its next files name its rounds
    save_run_state(restored, tmp_path / "c4", archive)
    index = load_run_state(tmp_path / "c4")["parties"]["index"]
    assert int(index.max()) == 4


def test_a_checkpoint_without_an_archive_holds_every_state(synthetic, tmp_path):
    config = tiny(algorithm="scaffold", **CROSS_DEVICE)
    run = FederatedRun(config, synthetic)
    run.run_round()
    save_run_state(run, tmp_path)
    saved = load_run_state(tmp_path)["parties"]
    assert isinstance(saved, list) and len(saved) == 8
    restored = FederatedRun(config, synthetic)
    with pytest.raises(ValueError, match="archive: none given"):
        restored.load_state_dict(
            {
                **load_run_state(tmp_path),
                "parties": run.party_states.checkpoint(PartyArchive(tmp_path / "a"), 1),
            }
        )


def test_a_state_file_that_is_not_a_party_state_is_refused(tmp_path):
    archive = PartyArchive(tmp_path)
    archive.write(0, 3, {"c": torch.zeros(2)})
    with open(archive.path(0, 3), "wb") as fh:
        fh.write(b"not a torch file")
    states = PartyStates([{"c": None}])
    states.restore({"index": torch.tensor([3]), "previous": torch.tensor([INITIAL])}, archive)
    with pytest.raises(ValueError, match=r"0-3\.pt: not a fedsweep party state, refused"):
        states[0]


def test_states_that_fit_neither_memory_nor_disk_are_refused_before_work(monkeypatch):
    """A round's parties must fit in memory; the states the run can write (min(N,
    rounds x a round's parties)) in the memory budget (half the memory available) and
    the free disk together (MOON: one previous model a party)."""
    state = party_memory.model_state_bytes("simple-cnn", tiny().spec, 32, True)
    monkeypatch.setattr(party_memory, "available_memory", lambda: 3 * state + 1)
    monkeypatch.setattr(party_memory, "spill_space", lambda folder: 2 * state)
    with pytest.raises(ConfigError) as caught:  # 8 states > 1.5 in memory + 2 on disk
        with_data_checked(tiny(algorithm="moon", n_parties=8, sample_fraction=0.375, rounds=3))
    message = str(caught.value)
    assert caught.value.field == "n_parties" and "\n" not in message
    assert "for 8 parties" in message and "free on this node's disk" in message
    # 2 rounds of 3 write at most 6 states: still more than 3.5, and the message says so
    with pytest.raises(ConfigError, match="for the 6 parties its 2 rounds of 3 train"):
        with_data_checked(tiny(algorithm="moon", n_parties=8, sample_fraction=0.375))
    # 3 rounds of 1 write at most 3 of the 8 parties' states: they fit, the run is accepted
    with_data_checked(tiny(algorithm="moon", n_parties=8, sample_fraction=0.125, rounds=3))
    with_data_checked(tiny(algorithm="moon", n_parties=3))  # 3 states: 1.5 + 2 hold them
    with pytest.raises(ConfigError, match="for the 4 parties a round trains"):
        with_data_checked(tiny(algorithm="moon", n_parties=4))  # 4 at once > memory


def test_a_damaged_party_state_on_restore_continues_from_an_older_checkpoint(
    synthetic, tmp_path, capsys
):
    """A file the newest checkpoint names is damaged: the trial continues from the kept
    checkpoint before it, in one warning line naming the checkpoint and the file, and its
    rows equal an uninterrupted run's; with every checkpoint damaged, from round 0."""
    from ray import tune

    from federated.trainable import restore_candidates, restored_run

    config = tiny(algorithm="scaffold", **{**CROSS_DEVICE, "rounds": 5})
    straight = results(list(round_loop.run_rounds(config, synthetic)))
    run = FederatedRun(config, synthetic)
    archive = PartyArchive(tmp_path / "party_states")
    for k in (1, 2, 3):
        run.run_round()
        save_run_state(run, tmp_path / f"checkpoint_00000{k}", archive)
    index = load_run_state(tmp_path / "checkpoint_000003")["parties"]["index"].tolist()
    damaged = archive.path(index.index(3), 3)  # a state only the newest checkpoint names
    with open(damaged, "wb") as fh:
        fh.write(b"not a state")
    newest = tune.Checkpoint(str(tmp_path / "checkpoint_000003"))

    restored, used, _ = restored_run(config, restore_candidates(newest), archive)
    assert used.path.endswith("checkpoint_000002") and restored.round == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: checkpoint_000003 of this trial cannot be restored (")
    assert damaged in line and line.endswith("; continuing from an older checkpoint")
    assert results([restored.run_round() for _ in range(3)]) == straight[2:]

    for k in (1, 2):  # every checkpoint damaged: the trial starts again
        (tmp_path / f"checkpoint_00000{k}" / "run_state.pt").write_bytes(b"")
    restored, used, _ = restored_run(config, restore_candidates(newest), archive)
    assert used is None and restored.round == 0
    assert capsys.readouterr().err.splitlines()[-1].endswith("continuing from round 0")
