"""FedBN, the ``batchnorm`` rule and the BatchNorm variant of the simple CNN (issue 40).

``batchnorm=averaged`` averages running statistics like weights and never the step
counter; ``batchnorm=local`` keeps each party's statistics in its state; FedBN keeps
whole BatchNorm layers local.  Bad values are refused in one line naming the field.
"""

from __future__ import annotations

import copy

import pytest
import torch

from federated.algorithms.batchnorm_rule import batchnorm_entries
from federated.algorithms.party_own_state import KEPT_KEY
from federated.config.data_checks import with_data_checked
from federated.engine.round_loop import FederatedRun
from federated.evaluation.scoring import evaluate
from federated.params import ConfigError
from federated.server import aggregation_weights
from tests.conftest import tiny
from tests.test_packed_execution import WEIGHT_ATOL

BN = dict(model="simple-cnn-bn")


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(algorithm="fedbn"), "model"),  # simple-cnn has no BatchNorm layer
        (dict(algorithm="fedbn", batchnorm="averaged", **BN), "batchnorm"),
        (dict(batchnorm="mean", **BN), "batchnorm"),
        (dict(finetune_epochs=-1), "finetune_epochs"),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_the_field(overrides, field):
    with pytest.raises(ConfigError) as caught:  # values on resolving, the model's after
        with_data_checked(tiny(**overrides))
    assert caught.value.field == field
    assert "\n" not in str(caught.value)


def test_each_method_states_its_rule():
    assert tiny().batchnorm == "averaged"
    assert tiny(algorithm="fedper").batchnorm == "averaged"
    assert tiny(algorithm="fedbn", **BN).batchnorm == "local"
    assert tiny(batchnorm="local", **BN).to_dict()["batchnorm"] == "local"


def test_the_batchnorm_cnn_is_the_simple_cnn_with_two_batchnorm_layers(synthetic):
    """Same random draws as the plain CNN (BatchNorm layers draw none); its BatchNorm
    entries are the two layers' weights, biases, statistics and counters."""
    plain = FederatedRun(tiny(), synthetic).global_model.state_dict()
    with_bn = FederatedRun(tiny(**BN), synthetic).global_model.state_dict()
    entries = batchnorm_entries(with_bn)
    assert entries.layers == ("encoder.bn1", "encoder.bn2")
    assert set(with_bn) - set(entries.every) == set(plain)
    assert all(torch.equal(plain[k], with_bn[k]) for k in plain)


def test_averaged_statistics_are_the_weighted_mean_and_the_counter_is_never_averaged(synthetic):
    """Round 1 starts every party from the initial model under both rules, so the local
    run's saved party statistics are what the averaged run's parties sent."""
    config = tiny(n_parties=3, rounds=1, **BN)
    averaged = FederatedRun(config, synthetic)
    averaged.run_round()
    local = FederatedRun(config.replace(batchnorm="local"), synthetic)
    local.run_round()
    weights = aggregation_weights(local.party_sizes)
    glob = averaged.global_model.state_dict()
    for key in ("encoder.bn1.running_mean", "encoder.bn2.running_var"):
        mean = sum(w * s[KEPT_KEY][key] for w, s in zip(weights, local.party_states))
        assert torch.allclose(glob[key], mean, atol=1e-6)
        assert not torch.equal(local.global_model.state_dict()[key], glob[key])
    # the server never moves the counter, and under local never the statistics
    assert int(glob["encoder.bn1.num_batches_tracked"]) == 0
    local_glob = local.global_model.state_dict()
    assert torch.equal(local_glob["encoder.bn1.running_mean"], torch.zeros(6))
    assert all(KEPT_KEY not in s for s in averaged.party_states)
    assert all(int(s[KEPT_KEY]["encoder.bn1.num_batches_tracked"]) > 0 for s in local.party_states)


def test_local_statistics_evaluate_each_party_with_its_own(synthetic):
    """Under batchnorm=local FedAvg's parties are evaluated with the global weights and
    their own statistics: each one's per-party score differs from the global model's."""
    run = FederatedRun(
        tiny(n_parties=3, party_test_fraction=0.2, **BN, batchnorm="local"), synthetic
    )
    run.run_round()
    model = copy.deepcopy(run.global_model)
    for party in range(3):
        model.load_state_dict(run.party_states[party][KEPT_KEY], strict=False)
        ours = run._party_model(party)
        for key, value in model.state_dict().items():
            assert torch.equal(ours.state_dict()[key], value), key


def test_fedbn_keeps_every_batchnorm_layer_local_and_averages_the_rest(synthetic):
    config = tiny(algorithm="fedbn", n_parties=3, personal_test_every=1, **BN)
    run = FederatedRun(config, synthetic)
    initial = copy.deepcopy(run.global_model.state_dict())
    row = run.run_round()
    state = run.global_model.state_dict()
    entries = batchnorm_entries(state)
    assert all(torch.equal(state[k], initial[k]) for k in entries.every)
    assert not torch.equal(state["encoder.conv1.weight"], initial["encoder.conv1.weight"])
    model = copy.deepcopy(run.global_model)
    for party in range(3):
        own = run.party_states[party]["local"]
        assert sorted(own) == sorted(entries.every)
        assert not torch.equal(own["encoder.bn1.weight"], initial["encoder.bn1.weight"])
        model.load_state_dict({**state, **own})
        scores = evaluate(model, run.test_x, run.test_y, run.augmenter, 256, run.task.accumulator())
        assert scores.values["acc"] == row[f"party_acc/{party}"]
    # only the shared entries travel
    assert row["bytes_up"] < 3 * run.model_bytes


def test_fedbn_packed_gives_the_sequential_party_layers(synthetic):
    """Packed FedBN trains each party's own BatchNorm layers as the sequential path
    does.  Tolerance: BatchNorm divides by the batch's standard deviation, so the float
    order of grouped convolutions (1e-8 on the plain CNN, WEIGHT_ATOL) reaches the
    statistics amplified: measured 1.4e-5 on a running mean of 0.7 after one round."""
    config = tiny(algorithm="fedbn", rounds=1, n_parties=5, data_fraction=0.06, **BN)
    runs = {}
    for execution in ("sequential", "packed"):
        run = FederatedRun(config.replace(execution=execution), synthetic)
        run.run_round()
        runs[execution] = run
    assert type(runs["packed"].trainer).__name__ == "PackedTrainer"
    for party in range(5):
        seq = runs["sequential"].party_states[party]["local"]
        packed = runs["packed"].party_states[party]["local"]
        assert sorted(seq) == sorted(packed)
        for key in seq:
            torch.testing.assert_close(packed[key], seq[key], rtol=1e-4, atol=1e-4)
    glob = runs["packed"].global_model.state_dict()
    for key, value in runs["sequential"].global_model.state_dict().items():
        assert float((glob[key].double() - value.double()).abs().max()) <= 10 * WEIGHT_ATOL, key
