"""What one party's local training hands to the server: the input of every aggregator
(:mod:`federated.server.aggregation`), made by the round loop from a finished local
training (:mod:`federated.algorithms.base` re-exports it for methods)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch


@dataclass
class Contribution:
    """What one party's local training hands to the server."""

    party: int
    weights: Mapping[str, torch.Tensor]  # trained model state (valid during add() only)
    weight: float  # |D_i| / sum of the drawn parties' |D_j|
    num_samples: int
    steps: int  # local SGD steps taken
    extras: dict[str, list[torch.Tensor]]  # what end_local returned
