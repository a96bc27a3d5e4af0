"""What a model is trained and scored on: its task's loss and its metrics.

Two tasks, set by the data (:attr:`~federated.data.catalog.DatasetSpec.task`):

``classification``
    integer labels; the loss is cross-entropy; the metric is top-1 accuracy (``acc``).
``score`` (image assessment: an image folder with a scores file)
    float targets (N, T): the score, then the named attributes; the head outputs T
    values.  The loss (``score_loss``) is the mean over the T targets of the squared
    error (``mse``, the default), the absolute error (``l1``) or the Huber loss
    (``huber``, quadratic within :data:`HUBER_DELTA` score units: a tenth of a 0..1
    scale, linear beyond).  The metrics are the field's, on the *score* (column 0):
    ``mae`` and ``rmse`` (in score units), ``srcc`` (Spearman's rank correlation,
    average ranks for ties) and ``plcc`` (Pearson's linear correlation), and ``acc``,
    the binary accuracy at ``score_threshold``: the share of images whose prediction
    and score fall on the same side of it (both >= it, or both below).

MOON's contrastive term, FedProx's proximal term and every other method's extra acts on
representations or weights, not on the head, so every method runs on both tasks
unchanged: the methods call :func:`supervised_loss` for their supervised part.

Lower is better for ``mae``, ``rmse`` and ``loss``; higher for the others
(:data:`LOWER_IS_BETTER`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats

SCORE_LOSSES = ("mse", "l1", "huber")
HUBER_DELTA = 0.1  # score units: a tenth of a 0..1 scale
# each task's metrics; the first is the default primary metric
TASK_METRICS = {"classification": ("acc",), "score": ("srcc", "plcc", "mae", "rmse", "acc")}
SCORE_METRICS = ("mae", "rmse", "srcc", "plcc")  # the row's extra columns on score tasks
LOWER_IS_BETTER = frozenset({"mae", "rmse", "loss"})
NAN = float("nan")


def is_score_target(targets: torch.Tensor) -> bool:
    """Whether ``targets`` are a score task's (float (N, T)) rather than class labels."""
    return targets.is_floating_point()


def per_sample_loss(logits: torch.Tensor, targets: torch.Tensor, score_loss: str) -> torch.Tensor:
    """Each sample's loss (B,): cross-entropy on labels; on score targets (B, T) the
    ``score_loss`` averaged over the T targets."""
    if not is_score_target(targets):
        return F.cross_entropy(logits, targets, reduction="none")
    return _elementwise(logits, targets, score_loss).mean(dim=1)


def supervised_loss(logits: torch.Tensor, targets: torch.Tensor, score_loss: str) -> torch.Tensor:
    """The batch's mean supervised loss (a scalar): exactly ``F.cross_entropy`` on
    labels (classification results are unchanged), the mean ``score_loss`` on scores."""
    if not is_score_target(targets):
        return F.cross_entropy(logits, targets)
    return _elementwise(logits, targets, score_loss).mean()


def _elementwise(outputs: torch.Tensor, targets: torch.Tensor, score_loss: str) -> torch.Tensor:
    outputs = outputs.float()
    if score_loss == "mse":
        return F.mse_loss(outputs, targets, reduction="none")
    if score_loss == "l1":
        return F.l1_loss(outputs, targets, reduction="none")
    if score_loss == "huber":
        return F.huber_loss(outputs, targets, reduction="none", delta=HUBER_DELTA)
    raise ValueError(f"score_loss={score_loss!r} (allowed: {', '.join(SCORE_LOSSES)})")


def agreement(predicted: torch.Tensor, truth: torch.Tensor, threshold: float) -> torch.Tensor:
    """1.0 where prediction and score fall on the same side of ``threshold``, else 0.0."""
    return ((predicted >= threshold) == (truth >= threshold)).double()


def score_metrics(
    predicted: np.ndarray, truth: np.ndarray, loss_sum: float, threshold: float
) -> dict[str, float]:
    """The score metrics of predictions against scores (1-D arrays of one length):
    ``acc`` (binary, at ``threshold``), ``loss`` (``loss_sum`` / n), ``mae``, ``rmse``,
    ``srcc``, ``plcc``.  A correlation is NaN where it is undefined (fewer than two
    images, or a constant prediction or score)."""
    n = len(truth)
    if n == 0:
        return dict.fromkeys(("acc", "loss", *SCORE_METRICS), NAN)
    predicted = np.asarray(predicted, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    error = predicted - truth
    return {
        "acc": float(np.mean((predicted >= threshold) == (truth >= threshold))),
        "loss": float(loss_sum) / n,
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(math.sqrt(np.mean(error**2))),
        "srcc": _correlation(stats.spearmanr, predicted, truth),
        "plcc": _correlation(stats.pearsonr, predicted, truth),
    }


def _correlation(kind, a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return NAN
    return float(kind(a, b)[0])
