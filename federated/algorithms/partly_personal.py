"""The shared machinery of partly personal methods (FedPer, FedRep, LG-FedAvg): a rule
(:mod:`federated.algorithms.layer_rule`) splits the model into entries each party keeps
and entries the server averages.

* **Party state.** ``state["local"]``: the party's own local entries (parameters and
  buffers), CPU copies, None until its first local training.  A party starts each local
  training from the round's global model with its own local entries loaded over it, and
  saves them when it ends, so the checkpoint holds every party's part (exact resume).
* **Server.** The |D_i|-weighted mean of the shared entries; the global model's local
  entries stay the initial model's, which is what a party that has not trained yet
  starts from (the papers initialise every party's head from the one initial model).
* **Evaluation.** Party *i*'s model is the round's new global model (after the server
  step) with *i*'s local entries over it: the model it would start its next round
  from.  As every method is evaluated after the round's aggregation, this is measured
  after local training, and PFLlib's "before the next round's training" is the same
  model.
* **Communication.** Only the shared entries travel, each way.

Only ``load_state_dict`` and ``state_dict`` touch the model, so packed execution applies
(``packable``) unless a subclass's training hooks say otherwise.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from federated.algorithms.base import PERSONALISED_POOLED_TEST_EVERY, Algorithm, LocalJob
from federated.algorithms.layer_rule import model_local_names
from federated.models import FedConModel
from federated.server.aggregation import Aggregator, WeightedMean
from federated.server.contribution import Contribution


class SharedMean(Aggregator):
    """The weighted mean of the shared entries; the local entries keep the global
    model's values (the server steps them by zero)."""

    def __init__(self, global_state: dict[str, torch.Tensor], local: frozenset[str]) -> None:
        self.mean = WeightedMean(global_state)
        self.kept = {k: global_state[k].clone() for k in local}

    def add(self, contribution: Contribution) -> None:
        self.mean.add(contribution)

    def result(self) -> dict[str, torch.Tensor]:
        return {**self.mean.result(), **self.kept}


class PartlyPersonal(Algorithm):
    """A model split into local and shared entries by ``self.params.personal_layers``."""

    packable = True
    # sends its shared entries only: DP-FedAvg protects them; the local ones never leave
    dp_obstacle = None
    party_state_copies = 1.0  # at most: the entries its rule keeps local
    personal_test_every_default = PERSONALISED_POOLED_TEST_EVERY

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scratch: FedConModel | None = None  # party_model's, never state
        self._local: frozenset[str] | None = None  # the rule applied to the run's model
        self._local_bytes = 0  # bytes of the local entries, which never travel

    def local_names(self, model: torch.nn.Module) -> frozenset[str]:
        """The entries this run keeps local (the rule checked on the real model once)."""
        if self._local is None:
            self._local = model_local_names(model, self.params.personal_layers)
        return self._local

    def init_server_state(self, global_model: FedConModel) -> dict[str, Any]:
        local = self.local_names(global_model)  # a bad rule is refused before any training
        self._local_bytes = sum(
            v.numel() * v.element_size() for k, v in global_model.state_dict().items() if k in local
        )
        return {}

    def init_party_state(self, party: int) -> dict[str, Any]:
        return {"local": None}  # None: the initial model's local entries

    def begin_local(self, job: LocalJob) -> None:
        if job.state["local"] is not None:
            job.model.load_state_dict(job.state["local"], strict=False)

    def end_local(self, job: LocalJob) -> dict[str, list[torch.Tensor]]:
        state = job.model.state_dict()
        job.state["local"] = {
            k: state[k].detach().to("cpu", copy=True) for k in sorted(self.local_names(job.model))
        }
        return {}

    def party_model(
        self, party: int, global_model: FedConModel, state: dict[str, Any]
    ) -> FedConModel | None:
        """The global model with the party's local entries (None before it trained)."""
        if state["local"] is None:
            return None
        if self._scratch is None:
            self._scratch = copy.deepcopy(global_model)
        self._scratch.load_state_dict(global_model.state_dict())
        self._scratch.load_state_dict(state["local"], strict=False)
        return self._scratch

    def aggregator(self, server: dict[str, Any], global_model: FedConModel) -> Aggregator:
        return SharedMean(global_model.state_dict(), self.local_names(global_model))

    def local_entries(self, global_model: FedConModel) -> frozenset[str]:
        """The entries the rule keeps at each party (never sent)."""
        return self.local_names(global_model)

    def bytes_per_party(self, model_bytes: int, param_bytes: int) -> tuple[int, int]:
        """The shared entries' bytes each way: the local ones stay with the party."""
        shared = model_bytes - self._local_bytes
        return shared, shared
