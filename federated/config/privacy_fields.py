"""The client-level differential-privacy fields of a run (``dp_*``, docs/privacy.md):
their defaults and every check of them, in one place.

:func:`check_privacy` is called once, from :func:`federated.config.checks.validate`, and
raises :class:`ConfigError` with one line naming the field: a negative or absurd noise,
a clip norm <= 0, epsilon <= 0, delta outside (0, 1/n_parties), an accountant the
party sampling does not allow, noise without clipping,
both a noise multiplier and a target epsilon, a target the planned rounds cannot meet
with a noise multiplier up to :data:`~federated.privacy_accountant.MAX_NOISE_MULTIPLIER`,
adaptive clipping whose noise the clipped count alone would exceed, and a method whose
uploads DP-FedAvg would leave unprotected (``Algorithm.dp_obstacle``, a declaration).
:func:`privacy_defaults` is the part of resolution that completes them: delta =
min(1e-5, 1/(10 N)) and adaptive clipping's first norm 0.1, only where the run uses
them; :func:`run_accountant` is the accountant (unset: PLD under Poisson sampling and
under record-level DP-SGD, RDP under fixed-size).

The config reaches these functions as a plain object (``Any``), as in
:mod:`federated.config.checks`.
"""

from __future__ import annotations

from typing import Any

from federated.params import ConfigError, one_of, positive
from federated.privacy_accountant import (
    ACCOUNTANTS,
    ADAPTIVE_INITIAL_CLIP_NORM,
    MAX_NOISE_MULTIPLIER,
    RECORD_ACCOUNTANTS,
    clipped_count_std,
    default_delta,
    epsilon_after,
    noise_for_epsilon,
)
from federated.registry import load_method

DP_CLIPPINGS = ("fixed", "adaptive")
DP_LEVELS = ("party", "record")


def clipping_on(c: Any) -> bool:
    """Whether each party's update is clipped (a clip norm given, or adaptive clipping)."""
    return c.dp_clip_norm is not None or c.dp_clipping == "adaptive"


def noise_on(c: Any) -> bool:
    """Whether Gaussian noise is added (a noise multiplier > 0 or a target epsilon)."""
    return c.dp_noise_multiplier > 0 or c.dp_target_epsilon is not None


def record_level(c: Any) -> bool:
    """Whether DP-SGD inside each party protects each record (``dp_level=record``)."""
    return c.dp_level == "record"


def privacy_on(c: Any) -> bool:
    """Whether DP-FedAvg's rule replaces the method's aggregation (clipping, noise or
    both, at the party level)."""
    return not record_level(c) and (clipping_on(c) or noise_on(c))


def privacy_defaults(c: Any) -> dict[str, Any]:
    """``dp_delta`` and ``dp_clip_norm`` completed where the run uses them and the user
    left them None (``c`` has its parties counted): delta = min(1e-5, 1/(10 N)) under
    noise, the first clip norm 0.1 under adaptive clipping; otherwise as written.
    ``dp_accountant`` stays None where unset (:func:`run_accountant` reads the
    sampling's default), so checkpoints made before the field compare equal."""
    delta = c.dp_delta
    if delta is None and noise_on(c):
        delta = default_delta(c.n_parties)
    clip = c.dp_clip_norm
    if clip is None and c.dp_clipping == "adaptive":
        clip = ADAPTIVE_INITIAL_CLIP_NORM
    return {"dp_delta": delta, "dp_clip_norm": clip}


def run_accountant(c: Any) -> str:
    """The accountant of ``c``: the one given, else PLD under record-level DP-SGD
    (Poisson batches) and its party sampling's default under DP-FedAvg."""
    if c.dp_accountant is not None:
        return str(c.dp_accountant)
    if record_level(c):
        return RECORD_ACCOUNTANTS[0]
    return ACCOUNTANTS[c.party_sampling][0]


def run_noise_multiplier(c: Any) -> float:
    """The noise multiplier sigma the run adds (unitless: noise std over the clip norm):
    the one given, or the one solved from ``dp_target_epsilon`` (the same on every call
    and every machine; NaN if unmet, which :func:`check_privacy` refuses first)."""
    if c.dp_target_epsilon is None:
        return float(c.dp_noise_multiplier)
    delta = c.dp_delta if c.dp_delta is not None else default_delta(c.n_parties)
    sigma = noise_for_epsilon(
        float(c.dp_target_epsilon),
        float(delta),
        c.rounds,
        c.n_parties,
        c.parties_per_round,
        c.party_sampling,
        run_accountant(c),
    )
    return float("nan") if sigma is None else sigma


def planned_epsilon(c: Any) -> tuple[float, float] | None:
    """(ε, δ): the client-level ε all of ``c.rounds`` planned rounds spend at the run's δ
    (inf: clipping without noise), as the run's accountant will count it; None for a run
    without party-level DP, and for record-level DP, whose ε depends on each party's
    record count (known once the data is loaded)."""
    if not privacy_on(c):
        return None
    delta = float(c.dp_delta if c.dp_delta is not None else default_delta(c.n_parties))
    epsilon = epsilon_after(
        c.rounds, c.n_parties, c.parties_per_round, run_noise_multiplier(c), delta,
        c.party_sampling, run_accountant(c),
    )  # fmt: skip
    return epsilon, delta


