"""Annealed MOON temperature ("NEW-MOON", papers/moon-annealed-temperature.txt §2.2, §3.1).

The paper gives the update rule and the acceptance rule but leaves their wiring open.
This is the reading implemented here, exactly:

* **When**: after every local SGD step's backward pass (per step, not per epoch), while
  the contrastive term is active (a party with no previous model has none to anneal).
* **Which gradient norm**: the L2 norm over all of the local model's parameter gradients
  of the full local objective (CE + mu·l_con), before the optimizer step (so weight
  decay and momentum are not included).  ``prev_grad`` is the previous step's norm in
  the same local training; the first step only records its norm.
* **Candidate**: ``tau' = max(tau · (1 - sigma · |g_t - g_{t-1}| / (g_{t-1} + 1e-8)), tau_min)``
  (eq. 3, sigma = ``tau_sigma``, default 0.005; tau_min default 0.001).  A candidate
  equal to the current value (already at the floor) is not a proposal.
* **Whose loss**: the current batch's contrastive loss l_con (without mu; the
  cross-entropy does not depend on tau) evaluated at ``tau`` and at ``tau'`` from the
  similarities already computed for this step — no extra forward pass.
* **Acceptance** (eq. 2, Metropolis): accept when ``new < old``, otherwise with
  probability ``exp((old - new) / tau)``, tau being the current temperature.  The coin
  is drawn from the run's seeded ``algorithm`` stream, saved in checkpoints.
* **Scope**: with ``tau_scope="round"`` (default) every local training starts at tau0 =
  ``tau`` (default 1.0), as a temperature local to the reference code's training
  function would; with ``tau_scope="run"`` each party resumes from where its previous
  local training ended (kept in its party state and checkpoints).
* **Reported**: per round, ``tau_end`` (mean over the drawn parties of the value each
  ended its local training with), ``tau_end_lowest`` (their minimum) and ``tau_acceptance`` (mean
  share of proposals accepted).  Together the rows give the tau trajectory.

By construction tau stays in [tau_min, tau0]: candidates never exceed the current value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from federated.algorithms.temperature import TemperatureSchedule

if TYPE_CHECKING:
    from federated.algorithms.moon import MoonParams

EPSILON = 1e-8


class AnnealedTemperature(TemperatureSchedule):
    def __init__(self, params: MoonParams, generator: torch.Generator) -> None:
        super().__init__(params, generator)
        self.tau0 = float(params.tau)
        self.tau_min = float(params.tau_min)
        self.sigma = float(params.tau_sigma)
        self.carry_over = params.tau_scope == "run"
        self._previous_grad: float | None = None
        self._proposals = 0
        self._accepted = 0

    def begin(self, party_state: dict[str, Any]) -> None:
        self.value = party_state.get("tau", self.tau0) if self.carry_over else self.tau0
        self._previous_grad = None
        self._proposals = 0
        self._accepted = 0

    def candidate(self, grad: float, previous_grad: float) -> float:
        """Eq. 3 from the current value and two successive gradient norms."""
        change = abs(grad - previous_grad) / (previous_grad + EPSILON)
        return max(self.value * (1.0 - self.sigma * change), self.tau_min)

    def observe(self, grad_norm: Callable[[], float], loss_at: Callable[[float], float]) -> None:
        grad = grad_norm()
        previous, self._previous_grad = self._previous_grad, grad
        if previous is None:
            return
        proposal = self.candidate(grad, previous)
        if proposal == self.value:
            return
        self._proposals += 1
        old_loss, new_loss = loss_at(self.value), loss_at(proposal)
        if new_loss < old_loss:
            accept = True
        else:
            coin = float(torch.rand((), generator=self.generator))
            accept = coin < math.exp((old_loss - new_loss) / self.value)
        if accept:
            self._accepted += 1
            self.value = proposal

    def end(self, party_state: dict[str, Any]) -> dict[str, float]:
        if self.carry_over:
            party_state["tau"] = self.value
        rate = self._accepted / self._proposals if self._proposals else float("nan")
        return {"tau": self.value, "tau_acceptance": rate}
