"""Server-side rules: weighted averaging and the server update (plain or FedAvgM).

A new server rule: one file with a :class:`ServerOptimizer` subclass, one line below.
"""

from federated.server.aggregation import WeightedAverage, aggregation_weights, weighted_average
from federated.server.base import ServerOptimizer
from federated.server.fedavgm import FedAvgM

SERVER_OPTIMIZERS: dict[str, type[ServerOptimizer]] = {
    "avg": ServerOptimizer,
    "fedavgm": FedAvgM,
}

__all__ = [
    "SERVER_OPTIMIZERS",
    "FedAvgM",
    "ServerOptimizer",
    "WeightedAverage",
    "aggregation_weights",
    "weighted_average",
]
