"""The local-trainer interface: what the round loop asks of an execution path.

``trainer.train(jobs, plan)`` trains each drawn party's :class:`LocalJob` on its
:class:`~federated.execution.batch_plan.PartyBatches` and yields ``(job, result)`` in
the drawn order.  The caller hands each yielded job to the server (``end_local``,
aggregation) before asking for the next: the sequential path trains a party only then,
since parties share its one working model.

A trainer owns ``job.model`` (it sets it before the local training starts) and calls
:func:`start_local` exactly once per job; ``end_local`` is the round loop's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from federated.algorithms.base import Algorithm, LocalJob
from federated.algorithms.party_own_state import PartyOwnState
from federated.data import Augmenter
from federated.execution.batch_plan import PartyBatches
from federated.heterogeneity.feature_skew import FeatureSkew
from federated.models import FedConModel
from federated.runtime.precision import FLOAT32, Precision
from federated.sgd_rule import SgdRule


@dataclass(frozen=True)
class PartyResult:
    """What one local training produced."""

    losses: dict[str, float]  # mean over the steps where each part was computed
    samples: int  # samples trained on, counted once per epoch
    steps: int

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in self.losses.values())


@dataclass(frozen=True)
class TrainingSetup:
    """What every execution path trains with, the same for all of a run's rounds."""

    algorithm: Algorithm
    own: PartyOwnState  # what each party keeps (loaded at start_local)
    global_model: FedConModel  # the round's global model (weights change per round)
    augmenter: Augmenter
    rule: SgdRule
    images: torch.Tensor  # the run's laid-out uint8 training images: the plan's rows
    labels: torch.Tensor
    skew: FeatureSkew | None = None  # feature skew; trainers add its noise per step
    #: the context every step's forward pass and loss run in (bf16 autocast or none)
    precision: Precision = FLOAT32

    @property
    def noise(self) -> FeatureSkew | None:
        """The skew when it adds noise per step (a rotation is in the batch plan)."""
        return self.skew if self.skew is not None and self.skew.adds_noise else None


class LocalTrainer(Protocol):
    """One execution path's local training of a round's drawn parties."""

    #: core-seconds the last round's training ran on idle cores beyond its wall time
    #: (packs side by side, :mod:`federated.execution.packed`; 0.0 on every other path)
    spare_core_seconds: float
    #: the path's name, as a row records it (``execution_path``)
    path: str

    def train(
        self, jobs: Sequence[LocalJob], plan: Sequence[PartyBatches]
    ) -> Iterator[tuple[LocalJob, PartyResult]]:
        """Train ``jobs[i]`` on ``plan[i]``; yield each in the drawn (given) order."""
        ...


def start_local(
    job: LocalJob, global_state: Mapping[str, torch.Tensor], setup: TrainingSetup
) -> None:
    """The start of every local training: the round's global weights into the party's
    model (``job.model``, set by the trainer), the party's own state over them (its kept
    entries, its personal model: ``setup.own``), then the method's ``begin_local``."""
    job.model.load_state_dict(global_state)
    job.personal = setup.own.start(job.model, job.global_model, job.state, setup.rule, job.device)
    setup.algorithm.begin_local(job)
