"""FedAvgM (server momentum, the reference code's damped form) against FedAvg and by hand."""

from __future__ import annotations

import pytest
import torch

from federated.config.run_config import RunConfig
from federated.engine.round_loop import run_rounds
from federated.server.fedavgm import FedAvgM
from tests.short_runs import short_run


def fmnist_config(**overrides) -> RunConfig:
    # exact on the CPU; CUDA contracts x + 1.0 * (avg - x) into an FMA that rounds otherwise
    values = short_run("fmnist", parties=5, rounds=3, fractions=(0.02, 0.1), seed=0) | overrides
    return RunConfig.from_dict(values).resolved()


@pytest.mark.parametrize("algorithm", ["fedavg", "moon"])
def test_beta_zero_and_server_lr_one_is_exactly_plain_averaging(fmnist, algorithm):
    plain = list(run_rounds(fmnist_config(algorithm=algorithm), fmnist))
    zero = fmnist_config(
        algorithm=algorithm, server_optimizer="fedavgm", server_momentum=0.0, server_lr=1.0
    )
    damped = list(run_rounds(zero, fmnist))
    assert [r["test_acc"] for r in damped] == [r["test_acc"] for r in plain]
    assert [r["test_loss"] for r in damped] == [r["test_loss"] for r in plain]
    # the switch is live: real momentum changes the trajectory
    momentum = list(run_rounds(zero.replace(server_momentum=0.9), fmnist))
    assert [r["test_loss"] for r in momentum] != [r["test_loss"] for r in plain]


# Two server steps on a two-entry state, worked out on paper (delta = w_old - w_avg):
#   beta 0.9, lr 1:  v1 = 0.1·(0.4, -1.0) = (0.04, -0.1);       w1 = (0.96, -1.9)
#                    delta2 = w1 - (0.5, -2.5) = (0.46, 0.6)
#                    v2 = 0.9·v1 + 0.1·delta2 = (0.082, -0.03);  w2 = (0.878, -1.87)
#   beta 0.9, lr 2:  w1 = w0 - 2·v1 = (0.92, -1.8);  delta2 = (0.42, 0.7)
#                    v2 = (0.036 + 0.042, -0.09 + 0.07) = (0.078, -0.02);  w2 = (0.764, -1.76)
#   beta 0.5, lr 1:  v1 = (0.2, -0.5);  w1 = (0.8, -1.5);  delta2 = (0.3, 1.0)
#                    v2 = (0.1 + 0.15, -0.25 + 0.5) = (0.25, 0.25);  w2 = (0.55, -1.75)
@pytest.mark.parametrize(
    ("beta", "lr", "w1", "w2"),
    [
        (0.9, 1.0, (0.96, -1.9), (0.878, -1.87)),
        (0.9, 2.0, (0.92, -1.8), (0.764, -1.76)),
        (0.5, 1.0, (0.8, -1.5), (0.55, -1.75)),
    ],
)
def test_two_steps_follow_the_momentum_formula(beta, lr, w1, w2):
    values = {"server_optimizer": "fedavgm", "server_momentum": beta, "server_lr": lr}
    server = FedAvgM(RunConfig.from_dict(values).resolved())
    weights = [torch.tensor([1.0, -2.0], dtype=torch.float64)]
    server.step(weights, [torch.tensor([0.6, -1.0], dtype=torch.float64)])
    torch.testing.assert_close(weights[0], torch.tensor(w1, dtype=torch.float64))
    server.step(weights, [torch.tensor([0.5, -2.5], dtype=torch.float64)])
    torch.testing.assert_close(weights[0], torch.tensor(w2, dtype=torch.float64))


def test_velocity_survives_a_state_dict_round_trip():
    config = RunConfig.from_dict({"server_optimizer": "fedavgm", "server_momentum": 0.7}).resolved()
    first, second = [torch.tensor([0.6, -1.0])], [torch.tensor([0.5, -2.5])]
    straight = FedAvgM(config)
    w = [torch.tensor([1.0, -2.0])]
    straight.step(w, first)
    resumed = FedAvgM(config)
    resumed.load_state_dict(straight.state_dict())
    w_resumed = [w[0].clone()]
    straight.step(w, second)
    resumed.step(w_resumed, second)
    assert torch.equal(w[0], w_resumed[0])
    assert float(straight.velocity[0].abs().sum()) > 0
