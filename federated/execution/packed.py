"""Packed execution: a round's drawn parties train together, as one packed network.

The same local training as :mod:`federated.execution.sequential` — E epochs of
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
  (:mod:`federated.execution.packed_model`) over all ``w`` parties' batches, the method's loss
  computed per party on that party's slice of the output (the sum's gradient is each
  party's own), the method's gradient hooks per party on ``p.grad`` views, and one
  fused SGD update over the ``w`` parties' slices (each with its own momentum).
* **Frozen models** (MOON's global and previous models) run once per step for all
  parties (:class:`~federated.execution.frozen_models.FrozenPack`).
* **Packs side by side.**  A round's packs are independent (each reads the global
  model and its parties' batches, and writes only its parties' weights and state; the
  method object holds only its parameters, the packing contract of
  :mod:`federated.algorithms.base`), so with ``pack_threads`` > 1 they train on that
  many threads at once, each running one torch thread.  Each pack's arithmetic is the
  same on any thread, so results are bit for bit those of one thread (tested).  The
  sweep's trainable raises it for a trial that has idle cores beside it (the last wave
  of a sweep: :mod:`federated.trainable`).

The maths is the sequential path's; only float summation order differs (grouped
convolutions and batched matrix products add in another order), so weights agree to
float rounding and per-round accuracies to a fraction of a point (tests hold both).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import torch

from federated.algorithms.base import Algorithm, LocalJob
from federated.data import AugmentParams
from federated.execution.batch_plan import PartyBatches
from federated.execution.frozen_models import FrozenPack
from federated.execution.loss_sums import LossSums, read_means
from federated.execution.packed_model import PackedModel, fold_images, unfold_output
from federated.execution.trainer import PartyResult, TrainingSetup, start_local

# Parties per packed network on a CPU.  Real rounds (CIFAR-shaped, 10 parties, Dir(0.5),
# one AMD EPYC thread; README, "Speed") at widths 2, 4, 10: FedAvg 1.09x, 1.18x, 1.20x the
# sequential path, MOON 1.08x, 1.15x, 1.06x; one pack of 50 parties ran MOON at 0.67x.
# Wider packs stop paying once a pack's activations leave the cache; narrower ones keep
# parties of similar length together.  On a GPU, where a step is bound by kernel
# launches, every drawn party goes into one pack.
CPU_PACK_WIDTH = 4


def pack_width(asked: int | None, device: torch.device) -> int | None:
    """Parties per pack: ``asked`` (the config's ``pack_width``), else the device's
    default (None: all drawn parties in one pack)."""
    if asked is not None:
        return asked
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
    """Trains a round's parties in packs; keeps its packed networks between rounds
    (one per pack of a round and width: a round's packs all hold trained weights until
    the round has handed them to the server)."""

    #: the path a row records (``execution_path``)
    path: ClassVar[str] = "packed"

    def __init__(self, setup: TrainingSetup, width: int | None) -> None:
        self.setup = setup
        self.width = pack_width(width, setup.images.device)
        self._nets: dict[tuple[int, int], PackedModel] = {}
        kind = type(setup.algorithm)
        self._reads_gradients = kind.after_backward is not Algorithm.after_backward
        self._adjusts_weights = kind.after_step is not Algorithm.after_step
        #: threads that train a round's packs side by side (1: one after another); only
        #: for a run on one torch thread (each pack thread runs one), set between rounds
        self.pack_threads = 1
        #: core-seconds the last round's packs ran beyond its training's wall time: the
        #: idle cores it used (0.0 on one pack thread)
        self.spare_core_seconds = 0.0

    def network(self, pack: int, slots: int) -> PackedModel:
        """The packed network of the round's ``pack``-th pack, ``slots`` wide."""
        net = self._nets.get((pack, slots))
        if net is None:
            net = self._nets[pack, slots] = PackedModel(self.setup.global_model, slots)
        return net

    def train(
        self, jobs: Sequence[LocalJob], plan: Sequence[PartyBatches]
    ) -> Iterator[tuple[LocalJob, PartyResult]]:
        """Train every pack, then yield the parties in the drawn order."""
        by_party = {job.party: job for job in jobs}
        round_packs = packs(plan, self.width)
        work = [(pack, self.network(n, len(pack))) for n, pack in enumerate(round_packs)]
        results: dict[int, PartyResult] = {}
        self.spare_core_seconds = 0.0
        threads = min(self.pack_threads, len(work))
        if threads > 1:
            results = self._side_by_side(work, by_party, threads)
        else:
            for pack, packed in work:
                results.update(self._train_pack(pack, packed, by_party))
        for job in jobs:
            yield job, results[job.party]

    def _side_by_side(
        self,
        work: list[tuple[list[PartyBatches], PackedModel]],
        jobs: dict[int, LocalJob],
        threads: int,
    ) -> dict[int, PartyResult]:
        """Every pack of ``work`` trained on ``threads`` threads at once; records the
        core-seconds beyond the wall time (:attr:`spare_core_seconds`)."""
        busy: list[float] = []

        def timed(pack: list[PartyBatches], packed: PackedModel) -> dict[int, PartyResult]:
            start = time.perf_counter()
            out = self._train_pack(pack, packed, jobs)
            busy.append(time.perf_counter() - start)
            return out

        start = time.perf_counter()
        with ThreadPoolExecutor(threads, thread_name_prefix="pack") as pool:
            parts = list(pool.map(lambda item: timed(*item), work))
        self.spare_core_seconds = max(0.0, sum(busy) - (time.perf_counter() - start))
        return {party: result for part in parts for party, result in part.items()}

    def _train_pack(
        self, pack: list[PartyBatches], packed: PackedModel, jobs: dict[int, LocalJob]
    ) -> dict[int, PartyResult]:
        algorithm = self.setup.algorithm
        augmenter = self.setup.augmenter
        slots = len(pack)
        global_state = self.setup.global_model.state_dict()
        frozen = FrozenPack(self.setup.global_model)
        slot_jobs = []
        for slot, party in enumerate(pack):
            job = jobs[party.party]
            job.model = packed.copy_model(slot)
            job.frozen = frozen.view(slot)
            slot_jobs.append(job)
        for job in sorted(slot_jobs, key=lambda j: j.party):  # the sequential path's order
            start_local(job, global_state, self.setup)
        frozen.build(slots)
        packed.net.train()

        params = packed.parameters
        shapes = packed.slot_shapes
        momenta = self.setup.rule.new_momenta(params)
        table = _SlotTable(pack)
        sums = [LossSums() for _ in range(slots)]
        batch = table.batch
        for t, w in enumerate(table.widths):
            index, augment = table.rows(t, w)

            def side_by_side(images: torch.Tensor, w: int = w) -> torch.Tensor:
                return fold_images(images.view(w, batch, *images.shape[1:]))

            raw = self.setup.images.index_select(0, index)
            folded = augmenter.train_batch(raw, augment, side_by_side)
            if self.setup.noise is not None:
                self._add_noise(folded, slot_jobs, w, t)
            ys = self.setup.labels.index_select(0, index).view(
                w, batch, *self.setup.labels.shape[1:]
            )
            frozen.begin_step(folded, w)
            # the forward pass and the losses (frozen models included); not backward
            with self.setup.precision.autocast():
                outputs = unfold_output(packed.net(folded), w)
                channels = folded.shape[1] // w
                totals = []
                for slot in range(w):
                    job = slot_jobs[slot]
                    x = folded[:, slot * channels : (slot + 1) * channels]  # the party's batch
                    terms = algorithm.loss(job, outputs[slot], x, ys[slot])
                    totals.append(terms.total)
                    sums[slot].add(terms.parts)
            for p in params:
                p.grad = None
            torch.stack(totals).sum().backward()
            if self._reads_gradients:
                packed.link_gradients(range(w))
                for slot in range(w):
                    extra = algorithm.after_backward(slot_jobs[slot])
                    if extra:
                        sums[slot].add(extra)
            self._step(params, shapes, momenta, w)
            for slot in range(w):
                job = slot_jobs[slot]
                if self._adjusts_weights:
                    algorithm.after_step(job)
                job.steps += 1
        losses = read_means(sums)  # one read of every party's loss sums
        return {
            party.party: PartyResult(losses[slot], party.steps * batch, slot_jobs[slot].steps)
            for slot, party in enumerate(pack)
        }

    def _add_noise(self, folded: torch.Tensor, jobs: list[LocalJob], w: int, step: int) -> None:
        """Each slot's feature-skew noise of this step, on its channels of the batch."""
        channels = folded.shape[1] // w
        shape = (folded.shape[0], channels, *folded.shape[2:])
        for slot in range(w):
            job = jobs[slot]
            scale = self.setup.augmenter.scale
            noise = self.setup.noise.noise(job.party, job.round_index, step, 1, shape, scale)
            if noise is not None:
                folded[:, slot * channels : (slot + 1) * channels] += noise

    def _step(
        self,
        params: list[torch.nn.Parameter],
        shapes: list[tuple[int, ...]],
        momenta: list[torch.Tensor] | None,
        w: int,
    ) -> None:
        """One SGD update of the first ``w`` slots (the others keep their weights)."""
        self.setup.rule.step(
            [p.view(shape)[:w] for p, shape in zip(params, shapes)],
            [p.grad.view(shape)[:w] for p, shape in zip(params, shapes)],
            None if momenta is None else [b.view(shape)[:w] for b, shape in zip(momenta, shapes)],
        )
