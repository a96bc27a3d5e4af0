"""A party's whole personal model beside the global one (Ditto, APFL): the working
network one local training trains and the party state it is saved to.

A method declares it (``OwnState(personal_model=True)``,
:mod:`federated.algorithms.party_own_state`); the engine then loads the party's personal
model before the method's ``begin_local`` (``job.personal``), steps it with the run's
own SGD rule (:class:`~federated.sgd_rule.SgdRule`: lr, momentum, weight decay; the
same object that steps the global model's copy) after the method's ``after_step``, and
saves it when the local training ends.  The method only reads it: ``job.personal.net``
in its loss, ``job.personal.params`` (and their gradients) in ``after_backward``.

Between rounds it lives in the party's state, on the CPU: ``state["personal"]`` (its
``state_dict``; None before the party first trains: it then starts from the round's
global model) and ``state["personal_momenta"]`` (its SGD momentum, kept across rounds
as an optimiser living at the party keeps it).  So a checkpoint holds every party's
personal model and optimiser: a resumed run continues exactly.  The engine runs the
personal model beside the party's copy of the global model, which packed execution
does not allow: such a method trains sequentially.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from federated.models import FedConModel
from federated.sgd_rule import SgdRule

#: the party-state keys of a personal model and its momentum
MODEL_KEY = "personal"
MOMENTA_KEY = "personal_momenta"


def tensors_to_cpu(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Detached CPU copies: party state leaves the accelerator between rounds."""
    return [t.detach().to("cpu", copy=True) for t in tensors]


def model_state_to_cpu(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's whole ``state_dict`` as detached CPU copies."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


@dataclass
class PersonalModel:
    """One party's personal model during one local training (``job.personal``)."""

    net: FedConModel  # the run's one working network, holding this party's weights
    params: list[torch.nn.Parameter]
    momenta: list[torch.Tensor] | None  # None when the run's SGD has no momentum

    @classmethod
    def start(
        cls,
        net: FedConModel,
        global_model: FedConModel,
        state: dict[str, Any],
        rule: SgdRule,
        device: torch.device,
    ) -> PersonalModel:
        """The party's personal model in ``net``, ready to train: its saved weights (the
        round's global model before its first training) and momentum."""
        saved = state[MODEL_KEY]
        net.load_state_dict(global_model.state_dict() if saved is None else saved)
        net.train()
        params = list(net.parameters())
        momenta = state[MOMENTA_KEY]
        if momenta is None:
            momenta = rule.new_momenta(params)
        else:
            momenta = [m.to(device) for m in momenta]
        return cls(net, params, momenta)

    @torch.no_grad()
    def step(self, rule: SgdRule) -> None:
        """One step of ``rule`` on the gradients the method's objective left on the
        personal model's parameters, which it then clears (a parameter without one
        is left be, as on the global model's copy)."""
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        rule.step(
            [self.params[i] for i in live],
            [self.params[i].grad for i in live],
            None if self.momenta is None else [self.momenta[i] for i in live],
        )
        for p in self.params:
            p.grad = None

    def save(self, state: dict[str, Any]) -> None:
        """The personal model and its momentum into the party's state (CPU copies)."""
        state[MODEL_KEY] = model_state_to_cpu(self.net)
        state[MOMENTA_KEY] = None if self.momenta is None else tensors_to_cpu(self.momenta)
