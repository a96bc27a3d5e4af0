"""Record-level DP-SGD inside each party (``dp_level=record``, docs/privacy.md): the
sequential paths with each local step's batch a Poisson sample of the party's records
and its gradient DP-SGD's — per-sample gradients of the supervised loss
(:mod:`federated.execution.per_sample`), each clipped to ``dp_clip_norm`` C, summed,
Gaussian noise of std ``dp_noise_multiplier``·C added, divided by the expected batch
size — then the same SGD rule.

**Poisson batches.**  A party of n records takes as many steps as its batch plan lists
(``local_epochs`` × n // ``batch_size``, or fewer for a straggler); at each step every
one of its records joins the batch independently with probability q = min(1,
``batch_size``/n), from a generator keyed by (seed, party, round, step), so the batch
plan's shuffled batches are not used and nothing the run draws from its streams
changes.  That is the sampling DP-SGD's amplification argument needs (Abadi et al.
2016; Opacus's default): the accountant
(:class:`~federated.engine.round_hooks.RecordAccountant`) composes one
``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))`` per step.  A step's augmentation
is drawn from the same generator after the records; feature skew applies as on the
other paths.  The loss logged is the batch's (an empty batch logs none).  Packed
execution does not apply (each sample's gradient is taken on its own):
:func:`federated.execution.choice.local_trainer` falls back to these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from federated.algorithms.base import LocalJob
from federated.data import AugmentParams
from federated.execution.batch_plan import PartyBatches, rotated
from federated.execution.loss_sums import LossSums, read_means
from federated.execution.per_sample import (
    noise_generator,
    per_sample_gradients,
    poisson_sample,
    private_gradient,
    sampling_generator,
)
from federated.execution.sequential import ReferenceTrainer, SequentialTrainer
from federated.execution.trainer import PartyResult
from federated.privacy_accountant import sampling_rate

#: a party's records: party -> the rows of the run's training tensors it holds
PartyRecords = Callable[[int], torch.Tensor]


@dataclass(frozen=True)
class RecordNoise:
    """A run's DP-SGD settings: C (L2, gradient units), sigma, and the run's seed."""

    clip_norm: float
    noise_multiplier: float
    seed: int


class RecordPrivateSteps(SequentialTrainer):
    """A sequential trainer whose steps are DP-SGD's on Poisson batches (the module
    docstring); ``records`` gives each party's rows."""

    path: ClassVar[str] = "sequential"
    record_noise: RecordNoise
    records: PartyRecords

    def train_one(self, job: LocalJob, batches: PartyBatches) -> PartyResult:
        """``job.model``'s local training: ``batches.steps`` DP-SGD steps on Poisson
        batches of expected size ``batches.batch``."""
        model = job.model
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        momenta = self.setup.rule.new_momenta(params)
        sums = LossSums()
        rows = self.records(job.party)
        rate = sampling_rate(batches.batch, rows.shape[0])
        samples = 0
        for step in range(batches.steps):
            x, y = self._poisson_batch(job, rows, rate, step)
            samples += x.shape[0]
            parts = self._step(job, params, momenta, x, y, float(rate * rows.shape[0]))
            if x.shape[0] > 0:
                sums.add(parts)
        (losses,) = read_means([sums])
        return PartyResult(losses, samples=samples, steps=job.steps)

    def _poisson_batch(
        self, job: LocalJob, rows: torch.Tensor, rate: float, step: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Step ``step``'s Poisson batch of the party's ``rows``: augmented, skewed."""
        setup = self.setup
        generator = sampling_generator(self.record_noise.seed, job.party, job.round_index, step)
        picked = poisson_sample(rows.shape[0], rate, generator)
        index = rows.index_select(0, picked.to(rows.device))
        size = index.shape[0]
        augment: AugmentParams | None = setup.augmenter.draw(size, generator)
        if setup.skew is not None:  # a rotated domain joins the augmentation
            one = PartyBatches(job.party, size, 1, index, augment)
            augment = rotated(one, setup.skew.angle(job.party)).augment
        raw = setup.images.index_select(0, index)
        # an empty batch: nothing to augment (the reference path's per-sample ops need one)
        x = self.augment(raw, augment) if size > 0 else setup.augmenter.normalize(raw)
        if setup.noise is not None and size > 0:
            noise = setup.noise.noise(
                job.party, job.round_index, step, 1, tuple(x.shape), setup.augmenter.scale
            )
            if noise is not None:
                x += noise
        return x, setup.algorithm.task.take_targets(setup.labels, index)

    def _step(
        self,
        job: LocalJob,
        params: list[torch.nn.Parameter],
        momenta: list[torch.Tensor] | None,
        x: torch.Tensor,
        y: torch.Tensor,
        expected: float | None = None,
    ) -> dict[str, torch.Tensor]:
        """One DP-SGD step on the batch (x, y) (possibly empty), the noised sum divided
        by ``expected`` (the expected batch size; None: the batch's own); returns the
        loss parts."""
        algorithm = self.setup.algorithm
        task = algorithm.task
        model = job.model
        terms = algorithm.loss(job, task.forward(model, x, y), x, y)
        # the parameters the objective reaches (a projection head FedAvg never reads
        # gets no gradient, so no noise and no step, as on the other paths); an empty
        # batch's NaN mean still reaches the same ones
        reached = torch.autograd.grad(terms.total, params, allow_unused=True)
        live = [p for p, g in zip(params, reached) if g is not None]
        names = {id(p): n for n, p in model.named_parameters()}

        def sample_loss(m: torch.nn.Module, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            return algorithm.supervised_loss(task.forward(m, xi, yi), yi)

        grads = per_sample_gradients(model, [names[id(p)] for p in live], sample_loss, x, y)
        noise = self.record_noise
        generator = noise_generator(noise.seed, job.party, job.round_index, job.steps)
        divisor = float(x.shape[0]) if expected is None else expected
        private = private_gradient(
            grads, noise.clip_norm, noise.noise_multiplier, divisor, generator
        )
        for p in params:
            p.grad = None
        for p, g in zip(live, private):
            p.grad = g
        self.setup.rule.step_reached(params, momenta)
        algorithm.after_step(job)
        job.steps += 1
        return {k: v.detach() for k, v in terms.parts.items()}


class RecordPrivateSequential(RecordPrivateSteps):
    """DP-SGD steps on the sequential path (batched augmentation)."""


class RecordPrivateReference(RecordPrivateSteps, ReferenceTrainer):
    """DP-SGD steps on the reference path (per-sample torchvision augmentation)."""

    path: ClassVar[str] = "reference"
