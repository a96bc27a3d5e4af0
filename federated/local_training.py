"""One party's local training: E epochs of SGD on its data under the method's objective.

The solver is the MOON paper's: SGD with the configured lr, momentum and weight decay,
batch 64, and a fresh optimizer for every local training (no momentum carried across
rounds).  As in the reference code, each epoch drops the last partial batch; a party
smaller than one batch trains on one batch of all its samples instead of not at all.

Batches are drawn from the party's uint8 images already on the device: one random
permutation and one set of augmentation parameters per epoch from the run's ``batches``
stream, then one gather and one batched augmentation per batch.  Loss values stay on
the device and are read once per party, so a GPU run never waits on the host per batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from federated.algorithms import Algorithm, LocalJob
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
        # one fused kernel instead of a loop over parameters; same numbers as the default
        fused=True,
    )
    n = labels.shape[0]
    batch = min(config.batch_size, n)
    n_batches = batches_per_epoch(n, config.batch_size)
    reference = config.execution == "reference"
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}
    for _ in range(config.local_epochs):
        order = torch.randperm(n, generator=generator).to(job.device, non_blocking=True)
        params = augmenter.draw(n, generator)
        for b in range(n_batches):
            idx = order[b * batch : (b + 1) * batch]
            batch_params = None if params is None else params.slice(b * batch, (b + 1) * batch)
            raw = images.index_select(0, idx)  # a plain gather: several times cheaper than []
            if reference:
                x = augment_reference(augmenter, raw, batch_params)
            else:
                x = augmenter.train_batch(raw, batch_params)
            y = labels.index_select(0, idx)
            terms = algorithm.loss(job, model(x), x, y)
            optimizer.zero_grad(set_to_none=True)
            terms.total.backward()
            parts = terms.parts
            extra = algorithm.after_backward(job)
            if extra:
                parts = {**parts, **extra}
            optimizer.step()
            algorithm.after_step(job)
            job.steps += 1
            for key, value in parts.items():
                if key in sums:
                    sums[key] += value
                    counts[key] += 1
                else:
                    sums[key] = value.clone()
                    counts[key] = 1
    keys = list(sums)
    values = torch.stack([sums[k] for k in keys]).tolist() if keys else []
    losses = {k: v / counts[k] for k, v in zip(keys, values)}
    return PartyResult(losses, samples=n_batches * batch * config.local_epochs, steps=job.steps)
