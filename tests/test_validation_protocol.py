"""Held-out party data and federated evaluation (federated/evaluation/holdout.py, validation.py):
disjoint splits, stratification, no test image anywhere, validation off changing nothing,
seeded evaluating shares, exact resume, one-line refusals."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from federated.config.run_config import ConfigError
from federated.engine.party_data import PartyData
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.engine.run_files import RunFiles
from federated.evaluation.holdout import held_out_count, hold_out, stratified_pick
from federated.heterogeneity.partition import PartitionError
from tests.conftest import tiny
from tests.restored_runs import restored_results
from tests.short_runs import PARTY_SCORES
from tests.test_round_loop import results


def test_splits_are_disjoint_cover_the_party_and_keep_its_order():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 5, size=400)
    partition = [np.sort(rng.choice(400, size=n, replace=False)) for n in (7, 50, 120)]
    held = hold_out(partition, labels, 3, 0.2, "party", 0.1)
    for party, idx in enumerate(partition):
        train, val, test = held.train[party], held.val[party], held.local_test[party]
        assert len(val) == held_out_count(len(idx), 0.2)
        assert not set(train) & set(val) and not set(train) & set(test)
        assert not set(val) & set(test)
        assert sorted([*train, *val, *test]) == sorted(idx)
        assert list(train) == [i for i in idx if i in set(train)]  # partition order kept


def test_a_party_holds_out_each_class_in_proportion():
    labels = np.array([0] * 60 + [1] * 30 + [2] * 10)
    mask = stratified_pick(labels, 10, np.random.default_rng(1))
    assert np.bincount(labels[mask], minlength=3).tolist() == [6, 3, 1]
    # fewer picks than classes: the largest remainders (the largest classes) first
    mask = stratified_pick(labels, 2, np.random.default_rng(1))
    assert np.bincount(labels[mask], minlength=3).tolist() == [1, 1, 0]


def test_the_server_slice_is_stratified_over_the_pool_and_leaves_the_parties():
    labels = np.repeat(np.arange(4), 50)
    partition = [np.arange(0, 100), np.arange(100, 200)]
    held = hold_out(partition, labels, 0, 0.1, "server", 0.0)
    assert np.bincount(labels[held.server_val], minlength=4).tolist() == [5, 5, 5, 5]
    kept = np.concatenate(held.train)
    assert not set(kept) & set(held.server_val)
    assert len(kept) + len(held.server_val) == 200


def test_a_party_left_with_nothing_to_train_on_is_one_line():
    labels = np.zeros(12, dtype=np.int64)
    with pytest.raises(PartitionError, match=r"val_fraction=0.5 leaves party 1 \(1 sample"):
        hold_out([np.arange(11), np.arange(11, 12)], labels, 0, 0.5, "party", 0.0)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (dict(val_fraction=1.0), r"val_fraction=1.0 .*0 \(off\) or a fraction in \(0, 1\)"),
        (dict(val_fraction=-0.1), r"val_fraction=-0.1 "),
        (dict(party_test_fraction=1.5), r"party_test_fraction=1.5 "),
        (dict(val_fraction=0.6, party_test_fraction=0.5), r"a fraction < 1 - val_fraction=0.6"),
        (dict(eval_fraction=0.0), r"eval_fraction=0.0 .*a fraction in \(0, 1\]"),
        (dict(val_split="clients"), r"val_split='clients'"),
    ],
)
def test_bad_held_out_values_are_one_line(values, message):
    with pytest.raises(ConfigError, match=message):
        tiny(**values)


def test_no_test_image_is_held_out_and_the_test_set_is_unchanged(synthetic):
    off = PartyData(synthetic, tiny(), "cpu")
    on = PartyData(synthetic, tiny(val_fraction=0.2, party_test_fraction=0.1), "cpu")
    assert off.test_x.equal(on.test_x) and off.test_y.equal(on.test_y)
    # the parties' training positions (on the CPU the rows of the loaded set they use)
    assert on.validation.x.shape[0] + on.local_test.x.shape[0] + on.offsets[-1] == off.offsets[-1]
    assert off.offsets[-1] == len(off.rows) == sum(off.party_sizes)


def test_a_cpu_run_reads_the_loaded_images_and_its_batches_are_its_parties_rows(synthetic):
    """On the CPU the run keeps no copy of the training set (issue 53: 748 MiB at 10⁵
    parties); a party's data and every planned batch are its own rows of the loaded set."""
    run = FederatedRun(tiny(n_parties=3, val_fraction=0.2), synthetic)
    data = run.data
    assert data.train_x.data_ptr() == synthetic.train_x.data_ptr()  # the same storage
    for party, rows in enumerate(data.partition):
        images, labels = data.party(party)
        assert images.equal(synthetic.train_x[rows]) and labels.equal(synthetic.train_y[rows])
    _, plan = run._round_plan(run.draw_parties())
    for batches in plan:
        assert set(batches.index.tolist()) <= set(data.partition[batches.party].tolist())


