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
from federated.execution.batch_plan import PartyBatches


@dataclass(frozen=True)
class PartyResult:
    """What one local training produced."""

    losses: dict[str, float]  # mean over the steps where each part was computed
    samples: int  # samples trained on, counted once per epoch
    steps: int

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in self.losses.values())


class LocalTrainer(Protocol):
    """One execution path's local training of a round's drawn parties."""

    def train(
        self, jobs: Sequence[LocalJob], plan: Sequence[PartyBatches]
    ) -> Iterator[tuple[LocalJob, PartyResult]]:
        """Train ``jobs[i]`` on ``plan[i]``; yield each in the drawn (given) order."""
        ...


def start_local(
    job: LocalJob, global_state: Mapping[str, torch.Tensor], algorithm: Algorithm
) -> None:
    """The start of every local training: the round's global weights into the party's
    model (``job.model``, set by the trainer), then the method's ``begin_local``."""
    job.model.load_state_dict(global_state)
    algorithm.begin_local(job)
