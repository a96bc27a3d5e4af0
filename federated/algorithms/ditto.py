"""Ditto (Li et al. 2021): a personal model pulled towards the global one.

Each party keeps a personal model v (its declaration: ``own_state``, a personal model;
the engine loads, steps and saves it, :mod:`federated.algorithms.personal_model`).  In a
local training it trains the global model w as FedAvg does (its contribution) and,
on the same batches, v on its own loss plus the proximal pull of weight λ
(``ditto_lambda``) to the round's global model w^t:

    v <- v - lr · (∇F_i(v) + λ (v - w^t))

(the paper's Algorithm 1, with the run's SGD solver; the pull is added to v's gradient,
so momentum and weight decay see it).  Each party is evaluated with its v.  λ = 0 is
local training beside FedAvg; a large λ keeps v near the global model.

Default λ = 0.1: the paper chooses λ per data set on validation data rather than
fixing one; 0.1 is FederatedScope's default (``regular_weight``).  PFLlib's default
``mu = 0`` is λ = 0, plain local training, not Ditto.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from federated.algorithms.base import Algorithm, LocalJob, LossTerms
from federated.algorithms.party_own_state import PERSONALISED_POOLED_TEST_EVERY, OwnState
from federated.models import ModelOutput
from federated.params import ConfigError, MethodParams, describe, non_negative

# Ditto's λ grid is 0.01 .. 2 (Li et al. 2021); at lr 0.01 a λ of 1e4 already makes each
# step overshoot the pull 100-fold.
MAX_DITTO_LAMBDA = 1e4


@dataclass(frozen=True)
class DittoParams(MethodParams):
    """Ditto's proximal weight λ."""

    ditto_lambda: float = field(
        default=0.1,
        metadata=describe("weight lambda >= 0 of the personal model's pull to the global model"),
    )

    def check(self) -> None:
        non_negative("ditto_lambda", self.ditto_lambda)
        if self.ditto_lambda > MAX_DITTO_LAMBDA:
            # λ·(v - w) in float32 overflows long before 1e308; Ditto's grid is 0.01..2
            raise ConfigError(
                "ditto_lambda",
                self.ditto_lambda,
                f"a number in [0, {MAX_DITTO_LAMBDA:g}] (fedsweep's limit: a pull this strong "
                "already holds the personal model at the global one)",
            )


class Ditto(Algorithm):
    name = "ditto"
    dp_obstacle = None  # sends the global model's weights; its personal model stays at home
    own_state = OwnState(personal_model=True, personal_test_every=PERSONALISED_POOLED_TEST_EVERY)
    Params = DittoParams

    def begin_local(self, job: LocalJob) -> None:
        job.scratch["anchor"] = [p.detach() for p in job.global_model.parameters()]

    def loss(self, job: LocalJob, out: ModelOutput, x: torch.Tensor, y: torch.Tensor) -> LossTerms:
        ce = self.supervised_loss(out, y)
        # through the task: a detector in training mode takes the batch's boxes
        own = self.supervised_loss(self.task.forward(job.personal.net, x, y), y)
        return LossTerms(ce + own, {"ce": ce.detach(), "personal": own.detach()})

    def after_backward(self, job: LocalJob) -> dict[str, torch.Tensor]:
        """The pull's gradient λ (v - w^t) onto v's; its value logged as ``prox_loss``."""
        lam = self.params.ditto_lambda
        pairs = [
            (p, a)
            for p, a in zip(job.personal.params, job.scratch["anchor"])
            if p.grad is not None  # a parameter the loss did not reach: SGD leaves it be
        ]
        with torch.no_grad():
            diffs = torch._foreach_sub([p.detach() for p, _ in pairs], [a for _, a in pairs])
            if lam > 0:
                torch._foreach_add_([p.grad for p, _ in pairs], diffs, alpha=lam)
            squared = torch.stack(torch._foreach_norm(diffs)).square().sum()
        return {"prox": 0.5 * lam * squared}
