"""FedNova (Wang, Liu, Liang, Joshi, Poor; NeurIPS 2020): normalised averaging.

Parties train as in FedAvg but may take different numbers of local steps tau_i (their
data sizes differ, every party runs E epochs).  Plain averaging then over-weights the
parties that took more steps (objective inconsistency).  FedNova averages the parties'
*normalised* updates and rescales by an effective step count::

    d_i     = (x - y_i) / a_i                  normalised cumulative update of party i
    tau_eff = sum_i p_i · a_i                   p_i = |D_i| / sum of the drawn |D_j|
    x_new   = x - tau_eff · sum_i p_i · d_i

``a_i`` is the L1 norm of party i's aggregation vector.  With local SGD momentum rho
(the paper's momentum correction, §5 and its reference code's ``local_normalizing_vec``)
the update after tau steps is ``lr · sum_j g_j · (1 - rho^(tau-j+1)) / (1 - rho)``, so::

    a_i = sum_{t=1..tau_i} (1 - rho^t) / (1 - rho)    (= tau_i when rho = 0)

Weight decay is part of each step's gradient, as in the reference code.  When every
party takes the same number of steps, x_new is the weighted mean of the y_i (FedAvg),
up to rounding.  The normalisation applies to every floating-point entry of the model
state; integer entries (BatchNorm's counters) are averaged as in FedAvg.  FedNova's
server momentum is the server optimizer's business (``--server-optimizer fedavgm``).
"""

from __future__ import annotations

from typing import Any

import torch

from federated.algorithms.base import Algorithm, Contribution
from federated.models import FedConModel
from federated.server.aggregation import Aggregator, WeightedAverage


def normalizing_factor(steps: int, momentum: float) -> float:
    """a_i: the L1 norm of the aggregation vector of ``steps`` SGD steps with ``momentum``."""
    if momentum == 0:
        return float(steps)
    return sum((1.0 - momentum**t) / (1.0 - momentum) for t in range(1, steps + 1))


class NormalizedAverage(Aggregator):
    """Accumulates sum_i p_i (x - y_i) / a_i and tau_eff = sum_i p_i a_i party by party."""

    def __init__(self, global_model: FedConModel, momentum: float) -> None:
        self.current = global_model.state_dict()
        self.momentum = momentum
        self.float_keys = [k for k, v in self.current.items() if v.is_floating_point()]
        self.normalized = [torch.zeros_like(self.current[k]) for k in self.float_keys]
        self.others = WeightedAverage(
            {k: v for k, v in self.current.items() if not v.is_floating_point()}
        )
        self.tau_eff = 0.0

    def add(self, contribution: Contribution) -> None:
        a = normalizing_factor(max(contribution.steps, 1), self.momentum)
        p = contribution.weight
        with torch.no_grad():
            update = torch._foreach_sub(
                [self.current[k] for k in self.float_keys],
                [contribution.weights[k].detach() for k in self.float_keys],
            )
            torch._foreach_add_(self.normalized, update, alpha=p / a)
        self.others.add(
            {k: v for k, v in contribution.weights.items() if k not in self.float_keys}, p
        )
        self.tau_eff += p * a

    def result(self) -> dict[str, torch.Tensor]:
        out = self.others.result()
        with torch.no_grad():
            for key, normalized in zip(self.float_keys, self.normalized):
                out[key] = self.current[key] - self.tau_eff * normalized
        return out


class FedNova(Algorithm):
    """FedAvg's party side; the server combines normalised updates."""

    name = "fednova"
    packable = True
    dp_obstacle = (
        "divides each party's update by its step count at the server, a rule DP-FedAvg's "
        "clipped mean would replace (and the counts would go unprotected)"
    )

    def aggregator(self, server: dict[str, Any], global_model: FedConModel) -> NormalizedAverage:
        return NormalizedAverage(global_model, self.config.momentum)
