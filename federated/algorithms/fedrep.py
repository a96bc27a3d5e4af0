"""FedRep (Collins et al. 2021): a shared representation, a personal head, trained in
turn.

Each local training runs the round's E epochs in two phases: the first
``rep_head_epochs`` epochs train the head alone (the body frozen), the remaining
E - ``rep_head_epochs`` the body alone (the head frozen); the server averages the body.
The head is FedPer's (``personal_layers`` default ``head,classifier``, ``classifier``
without a projection head); party state, aggregation and evaluation follow its
declaration, :mod:`federated.algorithms.partly_personal`'s.

Default ``rep_head_epochs = E - 1``: the paper's code trains the representation for
``local_rep_ep = 1`` of the local epochs and the head for the rest, so the body moves
one epoch per round.  With E = 1 (fedsweep's smoke budget) there is no whole epoch for
each phase and the default is 0.5: the head trains the first half of the epoch's
steps, the body the second.  PFLlib instead trains the head ``plocal_epochs = 1`` epoch and
then the body ``local_epochs`` more (E + 1 epochs, mostly body): the paper's balance
turned over, which is why its default is not taken.

A frozen group's gradients are dropped before the SGD step (``p.grad = None``), so its
weights, weight decay and momentum are untouched, as ``requires_grad = False`` does in
the paper's code.  The packed step updates every slot's whole network, so FedRep trains
sequentially (``packable`` stays False).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from federated.algorithms.base import LocalJob
from federated.algorithms.fedper import head_rule
from federated.algorithms.layer_rule import LayerRuleParams, model_local_names
from federated.algorithms.partly_personal import PartlyPersonal
from federated.params import ConfigError, MethodParams, describe, positive


@dataclass(frozen=True)
class FedRepParams(LayerRuleParams):
    """FedRep's head (local) and how many of the E local epochs train it."""

    rep_head_epochs: float = field(
        default=1.0,
        metadata=describe(
            "local epochs (of E, may be fractional) that train the head with the body "
            "frozen, before the body trains with the head frozen; default E - 1 (the "
            "paper's one body epoch), 0.5 when E = 1"
        ),
    )

    @classmethod
    def resolved_default(cls, name: str, values: Mapping[str, Any]) -> Any:
        if name == "personal_layers":
            return head_rule(values)
        if name == "rep_head_epochs":
            epochs = int(values.get("local_epochs", 2))
            # E = 1 has no whole epoch for each phase: the head takes its first half
            return float(epochs - 1) if epochs >= 2 else 0.5
        return super().resolved_default(name, values)

    @classmethod
    def build(
        cls, values: Mapping[str, Any], context: Mapping[str, Any] | None = None
    ) -> MethodParams:
        params = super().build(values, context)
        epochs = None if context is None else context.get("local_epochs")
        if epochs is not None and params.rep_head_epochs >= epochs:
            raise ConfigError(
                "rep_head_epochs",
                params.rep_head_epochs,
                f"a number in (0, local_epochs) = (0, {epochs}): the body needs some of the "
                "local training",
            )
        return params

    def check(self) -> None:
        super().check()
        positive("rep_head_epochs", self.rep_head_epochs)


class FedRep(PartlyPersonal):
    name = "fedrep"
    Params = FedRepParams
    packable = False

    def packing_obstacle(self) -> str | None:
        return "fedrep freezes half the model per phase, which the packed SGD step cannot skip"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head: frozenset[str] | None = None  # the rule on the run's model, read once

    def begin_local(self, job: LocalJob) -> None:
        # the head is the rule's entries (the engine has loaded the party's own)
        if self._head is None:
            self._head = model_local_names(job.model, self.params.personal_layers)
        local = self._head
        named = list(job.model.named_parameters())
        job.scratch["head"] = [p for n, p in named if n in local]
        job.scratch["body"] = [p for n, p in named if n not in local]
        # the batch plan's epoch: full batches, at least one (a party below one batch)
        per_epoch = max(1, job.num_samples // self.config.batch_size)
        # a fractional epoch rounds up: the head always gets a step
        job.scratch["head_steps"] = math.ceil(self.params.rep_head_epochs * per_epoch)

    def after_backward(self, job: LocalJob) -> dict[str, torch.Tensor]:
        training_head = job.steps < job.scratch["head_steps"]
        for p in job.scratch["body" if training_head else "head"]:
            p.grad = None
        return {}
