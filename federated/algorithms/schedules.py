"""The registry of MOON temperature schedules: a new schedule is one file and one line."""

from __future__ import annotations

from federated.algorithms.annealed_temperature import AnnealedTemperature
from federated.algorithms.temperature import TemperatureSchedule

TEMPERATURE_SCHEDULES: dict[str, type[TemperatureSchedule]] = {
    "fixed": TemperatureSchedule,
    "annealed": AnnealedTemperature,
}
