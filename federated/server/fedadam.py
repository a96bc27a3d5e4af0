"""Adaptive server optimizers (Reddi et al., ICLR 2021, "Adaptive Federated
Optimization", Algorithm 2): FedAdam and FedYogi.

With the round's pseudo-gradient ``delta = combined - current`` (the aggregator's
combined state minus the global model; for FedAvg the weighted mean's move)::

    m <- beta1 · m + (1 - beta1) · delta
    v <- beta2 · v + (1 - beta2) · delta²                        (FedAdam)
    v <- v - (1 - beta2) · delta² · sign(v - delta²)              (FedYogi)
    x <- x + eta · m / (sqrt(v) + eps)

as in the paper: no bias correction, ``m`` starts at 0 and ``v`` at eps² (the paper's
``v_{-1} >= tau²``), ``eps`` is its adaptivity ``tau``.  Defaults: beta1 0.9, beta2
0.99, eps 1e-3 (the paper's), eta 0.01 (a choice: the paper tunes eta per task).  The
rule applies to every floating-point entry of the model state, as FedAvgM's does;
``m`` and ``v`` are part of checkpoints.
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
class AdaptiveParams(MethodParams):
    """FedAdam's and FedYogi's parameters (their own: ``server_lr`` is FedAvgM's)."""

    adaptive_lr: float = field(default=0.01, metadata=describe("server learning rate eta > 0"))
    adaptive_beta1: float = field(default=0.9, metadata=describe("first-moment decay in [0, 1)"))
    adaptive_beta2: float = field(default=0.99, metadata=describe("second-moment decay in [0, 1)"))
    adaptive_eps: float = field(
        default=1e-3, metadata=describe("adaptivity tau > 0 (added to sqrt(v))")
    )

    def check(self) -> None:
        positive("adaptive_lr", self.adaptive_lr)
        unit_interval("adaptive_beta1", self.adaptive_beta1)
        unit_interval("adaptive_beta2", self.adaptive_beta2)
        positive("adaptive_eps", self.adaptive_eps)


class FedAdam(ServerOptimizer):
    name = "fedadam"
    Params = AdaptiveParams

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.m: list[torch.Tensor] | None = None
        self.v: list[torch.Tensor] | None = None

    def second_moment(self, v: list[torch.Tensor], squared: list[torch.Tensor]) -> None:
        """FedAdam: v <- beta2·v + (1 - beta2)·delta²."""
        beta2 = self.params.adaptive_beta2
        torch._foreach_mul_(v, beta2)
        torch._foreach_add_(v, squared, alpha=1.0 - beta2)

    def step(self, current: list[torch.Tensor], average: list[torch.Tensor]) -> None:
        p = self.params
        with torch.no_grad():
            if self.m is None or self.v is None:
                self.m = [torch.zeros_like(t) for t in current]
                self.v = [torch.full_like(t, p.adaptive_eps**2) for t in current]
            elif self.m[0].device != current[0].device:  # restored from a checkpoint
                self.m = [t.to(current[0].device) for t in self.m]
                self.v = [t.to(current[0].device) for t in self.v]
            delta = torch._foreach_sub(average, current)
            torch._foreach_mul_(self.m, p.adaptive_beta1)
            torch._foreach_add_(self.m, delta, alpha=1.0 - p.adaptive_beta1)
            self.second_moment(self.v, torch._foreach_mul(delta, delta))
            denominator = torch._foreach_add(torch._foreach_sqrt(self.v), p.adaptive_eps)
            torch._foreach_addcdiv_(current, self.m, denominator, value=p.adaptive_lr)

    def state_dict(self) -> dict[str, Any]:
        if self.m is None or self.v is None:
            return {"m": None, "v": None}
        return {"m": [t.cpu() for t in self.m], "v": [t.cpu() for t in self.v]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        m, v = state.get("m"), state.get("v")
        self.m = None if m is None else [t.clone() for t in m]
        self.v = None if v is None else [t.clone() for t in v]


class FedYogi(FedAdam):
    name = "fedyogi"

    def second_moment(self, v: list[torch.Tensor], squared: list[torch.Tensor]) -> None:
        """FedYogi: v <- v - (1 - beta2)·delta²·sign(v - delta²)."""
        signs = [torch.sign(a - b) for a, b in zip(v, squared)]
        torch._foreach_addcmul_(v, squared, signs, value=-(1.0 - self.params.adaptive_beta2))
