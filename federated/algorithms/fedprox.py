"""FedProx (Li et al. 2020): CE + (mu/2)·||w - w_global||² per batch.

The proximal term's gradient, mu·(w - w_global), is added to the parameters' gradients
directly after back-propagating the cross-entropy: the same gradient as
differentiating the term, without an autograd graph over every parameter.  Its value is
still computed each step and logged as ``prox_loss``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from federated.algorithms.base import Algorithm, LocalJob
from federated.params import MethodParams, describe, non_negative


@dataclass(frozen=True)
class FedProxParams(MethodParams):
    """FedProx's proximal weight ``mu`` (default: the paper's best for the dataset, 0.01
    elsewhere)."""

    mu: float = field(
        default=0.01,
        metadata=describe(
            "proximal weight >= 0 (paper's best: 0.01 on cifar10, 0.001 on "
            "cifar100 and tinyimagenet, else 0.01)"
        ),
    )

    # the MOON paper's best FedProx mu per dataset (§4.2)
    PAPER_MU: ClassVar[dict[str, float]] = {
        "cifar10": 0.01,
        "cifar100": 0.001,
        "tinyimagenet": 0.001,
    }

    @classmethod
    def resolved_default(cls, name: str, values: Mapping[str, Any]) -> Any:
        if name == "mu":
            return cls.PAPER_MU.get(str(values.get("dataset")), cls.defaults()["mu"])
        return super().resolved_default(name, values)

    def check(self) -> None:
        non_negative("mu", self.mu)


class FedProx(Algorithm):
    name = "fedprox"
    packable = True
    dp_obstacle = None  # sends its weights only (mu acts at the party)
    Params = FedProxParams

    def begin_local(self, job: LocalJob) -> None:
        job.scratch["params"] = [p for p in job.model.parameters() if p.requires_grad]
        job.scratch["anchor"] = [p.detach() for p in job.global_model.parameters()]

    def after_backward(self, job: LocalJob) -> dict[str, torch.Tensor]:
        mu = self.params.mu
        params = job.scratch["params"]
        with torch.no_grad():
            diffs = torch._foreach_sub([p.detach() for p in params], job.scratch["anchor"])
            grads = [p.grad for p in params]
            if mu > 0:
                torch._foreach_add_(grads, diffs, alpha=mu)
            squared = torch.stack(torch._foreach_norm(diffs)).square().sum()
        return {"prox": 0.5 * mu * squared}
