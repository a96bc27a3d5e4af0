"""FedAvgM: server momentum on the averaged update (Hsu et al. 2019; MOON paper App. E).

With ``delta = w_old - w_avg`` the reference code's (damped) form is::

    v     <- beta · v + (1 - beta) · delta
    w_new <- w_old - server_lr · v

which is what fedsweep does, so results compare with the paper's Table 10.  (The
undamped form of Hsu et al., ``v <- beta·v + delta``, equals this one with
``server_lr / (1 - beta)``.)  The update is computed as ``w_avg + (delta - server_lr·v)``,
algebraically the same, so that ``beta = 0, server_lr = 1`` gives exactly plain averaging
(``delta - 1·delta`` is exactly zero in floating point).  It applies to every
floating-point entry of the model state, BatchNorm statistics included, as in the
reference code.  The velocity starts at zero and is part of checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from federated.params import MethodParams, describe, positive, unit_interval
from federated.server.base import ServerOptimizer

if TYPE_CHECKING:
    from federated.config.run_config import RunConfig


@dataclass(frozen=True)
class FedAvgMParams(MethodParams):
    """FedAvgM's parameters: the server momentum and learning rate."""

    server_momentum: float = field(default=0.9, metadata=describe("server momentum beta in [0, 1)"))
    server_lr: float = field(default=1.0, metadata=describe("server learning rate > 0"))

    def check(self) -> None:
        unit_interval("server_momentum", self.server_momentum)
        positive("server_lr", self.server_lr)


class FedAvgM(ServerOptimizer):
    name = "fedavgm"
    Params = FedAvgMParams

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.velocity: list[torch.Tensor] | None = None

    def step(self, current: list[torch.Tensor], average: list[torch.Tensor]) -> None:
        beta, lr = self.params.server_momentum, self.params.server_lr
        with torch.no_grad():
            if self.velocity is None:
                self.velocity = [torch.zeros_like(t) for t in current]
            elif self.velocity[0].device != current[0].device:  # restored from a checkpoint
                self.velocity = [v.to(current[0].device) for v in self.velocity]
            delta = torch._foreach_sub(current, average)
            torch._foreach_mul_(self.velocity, beta)
            torch._foreach_add_(self.velocity, delta, alpha=1.0 - beta)
            # w_new = w_avg + (delta - lr·v)
            torch._foreach_add_(delta, self.velocity, alpha=-lr)
            torch._foreach_copy_(current, torch._foreach_add(average, delta))

    def state_dict(self) -> dict[str, Any]:
        return {"velocity": None if self.velocity is None else [v.cpu() for v in self.velocity]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("velocity")
        self.velocity = None if saved is None else [v.clone() for v in saved]
