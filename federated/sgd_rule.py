"""The local solver's update rule, defined once: every execution path, the personal
models (Ditto, APFL) and fine-tuning update through it.

SGD with the configured learning rate, momentum and weight decay (no dampening, no
Nesterov: the MOON paper's solver), a fresh momentum per local training.  Both paths
call :meth:`SgdRule.step`, torch's functional ``sgd`` with the fused kernel: the
sequential path on one model's parameters, the packed path on the first ``w`` slots'
slices of the packed parameters (each slot with its own momentum).  A zero momentum
buffer gives the same first step as torch's lazily created one (``0·m + g == g``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.optim.sgd import sgd


@dataclass(frozen=True)
class SgdRule:
    """SGD's options; ``lr`` per step, ``weight_decay`` the L2 coefficient."""

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False

    def new_momenta(self, params: Sequence[torch.Tensor]) -> list[torch.Tensor] | None:
        """Fresh momentum buffers for ``params`` (None when momentum is off)."""
        if not self.momentum:
            return None
        return [torch.zeros_like(p) for p in params]

    def step_reached(
        self, params: Sequence[torch.Tensor], momenta: Sequence[torch.Tensor] | None
    ) -> None:
        """One update of the ``params`` a backward pass reached (those holding a
        gradient; a parameter the objective did not reach is left be, its momentum
        too): the sequential path's and fine-tuning's step after ``backward``."""
        live = [i for i, p in enumerate(params) if p.grad is not None]
        self.step(
            [params[i] for i in live],
            [params[i].grad for i in live],
            None if momenta is None else [momenta[i] for i in live],
        )

    @torch.no_grad()
    def step(
        self,
        weights: Sequence[torch.Tensor],
        grads: Sequence[torch.Tensor],
        momenta: Sequence[torch.Tensor] | None,
    ) -> None:
        """One update of ``weights`` in place (one fused kernel over all tensors)."""
        buffers: list[torch.Tensor | None] = (
            [None] * len(weights) if momenta is None else list(momenta)
        )
        sgd(
            list(weights),
            list(grads),
            buffers,
            # one fused kernel instead of a loop over tensors (~3% of a simple-cnn step)
            fused=True,
            weight_decay=self.weight_decay,
            momentum=self.momentum,
            lr=self.lr,
            dampening=self.dampening,
            nesterov=self.nesterov,
            maximize=False,
        )
