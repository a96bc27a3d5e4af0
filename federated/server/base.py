"""Server update rules: how the averaged party models become the next global model."""

from __future__ import annotations

from typing import Any

import torch

from federated.config import RunConfig


class ServerOptimizer:
    """Plain federated averaging: the next global model is the weighted average."""

    name = "avg"

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    def step(self, current: list[torch.Tensor], average: list[torch.Tensor]) -> None:
        """Overwrite ``current`` (the global model's floating-point state) in place."""
        with torch.no_grad():
            torch._foreach_copy_(current, average)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None
