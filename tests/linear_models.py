"""Tiny linear models for hand computations: logistic regression as a FedConModel, its
analytic cross-entropy gradient, and an augmenter that leaves float features alone."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from federated.models import FedConModel


class PassThrough:
    """An augmenter for pre-made float features: no random parameters, no change."""

    device = torch.device("cpu")

    def draw(self, n: int, generator: torch.Generator) -> None:
        return None

    def train_batch(self, x: torch.Tensor, params: None) -> torch.Tensor:
        return x


def linear_model(weight: torch.Tensor, bias: torch.Tensor) -> FedConModel:
    """Logistic regression as a FedConModel: no encoder weights, no projection head."""
    model = FedConModel(nn.Flatten(), weight.shape[1], weight.shape[0], projection_head=False)
    model = model.double()
    with torch.no_grad():
        model.classifier.weight.copy_(weight)
        model.classifier.bias.copy_(bias)
    return model


def ce_gradient(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
    """Analytic gradient of the mean softmax cross-entropy of ``x @ w.T + b``."""
    p = torch.softmax(x @ w.T + b, dim=1)
    r = p - F.one_hot(y, w.shape[0]).double()
    return [r.T @ x / len(y), r.mean(dim=0)]
