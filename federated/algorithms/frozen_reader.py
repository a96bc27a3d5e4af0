"""The frozen models a party's objective reads, as a method sees them (``job.frozen``).

A method never runs a frozen model itself: it registers the states it wants (MOON's
previous local models) and asks ``job.frozen`` for their representations ``z`` of the
batch.  :class:`FrozenReader` is that interface; :class:`FrozenModels` its one-party
implementation (sequential and reference execution, and a job built by hand).  Packed
execution gives each job a view of one frozen packed network instead
(:mod:`federated.execution.frozen_models`), which meets the same interface.  This module
sits with the methods, below the execution layer, so the method interface imports
nothing from the engine that runs it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Protocol

import torch

from federated.models import FedConModel

State = Mapping[str, torch.Tensor]


class FrozenReader(Protocol):
    """What ``job.frozen`` offers a method: frozen models' representations of a batch."""

    def register(self, name: str, states: Sequence[State]) -> None:
        """Frozen models ``name``: one per state (weights of the global model's shape)."""
        ...

    def global_projection(self, x: torch.Tensor) -> torch.Tensor:
        """z of batch ``x`` by the round's global model, (B, out_dim)."""
        ...

    def projections(self, name: str, x: torch.Tensor) -> list[torch.Tensor]:
        """z of batch ``x`` by each model registered as ``name``, in registration order."""
        ...


class FrozenModels:
    """One party's frozen models, run on its batches one by one."""

    def __init__(self, global_model: FedConModel) -> None:
        self.global_model = global_model
        self._models: dict[str, list[FedConModel]] = {}

    def register(self, name: str, states: Sequence[State]) -> None:
        """Frozen models ``name``: one per state (weights of the global model's shape)."""
        models = []
        for state in states:
            model = copy.deepcopy(self.global_model).eval().requires_grad_(False)
            model.load_state_dict(state)
            models.append(model)
        self._models[name] = models

    @torch.no_grad()
    def global_projection(self, x: torch.Tensor) -> torch.Tensor:
        """z of batch ``x`` by the round's global model, (B, out_dim)."""
        return self.global_model.project(x)

    @torch.no_grad()
    def projections(self, name: str, x: torch.Tensor) -> list[torch.Tensor]:
        """z of batch ``x`` by each model registered as ``name``, in registration order."""
        return [model.project(x) for model in self._models.get(name, [])]
