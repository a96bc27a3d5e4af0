"""Evaluation with local fine-tuning (``finetune_epochs``; FedAvg+FT, issue 40).

Each evaluating party fine-tunes a copy of its model on its own training data before
its local test and validation scores; the copy is thrown away, so training, the
global model and the pooled test set are exactly a run without it.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from federated.engine.round_loop import FederatedRun
from federated.evaluation.fine_tuning import FineTuner
from federated.evaluation.scoring import evaluate
from federated.sgd_rule import SgdRule
from tests.conftest import tiny

OWN_SPLITS = dict(n_parties=4, data_fraction=0.1, val_fraction=0.2, party_test_fraction=0.2)
TRAINING = ("test_acc", "test_loss", "train_loss", "samples_this_round", "bytes_up")
PARTY = ("party_test_acc", "party_test_acc_mean", "val_acc", "party_val_acc_mean")


def _rows(config, synthetic, rounds=2):
    run = FederatedRun(config, synthetic)
    return run, [run.run_round() for _ in range(rounds)]


@pytest.mark.parametrize("algorithm", ["fedavg", "fedper"])
def test_fine_tuning_changes_party_scores_and_nothing_of_training(algorithm, synthetic):
    plain, plain_rows = _rows(tiny(algorithm=algorithm, **OWN_SPLITS), synthetic)
    tuned, tuned_rows = _rows(tiny(algorithm=algorithm, finetune_epochs=1, **OWN_SPLITS), synthetic)
    for a, b in zip(plain_rows, tuned_rows):
        for key in TRAINING:
            # FedPer's round 1 holds no pooled test value (personal_test_every): NaN in both
            assert a[key] == b[key] or (math.isnan(a[key]) and math.isnan(b[key])), key
        # the generated data's labels are noise: a tuned model may score the same
        # accuracy, never the same loss
        assert a["val_loss"] != b["val_loss"]
        if algorithm == "fedavg":  # FedPer's own heads may keep their accuracy here
            assert all(a[key] != b[key] for key in PARTY)
        # the rows record what ran: every party's own splits scored a fine-tuned copy
        assert "finetuned_parties" not in a and b["finetuned_parties"] == 4
    ours, theirs = plain.global_model.state_dict(), tuned.global_model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_the_reported_party_score_is_the_fine_tuned_copy_of_the_global_model(synthetic):
    """Round 1's party 2: the global model fine-tuned with the tuner's own seed, on its
    local test split, is the row's per-party value (parties.csv's input)."""
    run = FederatedRun(tiny(finetune_epochs=2, **OWN_SPLITS), synthetic)
    run.run_round()
    config = run.config
    tuner = FineTuner(
        2,
        run.task,
        run.augmenter,
        run.data.party,
        config.batch_size,
        SgdRule(config.lr, config.momentum, config.weight_decay),
        config.seed,
    )
    before = copy.deepcopy(run.global_model.state_dict())
    model = tuner.tuned(run.global_model, 2, 1)
    assert all(torch.equal(before[k], v) for k, v in run.global_model.state_dict().items())
    split = run.local_tester.split
    rows = split.owner == 2
    scores = evaluate(
        model, split.x[rows], split.y[rows], run.augmenter, 256, run.task.accumulator()
    )
    assert scores.values["acc"] == pytest.approx(run.party_scorer.last[2], abs=1e-12)


def test_fine_tuning_is_seeded(synthetic):
    config = tiny(finetune_epochs=1, **OWN_SPLITS)
    first = _rows(config, synthetic)[1]
    again = _rows(config, synthetic)[1]
    assert [r["party_test_acc_std"] for r in first] == [r["party_test_acc_std"] for r in again]


def test_fine_tuning_without_own_splits_is_warned_about():
    from federated.config.inert_settings import inert_settings

    (line,) = inert_settings(tiny(finetune_epochs=2))
    assert line.startswith("warning: finetune_epochs=2 has no effect: val_fraction=0")
    assert inert_settings(tiny(finetune_epochs=2, val_fraction=0.1)) == []


class CountingRule(SgdRule):
    """The run's SGD rule, counting its steps and the rows of each step's batch."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.steps = 0

    def step_reached(self, params, momenta) -> None:
        self.steps += 1
        super().step_reached(params, momenta)


def test_fine_tuning_takes_the_batches_a_round_would(synthetic):
    """Its steps are a batch plan's: per epoch the party's full batches only (the last
    partial batch dropped, as training drops it), so 2 epochs of a party of n rows at
    batch 64 are 2 * (n // 64) steps, not 2 * ceil(n / 64)."""
    from federated.execution.batch_plan import batches_per_epoch

    run = FederatedRun(tiny(finetune_epochs=2, **OWN_SPLITS), synthetic)
    config = run.config
    rule = CountingRule(config.lr, config.momentum, config.weight_decay)
    tuner = FineTuner(
        2, run.task, run.augmenter, run.data.party, config.batch_size, rule, config.seed
    )
    rows = int(run.data.party(1)[0].shape[0])
    assert rows % config.batch_size != 0  # a partial batch to drop
    tuner.tuned(run.global_model, 1, 1)
    assert rule.steps == 2 * batches_per_epoch(rows, config.batch_size) == 2 * (rows // 64)
