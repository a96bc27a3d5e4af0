"""Packed execution: a round's drawn parties train together, as one packed network.

The same local training as :func:`federated.local_training.train_party` — E epochs of
SGD (lr, momentum, weight decay of the config; a fresh momentum per local training) on
each party's own batches — for all drawn parties at once:

* **Batches.** Every party's epoch permutations and augmentation parameters are drawn up
  front from the run's ``batches`` stream, party by party in the drawn order, exactly
  as the sequential path draws them; so each party trains on the very same batches.
  One gather and one batched augmentation per step serve every party.
* **Packs and slots.** Parties are grouped by batch size (a party smaller than one
  batch trains on all its samples as one batch), sorted by step count, longest first,
  and cut into packs of at most ``pack_width`` parties (so a pack holds parties of
  similar length); in a pack the party with the most steps takes slot 0, the next slot
  1, ...  Step ``t`` runs the first ``w`` slots, those of the parties that still have
  steps left: a party that has finished drops out of the arithmetic (no masked work),
  and its weights stay as it left them.  Packs train one after another.
* **Step.** One forward and backward pass of the packed network
  (:mod:`federated.packed_model`) over all ``w`` parties' batches, the method's loss
  computed per party on that party's slice of the output (the sum's gradient is each
  party's own), the method's gradient hooks per party on ``p.grad`` views, and one
  fused SGD update over the ``w`` parties' slices (each with its own momentum).
* **Frozen models** (MOON's global and previous models) run once per step for all
  parties (:class:`~federated.frozen_models.FrozenPack`).

The maths is the sequential path's; only float summation order differs (grouped
convolutions and batched matrix products add in another order), so weights agree to
float rounding and per-round accuracies to a fraction of a point (tests hold both).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch.optim.sgd import sgd

from federated.algorithms.base import Algorithm, LocalJob
from federated.config import RunConfig
from federated.data import Augmenter, AugmentParams
from federated.frozen_models import FrozenPack
from federated.local_training import PartyResult, accumulate_parts, batches_per_epoch
from federated.packed_model import PackedModel, fold_images, unfold_output


@dataclass
class PartyBatches:
    """One party's batches for a whole local training, drawn up front."""

    party: int
    batch: int  # samples per batch
    steps: int  # SGD steps (batches over all epochs)
    index: torch.Tensor  # (steps·batch,) rows of the laid-out training set, step order
    augment: AugmentParams | None  # the same rows' augmentation parameters


