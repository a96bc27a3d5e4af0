"""The one evaluation loop: a model's forward passes over a set held as uint8 tensors,
each batch handed to the task's metric accumulator (:meth:`federated.tasks.base.Task.accumulator`),
so one pass gives every metric of a split.

Every score of a run comes out of :func:`evaluate`: the pooled test set (the global
model, or each party's own), federated validation and the parties' local test splits
(one pass over the chosen parties' rows with each sample's ``owner`` when they all use
the global model, one pass over a party's own rows per party otherwise), fine-tuned
copies included.  What differs is the model, the rows and the accumulator (pooled, or
summed per party).  The model is put in eval mode for the pass (normalise only, no
augmentation) and its mode restored after it.

Given a :class:`~federated.evaluation.shared_stages.SharedStages` cache, a model that
shares its leading stages with the global model (FedPer's encoder) starts each batch
from their kept outputs instead of the images; the first such model's pass fills the
cache.  Batch boundaries are :func:`batch_starts`' in every case, so a batch's outputs
are those of scoring the model whole, bit for bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from federated.data import Augmenter
from federated.runtime.precision import FLOAT32, Precision, float32
from federated.tasks.base import MetricAccumulator

if TYPE_CHECKING:
    from federated.evaluation.shared_stages import SharedStages


def batch_starts(n_rows: int, batch_size: int) -> range:
    """The first row of each evaluation batch of ``n_rows`` rows, ``batch_size`` a batch."""
    return range(0, n_rows, batch_size)


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    images: torch.Tensor,
    targets: torch.Tensor,
    augmenter: Augmenter,
    batch_size: int,
    accumulator: MetricAccumulator,
    owner: torch.Tensor | None = None,
    shared: SharedStages | None = None,
    output: str = "logits",
    precision: Precision = FLOAT32,
) -> Any:
    """``model`` on ``images`` (uint8 NCHW) and their ``targets``, ``batch_size`` images
    per forward pass; ``owner``: each image's party (int64, on the device), for a
    per-party ``accumulator``; ``shared``: the round's cache of the global model's
    leading stages over these very ``images`` (module docstring); ``output``: the
    field of the model's :class:`~federated.models.fedcon.ModelOutput` the accumulator
    takes (``logits``; the representation probe's collector takes ``projection``, and
    no cache); ``precision``: the run's (forward passes under its autocast, the
    accumulator fed float32 outputs).  Returns what the accumulator computes (a task's:
    its :class:`~federated.tasks.base.Scores`)."""
    was_training = model.training
    model.eval()
    stages = None if shared is None or output != "logits" else shared.run_for(model)
    for index, start in enumerate(batch_starts(images.shape[0], batch_size)):
        stop = start + batch_size
        with precision.autocast():
            if stages is None:
                outputs = getattr(model(augmenter.normalize(images[start:stop])), output)
            else:
                x = stages.kept(index)
                if x is None:
                    x = stages.leading(index, augmenter.normalize(images[start:stop]))
                outputs = stages.rest(x)
        accumulator.update(
            float32(outputs), targets[start:stop], None if owner is None else owner[start:stop]
        )
    model.train(was_training)
    return accumulator.compute()
