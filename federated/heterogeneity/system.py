"""System heterogeneity: parties that cannot do all their local work, or never report.

Each round, after the parties are drawn and their batch plans are drawn in full
(:mod:`federated.execution.batch_plan`, so no other party's batches change), the run's
``system`` stream decides, in this order and only for the settings that are on:

1. **dropout** — each drawn party independently never reports, with probability
   ``dropout`` (a phone that went offline): it does not train and is not aggregated;
2. **per-party work** (FedNova's setting) — with ``local_epochs_min`` set, each drawn
   party runs ``E_i ~ U{local_epochs_min, ..., local_epochs}`` epochs: the first ``E_i``
   epochs of its plan;
3. **stragglers** (FedProx's setting) — ``round(k · straggler_fraction)`` of the ``k``
   drawn parties, chosen uniformly, do a uniform number of local steps in ``[1, S_i]``
   (``S_i`` their step count after 2.): the first steps of their plan.  Under
   ``straggler_policy=partial`` their partial work is aggregated like any other; under
   ``drop`` they are not aggregated (and not trained, since nothing would read it).

Aggregation weights are ``|D_i| / Σ|D_j|`` over the parties that report, for every
policy.  A round where nobody reports leaves the global model as it was.  Methods see
the work actually done: a contribution's ``steps`` is the steps its party took, which is
what FedNova normalises by and SCAFFOLD's control update divides by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class RoundWork:
    """Who of a round's drawn parties trains and reports, and how much each does."""

    reporting: list[int]  # parties that train and report, in the drawn order
    step_limit: dict[int, int] = field(default_factory=dict)  # party -> its steps, if cut
    stragglers: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)  # never reported (dropout)

    @classmethod
    def everyone(cls, drawn: Sequence[int]) -> RoundWork:
        return cls(reporting=list(drawn))


def has_system_heterogeneity(config) -> bool:
    """Whether the config asks for any of the three (and so draws from ``system``)."""
    return bool(
        config.dropout > 0 or config.straggler_fraction > 0 or config.local_epochs_min is not None
    )


def draw_round_work(
    drawn: Sequence[int],
    full_steps: Sequence[int],
    steps_per_epoch: Sequence[int],
    config,
    rng: np.random.Generator,
) -> RoundWork:
    """This round's work for the ``drawn`` parties (``full_steps[j]``,
    ``steps_per_epoch[j]``: party ``drawn[j]``'s plan); draws from ``rng`` only for the
    settings that are on, a fixed number of draws per round for a given draw size."""
    if not has_system_heterogeneity(config):
        return RoundWork.everyone(drawn)
    k = len(drawn)
    dropped: set[int] = set()
    if config.dropout > 0:
        coins = rng.random(k)
        dropped = {p for p, coin in zip(drawn, coins) if coin < config.dropout}
    full = {p: int(s) for p, s in zip(drawn, full_steps)}
    limit = dict(full)  # each party's steps after the draws below
    if config.local_epochs_min is not None:
        epochs = rng.integers(config.local_epochs_min, config.local_epochs + 1, size=k)
        for p, e, per_epoch in zip(drawn, epochs, steps_per_epoch):
            limit[p] = int(e) * int(per_epoch)
    stragglers: list[int] = []
    if config.straggler_fraction > 0:
        count = round(k * config.straggler_fraction)
        chosen = rng.choice(k, size=count, replace=False) if count else np.array([], int)
        stragglers = sorted(drawn[int(j)] for j in chosen)
        for p in stragglers:
            limit[p] = int(rng.integers(1, limit[p] + 1))
    skipped = dropped | (set(stragglers) if config.straggler_policy == "drop" else set())
    reporting = [p for p in drawn if p not in skipped]
    cut = {p: s for p, s in limit.items() if p in reporting and s < full[p]}
    return RoundWork(reporting, cut, stragglers, sorted(dropped))
