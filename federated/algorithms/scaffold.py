"""SCAFFOLD (Karimireddy et al. 2020) with option II control variates.

Party i starts from the global weights x and, after every SGD step, applies the
correction ``y <- y - lr · (c - c_i)`` (the reference code's placement: after the
optimizer step, so momentum does not accumulate the correction).  After K local steps::

    c_i+ = c_i - c + (x - y) / (K · lr)        (option II)
    sends y and delta_c_i = c_i+ - c_i

The server averages weights as usual and updates ``c <- c + (1/N) · sum_{drawn} delta_c_i``,
i.e. the mean delta scaled by the fraction |S|/N of parties drawn.  All control variates
start at zero; ``c`` is server state (``server["c"]``, on the device with the global
model), each ``c_i`` party state on the CPU (materialised at the party's first round).
Control variates cover trainable parameters only (not BatchNorm statistics).  Parties
and server each send a control variate besides the model, so a round moves twice the
parameters each way.
"""

from __future__ import annotations

from typing import Any

import torch

from federated.algorithms.base import Algorithm, Contribution, LocalJob, tensors_to_cpu
from federated.algorithms.party_own_state import OwnState
from federated.models import FedConModel
from federated.server.aggregation import WeightedMean


def _norm(tensors: list[torch.Tensor]) -> float:
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(tensors))))


class ScaffoldAggregator(WeightedMean):
    """The weighted mean of the weights; sums the parties' delta c and moves the server's
    c by that sum / N when the round's result is taken."""

    def __init__(self, server: dict[str, Any], global_model: FedConModel, n_parties: int) -> None:
        super().__init__(global_model.state_dict())
        self.server = server
        self.n_parties = n_parties
        self.delta_sum = [torch.zeros_like(c) for c in server["c"]]

    def add(self, contribution: Contribution) -> None:
        super().add(contribution)
        torch._foreach_add_(self.delta_sum, contribution.extras["delta_c"])

    def result(self) -> dict[str, torch.Tensor]:
        torch._foreach_add_(self.server["c"], self.delta_sum, alpha=1.0 / self.n_parties)
        return super().result()


class Scaffold(Algorithm):
    name = "scaffold"
    packable = True
    own_state = OwnState(parameter_copies=1.0)  # each party's control variate c_i
    dp_obstacle = (
        "uploads its control-variate change delta_c beside its weights, which DP-FedAvg "
        "would neither clip nor noise"
    )

    def init_party_state(self, party: int) -> dict:
        return {"c": None}  # zeros, materialised lazily

    def init_server_state(self, global_model: FedConModel) -> dict[str, Any]:
        return {"c": [torch.zeros_like(p) for p in global_model.parameters()]}

    def begin_local(self, job: LocalJob) -> None:
        stored = job.state["c"]
        c = job.server["c"]
        c_local = (
            [torch.zeros_like(p) for p in c]
            if stored is None
            else [t.to(job.device, non_blocking=True) for t in stored]
        )
        job.scratch["c_local"] = c_local
        job.scratch["correction"] = torch._foreach_sub(c, c_local)
        job.scratch["params"] = list(job.model.parameters())

    def after_step(self, job: LocalJob) -> None:
        with torch.no_grad():
            torch._foreach_add_(
                job.scratch["params"], job.scratch["correction"], alpha=-self.config.lr
            )

    def end_local(self, job: LocalJob) -> dict[str, list[torch.Tensor]]:
        steps = max(job.steps, 1)
        c, c_local = job.server["c"], job.scratch["c_local"]
        with torch.no_grad():
            drift = torch._foreach_sub(
                [p.detach() for p in job.global_model.parameters()],
                [p.detach() for p in job.scratch["params"]],
            )
            c_new = torch._foreach_sub(c_local, c)
            torch._foreach_add_(c_new, drift, alpha=1.0 / (steps * self.config.lr))
            delta = torch._foreach_sub(c_new, c_local)
        job.state["c"] = tensors_to_cpu(c_new)
        job.info["c_local_norm"] = _norm(c_new)
        return {"delta_c": delta}

    def aggregator(self, server: dict[str, Any], global_model: FedConModel) -> ScaffoldAggregator:
        return ScaffoldAggregator(server, global_model, self.config.n_parties)

    def bytes_per_party(self, model_bytes: int, param_bytes: int) -> tuple[int, int]:
        return model_bytes + param_bytes, model_bytes + param_bytes

    def round_metrics(self, jobs: list[LocalJob], server: dict[str, Any]) -> dict[str, float]:
        local = [j.info["c_local_norm"] for j in jobs]
        return {
            "c_global_norm": _norm(server["c"]),
            "c_local_norm": sum(local) / max(1, len(local)),
        }
