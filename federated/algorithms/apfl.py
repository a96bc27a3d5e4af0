"""APFL (Deng, Kamani and Mahdavi 2020): a learned per-party mix of a personal and the
global model.

Each party keeps a personal model v (its declaration, ``own_state``: the engine loads,
steps and saves it, :mod:`federated.algorithms.personal_model`) and a mixing weight α in
[0, 1] (``state["alpha"]``, starting at ``apfl_alpha``).  Its model is the mix of
parameters v̄ = α v + (1 - α) w.  In a local training, on every batch:

* the global model w trains as FedAvg does (its contribution);
* v steps on the mixed model's loss, whose gradient reaches v as α ∇F_i(v̄) (w enters
  the mix detached: it learns from its own loss only);
* α steps on the same loss, ∂F_i(v̄)/∂α = <v - w, ∇F_i(v̄)>, with the run's lr, and is
  clipped to [0, 1] (the paper's adaptive α).

Each party is evaluated with α v + (1 - α) w, w the round's new global model.  Buffers
(BatchNorm statistics) of the mix are v's.

Default ``apfl_alpha = 0.5``: the paper's experiments mix with α in {0.25, 0.5, 0.75}
and learn α from there; 0.5 starts the learned α in the middle.  PFLlib starts at 1.0
(the personal model alone).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.func import functional_call

from federated.algorithms.base import Algorithm, LocalJob, LossTerms
from federated.algorithms.party_own_state import PERSONALISED_POOLED_TEST_EVERY, OwnState
from federated.models import FedConModel, ModelOutput
from federated.params import ConfigError, MethodParams, describe


@dataclass(frozen=True)
class ApflParams(MethodParams):
    """APFL's initial mixing weight (learned per party from there)."""

    apfl_alpha: float = field(
        default=0.5,
        metadata=describe("initial weight alpha in [0, 1] of the personal model in the mix"),
    )

    def check(self) -> None:
        if not 0 <= self.apfl_alpha <= 1:
            raise ConfigError("apfl_alpha", self.apfl_alpha, "a number in [0, 1]")


class Apfl(Algorithm):
    name = "apfl"
    dp_obstacle = None  # sends the global model's weights; its personal model and mix stay
    own_state = OwnState(personal_model=True, personal_test_every=PERSONALISED_POOLED_TEST_EVERY)
    Params = ApflParams

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mix: FedConModel | None = None  # party_model's work network, never state

    def init_party_state(self, party: int) -> dict[str, Any]:
        return {"alpha": self.params.apfl_alpha}

    def begin_local(self, job: LocalJob) -> None:
        job.scratch["alpha"] = torch.tensor(
            job.state["alpha"], device=job.device, requires_grad=True
        )

    def loss(self, job: LocalJob, out: ModelOutput, x: torch.Tensor, y: torch.Tensor) -> LossTerms:
        ce = self.supervised_loss(out, y)
        personal = job.personal.net
        mixed = self.mixed(personal, job.model, job.scratch["alpha"], detach=True)

        def mixed_model(*inputs: Any) -> ModelOutput:
            return functional_call(personal, mixed, inputs)

        # through the task: a detector in training mode takes the batch's boxes
        own = self.supervised_loss(self.task.forward(mixed_model, x, y), y)
        return LossTerms(ce + own, {"ce": ce.detach(), "personal": own.detach()})

    @staticmethod
    def mixed(
        personal: torch.nn.Module, shared: torch.nn.Module, alpha: torch.Tensor, detach: bool
    ) -> dict[str, torch.Tensor]:
        """α v + (1 - α) w per parameter (w detached while training)."""
        theirs = dict(shared.named_parameters())
        out = {}
        for name, p in personal.named_parameters():
            w = theirs[name].detach() if detach else theirs[name]
            out[name] = alpha * p + (1 - alpha) * w
        return out

    def after_step(self, job: LocalJob) -> None:
        """α's step (the engine steps the personal model next)."""
        alpha = job.scratch["alpha"]
        with torch.no_grad():
            if alpha.grad is not None:
                alpha.sub_(self.config.lr * alpha.grad).clamp_(0.0, 1.0)
                alpha.grad = None

    def end_local(self, job: LocalJob) -> dict[str, list[torch.Tensor]]:
        job.state["alpha"] = float(job.scratch["alpha"].detach().cpu())
        return {}

    def party_model(
        self, party: int, global_model: FedConModel, state: dict[str, Any]
    ) -> FedConModel | None:
        """α v + (1 - α) w with the new global w (None before the party trained)."""
        if state["personal"] is None:
            return None
        if self._mix is None:
            self._mix = copy.deepcopy(global_model)
        net = self._mix
        net.load_state_dict(state["personal"])
        with torch.no_grad():
            alpha = torch.tensor(state["alpha"])
            for name, value in self.mixed(net, global_model, alpha, detach=True).items():
                net.get_parameter(name).copy_(value)
        return net

    def round_metrics(self, jobs: list[LocalJob], server: dict[str, Any]) -> dict[str, float]:
        """The mean mixing weight of the round's parties (``apfl_alpha_mean``)."""
        if not jobs:
            return {}
        return {"apfl_alpha_mean": sum(j.state["alpha"] for j in jobs) / len(jobs)}
