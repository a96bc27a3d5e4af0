"""Record-level DP-SGD inside each party (``dp_level=record``, docs/privacy.md): the
sequential paths with each local step's gradient replaced by DP-SGD's — per-sample
gradients of the supervised loss (:mod:`federated.execution.per_sample`), each clipped
to ``dp_clip_norm`` C, summed, Gaussian noise of std ``dp_noise_multiplier``·C added,
divided by the batch size — then the same SGD rule.  The loss logged is the batch's, as
on the other paths.  Packed execution does not apply (each sample's gradient is taken
on its own); :func:`federated.execution.choice.local_trainer` falls back to these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from federated.algorithms.base import LocalJob
from federated.execution.per_sample import noise_generator, per_sample_gradients, private_gradient
from federated.execution.sequential import ReferenceTrainer, SequentialTrainer


@dataclass(frozen=True)
class RecordNoise:
    """A run's DP-SGD settings: C (L2, gradient units), sigma, and the run's seed."""

    clip_norm: float
    noise_multiplier: float
    seed: int


class RecordPrivateSteps(SequentialTrainer):
    """A sequential trainer whose steps are DP-SGD's (the module docstring)."""

    path: ClassVar[str] = "sequential"
    record_noise: RecordNoise

    def _step(
        self,
        job: LocalJob,
        params: list[torch.nn.Parameter],
        momenta: list[torch.Tensor] | None,
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        algorithm = self.setup.algorithm
        task = algorithm.task
        model = job.model
        terms = algorithm.loss(job, task.forward(model, x, y), x, y)
        # the parameters the objective reaches (a projection head FedAvg never reads
        # gets no gradient, so no noise and no step, as on the other paths)
        reached = torch.autograd.grad(terms.total, params, allow_unused=True)
        live = [p for p, g in zip(params, reached) if g is not None]
        names = {id(p): n for n, p in model.named_parameters()}

        def sample_loss(m: torch.nn.Module, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            return algorithm.supervised_loss(task.forward(m, xi, yi), yi)

        grads = per_sample_gradients(model, [names[id(p)] for p in live], sample_loss, x, y)
        noise = self.record_noise
        generator = noise_generator(noise.seed, job.party, job.round_index, job.steps)
        private = private_gradient(
            grads, noise.clip_norm, noise.noise_multiplier, x.shape[0], generator
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
