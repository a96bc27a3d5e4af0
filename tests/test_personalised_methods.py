"""Personalised methods (issue 40): FedPer, FedRep, LG-FedAvg, Ditto, APFL.

Each party is evaluated with its own model (``party_model``); its personal part lives
in its state on the CPU, so a run restored from a state dict continues exactly; bad
values are refused in one line naming the field; packed execution, where a method
declares it, gives the sequential path's weights and party states.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from federated.config.data_checks import with_data_checked
from federated.engine.round_loop import FederatedRun
from federated.evaluation.scoring import evaluate
from federated.params import ConfigError
from tests.conftest import tiny
from tests.test_packed_execution import WEIGHT_ATOL
from tests.test_round_loop import results


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(algorithm="fedper", personal_layers="clasifier"), "personal_layers"),
        (dict(algorithm="lg-fedavg", personal_layers="encoder.fc9"), "personal_layers"),
        (dict(algorithm="fedper", personal_layers="encoder,head,classifier"), "personal_layers"),
        (
            dict(algorithm="fedper", projection_head=False, personal_layers="head"),
            "personal_layers",
        ),
        (dict(algorithm="ditto", ditto_lambda=-0.1), "ditto_lambda"),
        (dict(algorithm="apfl", apfl_alpha=1.5), "apfl_alpha"),
        (dict(algorithm="apfl", apfl_alpha=-0.5), "apfl_alpha"),
        (dict(algorithm="fedrep", local_epochs=1, rep_head_epochs=1), "rep_head_epochs"),
        (dict(algorithm="fedrep", rep_head_epochs=0), "rep_head_epochs"),
        (dict(algorithm="fedrep", local_epochs=3, rep_head_epochs=3), "rep_head_epochs"),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_the_field(overrides, field):
    with pytest.raises(ConfigError) as caught:  # values on resolving, the model's after
        with_data_checked(tiny(**overrides))
    assert caught.value.field == field
    assert "\n" not in str(caught.value)


def test_the_default_rules_follow_the_model_and_the_epochs():
    assert tiny(algorithm="fedper").algorithm_params.personal_layers == "head,classifier"
    assert tiny(algorithm="fedper", projection_head=False).algorithm_params.personal_layers == (
        "classifier"
    )
    assert tiny(algorithm="lg-fedavg").algorithm_params.personal_layers == "encoder"
    assert tiny(algorithm="fedrep", local_epochs=5).algorithm_params.rep_head_epochs == 4
    assert tiny(algorithm="fedrep", local_epochs=1).algorithm_params.rep_head_epochs == 0.5


def test_fedper_keeps_each_head_local_and_averages_the_base(synthetic):
    """The global model's head stays the initial one; a party's model is the new global
    base with its own head, and that model on the test set is its reported accuracy;
    only the base travels."""
    config = tiny(algorithm="fedper", n_parties=3, rounds=2, personal_test_every=1)
    run = FederatedRun(config, synthetic)
    initial = copy.deepcopy(run.global_model.state_dict())
    row = run.run_round()
    state = run.global_model.state_dict()
    head = [k for k in state if k.startswith(("head.", "classifier."))]
    assert head and all(torch.equal(state[k], initial[k]) for k in head)
    assert not torch.equal(state["encoder.conv1.weight"], initial["encoder.conv1.weight"])
    model = copy.deepcopy(run.global_model)
    accs = []
    for party in range(3):
        own = run.party_states[party]["local"]
        assert sorted(own) == sorted(head)
        model.load_state_dict({**state, **own})
        scores = evaluate(model, run.test_x, run.test_y, run.augmenter, 256, run.task.accumulator())
        assert scores.values["acc"] == row[f"party_acc/{party}"]
        accs.append(scores.values["acc"])
    assert row["test_acc"] == pytest.approx(float(np.mean(accs)), abs=1e-12)
    head_bytes = sum(initial[k].numel() * initial[k].element_size() for k in head)
    assert row["bytes_up"] == 3 * (run.model_bytes - head_bytes)


def test_lg_fedavg_keeps_each_body_local_and_averages_the_head(synthetic):
    run = FederatedRun(tiny(algorithm="lg-fedavg", n_parties=3), synthetic)
    initial = copy.deepcopy(run.global_model.state_dict())
    run.run_round()
    state = run.global_model.state_dict()
    body = [k for k in state if k.startswith("encoder.")]
    assert all(torch.equal(state[k], initial[k]) for k in body)
    assert not torch.equal(state["classifier.weight"], initial["classifier.weight"])
    assert sorted(run.party_states[0]["local"]) == sorted(body)


def test_fedrep_trains_the_head_first_then_the_body(synthetic, monkeypatch):
    """With E = 3 and rep_head_epochs = 2: during the first two epochs' steps only the
    head moves, after them only the body."""
    from federated.algorithms.fedrep import FedRep

    moved: list[tuple[bool, bool]] = []
    step = FedRep.after_backward

    def spy(self, job):
        out = step(self, job)
        moved.append(
            (
                all(p.grad is None for p in job.scratch["body"]),
                all(p.grad is None for p in job.scratch["head"]),
            )
        )
        return out

    monkeypatch.setattr(FedRep, "after_backward", spy)
    config = tiny(algorithm="fedrep", n_parties=1, local_epochs=3, rep_head_epochs=2)
    run = FederatedRun(config, synthetic)
    per_epoch = max(1, run.party_sizes[0] // config.batch_size)
    run.run_round()
    assert moved == [(True, False)] * (2 * per_epoch) + [(False, True)] * per_epoch


def test_ditto_without_its_pull_trains_each_personal_model_as_solo_does(synthetic):
    """lambda = 0: after one round every party's personal model is SOLO's (the same
    batches, the same solver, from the same initial model; both sequential, so the same
    float order)."""
    same = dict(n_parties=3, execution="sequential")
    ditto = FederatedRun(tiny(algorithm="ditto", ditto_lambda=0.0, **same), synthetic)
    solo = FederatedRun(tiny(algorithm="solo", **same), synthetic)
    ditto.run_round()
    solo.run_round()
    for party in range(3):
        mine, theirs = ditto.party_states[party]["personal"], solo.party_states[party]["local"]
        assert all(torch.equal(mine[k], theirs[k]) for k in theirs)


def test_a_strong_ditto_pull_keeps_the_personal_models_near_the_global(synthetic):
    def distance(lam: float) -> float:
        run = FederatedRun(tiny(algorithm="ditto", ditto_lambda=lam, n_parties=2), synthetic)
        start = copy.deepcopy(run.global_model.state_dict())  # round 1's global model
        run.run_round()
        own = run.party_states[0]["personal"]
        return sum(float((own[k] - start[k]).norm()) for k in own)

    assert distance(10.0) < distance(0.0)


def test_apfl_evaluates_each_party_with_its_learned_mix(synthetic):
    run = FederatedRun(tiny(algorithm="apfl", n_parties=2, personal_test_every=1), synthetic)
    row = run.run_round()
    state = run.party_states[1]
    alpha = state["alpha"]
    assert 0.0 <= alpha <= 1.0 and alpha != 0.5  # learned from the initial 0.5
    model = copy.deepcopy(run.global_model)
    mixed = {
        k: alpha * v + (1 - alpha) * run.global_model.state_dict()[k]
        for k, v in state["personal"].items()
    }
    model.load_state_dict(mixed)
    scores = evaluate(model, run.test_x, run.test_y, run.augmenter, 256, run.task.accumulator())
    assert scores.values["acc"] == pytest.approx(row["party_acc/1"], abs=1e-9)
    assert row["apfl_alpha_mean"] == pytest.approx(
        np.mean([s["alpha"] for s in run.party_states]), abs=1e-12
    )


@pytest.mark.parametrize("method", ["fedper", "lg-fedavg"])
def test_packed_gives_the_sequential_party_states(method, synthetic):
    """The generic test compares the global model; here each party's local entries too.
    Tolerance 10 x WEIGHT_ATOL: the party's own head is not averaged with others, so a
    ReLU unit whose input sits at zero under one float order and not the other moves
    that unit's gradient whole (measured on this data: party 4's projection-head unit
    36 alone, 6.5e-6, after one round; every other entry within 3e-8)."""
    config = tiny(algorithm=method, rounds=2, n_parties=5, data_fraction=0.06)
    runs = {}
    for execution in ("sequential", "packed"):
        run = FederatedRun(config.replace(execution=execution), synthetic)
        run.run_round()
        run.run_round()
        runs[execution] = run
    for party in range(5):
        seq = runs["sequential"].party_states[party]["local"]
        packed = runs["packed"].party_states[party]["local"]
        worst = max(float((seq[k] - packed[k]).abs().max()) for k in seq)
        assert worst <= 10 * WEIGHT_ATOL, worst


@pytest.mark.parametrize(
    "overrides",
    [dict(algorithm="ditto"), dict(algorithm="fedrep", local_epochs=2)],
    ids=["ditto", "fedrep"],
)
def test_four_rounds_equal_two_then_a_restored_run_of_two(overrides, synthetic):
    """Every party's personal part (Ditto: its model and momentum) is in the state
    dict: 2 rounds + restore + 2 rounds gives the uninterrupted run's 4 rows."""
    # parties of 214 to 290 samples: 3 or 4 batches of 64 each round
    config = tiny(rounds=4, sample_fraction=0.75, **overrides)
    run = FederatedRun(config, synthetic)
    straight = results([run.run_round() for _ in range(4)])
    first = FederatedRun(config, synthetic)
    head = results([first.run_round() for _ in range(2)])
    restored = FederatedRun(config, synthetic)
    restored.load_state_dict(copy.deepcopy(first.state_dict()))
    tail = results([restored.run_round() for _ in range(2)])
    assert head + tail == straight


