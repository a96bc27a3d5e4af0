"""FedProx (Li et al. 2020): CE + (mu/2)·||w - w_global||² per batch.

The proximal term's gradient, mu·(w - w_global), is added to the parameters' gradients
directly after back-propagating the cross-entropy: the same gradient as
differentiating the term, without an autograd graph over every parameter.  Its value is
still computed each step and logged as ``prox_loss``.
"""

from __future__ import annotations

import torch

from federated.algorithms.base import Algorithm, LocalJob


class FedProx(Algorithm):
    name = "fedprox"

    def begin_local(self, job: LocalJob) -> None:
        self._params = [p for p in job.model.parameters() if p.requires_grad]
        self._anchor = [p.detach() for p in job.global_model.parameters()]

    def after_backward(self, job: LocalJob) -> dict[str, torch.Tensor]:
        mu = self.config.mu
        with torch.no_grad():
            diffs = torch._foreach_sub([p.detach() for p in self._params], self._anchor)
            grads = [p.grad for p in self._params]
            if mu > 0:
                torch._foreach_add_(grads, diffs, alpha=mu)
            squared = torch.stack(torch._foreach_norm(diffs)).square().sum()
        return {"prox": 0.5 * mu * squared}
