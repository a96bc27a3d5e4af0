"""SOLO: every party trains alone on its own data; nothing is communicated.

Each party starts from the same initial model (the run's initial global model) and,
every round, trains ``local_epochs`` more epochs continuing from its own weights (its
``state["weights"]``), so
after R rounds it has trained R·E epochs (the paper's SOLO uses 300 epochs: e.g.
``rounds=30, local_epochs=10``).  All parties train every round whatever
``sample_fraction`` says (``personal_models``), each is evaluated with its own model
(:meth:`Solo.party_model`: the round reports the mean and std over parties and each
party's accuracy, ``test_acc``, ``test_acc_std``, ``party_acc/<i>``), an aggregator
combines nothing (the global model stays the initial one) and nothing is communicated.
"""

from __future__ import annotations

import copy
from typing import Any

from federated.algorithms.base import Algorithm, LocalJob, model_state_to_cpu
from federated.models import FedConModel
from federated.server.aggregation import Aggregator, NoAggregation


class Solo(Algorithm):
    name = "solo"
    whole_personal_model = True
    party_state_copies = 1.0  # its own model
    packable = True
    personal_models = True
    dp_obstacle = "has no server: nothing is aggregated (each party's model stays its own)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scratch: FedConModel | None = None  # party_model's, never state

    def init_party_state(self, party: int) -> dict:
        return {"weights": None}  # None: still the initial model

    def begin_local(self, job: LocalJob) -> None:
        if job.state["weights"] is not None:
            job.model.load_state_dict(job.state["weights"])

    def end_local(self, job: LocalJob) -> dict:
        job.state["weights"] = model_state_to_cpu(job.model)
        return {}

    def party_model(
        self, party: int, global_model: FedConModel, state: dict[str, Any]
    ) -> FedConModel | None:
        """The party's own weights (None before it first trained: the initial model),
        in a scratch copy of the global model kept for evaluation only."""
        if state["weights"] is None:
            return None
        if self._scratch is None:
            self._scratch = copy.deepcopy(global_model)
        self._scratch.load_state_dict(state["weights"])
        return self._scratch

    def aggregator(self, server: dict[str, Any], global_model: FedConModel) -> Aggregator:
        return NoAggregation()

    def bytes_per_party(self, model_bytes: int, param_bytes: int) -> tuple[int, int]:
        return 0, 0
