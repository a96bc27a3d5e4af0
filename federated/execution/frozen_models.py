"""Frozen models a party's objective reads: the round's global model, and models the
method registers for the party (MOON's previous local models).

A method never runs a frozen model itself; it asks ``job.frozen`` for their
representations ``z`` of the batch it is given (no gradients flow into them).  That lets
the engine choose how to compute them:

* :class:`~federated.algorithms.frozen_reader.FrozenModels` — one party at a time
  (sequential and reference execution): the global model and one copy per registered
  state, each run on the party's batch (it lives with the method interface, which
  defaults to it).
* :class:`PackedFrozenModels` — packed execution: per step, the global model runs once
  on every party's batch together (as a frozen packed network of copies of it, on the
  folded batches the trained network reads), and all parties' registered models run as
  one frozen packed network (:mod:`federated.execution.packed_model`); each party's view returns
  its rows.

Registered states stay where the party keeps them (its CPU state) until registered;
copies on the device live for one local training.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from federated.algorithms.frozen_reader import State
from federated.execution.packed_model import PackedModel
from federated.models import FedConModel


class FrozenPack:
    """The frozen models of every party of one pack, computed for all of them at once.

    Slots are the pack's (longest-training party first); a step that runs the first
    ``w`` slots calls :meth:`begin_step` with their batches, and the first request for
    a projection computes it for all ``w`` parties.
    """

    def __init__(self, global_model: FedConModel) -> None:
        self.global_model = global_model
        self._states: dict[str, list[tuple[int, State]]] = {}
        # name -> (packed network, entry -> slot, per-slot (first entry, count))
        self._nets: dict[str, tuple[PackedModel, torch.Tensor, dict[int, tuple[int, int]]]] = {}
        # name -> entries of the first w slots, for every w
        self._entries_within: dict[str, list[int]] = {}
        # name -> whether entry i belongs to slot i for every i (one model per slot, as
        # MOON's k = 1 once every party has trained): the trained network's folded
        # input is then the frozen network's input as it is
        self._one_per_slot: dict[str, bool] = {}
        self._global: PackedModel | None = None  # copies of the global model, when asked for
        self._slots = 0
        self._folded: torch.Tensor | None = None
        self._copies = 0
        self._cache: dict[str, torch.Tensor] = {}

    def view(self, slot: int) -> PackedFrozenModels:
        return PackedFrozenModels(self, slot)

    def register(self, slot: int, name: str, states: Sequence[State]) -> None:
        self._states.setdefault(name, []).extend((slot, state) for state in states)

    def build(self, slots: int) -> None:
        """Lay the registered models out as packed networks (after every party's
        ``begin_local``), entries in slot order so that a slot prefix is an entry prefix."""
        device = next(self.global_model.parameters()).device
        self._slots = slots
        for name, entries in self._states.items():
            entries = sorted(entries, key=lambda e: e[0])
            if not entries:
                continue
            packed = PackedModel(self.global_model, len(entries))
            for index, (_, state) in enumerate(entries):
                packed.load(index, state)
            packed.net.eval().requires_grad_(False)
            owners = [slot for slot, _ in entries]
            spans: dict[int, tuple[int, int]] = {}
            for index, slot in enumerate(owners):
                first, count = spans.get(slot, (index, 0))
                spans[slot] = (first, count + 1)
            self._nets[name] = (packed, torch.tensor(owners, device=device), spans)
            self._one_per_slot[name] = owners == list(range(len(owners)))
            self._entries_within[name] = [sum(1 for s in owners if s < w) for w in range(slots + 1)]

    def begin_step(self, folded: torch.Tensor, copies: int) -> None:
        """This step's normalised batches of the first ``copies`` slots, folded side by
        side (:func:`~federated.execution.packed_model.fold_images`: (B, copies·C, H, W))."""
        self._folded = folded
        self._copies = copies
        self._cache.clear()

    @staticmethod
    def _per_copy(z: torch.Tensor, copies: int) -> torch.Tensor:
        """(B, copies·D) -> (copies, B, D), contiguous."""
        return z.view(z.shape[0], copies, -1).transpose(0, 1).contiguous()

    @torch.no_grad()
    def global_projection(self, slot: int) -> torch.Tensor:
        z = self._cache.get("")
        if z is None:
            if self._global is None:
                self._global = PackedModel(self.global_model, self._slots)
                state = self.global_model.state_dict()
                for copy_slot in range(self._slots):
                    self._global.load(copy_slot, state)
                self._global.net.eval().requires_grad_(False)
            z = self._global.net.project(self._folded)
            z = self._cache[""] = self._per_copy(z, self._copies)
        return z[slot]

    @torch.no_grad()
    def projections(self, slot: int, name: str) -> list[torch.Tensor]:
        net = self._nets.get(name)
        if net is None or slot not in net[2]:
            return []
        z = self._cache.get(name)
        if z is None:
            packed, owners, _ = net
            folded, copies = self._folded, self._copies
            n = self._entries_within[name][copies]
            if self._one_per_slot[name] and n == copies:
                inputs = folded
            else:  # each entry reads its party's channels
                channels = folded.shape[1] // copies
                within = torch.arange(channels, device=folded.device)
                index = (owners[:n, None] * channels + within).reshape(-1)
                inputs = folded.index_select(1, index).contiguous(memory_format=torch.channels_last)
            z = self._cache[name] = self._per_copy(packed.net.project(inputs), n)
        first, count = net[2][slot]
        return [z[first + j] for j in range(count)]


class PackedFrozenModels:
    """One party's view of its pack's frozen models (a
    :class:`~federated.algorithms.frozen_reader.FrozenReader`)."""

    def __init__(self, pack: FrozenPack, slot: int) -> None:
        self.pack = pack
        self.slot = slot

    def register(self, name: str, states: Sequence[State]) -> None:
        self.pack.register(self.slot, name, states)

    def global_projection(self, x: torch.Tensor) -> torch.Tensor:
        return self.pack.global_projection(self.slot)

    def projections(self, name: str, x: torch.Tensor) -> list[torch.Tensor]:
        return self.pack.projections(self.slot, name)
