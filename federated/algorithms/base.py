"""The interface every federated method implements.

A method is a small class with three concerns kept apart (as Flower's strategies keep
what is sent to parties apart from how the server combines):

* **party loss** — :meth:`Algorithm.loss` (plus optional gradient-level hooks
  :meth:`after_backward` and :meth:`after_step`) defines what a party optimises;
* **party state** — :meth:`init_party_state`, :meth:`begin_local`, :meth:`end_local`
  manage what a party keeps between rounds (MOON's previous models, SCAFFOLD's control
  variate).  Party state lives on the CPU while the party is not training;
* **server side** — :meth:`receive` and :meth:`finish_round` combine what parties send
  beyond their weights.  Weight averaging (|D_i|/|D| over the drawn parties) and the
  server update rule (plain average, FedAvgM) belong to the round loop and
  :mod:`federated.server`, so any party-side method combines with any server rule.

Adding a method means one new file with a subclass and one line in
:data:`federated.algorithms.ALGORITHMS`.  Every hook has a working default, so a
subclass overrides only what differs from FedAvg.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F

from federated.config import RunConfig
from federated.models import FedConModel, ModelOutput


class LossTerms(NamedTuple):
    """A party's objective on one batch.

    ``total`` is back-propagated; ``parts`` are detached scalars logged per round, keyed
    by short names: ``ce`` becomes ``train_loss``, ``con`` ``con_loss``, any other key
    ``<key>_loss``.
    """

    total: torch.Tensor
    parts: dict[str, torch.Tensor]


@dataclass
class LocalJob:
    """One party's local training in one round, as the round loop hands it over."""

    party: int
    round_index: int  # 0-based index of the round being run
    model: FedConModel  # the working model: starts as the global model, trained in place
    global_model: FedConModel  # this round's global model, frozen (eval mode, no grad)
    state: dict[str, Any]  # the party's persistent state, owned by the algorithm
    num_samples: int
    device: torch.device
    steps: int = 0  # SGD steps taken so far in this local training
    info: dict[str, float] = field(default_factory=dict)  # per-party values to report


class Algorithm:
    """FedAvg's behaviour; subclasses override what their method changes."""

    name: ClassVar[str] = "fedavg"
    # SOLO-style methods: every party trains its own model every round, nothing is
    # communicated or aggregated, and each party's model is evaluated.
    personal_models: ClassVar[bool] = False

    def __init__(self, config: RunConfig, generator: torch.Generator) -> None:
        self.config = config
        self.generator = generator  # the run's "algorithm" random stream (CPU)

    # ------------------------------------------------------------------ party state
    def init_party_state(self, party: int) -> dict[str, Any]:
        """State a party starts with (before its first round)."""
        return {}

    def begin_local(self, job: LocalJob) -> None:
        """Prepare the party's local training (move state to the device, ...)."""
        return None

    def end_local(self, job: LocalJob) -> dict[str, list[torch.Tensor]]:
        """Finish local training: update the party's state (kept on the CPU) and return
        what the party sends to the server besides its weights."""
        return {}

    # ------------------------------------------------------------------- party loss
    def loss(self, job: LocalJob, out: ModelOutput, x: torch.Tensor, y: torch.Tensor) -> LossTerms:
        """The objective on one batch; FedAvg: cross-entropy."""
        ce = F.cross_entropy(out.logits, y)
        return LossTerms(ce, {"ce": ce.detach()})

    def after_backward(self, job: LocalJob) -> dict[str, torch.Tensor]:
        """Adjust gradients before the SGD step; returns extra loss parts to log."""
        return {}

    def after_step(self, job: LocalJob) -> None:
        """Adjust weights after the SGD step."""
        return None

    # ------------------------------------------------------------------ server side
    def init_server_state(self, global_model: FedConModel) -> None:
        """Create server-side state (besides the global weights)."""
        return None

    def receive(self, job: LocalJob, sent: dict[str, list[torch.Tensor]], weight: float) -> None:
        """Take in one drawn party's extras; ``weight`` is its |D_i| / sum of drawn |D_j|."""
        return None

    def finish_round(self, global_model: FedConModel) -> None:
        """Update server-side state once every drawn party has been received."""
        return None

    def server_state_dict(self) -> dict[str, Any]:
        return {}

    def load_server_state_dict(self, state: dict[str, Any]) -> None:
        return None

    # -------------------------------------------------------------------- reporting
    def extra_bytes_per_party(self, param_bytes: int) -> tuple[int, int]:
        """Bytes sent (down, up) per drawn party besides the model's state."""
        return 0, 0

    def round_metrics(self, jobs: list[LocalJob]) -> dict[str, float]:
        """Method-specific per-round metrics (e.g. tau, control-variate norms)."""
        return {}


def tensors_to_cpu(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Detached CPU copies: party state leaves the accelerator between rounds."""
    return [t.detach().to("cpu", copy=True) for t in tensors]


def model_state_to_cpu(model: FedConModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
