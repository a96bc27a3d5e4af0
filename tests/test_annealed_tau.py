"""Annealed MOON temperature: the update rule on scripted inputs, bounds, seeds, metrics.

The rule (federated/algorithms/annealed_temperature.py): per step, candidate
``max(tau·(1 - sigma·|g - g_prev|/(g_prev + 1e-8)), tau_min)``; accept when the batch's
contrastive loss at the candidate is lower, else with probability
``exp((old - new)/tau)`` using a coin from the run's ``algorithm`` stream.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from federated.algorithms.annealed_temperature import AnnealedTemperature
from federated.algorithms.base import LocalJob
from federated.algorithms.moon import Moon
from federated.config.run_config import RunConfig
from federated.engine.round_loop import run_rounds
from tests.conftest import tiny

EPS = 1e-8


def schedule(seed: int = 0, **overrides) -> AnnealedTemperature:
    values = dict(algorithm="moon", tau_schedule="annealed", tau=1.0, tau_min=0.001)
    values.update(overrides)
    params = RunConfig.from_dict(values).resolved().algorithm_params
    return AnnealedTemperature(params, torch.Generator().manual_seed(seed))


class ScriptedLoss:
    """``loss_at(t)``: the step's (old, new) losses in the order the schedule asks."""

    def __init__(self, old: float, new: float) -> None:
        self.values = [old, new]
        self.temperatures: list[float] = []

    def __call__(self, t: float) -> float:
        self.temperatures.append(t)
        return self.values[len(self.temperatures) - 1]


# (gradient norm, old loss, new loss) per step; sigma 0.1 so that steps are visible.
# With seed 3 the Metropolis coins are 0.0043, 0.1056, 0.2858, 0.0270, 0.4716.
SCRIPT = [
    (10.0, 0.0, 0.0),  # first step: only records its norm
    (12.0, 0.7, 0.6),  # change 0.2, lower loss: accepted outright (tau 0.98)
    (12.0, 0.0, 0.0),  # no change: the candidate equals tau, not a proposal
    (6.0, 0.5, 50.5),  # loss up by 50: P = exp(-50/tau) ~ 0, rejected
    (9.0, 0.5, 0.5 + 1e-9),  # loss up by 1e-9: P ~ 1, accepted (tau 0.931)
    (9.3, 0.4, 0.6),  # P = exp(-0.2/0.931) = 0.81 > coin 0.29: accepted
    (50.0, 0.6, 0.6),  # change 4.4: tau drops to 0.52; equal loss: P = 1
    (200.0, 0.2, 0.1),  # lower loss: accepted (tau 0.365)
    (2.0, 0.3, 0.8),  # P = exp(-0.5/0.365) = 0.25 < coin 0.47: rejected (with tau0
    #                    in the exponent P would be 0.61 and the candidate accepted)
    (1000.0, 0.3, 0.1),  # change ~500: the candidate is the floor; lower loss: accepted
    (1.0, 0.3, 0.1),  # at the floor: the candidate equals tau, not a proposal
]


def test_follows_the_update_rule_on_a_scripted_sequence():
    sigma, tau_min = 0.1, 0.001
    annealed = schedule(seed=3, tau_sigma=sigma)
    annealed.begin({})
    coins = torch.Generator().manual_seed(3)  # the hand computation's copy of the stream

    tau, previous, proposals, accepted = 1.0, None, 0, 0
    trajectory, outcomes = [], []
    for grad, old, new in SCRIPT:
        loss = ScriptedLoss(old, new)
        annealed.observe(lambda g=grad: g, loss)

        # by hand
        asked = []
        if previous is not None:
            change = abs(grad - previous) / (previous + EPS)
            candidate = max(tau * (1 - sigma * change), tau_min)
            if candidate != tau:
                proposals += 1
                asked = [tau, candidate]
                if new < old:
                    accept, how = True, "lower"
                else:
                    p = math.exp((old - new) / tau)
                    accept = float(torch.rand((), generator=coins)) < p
                    how = "metropolis-" + ("accept" if accept else "reject")
                outcomes.append(how)
                if accept:
                    accepted += 1
                    tau = candidate
        previous = grad
        trajectory.append(tau)

        # losses asked at (old tau, candidate), and only on proposals
        assert loss.temperatures == pytest.approx(asked, rel=1e-14)
        assert annealed.value == pytest.approx(tau, rel=1e-15)

    # the script exercises every branch, and ends on the floor
    assert {"lower", "metropolis-reject", "metropolis-accept"} <= set(outcomes)
    assert trajectory[-1] == tau_min
    # coins are drawn only for Metropolis decisions: the streams end in the same state
    assert torch.equal(annealed.generator.get_state(), coins.get_state())
    report = annealed.end({})
    assert report == {"tau": tau_min, "tau_acceptance": accepted / proposals}


