"""Top-1 accuracy and cross-entropy of a model on a (test) set held as uint8 tensors."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from federated.data import Augmenter
from federated.models import FedConModel


@torch.no_grad()
def evaluate(
    model: FedConModel,
    images: torch.Tensor,
    labels: torch.Tensor,
    augmenter: Augmenter,
    batch_size: int = 256,
) -> tuple[float, float]:
    """(accuracy in [0, 1], mean cross-entropy) over all of ``images``; normalise only."""
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=labels.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=labels.device)
    for start in range(0, labels.shape[0], batch_size):
        x = augmenter.normalize(images[start : start + batch_size])
        y = labels[start : start + batch_size]
        logits = model(x).logits
        loss_sum += F.cross_entropy(logits, y, reduction="sum").double()
        correct += (logits.argmax(dim=1) == y).sum()
    model.train(was_training)
    n = labels.shape[0]
    return int(correct) / n, float(loss_sum) / n
