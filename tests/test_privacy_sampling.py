"""Party sampling as a setting (``party_sampling`` fixed or poisson) and the accountant
(``dp_accountant`` rdp or pld): epsilon in the rows equal to ``dp_accounting`` called
directly for each sampling x accountant, the rows naming what computed it, the Poisson
draw a function of seed and round, an empty Poisson cohort still released, the
target-epsilon solve on each, exact resume, and the issue's figures."""

from __future__ import annotations

import dp_accounting
import numpy as np
import pytest
import torch
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from federated.config.run_config import RunConfig
from federated.engine.party_draw import poisson_cohort
from federated.engine.round_loop import FederatedRun
from federated.params import ConfigError
from federated.privacy_accountant import (
    PLD_DISCRETIZATION,
    SOLVE_TOLERANCE,
    epsilon_after,
    noise_for_epsilon,
)
from federated.server.privacy import PrivacySettings
from federated.trainable import load_run_state, save_run_state
from tests.conftest import tiny
from tests.test_round_loop import results

REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE
ADD_OR_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
SIGMA, DELTA = 1.0, 1e-3


def direct_epsilon(sampling: str, accountant: str, n: int, m: int, rounds: int) -> float:
    """dp_accounting called directly: fixed-size draws under replace-one (sensitivity 2C:
    multiplier sigma/2), Poisson under add-or-remove (sensitivity C: sigma)."""
    if sampling == "fixed":
        event = dp_accounting.SampledWithoutReplacementDpEvent(
            n, m, dp_accounting.GaussianDpEvent(SIGMA / 2)
        )
        counter = RdpAccountant(neighboring_relation=REPLACE_ONE)
    else:
        event = dp_accounting.PoissonSampledDpEvent(m / n, dp_accounting.GaussianDpEvent(SIGMA))
        if accountant == "pld":
            counter = PLDAccountant(ADD_OR_REMOVE, value_discretization_interval=1e-3)
        else:
            counter = RdpAccountant(neighboring_relation=ADD_OR_REMOVE)
    counter.compose(event, rounds)
    return counter.get_epsilon(DELTA)


CASES = [("fixed", "rdp", "replace-one"), ("poisson", "rdp", "add-remove")]
CASES += [("poisson", "pld", "add-remove")]


@pytest.mark.parametrize(("sampling", "accountant", "neighbours"), CASES)
def test_row_epsilon_equals_dp_accounting_called_directly(
    sampling, accountant, neighbours, synthetic
):
    config = tiny(
        n_parties=8,
        sample_fraction=0.5,
        rounds=2,
        party_sampling=sampling,
        dp_accountant=accountant,
        dp_noise_multiplier=SIGMA,
        dp_clip_norm=0.05,
        dp_delta=DELTA,
    )
    run = FederatedRun(config, synthetic)
    rows = [run.run_round() for _ in range(2)]
    assert PLD_DISCRETIZATION == 1e-3
    for k, row in enumerate(rows, start=1):
        assert row["dp_epsilon"] == pytest.approx(
            direct_epsilon(sampling, accountant, 8, 4, k), rel=1e-12
        )
        assert (
            row["dp_epsilon_accountant"],
            row["dp_epsilon_neighbours"],
            row["dp_epsilon_sampling"],
        ) == (accountant, neighbours, sampling)


def test_the_accountant_defaults_to_pld_under_poisson_and_rdp_under_fixed():
    def accountant(**values):
        base = dict(rounds=3, dp_noise_multiplier=1.0, dp_clip_norm=1.0)
        config = RunConfig.from_dict({**base, **values}).resolved()
        return PrivacySettings.from_config(config).accountant

    assert accountant(party_sampling="poisson") == "pld"
    assert accountant() == "rdp"
    assert accountant(party_sampling="poisson", dp_accountant="rdp") == "rdp"


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (
            dict(dp_accountant="pld"),
            "dp_accountant='pld' (allowed: rdp with party_sampling=fixed (dp_accounting's "
            "PLD accountant composes Poisson-sampled rounds",
        ),
        (dict(party_sampling="bernoulli"), "party_sampling='bernoulli' (allowed: one of fixed"),
    ],
)
def test_bad_sampling_settings_are_refused_in_one_line(values, words):
    with pytest.raises(ConfigError) as caught:
        RunConfig.from_dict(
            {"rounds": 3, "dp_noise_multiplier": 1.0, "dp_clip_norm": 1.0, **values}
        ).resolved()
    assert "\n" not in str(caught.value) and words in str(caught.value)


