"""Client-level privacy accounting for DP-FedAvg (docs/privacy.md), through Google's
maintained ``dp-accounting`` library; torch-free.  A run's accounting is an
:class:`Accounting`: how its parties are drawn (``party_sampling``), hence the
neighbouring relation the guarantee holds for, and the accountant (``dp_accountant``).

**Fixed-size sampling** (``party_sampling=fixed``, the default): each round's parties
are a uniformly random subset of fixed size ``m = parties_per_round`` out of the ``N``
parties, drawn without replacement (all N when ``m >= N``).  That is ``dp_accounting``'s
``SampledWithoutReplacementDpEvent(N, m, ...)``, whose Rényi bound (Wang, Balle and
Kasiviswanathan, AISTATS 2019, Theorem 27) holds for the *replace-one* neighbouring
relation: two federations are neighbours when one party's data is replaced by anything
else, N being public.  Only the Rényi-DP accountant (``rdp``) is offered: the PLD
accountant of ``dp_accounting`` does not compose this event.

**Poisson sampling** (``party_sampling=poisson``): each party takes part in a round
independently with probability ``q = m/N`` — how DP-FedAvg (McMahan et al. 2018), TFF
and Opacus state epsilon.  ``PoissonSampledDpEvent(q, ...)`` under *add-or-remove-one*
neighbours (one party's data present or absent), accounted by the privacy-loss
distribution accountant (``pld``, the default there: tighter) or the Rényi one.

**Sensitivity.**  Each party's clipped update has norm <= C.  Under replace-one,
swapping one moves the sum by up to 2C, so noise of standard deviation ``sigma * C`` on
the sum is a Gaussian mechanism of multiplier ``sigma / 2`` in ``dp_accounting``'s terms
(its multiplier is the noise's standard deviation over the L2 sensitivity); under
add-or-remove one party moves it by C: multiplier ``sigma``.  Adaptive clipping's noised
clipped count costs nothing extra: the update noise is lowered so that the two releases
together are this one multiplier (:func:`update_noise_multiplier`; the split is the same
under both relations).

**Rounds.**  Every round is one such event.  RDP: R rounds compose to R times one
round's Rényi divergence at every order, converted to (epsilon, delta) with
``dp_accounting.rdp.compute_epsilon`` — the arithmetic of
``RdpAccountant.compose(event, R).get_epsilon(delta)`` with one round's divergence
computed once.  PLD: ``PLDAccountant.compose(event, R).get_epsilon(delta)`` with a
discretisation of :data:`PLD_DISCRETIZATION` (pessimistic: an upper bound).  So the
accountant's state is the round count and these parameters: a resumed run recomputes the
same epsilon from the count.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    # imported where used: dp_accounting takes about a second to import (SciPy, its PLD
    # accountant), which every config check would otherwise pay, private runs or not
    from dp_accounting import DpEvent, NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

#: Largest noise multiplier fedsweep accepts or solves for: at sigma = 1000 the noise on
#: the mean is a thousand clip norms per expected party, which no training survives; a
#: target epsilon that needs more is refused rather than met by a run that learns nothing
MAX_NOISE_MULTIPLIER = 1e3
#: How close (relative) the noise solved from a target epsilon is to the smallest that
#: meets it: the solved sigma always meets the target, and is at most this much larger
SOLVE_TOLERANCE = 1e-3
#: delta's default where the user gives none: 1e-5 (the value most DP papers state, Abadi
#: et al. 2016 on) or 1/(10 N) for N > 10,000 parties, whichever is smaller; delta >= 1/N
#: is refused and delta > 1/(10 N) warned about (docs/privacy.md, "delta")
DEFAULT_DELTA = 1e-5
#: delta above 1/(DELTA_WARNING_FACTOR · N) is warned about
DELTA_WARNING_FACTOR = 10
#: how parties are drawn each round, and the accountants each allows (first: default)
SAMPLINGS = ("fixed", "poisson")
ACCOUNTANTS = {"fixed": ("rdp",), "poisson": ("pld", "rdp")}
#: the neighbouring relation each sampling's guarantee holds for (docs/privacy.md)
NEIGHBOURS = {"fixed": "replace-one", "poisson": "add-remove"}
#: the PLD accountant's discretisation of the privacy loss: 10x coarser than
#: dp_accounting's default 1e-4, ten times faster, and epsilon within 0.1 % of it on the
#: docs' cases (a pessimistic discretisation: still an upper bound)
PLD_DISCRETIZATION = 1e-3


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
    """delta = min(1e-5, 1/(10 N)) for N parties (unitless probability)."""
    return min(DEFAULT_DELTA, 1.0 / (DELTA_WARNING_FACTOR * float(n_parties)))


def accountant_multiplier(noise_multiplier: float, sampling: str = "fixed") -> float:
    """The Gaussian mechanism's multiplier in ``dp_accounting``'s terms: the run's
    ``sigma`` (noise standard deviation over the clip norm C) over the sum's
    sensitivity, 2C under replace-one (fixed sampling), C under add-or-remove
    (Poisson)."""
    return noise_multiplier / 2.0 if NEIGHBOURS[sampling] == "replace-one" else noise_multiplier


@dataclass(frozen=True)
class Accounting:
    """What a run's epsilon is computed from besides sigma, delta and the round count:
    ``n_parties`` N, ``per_round`` m (the expected cohort), the ``sampling`` and the
    ``accountant``; ``ValueError`` on a pair :data:`ACCOUNTANTS` does not allow."""

    n_parties: int
    per_round: int
    sampling: str = "fixed"
    accountant: str = "rdp"

    def __post_init__(self) -> None:
        allowed = ACCOUNTANTS.get(self.sampling)
        if allowed is None or self.accountant not in allowed:
            raise ValueError(
                f"dp_accountant={self.accountant} with party_sampling={self.sampling}: "
                f"allowed {allowed}"
            )

    @property
    def neighbours(self) -> str:
        """The neighbouring relation the guarantee holds for (replace-one, add-remove)."""
        return NEIGHBOURS[self.sampling]

    def relation(self) -> NeighboringRelation:
        from dp_accounting import NeighboringRelation

        if self.neighbours == "replace-one":
            return NeighboringRelation.REPLACE_ONE
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    def event(self, noise_multiplier: float) -> DpEvent:
        """One round as a ``dp_accounting`` event: the Gaussian sum of the drawn parties'
        clipped updates with noise ``noise_multiplier * C``, after the draw."""
        from dp_accounting import (
            GaussianDpEvent,
            PoissonSampledDpEvent,
            SampledWithoutReplacementDpEvent,
        )

        gaussian = GaussianDpEvent(accountant_multiplier(noise_multiplier, self.sampling))
        if self.sampling == "poisson":
            return PoissonSampledDpEvent(min(1.0, self.per_round / self.n_parties), gaussian)
        return SampledWithoutReplacementDpEvent(
            source_dataset_size=self.n_parties,
            sample_size=min(self.per_round, self.n_parties),
            event=gaussian,
        )

    def epsilon(self, rounds: int, noise_multiplier: float, delta: float) -> float:
        """epsilon of ``rounds`` rounds at ``delta`` (0 rounds: 0.0; no noise: inf)."""
        if rounds <= 0:
            return 0.0
        if noise_multiplier <= 0:
            return math.inf
        event = self.event(noise_multiplier)
        if self.accountant == "pld":
            return _pld_epsilon(event, rounds, delta)
        return composed_epsilon(event, rounds, delta, self.relation())


def round_event(n_parties: int, per_round: int, noise_multiplier: float) -> DpEvent:
    """One round of fixed-size DP-FedAvg as a ``dp_accounting`` event
    (:meth:`Accounting.event`)."""
    return Accounting(n_parties, per_round).event(noise_multiplier)


def new_accountant(relation: NeighboringRelation | None = None) -> RdpAccountant:
    """``dp_accounting``'s Rényi accountant with its default orders, for ``relation``
    (default: replace-one, which fedsweep's fixed-size sampling needs)."""
    from dp_accounting import NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

    if relation is None:
        relation = NeighboringRelation.REPLACE_ONE
    return RdpAccountant(neighboring_relation=relation)


@contextmanager
def _quiet_absl() -> Iterator[None]:
    """dp_accounting logs through absl each fractional Rényi order whose series does not
    converge (it leaves that order out, as it says): not the user's concern."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@functools.cache
def _pld_epsilon(event: DpEvent, rounds: int, delta: float) -> float:
    """epsilon at ``delta`` of ``rounds`` compositions of a Poisson-sampled ``event`` by
    ``dp_accounting``'s PLD accountant under add-or-remove neighbours (cached: a run's
    rows and the solve ask again)."""
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant(
        NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=PLD_DISCRETIZATION
    )
    accountant.compose(event, rounds)
    return float(accountant.get_epsilon(delta))


@functools.cache
def _round_rdp(event: DpEvent, relation: NeighboringRelation | None) -> tuple[float, ...]:
    """One round's Rényi divergence at each of the accountant's orders (cached: the
    solve below and every round of a run read it)."""
    accountant = new_accountant(relation)
    with _quiet_absl():
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
    rounds: int,
    n_parties: int,
    per_round: int,
    noise_multiplier: float,
    delta: float,
    sampling: str = "fixed",
    accountant: str = "rdp",
) -> float:
    """epsilon of ``rounds`` rounds of fedsweep's DP-FedAvg (0 rounds: 0.0; no noise:
    inf), at ``delta``, for ``sampling`` accounted by ``accountant``."""
    accounting = Accounting(n_parties, per_round, sampling, accountant)
    return accounting.epsilon(rounds, noise_multiplier, delta)


#: the accountants record-level DP-SGD offers (first: default)
RECORD_ACCOUNTANTS = ("pld", "rdp")


def sampling_rate(batch: int, n_records: int) -> float:
    """q: the probability that a record joins a step's Poisson batch, for an expected
    ``batch`` records out of a party's ``n_records`` (1 where the batch holds them all)."""
    return min(1.0, batch / n_records)


