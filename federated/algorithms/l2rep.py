"""l2-representation (MOON paper §4.7, Table 5): CE + mu·||z - z_glob||₂.

The second term pulls the local representation towards the frozen global model's, as
MOON's does, but without negatives.  The norm is the per-sample Euclidean distance
(not squared) between projection-head outputs, averaged over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from federated.algorithms.base import Algorithm, LocalJob, LossTerms
from federated.models import ModelOutput
from federated.params import MethodParams, describe, non_negative


def l2_representation_term(z: torch.Tensor, z_glob: torch.Tensor) -> torch.Tensor:
    """Batch mean of ||z_b - z_glob_b||₂."""
    return torch.linalg.vector_norm(z - z_glob, dim=1).mean()


@dataclass(frozen=True)
class L2RepresentationParams(MethodParams):
    """The weight ``mu`` of the representation term (default 0.1)."""

    mu: float = field(default=0.1, metadata=describe("weight of ||z - z_glob|| >= 0"))

    def check(self) -> None:
        non_negative("mu", self.mu)


class L2Representation(Algorithm):
    name = "l2rep"
    packable = True
    dp_obstacle = None  # sends its weights only
    Params = L2RepresentationParams

    def loss(self, job: LocalJob, out: ModelOutput, x: torch.Tensor, y: torch.Tensor) -> LossTerms:
        ce = self.supervised_loss(out, y)
        z_glob = job.frozen.global_projection(x)
        l2 = l2_representation_term(out.projection, z_glob)
        return LossTerms(ce + self.params.mu * l2, {"ce": ce.detach(), "l2": l2.detach()})
