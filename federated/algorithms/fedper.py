"""FedPer (Arivazhagan et al. 2019): the base layers are federated, the head is each
party's own.

Every party trains the whole model each round (E epochs, as FedAvg) from the global
base and its own head; the server averages the base only.  The head is the output
layer and the projection head (``personal_layers`` default ``head,classifier``;
``classifier`` without a projection head): the layers after the representation, as the
paper's "personalisation layers" are the network's top layers.  The split, the party
state and the evaluation (each party's own head on the new global base) are
:mod:`federated.algorithms.partly_personal`'s.

PFLlib splits every model into ``base`` and ``head = fc`` (the output layer only); on
fedsweep's models its rule is ``personal_layers=classifier``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federated.algorithms.layer_rule import LayerRuleParams
from federated.algorithms.partly_personal import PartlyPersonal


def head_rule(values: Mapping[str, Any]) -> str:
    """The layers after the representation: projection head and output layer."""
    return "head,classifier" if values.get("projection_head", True) else "classifier"


@dataclass(frozen=True)
class FedPerParams(LayerRuleParams):
    """FedPer's local layers (default: the head, :func:`head_rule`)."""

    @classmethod
    def resolved_default(cls, name: str, values: Mapping[str, Any]) -> Any:
        if name == "personal_layers":
            return head_rule(values)
        return super().resolved_default(name, values)


class FedPer(PartlyPersonal):
    name = "fedper"
    Params = FedPerParams
