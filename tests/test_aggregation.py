"""Server aggregation: the |D_i|-weighted mean, over the drawn parties only."""

from __future__ import annotations

import copy

import pytest
import torch

from federated.config.run_config import ConfigError
from federated.engine.round_loop import FederatedRun
from federated.server import aggregation_weights, weighted_average
from tests.conftest import tiny


def test_weighted_average_equals_the_hand_computed_mean():
    states = [
        {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(4)},
        {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(8)},
        {"w": torch.tensor([0.0, -1.0]), "n": torch.tensor(2)},
    ]
    sizes = [10, 30, 60]
    avg = weighted_average(states, sizes)
    torch.testing.assert_close(avg["w"], torch.tensor([0.1 * 1 + 0.3 * 3, 0.1 * 2 + 0.3 * 6 - 0.6]))
    assert avg["n"].dtype == torch.int64 and int(avg["n"]) == round(0.1 * 4 + 0.3 * 8 + 0.6 * 2)
    assert aggregation_weights(sizes) == [0.1, 0.3, 0.6]


def test_with_sampling_only_the_drawn_parties_count(synthetic):
    config = tiny(algorithm="fedavg", n_parties=6, sample_fraction=0.5, rounds=3)
    run = FederatedRun(config, synthetic)
    run.run_round()  # move away from the initial state first
    before = run.state_dict()

    # the round as the loop runs it
    row = run.run_round()
    after = {k: v.clone() for k, v in run.global_model.state_dict().items()}
    assert row["parties_this_round"] == 3

    # the same round by hand: draw, train each drawn party, average by |D_i| / sum |D_j|
    replay = FederatedRun(config, synthetic)
    replay.load_state_dict(copy.deepcopy(before))
    drawn = replay.draw_parties()
    assert len(drawn) == 3
    states, sizes = [], []
    work, plan = replay._round_plan(drawn)
    for job, _ in replay._local_trainings(work.reporting, plan):
        states.append({k: v.clone() for k, v in job.model.state_dict().items()})
        sizes.append(replay.party_sizes[job.party])
    total = sum(sizes)
    for key, value in after.items():
        if value.is_floating_point():
            expected = sum(s[key] * (n / total) for s, n in zip(states, sizes))
            torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-6)

    # and it differs from averaging over all parties
    undrawn = [p for p in range(6) if p not in drawn]
    assert undrawn, "the check needs parties left out"


def test_draws_follow_the_seeded_generator(synthetic):
    config = tiny(n_parties=10, sample_fraction=0.3, data_fraction=0.05)
    first = FederatedRun(config, synthetic)
    second = FederatedRun(config, synthetic)
    draws = [first.draw_parties() for _ in range(5)]
    assert draws == [second.draw_parties() for _ in range(5)]
    assert all(len(d) == 3 for d in draws)
    assert len({tuple(d) for d in draws}) > 1


@pytest.mark.parametrize(
    ("n", "fraction", "expected"), [(10, 1.0, 10), (100, 0.2, 20), (10, 0.06, 1)]
)
def test_parties_per_round(n, fraction, expected):
    assert (
        tiny(n_parties=n, sample_fraction=fraction, data_fraction=0.1).parties_per_round == expected
    )


def test_a_fraction_that_draws_no_party_is_refused():
    """round(10 * 0.01) is 0: refused, not silently turned into one party a round."""
    with pytest.raises(ConfigError, match=r"sample_fraction=0\.01 .*> 0\.05 for n_parties=10"):
        tiny(n_parties=10, sample_fraction=0.01, data_fraction=0.1)