@functools.cache
def record_epsilon(
    steps: int, rate: float, noise_multiplier: float, delta: float, accountant: str = "pld"
) -> float:
    """Record-level epsilon of one party after ``steps`` DP-SGD steps on Poisson batches
    (``dp_level=record``): each step keeps each of the party's records independently with
    probability ``rate`` = q and adds noise of std sigma·C to the sum of clipped
    per-sample gradients, so under add-or-remove-one-record neighbours a step is
    ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))`` (sensitivity C); the steps
    compose by ``dp_accounting``'s ``accountant`` (``pld``, discretisation
    :data:`PLD_DISCRETIZATION`, or ``rdp``).  0 steps: 0.0 (cached: every row asks)."""
    from dp_accounting import GaussianDpEvent, NeighboringRelation, PoissonSampledDpEvent

    if steps <= 0:
        return 0.0
    event = PoissonSampledDpEvent(rate, GaussianDpEvent(noise_multiplier))
    if accountant == "pld":
        return _pld_epsilon(event, steps, delta)
    return composed_epsilon(event, steps, delta, NeighboringRelation.ADD_OR_REMOVE_ONE)


@functools.cache
def noise_for_epsilon(
    target_epsilon: float,
    delta: float,
    rounds: int,
    n_parties: int,
    per_round: int,
    sampling: str = "fixed",
    accountant: str = "rdp",
) -> float | None:
    """The noise multiplier sigma whose ``rounds`` rounds spend at most
    ``target_epsilon`` at ``delta`` (for ``sampling`` and ``accountant``): bisection on
    log sigma, to within :data:`SOLVE_TOLERANCE` of the smallest such sigma (epsilon
    falls as sigma grows); None when even :data:`MAX_NOISE_MULTIPLIER` does not meet it.
    Deterministic: the same arguments give the same sigma on every machine and at every
    resume."""
    accounting = Accounting(n_parties, per_round, sampling, accountant)

    def meets(sigma: float) -> bool:
        return accounting.epsilon(rounds, sigma, delta) <= target_epsilon

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
