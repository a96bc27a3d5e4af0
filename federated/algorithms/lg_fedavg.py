"""LG-FedAvg (Liang et al. 2020, "Think locally, act globally"): each party keeps its
own representation (the body), the head is federated.

FedPer's split turned over: ``personal_layers`` defaults to ``encoder`` (the body), so
the projection head and the output layer are averaged by the server and every party
keeps its encoder.  The paper's global part is the top layers of the network, as here.
Party state, aggregation and evaluation are
:mod:`federated.algorithms.partly_personal`'s; PFLlib's LG-FedAvg is the same split
(``head`` shared, ``base`` local).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from federated.algorithms.layer_rule import LayerRuleParams
from federated.algorithms.partly_personal import PartlyPersonal
from federated.params import describe


@dataclass(frozen=True)
class LgFedAvgParams(LayerRuleParams):
    """LG-FedAvg's local layers: the body."""

    personal_layers: str = field(
        default="encoder",
        metadata=describe(
            "comma-separated prefixes of the model's state names kept at each party "
            "(encoder, head, classifier, or deeper: encoder.fc2)"
        ),
    )


class LgFedAvg(PartlyPersonal):
    name = "lg-fedavg"
    Params = LgFedAvgParams