def test_parties_whose_own_models_would_not_fit_are_refused_before_work(monkeypatch):
    """N parties x the method's copies of the model's state against the memory this
    machine has: Ditto keeps two copies (model, momentum) per party, FedAvg none."""
    from federated.models import party_memory

    state = party_memory.model_state_bytes("simple-cnn", tiny().spec, 32, True)
    monkeypatch.setattr(party_memory, "available_memory", lambda: 4 * 2 * state - 1)
    with pytest.raises(ConfigError) as caught:
        with_data_checked(tiny(algorithm="ditto", n_parties=4))
    assert caught.value.field == "n_parties"
    assert "\n" not in str(caught.value) and "2 copies" in str(caught.value)
    with_data_checked(tiny(algorithm="ditto", n_parties=3))  # 3 x 2 copies fit
    with_data_checked(tiny(algorithm="fedavg", n_parties=4))  # keeps no copy


def test_a_selecting_sweep_of_personalised_trials_says_what_ranks_them():
    from study.selection import personal_validation_note

    configs = [
        dict(algorithm="fedavg", batchnorm="averaged"),
        dict(algorithm="fedper", batchnorm="averaged"),
        dict(algorithm="fedavg", finetune_epochs=1, batchnorm="averaged"),
    ]
    note = personal_validation_note(configs, "val_acc")
    assert note.startswith("note: trials of fedper, fedavg with finetune_epochs rank by val_acc")
    assert "party_val_acc" in note and "\n" not in note
    assert personal_validation_note(configs[:1], "val_acc") is None
    assert personal_validation_note(configs, None) is None
