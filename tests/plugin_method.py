"""A method written outside fedsweep: FedAvg whose parties train with label smoothing,
plus a server optimizer that moves only part of the way to the combined model.

Nothing in fedsweep names these classes; they are loaded by import path::

    python -m federated.run --algorithm tests.plugin_method:LabelSmoothing --smoothing 0.1 \\
        --server-optimizer tests.plugin_method:PartialStep --step-fraction 0.5

docs/writing-a-method.md walks through this file; tests/test_plugins.py is its test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from federated.algorithms.base import Algorithm, LocalJob, LossTerms
from federated.models import ModelOutput
from federated.params import ConfigError, MethodParams, describe, fraction
from federated.server.base import ServerOptimizer


@dataclass(frozen=True)
class LabelSmoothingParams(MethodParams):
    smoothing: float = field(default=0.1, metadata=describe("label smoothing in [0, 1)"))

    def check(self) -> None:
        if not 0 <= self.smoothing < 1:
            raise ConfigError("smoothing", self.smoothing, "a number in [0, 1)")


class LabelSmoothing(Algorithm):
    """Parties minimise cross-entropy against smoothed labels; the server averages."""

    name = "label-smoothing"
    Params = LabelSmoothingParams
    packable = True  # only the loss differs: parties may train together

    def loss(self, job: LocalJob, out: ModelOutput, x: torch.Tensor, y: torch.Tensor) -> LossTerms:
        ce = F.cross_entropy(out.logits, y, label_smoothing=self.params.smoothing)
        return LossTerms(ce, {"ce": ce.detach()})


@dataclass(frozen=True)
class PartialStepParams(MethodParams):
    step_fraction: float = field(
        default=0.5, metadata=describe("share of the way to the combined model, in (0, 1]")
    )

    def check(self) -> None:
        fraction("step_fraction", self.step_fraction)


class PartialStep(ServerOptimizer):
    """w <- w + f · (combined - w): a damped server step without state."""

    name = "partial-step"
    Params = PartialStepParams

    def step(self, current: list[torch.Tensor], average: list[torch.Tensor]) -> None:
        with torch.no_grad():
            delta = torch._foreach_sub(average, current)
            torch._foreach_add_(current, delta, alpha=self.params.step_fraction)
