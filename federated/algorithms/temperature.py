"""Temperature schedules for MOON's contrastive loss: adaptive hyperparameter objects.

MOON reads ``schedule.value`` for every batch and tells the schedule what happened
through :meth:`TemperatureSchedule.observe`; a fixed temperature ignores it, the
annealed one (:mod:`federated.algorithms.annealed_temperature`) moves.  A new schedule
is one file and one line in :data:`federated.registry.TEMPERATURE_SCHEDULE_PATHS`.
A schedule object lives for one party's local training (MOON makes one per job).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from federated.algorithms.moon import MoonParams


class TemperatureSchedule:
    """A constant temperature ``params.tau``.  ``params`` is MOON's parameters (or any
    object with ``tau``, ``tau_min``, ``tau_sigma``, ``tau_scope``)."""

    def __init__(self, params: MoonParams, generator: torch.Generator) -> None:
        self.params = params
        self.generator = generator
        self.value: float = float(params.tau)

    def begin(self, party_state: dict[str, Any]) -> None:
        """A party's local training starts."""
        return None

    def observe(self, grad_norm: Callable[[], float], loss_at: Callable[[float], float]) -> None:
        """One SGD step happened.  ``grad_norm()`` gives the step's gradient norm and
        ``loss_at(t)`` the batch's contrastive loss at temperature ``t``; both are
        callables so that a fixed schedule pays for neither."""
        return None

    def end(self, party_state: dict[str, Any]) -> dict[str, float]:
        """A party's local training ended; returns values to report for it."""
        return {}
