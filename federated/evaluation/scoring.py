"""Top-1 accuracy and cross-entropy of a model on a (test) set held as uint8 tensors,
optionally per class (the per-party scores' input); a score task's metrics
(:func:`evaluate_scores`, :mod:`federated.tasks.objective`)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from federated.data import Augmenter
from federated.models import FedConModel
from federated.tasks.objective import per_sample_loss, score_metrics


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
    scores' input (:mod:`federated.evaluation.party_scores`)."""
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


@torch.no_grad()
def evaluate_scores(
    model: FedConModel,
    images: torch.Tensor,
    targets: torch.Tensor,
    augmenter: Augmenter,
    batch_size: int,
    score_loss: str,
    threshold: float,
) -> dict[str, float]:
    """A score task's metrics over all of ``images`` (targets float (N, T), the score
    first): ``acc`` (binary, at ``threshold``), ``loss`` (mean ``score_loss``), ``mae``,
    ``rmse``, ``srcc``, ``plcc`` (:func:`federated.tasks.objective.score_metrics`)."""
    was_training = model.training
    model.eval()
    predicted = []
    loss_sum = torch.zeros((), dtype=torch.float64, device=targets.device)
    for start in range(0, targets.shape[0], batch_size):
        x = augmenter.normalize(images[start : start + batch_size])
        y = targets[start : start + batch_size]
        outputs = model(x).logits
        loss_sum += per_sample_loss(outputs, y, score_loss).double().sum()
        predicted.append(outputs[:, 0].float())
    model.train(was_training)
    scores = torch.cat(predicted).cpu().numpy() if predicted else np.zeros(0)
    return score_metrics(scores, targets[:, 0].cpu().numpy(), float(loss_sum), threshold)
