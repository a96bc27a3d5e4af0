"""Which parties a round draws (``party_sampling``, docs/architecture.md "The round").

``fixed``: ``m = parties_per_round`` of the N parties, a uniformly random subset drawn
without replacement from the run's ``sampling`` stream (checkpointed with the run).
``poisson``: each party independently with probability ``q = m/N``, so the cohort's size
varies around m (possibly 0) — DP-FedAvg's sampling (McMahan et al. 2018).  The Poisson
draw is a function of the seed and the round alone (a generator keyed by both), so a
resumed run draws the same cohorts with no state to carry.
"""

from __future__ import annotations

import numpy as np

from federated.runtime.seeding import STREAMS


def poisson_cohort(seed: int, round_index: int, n_parties: int, rate: float) -> list[int]:
    """The parties (sorted) of round ``round_index`` (0-based) under Poisson sampling at
    ``rate`` (probability per party and round) in a run of seed ``seed``."""
    key = np.random.SeedSequence([seed, STREAMS["sampling"], round_index])
    chosen = np.random.default_rng(key).random(n_parties) < rate
    return [int(i) for i in np.flatnonzero(chosen)]


def draw_parties(
    sampling: str,
    seed: int,
    round_index: int,
    n_parties: int,
    per_round: int,
    stream: np.random.Generator,
) -> list[int]:
    """Round ``round_index``'s parties, sorted: ``per_round`` of ``n_parties`` under
    ``sampling`` (fixed: drawn from ``stream``; poisson: each with probability
    ``per_round / n_parties``); all of them where ``per_round >= n_parties``."""
    if per_round >= n_parties:
        return list(range(n_parties))
    if sampling == "poisson":
        return poisson_cohort(seed, round_index, n_parties, per_round / n_parties)
    return sorted(int(i) for i in stream.choice(n_parties, size=per_round, replace=False))
