"""One party's local training: E epochs of SGD on its data under the method's objective.

The solver is the MOON paper's: SGD with the configured lr, momentum and weight decay,
batch 64, and a fresh optimizer for every local training (no momentum carried across
rounds).  As in the reference code, each epoch drops the last partial batch; a party
smaller than one batch trains on one batch of all its samples instead of not at all.

Batches are drawn from the party's uint8 images already on the device: one random
permutation and one set of augmentation parameters per epoch from the run's ``batches``
stream, then one gather and one batched augmentation per chunk of batches.  Loss values stay on
the device and are read once per party, so a GPU run never waits on the host per batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from federated.algorithms.base import Algorithm, LocalJob
from federated.config import RunConfig
from federated.data import Augmenter, augment_reference


@dataclass(frozen=True)
class PartyResult:
    """What one local training produced."""

    losses: dict[str, float]  # mean over the batches where each part was computed
    samples: int  # samples trained on, counted once per epoch
    steps: int

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in self.losses.values())


# Batches gathered and augmented together: the augmentation is per sample, so a chunk
# gives the same numbers as batch by batch, with a sixteenth of the per-call overhead
# (about 5% of a small model's round on a CPU core); 16 x 64 CIFAR images are 12 MB.
AUGMENT_CHUNK_BATCHES = 16


def accumulate_parts(
    sums: dict[str, torch.Tensor], counts: dict[str, int], parts: dict[str, torch.Tensor]
) -> None:
    """Add one step's loss parts (on the device) to a local training's running sums."""
    for key, value in parts.items():
        if key in sums:
            sums[key] += value
            counts[key] += 1
        else:
            sums[key] = value.clone()
            counts[key] = 1


def batches_per_epoch(n_samples: int, batch_size: int) -> int:
    """Full batches per epoch; at least one (a small party's one batch is all it has)."""
    return max(1, n_samples // batch_size)


def train_party(
    job: LocalJob,
    algorithm: Algorithm,
    images: torch.Tensor,
    labels: torch.Tensor,
    augmenter: Augmenter,
    config: RunConfig,
    generator: torch.Generator,
) -> PartyResult:
    """Train ``job.model`` in place on (``images``, ``labels``), the party's data."""
    model = job.model
    model.train()
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=config.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        # one fused kernel instead of a loop over parameters (~3% of a simple-cnn step).
        # The same update as the default (foreach) SGD, but it rounds differently: after
        # a few steps parameters differ in the last float bit.  Both execution paths use
        # it, so they stay identical to each other.
        fused=True,
    )
    n = labels.shape[0]
    batch = min(config.batch_size, n)
    n_batches = batches_per_epoch(n, config.batch_size)
    reference = config.execution == "reference"
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}
    chunk = 1 if reference else AUGMENT_CHUNK_BATCHES
    for _ in range(config.local_epochs):
        order = torch.randperm(n, generator=generator).to(job.device, non_blocking=True)
        params = augmenter.draw(n, generator)
        for first in range(0, n_batches, chunk):
            start, stop = first * batch, min(first + chunk, n_batches) * batch
            idx = order[start:stop]
            chunk_params = None if params is None else params.slice(start, stop)
            raw = images.index_select(0, idx)  # a plain gather: cheaper than []
            if reference:
                xs = augment_reference(augmenter, raw, chunk_params)
            else:
                xs = augmenter.train_batch(raw, chunk_params)
            ys = labels.index_select(0, idx)
            for offset in range(0, stop - start, batch):
                x, y = xs[offset : offset + batch], ys[offset : offset + batch]
                accumulate_parts(sums, counts, _local_step(job, algorithm, optimizer, x, y))
    keys = list(sums)
    values = torch.stack([sums[k] for k in keys]).tolist() if keys else []
    losses = {k: v / counts[k] for k, v in zip(keys, values)}
    return PartyResult(losses, samples=n_batches * batch * config.local_epochs, steps=job.steps)


def _local_step(
    job: LocalJob,
    algorithm: Algorithm,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """One SGD step on the batch (x, y); returns the loss parts, still on the device."""
    terms = algorithm.loss(job, job.model(x), x, y)
    optimizer.zero_grad(set_to_none=True)
    terms.total.backward()
    parts = terms.parts
    extra = algorithm.after_backward(job)
    if extra:
        parts = {**parts, **extra}
    optimizer.step()
    algorithm.after_step(job)
    job.steps += 1
    return parts
