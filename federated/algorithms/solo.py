"""SOLO: every party trains alone on its own data; nothing is communicated.

Each party starts from the same initial model (the run's initial global model) and,
every round, trains ``local_epochs`` more epochs continuing from its own weights, so
after R rounds it has trained R·E epochs (the paper's SOLO uses 300 epochs: e.g.
``rounds=30, local_epochs=10``).  Its declaration says it all: every party keeps its
whole model (``own_state``, :data:`~federated.algorithms.party_own_state.WHOLE_MODEL`,
``state["local"]``), so the engine trains every party every round whatever
``sample_fraction`` says, starts each from its own weights, evaluates each with its own
model (the round reports the mean and std over parties and each party's accuracy,
``test_acc``, ``test_acc_std``, ``party_acc/<i>``) and counts no bytes sent; an
aggregator combines nothing (the global model stays the initial one).
"""

from __future__ import annotations

from typing import Any

from federated.algorithms.base import Algorithm
from federated.algorithms.party_own_state import WHOLE_MODEL, OwnState
from federated.models import FedConModel
from federated.server.aggregation import Aggregator, NoAggregation


class Solo(Algorithm):
    name = "solo"
    own_state = OwnState(keeps=WHOLE_MODEL)
    packable = True
    dp_obstacle = "has no server: nothing is aggregated (each party's model stays its own)"

    def aggregator(self, server: dict[str, Any], global_model: FedConModel) -> Aggregator:
        return NoAggregation()
