"""Registries of federated methods and MOON temperature schedules.

A new method: one file with an :class:`Algorithm` subclass, one line below.
"""

from __future__ import annotations

from federated.algorithms.annealed_temperature import AnnealedTemperature
from federated.algorithms.base import Algorithm, LocalJob, LossTerms
from federated.algorithms.fedavg import FedAvg
from federated.algorithms.fedprox import FedProx
from federated.algorithms.l2rep import L2Representation
from federated.algorithms.moon import Moon
from federated.algorithms.scaffold import Scaffold
from federated.algorithms.solo import Solo
from federated.algorithms.temperature import TemperatureSchedule

ALGORITHMS: dict[str, type[Algorithm]] = {
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "moon": Moon,
    "scaffold": Scaffold,
    "solo": Solo,
    "l2rep": L2Representation,
}

TEMPERATURE_SCHEDULES: dict[str, type[TemperatureSchedule]] = {
    "fixed": TemperatureSchedule,
    "annealed": AnnealedTemperature,
}

__all__ = [
    "ALGORITHMS",
    "TEMPERATURE_SCHEDULES",
    "Algorithm",
    "LocalJob",
    "LossTerms",
]