def test_stays_within_floor_and_start_and_never_rises():
    annealed = schedule(seed=1, tau=0.8, tau_min=0.05, tau_sigma=0.5)
    annealed.begin({})
    gen = torch.Generator().manual_seed(2)
    values = []
    for _ in range(400):
        grad = float(torch.rand((), generator=gen)) * 10
        old, new = torch.rand(2, generator=gen).tolist()
        annealed.observe(lambda g=grad: g, lambda t, o=old, n=new: o if t == annealed.value else n)
        values.append(annealed.value)
    assert all(0.05 <= v <= 0.8 for v in values)
    assert all(b <= a for a, b in itertools.pairwise(values))
    assert values[-1] == 0.05  # reaches the floor and stays there


@pytest.mark.parametrize(("scope", "resumes"), [("round", False), ("run", True)])
def test_scope_decides_whether_a_party_resumes_its_temperature(scope, resumes):
    annealed = schedule(tau_scope=scope, tau_sigma=0.5)
    party: dict = {}
    annealed.begin(party)
    for grad in (1.0, 2.0, 1.0):
        annealed.observe(lambda g=grad: g, lambda t: t)  # lower tau, lower loss: accepted
    ended = annealed.end(party)["tau"]
    assert ended < 1.0
    annealed.begin(party)
    assert annealed.value == (ended if resumes else 1.0)


def annealed_run(data, seed: int, scope: str = "round") -> list[dict]:
    config = tiny(algorithm="moon", tau_schedule="annealed", tau_scope=scope, rounds=3, seed=seed)
    return list(run_rounds(config, data))


def test_rows_carry_the_trajectory_and_a_seed_reproduces_it(synthetic):
    rows = annealed_run(synthetic, seed=0)
    again = annealed_run(synthetic, seed=0)
    keys = ("tau_end", "tau_end_lowest", "tau_acceptance", "test_loss")

    def values(rs: list[dict]) -> list[list]:  # NaN as None so that equal rows compare equal
        return [[None if math.isnan(r[k]) else r[k] for k in keys] for r in rs]

    assert values(rows) == values(again)

    # round 1: no previous model, no contrastive term, nothing annealed
    assert rows[0]["tau_end"] == rows[0]["tau_end_lowest"] == 1.0
    assert math.isnan(rows[0]["tau_acceptance"])
    for row in rows[1:]:
        assert 0.001 <= row["tau_end_lowest"] <= row["tau_end"] < 1.0
        assert 0.0 < row["tau_acceptance"] <= 1.0

    other = annealed_run(synthetic, seed=1)
    assert [r["tau_end"] for r in other[1:]] != [r["tau_end"] for r in rows[1:]]


def test_run_scope_carries_the_temperature_across_rounds(synthetic):
    rows = annealed_run(synthetic, seed=0, scope="run")
    taus = [r["tau_end"] for r in rows]
    lows = [r["tau_end_lowest"] for r in rows]
    # all parties train every round and resume where they stopped
    assert taus[2] < taus[1] < taus[0] == 1.0
    assert lows[2] <= lows[1]
    assert taus[2] < annealed_run(synthetic, seed=0)[2]["tau_end"]


def test_round_acceptance_ignores_parties_that_made_no_proposal():
    """A party with a single local step proposes nothing (rate NaN); it must not turn
    the round's acceptance rate into NaN for the parties that did propose."""
    config = RunConfig.from_dict({"algorithm": "moon", "tau_schedule": "annealed"}).resolved()
    moon = Moon(config, torch.Generator())
    infos = [
        {"negatives": 1, "tau": 0.9, "tau_acceptance": 0.5},
        {"negatives": 1, "tau": 1.0, "tau_acceptance": float("nan")},
        {"negatives": 1, "tau": 0.8, "tau_acceptance": 1.0},
    ]
    jobs = [
        LocalJob(i, 1, None, None, {}, 10, torch.device("cpu"), info=info)
        for i, info in enumerate(infos)
    ]
    metrics = moon.round_metrics(jobs, {})
    assert metrics["tau_end"] == pytest.approx(0.9)
    assert metrics["tau_end_lowest"] == 0.8
    assert metrics["tau_acceptance"] == pytest.approx(0.75)
    assert metrics["negatives"] == 1
