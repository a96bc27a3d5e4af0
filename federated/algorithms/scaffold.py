"""SCAFFOLD (Karimireddy et al. 2020) with option II control variates.

Party i starts from the global weights x and, after every SGD step, applies the
correction ``y <- y - lr · (c - c_i)`` (the reference code's placement: after the
optimizer step, so momentum does not accumulate the correction).  After K local steps::

    c_i+ = c_i - c + (x - y) / (K · lr)        (option II)
    sends y and delta_c_i = c_i+ - c_i

The server averages weights as usual and updates ``c <- c + (1/N) · sum_{drawn} delta_c_i``,
i.e. the mean delta scaled by the fraction |S|/N of parties drawn.  All control variates
start at zero; ``c`` lives on the device with the global model, each ``c_i`` on the CPU
(materialised at the party's first round).  Control variates cover trainable parameters
only (not BatchNorm statistics).  Parties and server each send a control variate besides
the model, so a round moves twice the parameters each way.
"""

from __future__ import annotations

import torch

from federated.algorithms.base import Algorithm, LocalJob, tensors_to_cpu
from federated.models import FedConModel


def _norm(tensors: list[torch.Tensor]) -> float:
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(tensors))))


class Scaffold(Algorithm):
    name = "scaffold"

    def init_party_state(self, party: int) -> dict:
        return {"c": None}  # zeros, materialised lazily

    def init_server_state(self, global_model: FedConModel) -> None:
        self.c = [torch.zeros_like(p) for p in global_model.parameters()]
        self._delta_sum = [torch.zeros_like(p) for p in global_model.parameters()]

    def begin_local(self, job: LocalJob) -> None:
        stored = job.state["c"]
        self._c_local = (
            [torch.zeros_like(p) for p in self.c]
            if stored is None
            else [t.to(job.device, non_blocking=True) for t in stored]
        )
        self._correction = torch._foreach_sub(self.c, self._c_local)
        self._params = list(job.model.parameters())

    def after_step(self, job: LocalJob) -> None:
        with torch.no_grad():
            torch._foreach_add_(self._params, self._correction, alpha=-self.config.lr)

    def end_local(self, job: LocalJob) -> dict[str, list[torch.Tensor]]:
        steps = max(job.steps, 1)
        with torch.no_grad():
            drift = torch._foreach_sub(
                [p.detach() for p in job.global_model.parameters()],
                [p.detach() for p in self._params],
            )
            c_new = torch._foreach_sub(self._c_local, self.c)
            torch._foreach_add_(c_new, drift, alpha=1.0 / (steps * self.config.lr))
            delta = torch._foreach_sub(c_new, self._c_local)
        job.state["c"] = tensors_to_cpu(c_new)
        job.info["c_local_norm"] = _norm(c_new)
        return {"delta_c": delta}

    def receive(self, job: LocalJob, sent: dict[str, list[torch.Tensor]], weight: float) -> None:
        torch._foreach_add_(self._delta_sum, sent["delta_c"])

    def finish_round(self, global_model: FedConModel) -> None:
        torch._foreach_add_(self.c, self._delta_sum, alpha=1.0 / self.config.n_parties)
        torch._foreach_zero_(self._delta_sum)

    def server_state_dict(self) -> dict:
        return {"c": tensors_to_cpu(self.c)}

    def load_server_state_dict(self, state: dict) -> None:
        for mine, saved in zip(self.c, state["c"]):
            mine.copy_(saved)

    def extra_bytes_per_party(self, param_bytes: int) -> tuple[int, int]:
        return param_bytes, param_bytes

    def round_metrics(self, jobs: list[LocalJob]) -> dict[str, float]:
        local = [j.info["c_local_norm"] for j in jobs]
        return {"c_global_norm": _norm(self.c), "c_local_norm": sum(local) / max(1, len(local))}
