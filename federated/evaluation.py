"""Top-1 accuracy and cross-entropy of a model on a (test) set held as uint8 tensors;
optionally per class (the per-party scores' input)."""

from __future__ import annotations

import numpy as np
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
    acc, loss, _, _ = _scores(model, images, labels, augmenter, batch_size, None)
    return acc, loss


def evaluate_by_class(
    model: FedConModel,
    images: torch.Tensor,
    labels: torch.Tensor,
    augmenter: Augmenter,
    batch_size: int,
    n_classes: int,
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """:func:`evaluate`'s (accuracy, loss), the same numbers exactly, plus per class the
    correct predictions and the test samples (two (C,) integer arrays): the per-party
    scores' input (:mod:`federated.party_scores`)."""
    acc, loss, correct, total = _scores(model, images, labels, augmenter, batch_size, n_classes)
    return acc, loss, correct, total


@torch.no_grad()
def _scores(
    model: FedConModel,
    images: torch.Tensor,
    labels: torch.Tensor,
    augmenter: Augmenter,
    batch_size: int,
    n_classes: int | None,
) -> tuple[float, float, np.ndarray | None, np.ndarray | None]:
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=labels.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=labels.device)
    by_class = None
    if n_classes is not None:
        by_class = torch.zeros(n_classes, dtype=torch.long, device=labels.device)
    for start in range(0, labels.shape[0], batch_size):
        x = augmenter.normalize(images[start : start + batch_size])
        y = labels[start : start + batch_size]
        logits = model(x).logits
        loss_sum += F.cross_entropy(logits, y, reduction="sum").double()
        hit = logits.argmax(dim=1) == y
        correct += hit.sum()
        if by_class is not None:  # on the device: no host sync per batch
            by_class += torch.bincount(y[hit], minlength=n_classes)
    model.train(was_training)
    n = labels.shape[0]
    if by_class is None:
        return int(correct) / n, float(loss_sum) / n, None, None
    total = torch.bincount(labels, minlength=n_classes).cpu().numpy()
    return int(correct) / n, float(loss_sum) / n, by_class.cpu().numpy(), total