def test_the_poisson_draw_is_a_function_of_seed_and_round():
    cohorts = [poisson_cohort(0, r, 1000, 0.05) for r in range(200)]
    assert cohorts == [poisson_cohort(0, r, 1000, 0.05) for r in range(200)]
    assert poisson_cohort(1, 0, 1000, 0.05) != cohorts[0]
    sizes = np.array([len(c) for c in cohorts])
    # Binomial(1000, 0.05): mean 50, std 6.9; 200 rounds' mean within 1.5 of 50
    assert abs(sizes.mean() - 50) < 1.5 and sizes.std() > 4
    assert all(c == sorted(set(c)) for c in cohorts)


def test_an_empty_poisson_cohort_still_releases_noise(synthetic):
    """4 parties at q = 1/4: some rounds draw nobody; under DP the round still adds the
    noise (an empty cohort is part of the mechanism) and counts in epsilon."""
    config = tiny(
        rounds=6,
        sample_fraction=0.25,
        party_sampling="poisson",
        dp_noise_multiplier=1.0,
        dp_clip_norm=0.05,
        dp_delta=DELTA,
    )
    run = FederatedRun(config, synthetic)
    empty = [r for r in range(6) if not poisson_cohort(config.seed, r, 4, 0.25)]
    assert empty, "seed 0 should draw an empty cohort in 6 rounds at q = 1/4"
    for _ in range(empty[0]):
        run.run_round()
    before = [p.clone() for p in run.global_model.parameters()]
    row = run.run_round()
    assert row["parties_this_round"] == 0 and row["reporting_parties"] == 0
    after = list(run.global_model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before))
    assert row["dp_epsilon"] == epsilon_after(empty[0] + 1, 4, 1, 1.0, DELTA, "poisson", "pld")


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_the_target_solve_meets_it_and_barely_under_poisson(accountant):
    target, delta, rounds, n, m = 4.0, 1e-5, 20, 100, 10
    sigma = noise_for_epsilon(target, delta, rounds, n, m, "poisson", accountant)
    assert sigma is not None
    assert epsilon_after(rounds, n, m, sigma, delta, "poisson", accountant) <= target
    lower = sigma / (1 + SOLVE_TOLERANCE)
    assert epsilon_after(rounds, n, m, lower, delta, "poisson", accountant) > target


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_a_restored_poisson_run_continues_exactly(accountant, synthetic, tmp_path):
    config = tiny(
        rounds=3,
        n_parties=6,
        sample_fraction=0.5,
        party_sampling="poisson",
        dp_accountant=accountant,
        dp_noise_multiplier=1.0,
        dp_clip_norm=0.05,
        dp_delta=DELTA,
    )
    straight_run = FederatedRun(config, synthetic)
    straight = results([straight_run.run_round() for _ in range(3)])
    first = FederatedRun(config, synthetic)
    head = results([first.run_round()])
    save_run_state(first, tmp_path)
    restored = FederatedRun(config, synthetic)
    restored.load_state_dict(load_run_state(tmp_path))
    tail = results([restored.run_round() for _ in range(2)])
    assert head + tail == straight
    assert straight[-1]["dp_epsilon"] == epsilon_after(3, 6, 3, 1.0, DELTA, "poisson", accountant)
    assert [r["parties_this_round"] for r in straight] == [
        len(poisson_cohort(config.seed, r, 6, 0.5)) for r in range(3)
    ]


def test_the_issues_case_by_each_accountant():
    """100 parties, 10 a round, sigma = 1, delta = 1e-5, after rounds 1 and 5: the
    figures docs/results/privacy.md states."""

    def eps(sampling, accountant):
        return [
            round(epsilon_after(r, 100, 10, 1.0, 1e-5, sampling, accountant), 2) for r in (1, 5)
        ]

    assert eps("fixed", "rdp") == [7.70, 13.82]
    assert eps("poisson", "rdp") == [2.13, 2.90]
    assert eps("poisson", "pld") == [1.68, 2.35]
