"""The model shape every algorithm shares: base encoder, projection head, output layer.

As in the MOON paper (§3.2) and its reference code: ``h`` = encoder features,
``z`` = projection head output (Linear(f, f), ReLU, Linear(f, out_dim); no ReLU after
it), ``y`` = output layer on ``z``.  Without the projection head (Table 7) the output
layer sits on the features and ``z = h``.  Every baseline uses the same network, head
included, as the paper does for fairness.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn


class ModelOutput(NamedTuple):
    """What a forward pass returns."""

    features: torch.Tensor  # h, (B, feature_dim)
    projection: torch.Tensor  # z = R_w(x), (B, out_dim) or h without a head
    logits: torch.Tensor  # (B, n_classes)


def projection_head_of(feature_dim: int, out_dim: int, enabled: bool) -> nn.Module:
    """MOON's projection head over ``feature_dim`` features: Linear, ReLU, Linear to
    ``out_dim`` (drawn from torch's RNG, in that order); the identity when not
    ``enabled``.  Every family's models carry it under the name ``head``."""
    if not enabled:
        return nn.Identity()
    return nn.Sequential(
        nn.Linear(feature_dim, feature_dim),
        nn.ReLU(inplace=True),
        nn.Linear(feature_dim, out_dim),
    )


class FedConModel(nn.Module):
    """Encoder + optional projection head + output layer."""

    def __init__(
        self,
        encoder: nn.Module,
        feature_dim: int,
        n_classes: int,
        out_dim: int = 256,
        projection_head: bool = True,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = projection_head_of(feature_dim, out_dim, projection_head)
        rep_dim = out_dim if projection_head else feature_dim
        self.classifier = nn.Linear(rep_dim, n_classes)

    def forward(self, x: torch.Tensor) -> ModelOutput:
        h = self.encoder(x)
        z = self.head(h)
        return ModelOutput(h, z, self.classifier(z))

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """z only: what frozen global/previous models contribute to representation losses."""
        return self.head(self.encoder(x))
