"""Parties' own models on the pooled test set through the stages they share with the
global model (federated/evaluation/shared_stages.py, issue 40's packed-round cost):
the scores a round reports are bit for bit those of scoring each party's model whole,
on real Fashion-MNIST, packed and sequential."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun
from federated.evaluation.scoring import evaluate
from federated.evaluation.shared_stages import SharedStages
from federated.params import ConfigError
from tests.short_runs import short_run


def fmnist_config(algorithm: str, model: str, execution: str) -> RunConfig:
    """A tiny seeded run that learns within two rounds (test accuracy well above chance)."""
    values = short_run("fmnist", parties=4, rounds=2, fractions=(0.1, 0.05), beta=0.5, seed=3)
    chosen = dict(algorithm=algorithm, model=model, execution=execution)
    # every round's pooled test scores are compared
    scored = dict(party_test_fraction=0.2, personal_test_every=1)
    return RunConfig.from_dict(
        values | chosen | scored | dict(batch_size=16, out_dim=32)
    ).resolved()


def shared_scorer(run: FederatedRun) -> SharedStages:
    return SharedStages(run.global_model)


def through(cache: SharedStages, run: FederatedRun, model: torch.nn.Module):
    """``model`` on the run's test set through the evaluation loop with ``cache``."""
    return evaluate(
        model, run.test_x, run.test_y, run.augmenter, 256, run.task.accumulator(), shared=cache
    )


# method, model, the leading stages its party models share with the global model
METHODS = [
    ("fedper", "simple-cnn", 1),  # the encoder: only head and output layer run per party
    ("lg-fedavg", "simple-cnn", 0),  # each party's own encoder: scored whole
    ("fedbn", "simple-cnn-bn", 0),  # own BatchNorm layers inside the encoder: scored whole
]


@pytest.mark.parametrize("execution", ["packed", "sequential"])
@pytest.mark.parametrize("method, model, shared", METHODS, ids=[m[0] for m in METHODS])
def test_each_round_reports_every_partys_model_scored_whole(
    method, model, shared, execution, fmnist
):
    run = FederatedRun(fmnist_config(method, model, execution), fmnist)
    for _ in range(2):
        row = run.run_round()
        accs, losses = [], []
        for party in range(4):
            own = run._party_model(party)
            assert shared_scorer(run).shared_count(own) == shared
            whole = evaluate(
                own, run.test_x, run.test_y, run.augmenter, 256, run.task.accumulator()
            )
            assert row[f"party_acc/{party}"] == whole.values["acc"]
            accs.append(whole.values["acc"])
            losses.append(whole.values["loss"])
        assert row["test_acc"] == float(np.mean(accs))
        assert row["test_loss"] == float(np.mean(losses))
        assert row["test_acc_std"] == float(np.std(accs))
    # learned (chance: 0.1), so the argmax is not one near-tie class everywhere
    assert row["test_acc"] > 0.2


def test_a_personal_output_layer_alone_shares_encoder_and_head(fmnist):
    """FedPer keeping only the output layer (PFLlib's split): two shared stages, and
    the same scores as the whole model; the outputs are kept per evaluation batch."""
    run = FederatedRun(
        fmnist_config("fedper", "simple-cnn", "packed").replace(personal_layers="classifier"),
        fmnist,
    )
    row = run.run_round()
    scorer = shared_scorer(run)
    batches = -(-run.test_x.shape[0] // 256)
    for party in range(4):
        own = run._party_model(party)
        assert scorer.shared_count(own) == 2
        # the first party's pass fills the cache; the next ones start from it
        via = through(scorer, run, own)
        assert len(scorer._outputs[2]) == batches
        whole = evaluate(own, run.test_x, run.test_y, run.augmenter, 256, run.task.accumulator())
        assert via.values == whole.values
        assert np.array_equal(via.class_correct, whole.class_correct)
        assert row[f"party_acc/{party}"] == whole.values["acc"]


def test_kept_outputs_are_the_global_models_leading_stages_batch_by_batch(fmnist):
    """What the cache holds is the global model's encoder output per evaluation batch,
    bit for bit, though a party's pass computed it; a later pass leaves it unchanged."""
    run = FederatedRun(fmnist_config("fedper", "simple-cnn", "packed"), fmnist)
    run.run_round()
    scorer = shared_scorer(run)
    through(scorer, run, run._party_model(0))
    kept = [x.clone() for x in scorer._outputs[1]]
    through(scorer, run, run._party_model(1))
    for index, start in enumerate(range(0, run.test_x.shape[0], 256)):
        x = run.augmenter.normalize(run.test_x[start : start + 256])
        with torch.no_grad():
            want = run.global_model.eval().encoder(x)
        assert torch.equal(scorer._outputs[1][index], want)
        assert torch.equal(kept[index], want)


def test_over_the_byte_budget_parties_are_scored_whole(fmnist):
    """Stage outputs that would exceed the budget are not kept: None, and the caller
    scores the party whole (the round's numbers do not depend on the budget)."""
    run = FederatedRun(fmnist_config("fedper", "simple-cnn", "packed"), fmnist)
    run.run_round()
    own = run._party_model(0)
    tight = SharedStages(run.global_model, cache_bytes=1000)
    whole = evaluate(own, run.test_x, run.test_y, run.augmenter, 256, run.task.accumulator())
    assert tight.shared_count(own) == 1
    assert through(tight, run, own).values == whole.values
    assert tight._outputs[1] is None and tight.run_for(own) is None
    assert through(tight, run, own).values == whole.values


def test_a_model_with_its_own_forward_is_scored_whole(fmnist):
    """Stages are FedConModel's forward: a subclass with its own is never split."""
    run = FederatedRun(fmnist_config("fedper", "simple-cnn", "packed"), fmnist)
    run.run_round()
    own = copy.deepcopy(run._party_model(0))

    class Twice(type(own)):
        def forward(self, x: torch.Tensor):
            return super().forward(x)

    own.__class__ = Twice
    assert shared_scorer(run).shared_count(own) == 0


def test_scoring_own_models_every_other_round_leaves_nan_between_and_equal_rows(fmnist):
    """``personal_test_every=2``: round 1's pooled test columns are NaN, rounds 2 and 3
    (the last) hold the every-round run's values; every other column is the same."""
    config = fmnist_config("lg-fedavg", "simple-cnn", "packed").replace(rounds=3)
    every = FederatedRun(config, fmnist)
    sparse = FederatedRun(config.replace(personal_test_every=2), fmnist)
    pooled = ("test_acc", "test_loss", "test_acc_std", *(f"party_acc/{p}" for p in range(4)))
    for round_number in (1, 2, 3):
        want, got = every.run_round(), sparse.run_round()
        assert set(want) == set(got)
        for key, value in want.items():
            if key.endswith("seconds") or key == "samples_per_second":
                continue
            skipped = round_number == 1 and key in pooled
            if skipped or (isinstance(value, float) and np.isnan(value)):
                assert np.isnan(got[key]), key
            else:
                assert got[key] == value, key
    assert not np.isnan(want["party_test_acc"])  # the parties' own splits, every round


def test_a_scoring_period_below_one_is_refused_naming_the_field():
    with pytest.raises(ConfigError) as caught:
        fmnist_config("fedper", "simple-cnn", "packed").replace(personal_test_every=0)
    assert caught.value.field == "personal_test_every" and "\n" not in str(caught.value)
