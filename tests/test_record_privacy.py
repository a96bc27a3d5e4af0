"""Record-level DP (``dp_level=record``, docs/privacy.md): DP-SGD inside each party on
Poisson batches.  Per-sample gradients by ``torch.func`` equal to one backward per
sample, clipped as Opacus clips (flat, min(1, C/||g||)) by hand, the noise's exact
values; the Poisson batch's draw; a run's per-party and worst epsilon equal to
``dp_accounting`` called directly (PLD and RDP, add/remove, Poisson-sampled steps);
a repeatable run; exact resume; the refusals."""

from __future__ import annotations

import warnings

import dp_accounting
import pytest
import torch
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun
from federated.engine.run_files import party_columns, party_rows
from federated.execution.choice import PackingFallback
from federated.execution.per_sample import (
    clipped_sum,
    noise_generator,
    per_sample_gradients,
    poisson_sample,
    private_gradient,
    sampling_generator,
)
from federated.params import ConfigError
from federated.privacy_accountant import PLD_DISCRETIZATION
from federated.trainable import load_run_state, save_run_state
from tests.conftest import tiny
from tests.test_round_loop import results

SIGMA, CLIP, DELTA = 1.0, 1.0, 1e-5


def _small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(2 * 4 * 4, 3),
    )


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(x), y)


def test_per_sample_gradients_and_clipping_equal_opacus_by_hand():
    model = _small_model()
    x, y = torch.randn(5, 1, 6, 6), torch.tensor([0, 1, 2, 1, 0])
    names = [n for n, _ in model.named_parameters()]
    grads = per_sample_gradients(model, names, _loss, x, y)
    by_hand = []  # one backward per sample: what Opacus's grad samples hold
    for b in range(5):
        model.zero_grad()
        _loss(model, x[b : b + 1], y[b : b + 1]).backward()
        by_hand.append([p.grad.clone() for p in model.parameters()])
    for i in range(len(names)):
        torch.testing.assert_close(grads[i], torch.stack([h[i] for h in by_hand]))
    clip = 0.05  # below every sample's norm here: each one is scaled
    expected = [torch.zeros_like(p) for p in model.parameters()]
    scales = []
    for sample in by_hand:
        norm = float(torch.sqrt(sum((t**2).sum() for t in sample)))
        scales.append(min(1.0, clip / norm))
        for total, t in zip(expected, sample):
            total += t * scales[-1]
    assert max(scales) < 1.0
    for got, want in zip(clipped_sum(grads, clip), expected):
        torch.testing.assert_close(got, want)
    # the noise: N(0, (sigma C)^2) per entry from the keyed generator, then / B
    noised = private_gradient(grads, clip, 2.0, 5, noise_generator(0, 3, 1, 7))
    generator = noise_generator(0, 3, 1, 7)
    for got, want in zip(noised, expected):
        noise = torch.randn(want.shape, generator=generator) * (2.0 * clip)
        torch.testing.assert_close(got, (want + noise) / 5)


def _record(**values) -> RunConfig:
    base = dict(
        rounds=2,
        sample_fraction=0.5,
        execution="sequential",
        dp_level="record",
        dp_noise_multiplier=SIGMA,
        dp_clip_norm=CLIP,
        party_scores_every=1,
    )
    return tiny(**{**base, **values})


def _direct(steps: int, rate: float, accountant: str) -> float:
    """One party's epsilon by dp_accounting itself: ``steps`` Poisson-sampled Gaussian
    steps under add/remove-one-record neighbours."""
    if steps == 0:
        return 0.0
    relation = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    if accountant == "pld":
        direct = PLDAccountant(relation, value_discretization_interval=PLD_DISCRETIZATION)
    else:
        direct = RdpAccountant(neighboring_relation=relation)
    event = dp_accounting.GaussianDpEvent(SIGMA)
    direct.compose(dp_accounting.PoissonSampledDpEvent(rate, event), steps)
    return direct.get_epsilon(DELTA)


