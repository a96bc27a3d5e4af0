"""FedDyn (Acar, Zhao, Matas, Mattina, Whatmough, Saligrama; ICLR 2021): dynamic
regularisation (Algorithm 1 of the paper).

Party k, drawn in round t with global model theta, minimises::

    L_k(w) - <g_k, w> + (alpha / 2) · ||w - theta||²

where ``g_k`` (party state, zero at first) is its running linear term.  The term's
gradient ``alpha·(w - theta) - g_k`` is added to the cross-entropy's after each
backward pass (as FedProx adds its own), so SGD momentum and weight decay act on the
whole objective.  After local training ``g_k <- g_k - alpha·(w_k - theta)``.

The server keeps ``h`` (server state, zero at first) and, over the drawn parties P::

    h         <- h - alpha · (1/N) · sum_{k in P} (w_k - theta)
    theta_new <- mean_{k in P}(w_k) - h / alpha

The mean is fedsweep's |D_k|-weighted one (the paper's plain mean when parties are
equally large); N counts every party, drawn or not, as in the paper.  ``g_k`` and ``h``
cover the trainable parameters; other state entries are averaged.  A party sends only
its model; ``g_k`` never leaves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from federated.algorithms.base import Algorithm, Contribution, LocalJob, tensors_to_cpu
from federated.algorithms.party_own_state import OwnState
from federated.models import FedConModel
from federated.params import MethodParams, describe, positive
from federated.server.aggregation import WeightedMean


@dataclass(frozen=True)
class FedDynParams(MethodParams):
    alpha: float = field(
        default=0.01, metadata=describe("FedDyn's regularisation weight alpha > 0")
    )

    def check(self) -> None:
        positive("alpha", self.alpha)


class FedDynAggregator(WeightedMean):
    """The weighted mean, corrected by the server state h, which it updates."""

    def __init__(
        self, server: dict[str, Any], global_model: FedConModel, alpha: float, n_parties: int
    ) -> None:
        super().__init__(global_model.state_dict())
        self.server = server
        self.alpha = alpha
        self.n_parties = n_parties
        self.names = [name for name, _ in global_model.named_parameters()]
        self.theta = [p.detach() for p in global_model.parameters()]
        self.drift = [torch.zeros_like(t) for t in self.theta]

    def add(self, contribution: Contribution) -> None:
        super().add(contribution)
        with torch.no_grad():
            local = [contribution.weights[name].detach() for name in self.names]
            torch._foreach_add_(self.drift, torch._foreach_sub(local, self.theta))

    def result(self) -> dict[str, torch.Tensor]:
        h = self.server["h"]
        out = super().result()
        with torch.no_grad():
            torch._foreach_add_(h, self.drift, alpha=-self.alpha / self.n_parties)
            for name, h_k in zip(self.names, h):
                out[name] = out[name] - h_k / self.alpha
        return out


class FedDyn(Algorithm):
    name = "feddyn"
    packable = True
    own_state = OwnState(parameter_copies=1.0)  # each party's gradient correction g_i
    dp_obstacle = "builds its server state h from the parties' unclipped, un-noised updates"
    Params = FedDynParams

    def init_party_state(self, party: int) -> dict:
        return {"g": None}  # zeros, materialised at the party's first round

    def init_server_state(self, global_model: FedConModel) -> dict[str, Any]:
        return {"h": [torch.zeros_like(p) for p in global_model.parameters()]}

    def begin_local(self, job: LocalJob) -> None:
        params = list(job.model.parameters())
        stored = job.state["g"]
        job.scratch["params"] = params
        job.scratch["theta"] = [p.detach() for p in job.global_model.parameters()]
        job.scratch["g"] = (
            [torch.zeros_like(p) for p in params]
            if stored is None
            else [t.to(job.device, non_blocking=True) for t in stored]
        )

    def after_backward(self, job: LocalJob) -> dict[str, torch.Tensor]:
        params = job.scratch["params"]
        with torch.no_grad():
            diffs = torch._foreach_sub([p.detach() for p in params], job.scratch["theta"])
            grads = [p.grad for p in params]
            torch._foreach_add_(grads, diffs, alpha=self.params.alpha)
            torch._foreach_sub_(grads, job.scratch["g"])
        return {}

    def end_local(self, job: LocalJob) -> dict[str, list[torch.Tensor]]:
        with torch.no_grad():
            drift = torch._foreach_sub(
                [p.detach() for p in job.scratch["params"]], job.scratch["theta"]
            )
            g = torch._foreach_sub(job.scratch["g"], torch._foreach_mul(drift, self.params.alpha))
        job.state["g"] = tensors_to_cpu(g)
        return {}

    def aggregator(self, server: dict[str, Any], global_model: FedConModel) -> FedDynAggregator:
        return FedDynAggregator(server, global_model, self.params.alpha, self.config.n_parties)
