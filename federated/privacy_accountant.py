"""Client-level privacy accounting for DP-FedAvg (docs/privacy.md), through Google's
maintained ``dp-accounting`` library (its Rényi-DP accountant); torch-free.

**The sampling it is matched to.**  fedsweep draws each round's parties as a uniformly
random subset of fixed size ``m = parties_per_round`` out of the ``N`` parties, without
replacement (``FederatedRun.draw_parties``: ``numpy``'s ``choice(N, m, replace=False)``;
all N when ``m >= N``).  That is ``dp_accounting``'s
``SampledWithoutReplacementDpEvent(N, m, ...)``, whose Rényi bound (Wang, Balle and
Kasiviswanathan, AISTATS 2019, "Subsampled Rényi Differential Privacy and Analytical
Moments Accountant", Theorem 27) holds for the *replace-one* neighbouring relation: two
federations are neighbours when one party's data is replaced by anything else, N being
public.  Not the Poisson approximation Flower and TFF account with (``q = m/N`` with
``PoissonSampledDpEvent``, valid for add-or-remove neighbours and Poisson sampling, not
for fixed-size cohorts like fedsweep's).

**Sensitivity.**  Under replace-one, swapping one party's clipped update (norm <= C) for
another moves the sum of clipped updates by up to 2C, so a Gaussian noise of standard
deviation ``sigma * C`` on the sum is a Gaussian mechanism of noise multiplier
``sigma / 2`` in ``dp_accounting``'s terms (its multiplier is the noise's standard
deviation over the L2 sensitivity, see ``_compute_rdp_sample_wor_gaussian``).  Adaptive
clipping's noised clipped count costs nothing extra: the update noise is lowered so that
the two releases together are this one multiplier (:func:`update_noise_multiplier`).

**Rounds.**  Every round is one such event; R rounds compose to R times one round's
Rényi divergence at every order, so ``epsilon(R)`` converts ``R · rdp_1`` to
(epsilon, delta) with ``dp_accounting.rdp.compute_epsilon`` — the very arithmetic of
``RdpAccountant.compose(event, R).get_epsilon(delta)``, with one round's Rényi values
computed once per (N, m, sigma).  So the accountant's state is the round count and these
parameters: a resumed run recomputes the same epsilon from the count.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    # imported where used: dp_accounting takes about a second to import (SciPy, its PLD
    # accountant), which every config check would otherwise pay, private runs or not
    from dp_accounting import (
        DpEvent,
        NeighboringRelation,
        SampledWithoutReplacementDpEvent,
    )
    from dp_accounting.rdp import RdpAccountant

#: Largest noise multiplier fedsweep accepts or solves for: at sigma = 1000 the noise on
#: the mean is a thousand clip norms per expected party, which no training survives; a
#: target epsilon that needs more is refused rather than met by a run that learns nothing
MAX_NOISE_MULTIPLIER = 1e3
#: How close (relative) the noise solved from a target epsilon is to the smallest that
#: meets it: the solved sigma always meets the target, and is at most this much larger
SOLVE_TOLERANCE = 1e-3
#: delta's default exponent: delta = 1 / N^1.1, a little below the 1/N at which an
#: (epsilon, delta) guarantee allows releasing one party's data outright
DEFAULT_DELTA_EXPONENT = 1.1


#: Adaptive clipping's settings (Andrew, Thakkar, McMahan, Ramaswamy, "Differentially
#: Private Learning with Adaptive Clipping", NeurIPS 2021): the first round's clip norm
#: where the user gives none, and the learning rate of its geometric update
#: C <- C · exp(-lr · (b - quantile)); the paper's and Flower's/TFF's defaults
ADAPTIVE_INITIAL_CLIP_NORM = 0.1
ADAPTIVE_CLIP_LR = 0.2
#: the noised clipped count's standard deviation per expected party (the paper's
#: recommendation, sigma_b = m / 20, also TFF's and Flower's default)
CLIPPED_COUNT_STD_PER_PARTY = 1.0 / 20.0


def clipped_count_std(per_round: int) -> float:
    """sigma_b: the standard deviation of the noise on the sum of the parties' clipped
    indicators (each in {-1/2, +1/2}) under adaptive clipping, for ``per_round`` expected
    parties (units: parties)."""
    return CLIPPED_COUNT_STD_PER_PARTY * per_round


def update_noise_multiplier(noise_multiplier: float, per_round: int, adaptive: bool) -> float:
    """The multiplier of the noise on the sum of clipped updates (its standard deviation
    over the clip norm).  Fixed clipping: ``noise_multiplier`` itself.  Adaptive
    clipping also releases a noised count, so the update noise is lowered to
    ``z = (sigma^-2 - (2 sigma_b)^-2)^-1/2`` (Andrew et al. 2021's split): the two
    releases together are one Gaussian mechanism of multiplier ``sigma`` — under
    replace-one the sum of updates has sensitivity 2C and the centred count 1, and
    ``(z/2)^-2 + sigma_b^-2 = (sigma/2)^-2`` — which is what the accountant charges.
    NaN where ``sigma >= 2 sigma_b`` (the count alone would spend more than ``sigma``
    allows; the config refuses it)."""
    if not adaptive or noise_multiplier == 0:
        return noise_multiplier
    count = 2.0 * clipped_count_std(per_round)
    if noise_multiplier >= count:
        return math.nan
    return (noise_multiplier**-2 - count**-2) ** -0.5


def default_delta(n_parties: int) -> float:
    """delta = 1 / N^1.1 for N parties (unitless probability)."""
    return float(n_parties) ** -DEFAULT_DELTA_EXPONENT


def accountant_multiplier(noise_multiplier: float) -> float:
    """The Gaussian mechanism's multiplier in ``dp_accounting``'s terms: the run's
    ``sigma`` (noise standard deviation over the clip norm C) over the replace-one
    sensitivity 2C of the sum, i.e. ``sigma / 2``."""
    return noise_multiplier / 2.0


def round_event(
    n_parties: int, per_round: int, noise_multiplier: float
) -> SampledWithoutReplacementDpEvent:
    """One round of DP-FedAvg as a ``dp_accounting`` event: ``per_round`` of
    ``n_parties`` drawn without replacement, then the Gaussian sum of their clipped
    updates with noise ``noise_multiplier * C``."""
    from dp_accounting import GaussianDpEvent, SampledWithoutReplacementDpEvent

    return SampledWithoutReplacementDpEvent(
        source_dataset_size=n_parties,
        sample_size=min(per_round, n_parties),
        event=GaussianDpEvent(accountant_multiplier(noise_multiplier)),
    )


def new_accountant(relation: NeighboringRelation | None = None) -> RdpAccountant:
    """``dp_accounting``'s Rényi accountant with its default orders, for ``relation``
    (default: replace-one, which fedsweep's fixed-size sampling needs)."""
    from dp_accounting import NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

    if relation is None:
        relation = NeighboringRelation.REPLACE_ONE
    return RdpAccountant(neighboring_relation=relation)


@functools.cache
def _round_rdp(event: DpEvent, relation: NeighboringRelation | None) -> tuple[float, ...]:
    """One round's Rényi divergence at each of the accountant's orders (cached: the
    solve below and every round of a run read it)."""
    accountant = new_accountant(relation)
    accountant.compose(event)
    return tuple(float(v) for v in accountant.rdp)


def composed_epsilon(
    event: DpEvent,
    rounds: int,
    delta: float,
    relation: NeighboringRelation | None = None,
) -> float:
    """epsilon at ``delta`` of ``rounds`` repetitions of ``event`` under ``relation``
    (default replace-one): ``rounds`` times one round's Rényi divergence, converted by
    ``dp_accounting.rdp.compute_epsilon`` — what ``RdpAccountant.compose(event,
    rounds).get_epsilon(delta)`` computes, with one round's divergence cached."""
    from dp_accounting.rdp import compute_epsilon

    if rounds <= 0:
        return 0.0
    rdp = rounds * np.asarray(_round_rdp(event, relation))
    epsilon, _ = compute_epsilon(new_accountant(relation).orders, rdp, delta)
    return float(epsilon)


def epsilon_after(
    rounds: int, n_parties: int, per_round: int, noise_multiplier: float, delta: float
) -> float:
    """epsilon of ``rounds`` rounds of fedsweep's DP-FedAvg (0 rounds: 0.0; no noise:
    inf), at ``delta``."""
    if rounds <= 0:
        return 0.0
    if noise_multiplier <= 0:
        return math.inf
    return composed_epsilon(round_event(n_parties, per_round, noise_multiplier), rounds, delta)


@functools.cache
def noise_for_epsilon(
    target_epsilon: float, delta: float, rounds: int, n_parties: int, per_round: int
) -> float | None:
    """The noise multiplier sigma whose ``rounds`` rounds spend at most
    ``target_epsilon`` at ``delta``: bisection on log sigma, to within
    :data:`SOLVE_TOLERANCE` of the smallest such sigma (epsilon falls as sigma grows);
    None when even :data:`MAX_NOISE_MULTIPLIER` does not meet it.  Deterministic: the
    same arguments give the same sigma on every machine and at every resume."""

    def meets(sigma: float) -> bool:
        return epsilon_after(rounds, n_parties, per_round, sigma, delta) <= target_epsilon

    if not meets(MAX_NOISE_MULTIPLIER):
        return None
    # a bracket [low, high], high meeting the target and low not, by doubling or halving
    # from sigma = 1 (the solved sigma of most runs lies within a few factors of it)
    low, high = 1.0, 1.0
    if meets(high):
        while meets(low):
            if low < 1e-6:  # any noise meets a target this loose
                return low
            high, low = low, low / 2.0
    else:
        while not meets(high):
            low, high = high, min(2.0 * high, MAX_NOISE_MULTIPLIER)
    while high / low > 1.0 + SOLVE_TOLERANCE:
        middle = math.sqrt(low * high)
        if meets(middle):
            high = middle
        else:
            low = middle
    return high