def test_validation_changes_no_other_draw(synthetic):
    """The same partition and initial weights with and without validation: only the
    held-out samples leave the parties."""
    off = FederatedRun(tiny(), synthetic)
    on = FederatedRun(tiny(val_fraction=0.25), synthetic)
    for a, b in zip(off.data.partition, on.data.partition):
        assert set(b) < set(a)
    for key, value in off.global_model.state_dict().items():
        assert value.equal(on.global_model.state_dict()[key])


def test_rows_carry_size_weighted_validation_and_the_share_evaluating(synthetic, tmp_path):
    config = tiny(rounds=2, n_parties=6, val_fraction=0.25, eval_fraction=0.5)
    run = FederatedRun(config, synthetic)
    files = RunFiles(tmp_path / "parties.csv", tmp_path / "repr")
    rows = []
    for _ in range(2):
        rows.append(run.run_round())
        files.record(run)
    assert [r["val_parties"] for r in rows] == [3, 3]
    assert [r["val_round"] for r in rows] == [1, 2]
    with (tmp_path / "parties.csv").open() as fh:
        parties = [r for r in csv.DictReader(fh) if r["round"] == "2"]
    evaluated = [r for r in parties if not math.isnan(float(r["party_val_acc"]))]
    assert len(evaluated) == 3
    sizes = np.array([int(r["party_val_samples"]) for r in evaluated])
    accs = np.array([float(r["party_val_acc"]) for r in evaluated])
    assert rows[1]["val_acc"] == pytest.approx(float((accs * sizes).sum() / sizes.sum()))
    # another seed draws other evaluating parties from its own stream
    assert 0.0 <= rows[1]["val_acc"] <= 1.0


def test_validation_off_adds_no_column(synthetic):
    row = next(run_rounds(tiny(rounds=1), synthetic))
    assert not [k for k in row if k.startswith("val_")]


@pytest.mark.parametrize("algorithm", ["fedavg", "solo"])
def test_a_restored_run_continues_with_the_same_validation(algorithm, synthetic, tmp_path):
    config = tiny(
        algorithm=algorithm,
        rounds=3,
        eval_fraction=0.5,
        **PARTY_SCORES,
    )
    run = FederatedRun(config, synthetic)
    straight = results([run.run_round() for _ in range(3)])
    assert restored_results(config, synthetic, tmp_path) == straight
    # round 2 is scored (every 2), round 3 is the last: both validate
    assert [r["val_round"] for r in straight] == [0, 2, 3]


def test_local_test_scores_each_party_on_its_own_images(synthetic):
    row = next(run_rounds(tiny(rounds=1, party_test_fraction=0.3), synthetic))
    reweighted = next(run_rounds(tiny(rounds=1), synthetic))
    assert row["party_acc_mean"] != reweighted["party_acc_mean"]


def test_the_per_party_note_names_what_the_parties_were_scored_on():
    import pandas as pd

    from analysis.tables.party_tables import party_accuracy_note

    own = party_accuracy_note(pd.DataFrame({"party_test_fraction": [0.1, 0.1]}))
    assert "own held-out local test split" in own
    pooled = party_accuracy_note(pd.DataFrame({"party_test_fraction": [0.0]}))
    assert pooled.startswith("Per-party accuracy: the test set re-weighted")
    assert "re-weighted" in party_accuracy_note(pd.DataFrame({"beta": [0.5]}))