def check_privacy(c: Any) -> None:
    """Raise :class:`ConfigError` naming the first ``dp_*`` field of ``c`` (parties
    counted, rounds checked) whose value is not allowed; nothing when DP is off and its
    fields hold their defaults."""
    one_of("dp_clipping", c.dp_clipping, DP_CLIPPINGS)
    one_of("dp_level", c.dp_level, DP_LEVELS)
    if c.dp_accountant is not None and not record_level(c):
        allowed = ACCOUNTANTS[c.party_sampling]
        if c.dp_accountant not in allowed:
            raise ConfigError(
                "dp_accountant",
                c.dp_accountant,
                f"{' or '.join(allowed)} with party_sampling={c.party_sampling} "
                "(dp_accounting's PLD accountant composes Poisson-sampled rounds, not "
                "fixed-size draws: set party_sampling=poisson for pld)",
            )
    if not c.dp_noise_multiplier >= 0:
        raise ConfigError("dp_noise_multiplier", c.dp_noise_multiplier, "a number >= 0 (0: none)")
    if c.dp_noise_multiplier > MAX_NOISE_MULTIPLIER:
        raise ConfigError(
            "dp_noise_multiplier",
            c.dp_noise_multiplier,
            f"at most {MAX_NOISE_MULTIPLIER:g} (fedsweep's limit: noise this large leaves "
            "nothing of the updates)",
        )
    if c.dp_clip_norm is not None:
        positive("dp_clip_norm", c.dp_clip_norm)
    if not 0 < c.dp_clip_quantile < 1:
        raise ConfigError("dp_clip_quantile", c.dp_clip_quantile, "a number in (0, 1)")
    if c.dp_target_epsilon is not None:
        positive("dp_target_epsilon", c.dp_target_epsilon)
        if c.dp_noise_multiplier > 0:
            raise ConfigError(
                "dp_target_epsilon",
                c.dp_target_epsilon,
                f"unset when dp_noise_multiplier={c.dp_noise_multiplier:g} is given (the "
                "noise is solved from a target epsilon: give one of the two)",
            )
    limit = 1.0 / c.n_parties
    if c.dp_delta is not None and not 0 < c.dp_delta < limit:
        raise ConfigError(
            "dp_delta",
            c.dp_delta,
            f"a number in (0, 1/n_parties={limit:.4g}): a delta of 1/N or more allows "
            "releasing one party's data outright",
        )
    if record_level(c):
        _check_record_level(c)
        return
    if not privacy_on(c):
        return
    if noise_on(c) and not clipping_on(c):
        name = "dp_noise_multiplier" if c.dp_target_epsilon is None else "dp_target_epsilon"
        raise ConfigError(
            name,
            getattr(c, name),
            "0/unset without clipping (noise calibrates to a clip norm: set dp_clip_norm "
            "or dp_clipping=adaptive)",
        )
    _check_method(c)
    if noise_on(c):
        _check_noise(c)


def _check_record_level(c: Any) -> None:
    """DP-SGD inside each party: a clip norm and a noise multiplier given (no target
    epsilon, fixed clipping, the PLD or RDP accountant), and a method whose local objective is
    the supervised loss alone (``Algorithm.per_sample_objective``, a declaration)."""
    needs = "under dp_level=record"
    if c.dp_clip_norm is None:
        raise ConfigError("dp_clip_norm", None, f"a per-sample clip norm > 0 {needs}")
    if c.dp_target_epsilon is not None:
        raise ConfigError(
            "dp_target_epsilon", c.dp_target_epsilon, f"unset {needs} (give dp_noise_multiplier)"
        )
    if not c.dp_noise_multiplier > 0:
        raise ConfigError("dp_noise_multiplier", c.dp_noise_multiplier, f"a number > 0 {needs}")
    one_of("dp_clipping", c.dp_clipping, ("fixed",))
    if c.dp_accountant is not None:
        one_of("dp_accountant", c.dp_accountant, RECORD_ACCOUNTANTS)
    if not load_method("algorithm", c.algorithm).per_sample_objective:
        raise ConfigError(
            "algorithm",
            c.algorithm,
            f"a method whose local objective is the supervised loss alone (fedavg) {needs}: "
            f"{c.algorithm}'s objective has no per-sample gradient DP-SGD can clip",
        )


def _check_method(c: Any) -> None:
    """The algorithm sends the server nothing DP-FedAvg leaves unclipped (its
    declaration, ``Algorithm.dp_obstacle``)."""
    obstacle = load_method("algorithm", c.algorithm).dp_obstacle
    if obstacle is not None:
        raise ConfigError(
            "algorithm",
            c.algorithm,
            f"a method DP-FedAvg can protect (fedavg, fedprox, moon, ...): {c.algorithm} "
            f"{obstacle}",
        )


def _check_noise(c: Any) -> None:
    """A target epsilon the planned rounds can meet, and adaptive clipping's split of
    the noise possible."""
    sigma = run_noise_multiplier(c)
    if sigma != sigma:  # NaN: not met even at the largest noise
        raise ConfigError(
            "dp_target_epsilon",
            c.dp_target_epsilon,
            f"an epsilon {c.rounds} rounds of {c.parties_per_round} of {c.n_parties} "
            f"parties can meet with a noise multiplier <= {MAX_NOISE_MULTIPLIER:g} "
            "(a larger target, fewer rounds or more parties)",
        )
    if c.dp_clipping == "adaptive":
        count = 2.0 * clipped_count_std(c.parties_per_round)
        if sigma >= count:
            name = "dp_noise_multiplier" if c.dp_target_epsilon is None else "dp_target_epsilon"
            raise ConfigError(
                name,
                getattr(c, name),
                f"a noise multiplier < {count:g} under adaptive clipping with "
                f"{c.parties_per_round} parties a round (the clipped count's own noise, "
                f"{count / 2:g}, would spend it all; this gives sigma={sigma:.4g}): fixed "
                "clipping, more parties a round, or less noise",
            )
