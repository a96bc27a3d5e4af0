"""The one evaluation loop: a model's forward passes over a set held as uint8 tensors,
each batch handed to the task's metric accumulator (:meth:`federated.tasks.base.Task.accumulator`),
so one pass gives every metric of a split.

The test set, federated validation and the parties' local test splits all go through
:func:`evaluate`; only the accumulator differs (pooled, or summed per party with each
sample's ``owner``).  The model is put in eval mode for the pass (normalise only, no
augmentation) and its mode restored after it.
"""

from __future__ import annotations

import torch

from federated.data import Augmenter
from federated.tasks.base import MetricAccumulator, Scores


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    images: torch.Tensor,
    targets: torch.Tensor,
    augmenter: Augmenter,
    batch_size: int,
    accumulator: MetricAccumulator,
    owner: torch.Tensor | None = None,
) -> Scores:
    """``model`` on ``images`` (uint8 NCHW) and their ``targets``, ``batch_size`` images
    per forward pass; ``owner``: each image's party (int64, on the device), for a
    per-party ``accumulator``.  Returns the accumulator's scores."""
    was_training = model.training
    model.eval()
    for start in range(0, images.shape[0], batch_size):
        stop = start + batch_size
        outputs = model(augmenter.normalize(images[start:stop])).logits
        accumulator.update(
            outputs, targets[start:stop], None if owner is None else owner[start:stop]
        )
    model.train(was_training)
    return accumulator.compute()
