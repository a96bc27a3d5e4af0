"""Partly personal methods (FedPer, FedRep, LG-FedAvg): a rule
(:mod:`federated.algorithms.layer_rule`, ``personal_layers``) splits the model into
entries each party keeps and entries the server averages.

The split is their whole declaration (``own_state``, :class:`LayerRule`); the engine
applies it as it applies every party's own state
(:mod:`federated.algorithms.party_own_state`):

* **Party state.** ``state["local"]``: the party's own local entries (parameters and
  buffers), CPU copies, None until its first local training.  A party starts each local
  training from the round's global model with its own local entries loaded over it, and
  saves them when it ends, so the checkpoint holds every party's part (exact resume).
* **Server.** The |D_i|-weighted mean of the shared entries; the server never moves the
  local ones, which stay the initial model's: what a party that has not trained yet
  starts from (the papers initialise every party's head from the one initial model).
* **Evaluation.** Party *i*'s model is the round's new global model (after the server
  step) with *i*'s local entries over it: the model it would start its next round
  from.  As every method is evaluated after the round's aggregation, this is measured
  after local training, and PFLlib's "before the next round's training" is the same
  model.
* **Communication.** Only the shared entries travel, each way.

No hook touches the model, so packed execution applies (``packable``) unless a
subclass's training hooks say otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from federated.algorithms.base import Algorithm
from federated.algorithms.layer_rule import model_local_names
from federated.algorithms.party_own_state import (
    PERSONALISED_POOLED_TEST_EVERY,
    KeptEntries,
    OwnState,
)
from federated.params import MethodParams


@dataclass(frozen=True)
class LayerRule(KeptEntries):
    """The entries the method's ``personal_layers`` prefixes name."""

    def names(
        self, model: torch.nn.Module, params: MethodParams, model_name: str | None
    ) -> frozenset[str]:
        return model_local_names(model, params.personal_layers)

    def most_names(self, model: torch.nn.Module) -> frozenset[str]:
        # a rule must leave some parameter shared, but which one is the rule's
        return frozenset(model.state_dict())


class PartlyPersonal(Algorithm):
    """A model split into local and shared entries by ``self.params.personal_layers``."""

    packable = True
    # sends its shared entries only: DP-FedAvg protects them; the local ones never leave
    dp_obstacle = None
    own_state = OwnState(keeps=LayerRule(), personal_test_every=PERSONALISED_POOLED_TEST_EVERY)
