"""A party's whole personal model beside the global one (Ditto, APFL).

The personal model is a second network a party trains during its local training, on
the very batches (and steps) its copy of the global model trains on.  Between rounds it
lives in the party's state, on the CPU: ``state["personal"]`` (its ``state_dict``, None
before the party first trains: it then starts from the round's global model) and
``state["personal_momenta"]`` (its SGD momentum, kept across rounds as an optimiser
living at the party keeps it).  So a checkpoint holds every party's personal model and
optimiser: a resumed run continues exactly.

Its update is the run's local solver, :class:`~federated.sgd_rule.SgdRule` (lr, momentum,
weight decay), over the tensors with a gradient, as the global model's copy is updated.
Both methods run the personal model themselves, which the packed path does not allow:
they train sequentially.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from federated.algorithms.base import LocalJob, model_state_to_cpu, tensors_to_cpu
from federated.models import FedConModel
from federated.sgd_rule import SgdRule


def personal_state() -> dict[str, Any]:
    """A party's personal-model state before its first local training."""
    return {"personal": None, "personal_momenta": None}


class PersonalModels:
    """One working network for the personal model of the party being trained (loaded
    from its state, saved back when it ends) and for evaluating parties."""

    def __init__(self, lr: float, momentum: float, weight_decay: float) -> None:
        self.rule = SgdRule(lr=lr, momentum=momentum, weight_decay=weight_decay)
        self._net: FedConModel | None = None  # a work buffer, never state

    def net(self, like: FedConModel) -> FedConModel:
        if self._net is None:
            self._net = copy.deepcopy(like).requires_grad_(True)
        return self._net

    def start(self, job: LocalJob) -> FedConModel:
        """The party's personal model on the device, ready to train (in ``job.scratch``)."""
        net = self.net(job.global_model)
        saved = job.state["personal"]
        net.load_state_dict(job.global_model.state_dict() if saved is None else saved)
        net.train()
        params = list(net.parameters())
        momenta = job.state["personal_momenta"]
        if momenta is None:
            momenta = self.rule.new_momenta(params)
        else:
            momenta = [m.to(job.device) for m in momenta]
        job.scratch["personal"] = net
        job.scratch["personal_params"] = params
        job.scratch["personal_momenta"] = momenta
        return net

    @torch.no_grad()
    def step(self, job: LocalJob) -> None:
        """One SGD step of the personal model on its gradients, which it then clears."""
        params = job.scratch["personal_params"]
        live = [i for i, p in enumerate(params) if p.grad is not None]
        momenta = job.scratch["personal_momenta"]
        self.rule.step(
            [params[i] for i in live],
            [params[i].grad for i in live],
            None if momenta is None else [momenta[i] for i in live],
        )
        for p in params:
            p.grad = None

    def finish(self, job: LocalJob) -> None:
        """The personal model and its momentum back into the party's state (CPU)."""
        job.state["personal"] = model_state_to_cpu(job.scratch["personal"])
        momenta = job.scratch["personal_momenta"]
        job.state["personal_momenta"] = None if momenta is None else tensors_to_cpu(momenta)

    def loaded(self, global_model: FedConModel, weights: dict[str, torch.Tensor]) -> FedConModel:
        """The working network holding ``weights`` (for evaluation)."""
        net = self.net(global_model)
        net.load_state_dict(weights)
        return net