def test_a_poisson_batch_keeps_each_record_with_probability_q():
    kept = poisson_sample(1000, 0.1, sampling_generator(0, 3, 1, 7))
    uniform = torch.rand(1000, generator=sampling_generator(0, 3, 1, 7), dtype=torch.float64)
    assert kept.tolist() == (uniform < 0.1).nonzero().flatten().tolist()
    assert 70 < kept.numel() < 130  # about q·n = 100
    other = poisson_sample(1000, 0.1, sampling_generator(0, 3, 1, 8))
    assert kept.tolist() != other.tolist()  # each step its own batch
    # the batch and the step's noise come from distinct generators
    assert not torch.equal(
        torch.rand(5, generator=sampling_generator(0, 3, 1, 7)),
        torch.rand(5, generator=noise_generator(0, 3, 1, 7)),
    )


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_a_record_level_run_states_each_partys_epsilon(synthetic, accountant):
    values = {} if accountant == "pld" else {"dp_accountant": "rdp"}
    run = FederatedRun(_record(**values), synthetic)
    assert run.config.dp_delta == DELTA
    for _ in range(2):
        row = run.run_round()
    hook = run.hooks.hooks[-1]
    sizes, batch = run.party_sizes, run.config.batch_size
    # 2 parties a round, 1 local epoch of n // batch steps each, 2 rounds
    per_training = [n // batch for n in sizes]
    assert all(s % k == 0 for s, k in zip(hook.steps, per_training))
    assert sum(s // k for s, k in zip(hook.steps, per_training)) == 2 * 2
    rates = [batch / n for n in sizes]
    assert hook.rates == rates
    direct = [_direct(s, q, accountant) for s, q in zip(hook.steps, rates)]
    assert row["dp_epsilon"] == max(direct) > 0
    assert (
        row["dp_epsilon_accountant"],
        row["dp_epsilon_neighbours"],
        row["dp_epsilon_sampling"],
    ) == (accountant, "add-remove record", "poisson batches")
    assert "party_dp_epsilon" in party_columns(run)
    rows = party_rows(run, 2, True, False)
    assert [r["party_dp_epsilon"] for r in rows] == direct


def test_a_record_level_run_is_repeatable(synthetic):
    first = results([FederatedRun(_record(), synthetic).run_round() for _ in range(1)])
    again = results([FederatedRun(_record(), synthetic).run_round() for _ in range(1)])
    assert first == again
    other = results([FederatedRun(_record(seed=1), synthetic).run_round() for _ in range(1)])
    assert first != other


def test_a_restored_record_level_run_continues_exactly(synthetic, tmp_path):
    config = _record(rounds=3)
    straight_run = FederatedRun(config, synthetic)
    straight = results([straight_run.run_round() for _ in range(3)])
    first = FederatedRun(config, synthetic)
    head = results([first.run_round()])
    save_run_state(first, tmp_path)
    restored = FederatedRun(config, synthetic)
    restored.load_state_dict(load_run_state(tmp_path))
    tail = results([restored.run_round() for _ in range(2)])
    assert head + tail == straight
    assert restored.hooks.hooks[-1].steps == straight_run.hooks.hooks[-1].steps


def test_packed_execution_falls_back_and_says_why(synthetic):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = FederatedRun(_record(execution="packed"), synthetic)
    assert run.trainer.path == "sequential"
    words = [str(w.message) for w in caught if issubclass(w.category, PackingFallback)]
    assert words == [
        "packed execution does not apply (dp_level=record takes each sample's gradient on "
        "its own): parties train one by one (execution=sequential)"
    ]


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (dict(algorithm="moon"), "algorithm='moon' (allowed: a method whose local objective"),
        (dict(dp_target_epsilon=5.0, dp_noise_multiplier=0.0), "dp_target_epsilon=5.0"),
        (dict(dp_clipping="adaptive"), "dp_clipping='adaptive' (allowed: one of fixed)"),
        (dict(dp_clip_norm=None), "dp_clip_norm=None (allowed: a per-sample clip norm > 0"),
        (dict(dp_accountant="prv"), "dp_accountant='prv' (allowed: one of pld, rdp)"),
    ],
)
def test_record_level_refusals_are_one_line(values, words):
    base = dict(rounds=2, dp_level="record", dp_noise_multiplier=1.0, dp_clip_norm=1.0)
    with pytest.raises(ConfigError) as caught:
        RunConfig.from_dict({**base, **values}).resolved()
    assert "\n" not in str(caught.value) and words in str(caught.value)


def test_a_batchnorm_model_is_refused_before_training(synthetic):
    with pytest.raises(ConfigError, match=r"model='simple-cnn-bn' \(allowed: a model without"):
        FederatedRun(_record(model="simple-cnn-bn"), synthetic)


def test_a_record_level_sweep_trains_sequentially_and_its_manifest_says_so(tmp_path):
    """The sweep's path choice sets what the trials train on (no fallback, no timing)."""
    from search_spaces import BUDGETS
    from search_spaces.study_file import load_study_file
    from study.path_choice import sweep_path_choice
    from study.plan import SweepPlan
    from study.resources import TrialResources

    def refuse(config):
        raise AssertionError("nothing may be measured here")

    study = tmp_path / "record.toml"
    study.write_text(
        'name = "record"\ndescription = "d"\ndataset = "synthetic"\n'
        '[fixed]\ndp_level = "record"\ndp_noise_multiplier = 1.0\ndp_clip_norm = 1.0\n'
        '[[axes]]\nname = "lr"\nvalues = [0.01, 0.1]\n'
    )
    plan = SweepPlan.build(load_study_file(study), BUDGETS["smoke"], seeds=[0])
    choice = sweep_path_choice(plan, TrialResources(1, 0), remote=False, measure=refuse)
    assert (choice.path, choice.source) == ("sequential", "not packable")
    reason = "dp_level=record takes each sample's gradient on its own"
    assert choice.to_manifest()["reason"] == reason
    assert {t.config["execution"] for t in plan.trials()} == {"sequential"}