def draw_batches(
    parties: Sequence[int],
    sizes: Sequence[int],
    offsets: Sequence[int],
    augmenter: Augmenter,
    config: RunConfig,
    generator: torch.Generator,
) -> list[PartyBatches]:
    """Every party's batches, drawn from ``generator`` in the order (and with the very
    calls) of :func:`~federated.local_training.train_party` run party by party."""
    out = []
    for party in parties:
        n = sizes[party]
        batch = min(config.batch_size, n)
        used = batches_per_epoch(n, config.batch_size) * batch
        orders, params = [], []
        for _ in range(config.local_epochs):
            order = torch.randperm(n, generator=generator).to(augmenter.device, non_blocking=True)
            drawn = augmenter.draw(n, generator)
            orders.append(order[:used] + offsets[party])
            if drawn is not None:
                params.append(drawn.slice(0, used))
        augment = None
        if params:
            augment = AugmentParams(
                torch.cat([p.dy for p in params]),
                torch.cat([p.dx for p in params]),
                torch.cat([p.flip for p in params]),
                None if params[0].angle is None else torch.cat([p.angle for p in params]),
            )
        steps = len(orders) * (used // batch)
        out.append(PartyBatches(party, batch, steps, torch.cat(orders), augment))
    return out


# Parties per packed network on a CPU.  Real rounds (CIFAR-shaped, 10 parties, Dir(0.5),
# one AMD EPYC thread; README, "Speed") at widths 2, 4, 10: FedAvg 1.09x, 1.18x, 1.20x the
# sequential path, MOON 1.08x, 1.15x, 1.06x; one pack of 50 parties ran MOON at 0.67x.
# Wider packs stop paying once a pack's activations leave the cache; narrower ones keep
# parties of similar length together.  On a GPU, where a step is bound by kernel
# launches, every drawn party goes into one pack.
CPU_PACK_WIDTH = 4


def pack_width(config: RunConfig, device: torch.device) -> int | None:
    """Parties per pack: ``config.pack_width``, else the device's default (None: all)."""
    if config.pack_width is not None:
        return config.pack_width
    return CPU_PACK_WIDTH if device.type == "cpu" else None


def packs(batches: Sequence[PartyBatches], width: int | None = None) -> list[list[PartyBatches]]:
    """Parties grouped by batch size (largest first), each group longest-training first
    (stable: drawn order among equals) and cut into packs of at most ``width``."""
    groups: dict[int, list[PartyBatches]] = {}
    for party in batches:
        groups.setdefault(party.batch, []).append(party)
    out = []
    for size in sorted(groups, reverse=True):
        group = sorted(groups[size], key=lambda p: -p.steps)
        step = width or len(group)
        out += [group[i : i + step] for i in range(0, len(group), step)]
    return out


class _SlotTable:
    """A pack's per-step rows and augmentation parameters, slot-major and padded, so
    that step t of the first w slots is one slice."""

    def __init__(self, pack: Sequence[PartyBatches]) -> None:
        self.batch = pack[0].batch
        self.steps = [p.steps for p in pack]
        width = self.steps[0] * self.batch
        device = pack[0].index.device

        def padded(tensors: list[torch.Tensor]) -> torch.Tensor:
            out = torch.zeros((len(tensors), width), dtype=tensors[0].dtype, device=device)
            for row, t in enumerate(tensors):
                out[row, : t.shape[0]] = t
            return out

        self.index = padded([p.index for p in pack])
        first = pack[0].augment
        self.augment = None
        if first is not None:
            self.augment = tuple(
                None if getattr(first, f) is None else padded([getattr(p.augment, f) for p in pack])
                for f in ("dy", "dx", "flip", "angle")
            )
        # w(t): slots still training at step t (steps are sorted, largest first)
        self.widths = [sum(1 for s in self.steps if s > t) for t in range(self.steps[0])]

    def rows(self, t: int, w: int) -> tuple[torch.Tensor, AugmentParams | None]:
        cols = slice(t * self.batch, (t + 1) * self.batch)
        index = self.index[:w, cols].reshape(-1)
        if self.augment is None:
            return index, None
        dy, dx, flip, angle = (None if a is None else a[:w, cols].reshape(-1) for a in self.augment)
        return index, AugmentParams(dy, dx, flip, angle)


class PackedTrainer:
    """Trains packs of parties for one run; keeps its packed networks between rounds
    (one per pack of a round and width: a round's packs all hold trained weights until
    the round has handed them to the server)."""

    def __init__(self, global_model: torch.nn.Module, algorithm: Algorithm) -> None:
        self.global_model = global_model
        self.algorithm = algorithm
        self._nets: dict[tuple[int, int], PackedModel] = {}
        kind = type(algorithm)
        self._reads_gradients = kind.after_backward is not Algorithm.after_backward
        self._adjusts_weights = kind.after_step is not Algorithm.after_step

    def network(self, pack: int, slots: int) -> PackedModel:
        """The packed network of the round's ``pack``-th pack, ``slots`` wide."""
        net = self._nets.get((pack, slots))
        if net is None:
            net = self._nets[pack, slots] = PackedModel(self.global_model, slots)
        return net

    def train(
        self,
        jobs: dict[int, LocalJob],
        batches: Sequence[PartyBatches],
        train_x: torch.Tensor,
        train_y: torch.Tensor,
        augmenter: Augmenter,
        config: RunConfig,
    ) -> Iterator[tuple[int, PartyResult]]:
        """Train every job (party -> job, ``job.model`` not yet set); yields each
        party's result as its pack finishes."""
        width = pack_width(config, train_x.device)
        for number, pack in enumerate(packs(batches, width)):
            packed = self.network(number, len(pack))
            yield from self._train_pack(pack, packed, jobs, train_x, train_y, augmenter, config)

    def _train_pack(
        self,
        pack: list[PartyBatches],
        packed: PackedModel,
        jobs: dict[int, LocalJob],
        train_x: torch.Tensor,
        train_y: torch.Tensor,
        augmenter: Augmenter,
        config: RunConfig,
    ) -> list[tuple[int, PartyResult]]:
        algorithm = self.algorithm
        slots = len(pack)
        global_state = self.global_model.state_dict()
        frozen = FrozenPack(self.global_model)
        slot_jobs = []
        for slot, party in enumerate(pack):
            packed.load(slot, global_state)
            job = jobs[party.party]
            job.model = packed.copy_model(slot)
            job.frozen = frozen.view(slot)
            slot_jobs.append(job)
        for job in sorted(slot_jobs, key=lambda j: j.party):  # the sequential path's order
            algorithm.begin_local(job)
        frozen.build(slots)
        packed.net.train()

        params = packed.parameters
        shapes = packed.slot_shapes
        buffers = [torch.zeros_like(p) for p in params] if config.momentum else None
        table = _SlotTable(pack)
        sums: list[dict[str, torch.Tensor]] = [{} for _ in range(slots)]
        counts: list[dict[str, int]] = [{} for _ in range(slots)]
        batch = table.batch
        for t, w in enumerate(table.widths):
            index, augment = table.rows(t, w)

            def side_by_side(images: torch.Tensor, w: int = w) -> torch.Tensor:
                return fold_images(images.view(w, batch, *images.shape[1:]))

            folded = augmenter.train_batch(train_x.index_select(0, index), augment, side_by_side)
            ys = train_y.index_select(0, index).view(w, batch)
            frozen.begin_step(folded, w)
            outputs = unfold_output(packed.net(folded), w)
            channels = folded.shape[1] // w
            totals = []
            for slot in range(w):
                job = slot_jobs[slot]
                x = folded[:, slot * channels : (slot + 1) * channels]  # the party's batch
                terms = algorithm.loss(job, outputs[slot], x, ys[slot])
                totals.append(terms.total)
                accumulate_parts(sums[slot], counts[slot], terms.parts)
            for p in params:
                p.grad = None
            torch.stack(totals).sum().backward()
            if self._reads_gradients:
                packed.link_gradients(range(w))
                for slot in range(w):
                    extra = algorithm.after_backward(slot_jobs[slot])
                    if extra:
                        accumulate_parts(sums[slot], counts[slot], extra)
            self._step(params, shapes, buffers, w, config)
            for slot in range(w):
                job = slot_jobs[slot]
                if self._adjusts_weights:
                    algorithm.after_step(job)
                job.steps += 1
        # one read of every party's loss sums
        keys = [list(s) for s in sums]
        flat = [s[k] for s, ks in zip(sums, keys) for k in ks]
        values = iter(torch.stack(flat).tolist() if flat else [])
        out = []
        for slot, party in enumerate(pack):
            losses = {k: next(values) / counts[slot][k] for k in keys[slot]}
            samples = party.steps * batch
            out.append((party.party, PartyResult(losses, samples, slot_jobs[slot].steps)))
        return out

    @staticmethod
    @torch.no_grad()
    def _step(
        params: list[torch.nn.Parameter],
        shapes: list[tuple[int, ...]],
        buffers: list[torch.Tensor] | None,
        w: int,
        config: RunConfig,
    ) -> None:
        """One fused SGD update of the first ``w`` slots (the others keep their weights)."""
        weights = [p.view(shape)[:w] for p, shape in zip(params, shapes)]
        grads = [p.grad.view(shape)[:w] for p, shape in zip(params, shapes)]
        momentum: list[torch.Tensor | None] = (
            [None] * len(params)
            if buffers is None
            else [b.view(shape)[:w] for b, shape in zip(buffers, shapes)]
        )
        sgd(
            weights,
            grads,
            momentum,
            fused=True,
            weight_decay=config.weight_decay,
            momentum=config.momentum,
            lr=config.lr,
            dampening=0.0,
            nesterov=False,
            maximize=False,
        )
