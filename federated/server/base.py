"""Server optimizers: how the round's combined model state becomes the next global model.

A server optimizer sees only the current global weights and the state the algorithm's
aggregator combined (for FedAvg the weighted mean), so it treats ``current - combined``
as the round's pseudo-gradient and any algorithm combines with any server optimizer.
A new one: one file with a subclass (and its ``Params``), one line in
:data:`federated.registry.SERVER_OPTIMIZER_PATHS`; outside fedsweep,
``--server-optimizer package.module:Class``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch

from federated.params import MethodParams, NoParams

if TYPE_CHECKING:
    from federated.config.run_config import RunConfig


class ServerOptimizer:
    """Plain federated averaging: the next global model is the combined state."""

    name: ClassVar[str] = "avg"
    Params: ClassVar[type[MethodParams]] = NoParams

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        built = config.server_params  # built once, with the config
        self.params = built if type(built) is self.Params else self.Params.build(config.to_dict())

    def step(self, current: list[torch.Tensor], average: list[torch.Tensor]) -> None:
        """Overwrite ``current`` (the global model's floating-point state) in place from
        ``average`` (the aggregator's combined state, same order)."""
        with torch.no_grad():
            torch._foreach_copy_(current, average)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None
