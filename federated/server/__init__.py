"""Server side: combining contributions (:mod:`federated.server.aggregation`) and the
server optimizers that turn the combined state into the next global model.

The registry of server optimizers is :data:`federated.registry.SERVER_OPTIMIZER_PATHS`;
:data:`SERVER_OPTIMIZERS` is it with the classes loaded.
"""

from federated.registry import SERVER_OPTIMIZER_PATHS, load_method
from federated.server.aggregation import (
    Aggregator,
    NoAggregation,
    WeightedAverage,
    WeightedMean,
    aggregation_weights,
    weighted_average,
)
from federated.server.base import ServerOptimizer

SERVER_OPTIMIZERS: dict[str, type[ServerOptimizer]] = {
    name: load_method("server_optimizer", name) for name in SERVER_OPTIMIZER_PATHS
}

__all__ = [
    "SERVER_OPTIMIZERS",
    "Aggregator",
    "NoAggregation",
    "ServerOptimizer",
    "WeightedAverage",
    "WeightedMean",
    "aggregation_weights",
    "weighted_average",
]
