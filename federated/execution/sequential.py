"""Sequential and reference execution: one party after another on one working model.

Each party trains E epochs of SGD (:class:`~federated.sgd_rule.SgdRule`) on the
batches its :class:`~federated.execution.batch_plan.PartyBatches` lists, under the
method's objective: per step the method's ``loss``, backward, ``after_backward``, the
SGD update, ``after_step`` (then, for a method with a personal model, that model's
SGD update by the same rule).  A party trains only when the round loop asks for it, after
the previous party has been handed to the server, so a round holds two copies of the
model whatever the number of parties drawn.

Rows are gathered from the uint8 training tensors already on the device and augmented
in chunks of :data:`AUGMENT_CHUNK_BATCHES` batches (the augmentation is per sample, so a
chunk gives the numbers batch by batch would).  The reference path augments one sample
at a time with torchvision's ops instead: the plain-math check the batched path equals.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar

import torch

from federated.algorithms.base import LocalJob
from federated.data import AugmentParams, augment_reference
from federated.execution.batch_plan import PartyBatches
from federated.execution.loss_sums import LossSums, read_means
from federated.execution.trainer import PartyResult, TrainingSetup, start_local
from federated.models import FedConModel

# Batches gathered and augmented together: a sixteenth of the per-call overhead (about
# 5% of a small model's round on a CPU core); 16 x 64 CIFAR images are 12 MB.
AUGMENT_CHUNK_BATCHES = 16


class SequentialTrainer:
    """Trains parties one by one in ``model`` (the run's working model), from the
    plan's rows of ``setup.images``/``setup.labels``."""

    #: the path a row records (``execution_path``)
    path: ClassVar[str] = "sequential"

    chunk_batches = AUGMENT_CHUNK_BATCHES
    spare_core_seconds = 0.0  # one party after another, on the run's own thread(s)

    def __init__(self, setup: TrainingSetup, model: FedConModel) -> None:
        self.setup = setup
        self.model = model

    def train(
        self, jobs: Sequence[LocalJob], plan: Sequence[PartyBatches]
    ) -> Iterator[tuple[LocalJob, PartyResult]]:
        for job, batches in zip(jobs, plan):
            job.model = self.model
            start_local(job, self.setup.global_model.state_dict(), self.setup)
            yield job, self.train_one(job, batches)

    def augment(self, raw: torch.Tensor, params: AugmentParams | None) -> torch.Tensor:
        """A chunk of uint8 rows -> the normalised, augmented float batch."""
        return self.setup.augmenter.train_batch(raw, params)

    def train_one(self, job: LocalJob, batches: PartyBatches) -> PartyResult:
        """``job.model``'s local training on ``batches`` (started: see ``start_local``)."""
        model = job.model
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        setup = self.setup
        momenta = setup.rule.new_momenta(params)
        sums = LossSums()
        batch = batches.batch
        chunk = self.chunk_batches
        for first in range(0, batches.steps, chunk):
            stop = min(first + chunk, batches.steps)
            index, augment = batches.rows(first, stop)
            xs = self.augment(setup.images.index_select(0, index), augment)
            if setup.noise is not None:
                shape = (batch, *xs.shape[1:])
                scale = setup.augmenter.scale
                noise = setup.noise.noise(
                    job.party, job.round_index, first, stop - first, shape, scale
                )
                if noise is not None:
                    xs += noise
            task = setup.algorithm.task
            ys = task.take_targets(setup.labels, index)
            for offset in range(0, (stop - first) * batch, batch):
                x = xs[offset : offset + batch]
                y = task.take_targets(ys, slice(offset, offset + batch))
                sums.add(self._step(job, params, momenta, x, y))
        (losses,) = read_means([sums])
        return PartyResult(losses, samples=batches.steps * batch, steps=job.steps)

    def _step(
        self,
        job: LocalJob,
        params: list[torch.nn.Parameter],
        momenta: list[torch.Tensor] | None,
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """One SGD step on the batch (x, y); returns the loss parts, still on the device."""
        algorithm = self.setup.algorithm
        with self.setup.precision.autocast():  # the forward pass and the loss; not backward
            terms = algorithm.loss(job, algorithm.task.forward(job.model, x, y), x, y)
        for p in params:
            p.grad = None
        terms.total.backward()
        parts = terms.parts
        extra = algorithm.after_backward(job)
        if extra:
            parts = {**parts, **extra}
        self.setup.rule.step_reached(params, momenta)
        algorithm.after_step(job)
        if job.personal is not None:  # the method's personal model, by the same rule
            job.personal.step(self.setup.rule)
        job.steps += 1
        return parts


class ReferenceTrainer(SequentialTrainer):
    """Sequential execution with per-sample torchvision augmentation."""

    #: the path a row records (``execution_path``)
    path: ClassVar[str] = "reference"

    chunk_batches = 1

    def augment(self, raw: torch.Tensor, params: AugmentParams | None) -> torch.Tensor:
        return augment_reference(self.setup.augmenter, raw, params)
