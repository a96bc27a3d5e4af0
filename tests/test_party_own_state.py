"""A party's own state is one declaration (``Algorithm.own_state``,
federated/algorithms/party_own_state.py), read by every layer (issue 51).

FedBN's BatchNorm layers and ``batchnorm=local``'s statistics are the same mechanism,
stored once; the server never moves what parties keep, under any server optimizer; a
method outside fedsweep declares kept entries and the engine applies them untouched;
the memory check counts the state MOON and SCAFFOLD keep; what the declaration replaced
is refused in one line.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch

from federated.algorithms.base import Algorithm
from federated.algorithms.batchnorm_rule import batchnorm_entries
from federated.algorithms.party_own_state import KEPT_KEY, KeptEntries, OwnState
from federated.config.data_checks import with_data_checked
from federated.engine.round_loop import FederatedRun
from federated.params import ConfigError, MethodParams
from tests.conftest import tiny

BN = dict(model="simple-cnn-bn")


@dataclass(frozen=True)
class OutputLayer(KeptEntries):
    """A kept-entries kind written outside fedsweep: the output layer."""

    def names(
        self, model: torch.nn.Module, params: MethodParams, model_name: str | None
    ) -> frozenset[str]:
        return frozenset(n for n in model.state_dict() if n.startswith("classifier."))


class KeepsOutputLayer(Algorithm):
    """FedAvg whose parties keep their output layer: a declaration, no hook."""

    name = "keeps-output-layer"
    packable = True
    dp_obstacle = None
    own_state = OwnState(keeps=OutputLayer())


class ClashingStateKey(KeepsOutputLayer):
    """Keeps entries, and names its own party state as they are stored."""

    name = "clashing-state-key"

    def init_party_state(self, party: int) -> dict:
        return {KEPT_KEY: 0}


def test_fedbn_and_local_batchnorm_hold_the_statistics_once(synthetic):
    """One key of party state holds everything a party keeps: FedBN's layers (its
    statistics among them), batchnorm=local's statistics and counters, and LG-FedAvg's
    encoder with batchnorm=local (whose BatchNorm layers it keeps already)."""
    cases = {
        "fedbn": dict(algorithm="fedbn"),
        "fedavg": dict(algorithm="fedavg", batchnorm="local"),
        "lg-fedavg": dict(algorithm="lg-fedavg", batchnorm="local"),
    }
    for name, overrides in cases.items():
        run = FederatedRun(tiny(rounds=1, n_parties=3, **BN, **overrides), synthetic)
        run.run_round()
        names = list(run.global_model.state_dict())
        entries = batchnorm_entries(names)
        expected = {
            "fedbn": set(entries.every),
            "fedavg": set(entries.statistics + entries.counters),
            "lg-fedavg": {n for n in names if n.startswith("encoder.")},
        }[name]
        for state in run.party_states:
            assert list(state) == [KEPT_KEY], name
            assert set(state[KEPT_KEY]) == expected, name
            assert int(state[KEPT_KEY]["encoder.bn1.num_batches_tracked"]) > 0
        assert run.own.kept == frozenset(expected)


@pytest.mark.parametrize("server_optimizer", ["avg", "fedavgm", "fedadam"])
def test_the_server_never_moves_what_the_parties_keep(server_optimizer, synthetic):
    """FedPer's head and batchnorm=local's statistics keep the initial model's values on
    the server through two rounds of every server optimizer, which steps only the
    entries it moves; every shared parameter moves."""
    config = tiny(algorithm="fedper", server_optimizer=server_optimizer, batchnorm="local", **BN)
    run = FederatedRun(config, synthetic)
    before = copy.deepcopy(run.global_model.state_dict())
    run.run_round()
    run.run_round()
    after = run.global_model.state_dict()
    kept = run.own.kept
    assert {n for n in kept if n.startswith("classifier.")} and "encoder.bn1.running_mean" in kept
    assert all(torch.equal(after[k], before[k]) for k in run.own.server_skips)
    assert not set(run._float_keys) & run.own.server_skips
    shared = [n for n, _ in run.global_model.named_parameters() if n not in kept]
    assert all(not torch.equal(after[k], before[k]) for k in shared)
    server = run.server.state_dict()
    moments = [v for v in server.values() if isinstance(v, list)]
    assert all(len(m) == len(run._float_keys) for m in moments)


def test_a_new_method_declaring_kept_entries_needs_no_engine_change(synthetic):
    """A plug-in method that declares its output layer kept trains, aggregates and
    evaluates exactly as FedPer with ``personal_layers=classifier``: same global model,
    same party states, same rows."""
    common = dict(projection_head=False, personal_test_every=1, party_test_fraction=0.2)
    plugin = FederatedRun(tiny(algorithm=f"{__name__}:KeepsOutputLayer", **common), synthetic)
    fedper = FederatedRun(
        tiny(algorithm="fedper", personal_layers="classifier", **common), synthetic
    )
    for _ in range(2):
        ours, theirs = plugin.run_round(), fedper.run_round()
        for key in ("test_acc", "test_acc_std", "party_acc/0", "bytes_up", "train_loss"):
            assert ours[key] == theirs[key], key
    assert plugin.own.kept == fedper.own.kept == {"classifier.weight", "classifier.bias"}
    for mine, theirs in zip(plugin.party_states, fedper.party_states):
        assert all(torch.equal(mine[KEPT_KEY][k], theirs[KEPT_KEY][k]) for k in theirs[KEPT_KEY])
    glob = fedper.global_model.state_dict()
    assert all(torch.equal(v, glob[k]) for k, v in plugin.global_model.state_dict().items())
    assert KeepsOutputLayer.evaluates_own_models()


@pytest.mark.parametrize(
    "overrides, per_party_copies, words",
    [
        (dict(algorithm="moon", prev_models=2), 2, "2 copies"),  # its previous models
        (dict(algorithm="scaffold"), 1, "1 copy"),  # its control variate c_i
        (dict(algorithm="ditto"), 2, "2 copies"),  # personal model and its momentum
    ],
)
def test_the_memory_check_counts_the_state_a_method_keeps(
    overrides, per_party_copies, words, monkeypatch
):
    """N x the copies a party keeps against the memory this machine has (simple-cnn has
    no buffers: its parameters are its whole state)."""
    from federated.models import party_memory

    state = party_memory.model_state_bytes("simple-cnn", tiny().spec, 32, True)
    monkeypatch.setattr(party_memory, "available_memory", lambda: 4 * per_party_copies * state - 1)
    # the memory check needs the model: the data step's (federated/config/data_checks.py)
    with pytest.raises(ConfigError) as caught:
        with_data_checked(tiny(n_parties=4, **overrides))
    assert caught.value.field == "n_parties"
    assert "\n" not in str(caught.value) and words in str(caught.value)
    with_data_checked(tiny(n_parties=3, **overrides))  # 3 parties' state fits
    with_data_checked(tiny(algorithm="fedprox", n_parties=4))  # keeps nothing: not checked


def test_a_class_attribute_the_declaration_replaced_is_refused_in_one_line():
    with pytest.raises(TypeError) as caught:

        class OldStyle(Algorithm):
            party_state_copies = 1.0

    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("OldStyle sets party_state_copies, which own_state")


def test_a_checkpoint_from_before_the_declaration_is_refused_in_one_line(synthetic):
    run = FederatedRun(tiny(algorithm="solo"), synthetic)
    old = {**run.state_dict(), "format": 1}
    with pytest.raises(ValueError) as caught:
        FederatedRun(tiny(algorithm="solo"), synthetic).load_state_dict(old)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("checkpoint of run-state format 1")


def test_a_method_state_key_that_clashes_with_the_kept_entries_is_refused(synthetic):
    config = tiny(algorithm=f"{__name__}:ClashingStateKey")
    with pytest.raises(ValueError) as caught:
        FederatedRun(config, synthetic)
    assert "\n" not in str(caught.value)
    assert "init_party_state uses ['local']" in str(caught.value)
