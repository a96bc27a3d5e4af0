"""Client-level differential privacy: DP-FedAvg's server rule (McMahan, Ramage, Talwar
and Zhang, "Learning Differentially Private Recurrent Language Models", ICLR 2018), run
in place of a method's own aggregation (docs/privacy.md).

Each round, for each reporting party i, its update is its trained model's entries the
server reads minus the round's global ones, ``u_i = w_i - w``; then::

    u_i  <- u_i · min(1, C / ||u_i||)                 clipped to L2 norm C
    w'   <- w + (sum_i u_i + N(0, (z · C)² I)) / m      m = parties_per_round

the noise drawn from the run's own ``privacy`` stream (CPU, so the noise is the same on
every device, and a resumed run draws on exactly as the uninterrupted one), on every
floating-point entry the server reads at once.  The sum is divided by the expected
cohort ``m``, not by the parties that reported: a party's weight in the mean is 1/m
whatever its data size (FedAvg's |D_i| weights would let one party's influence exceed
C/m), and dropouts and stragglers under ``straggler_policy=drop`` shrink the step rather
than reveal how many reported.

``u_i`` covers every floating-point entry the server reads: the parameters, and
BatchNorm's running statistics under ``batchnorm=averaged``; never the entries a
party keeps (its method's ``own_state``, :mod:`federated.algorithms.party_own_state`:
FedPer's head, FedBN's BatchNorm layers, the statistics under ``batchnorm=local``), nor
integer counters (the server keeps the global model's values of both).  ``C`` is
``dp_clip_norm``, or follows adaptive clipping (Andrew, Thakkar, McMahan and
Ramaswamy, "Differentially Private Learning with Adaptive Clipping", NeurIPS 2021): each
reporting party also contributes ``b_i = 1[||u_i|| <= C] - 1/2``, the server releases
``b = (sum_i b_i + N(0, sigma_b²)) / m + 1/2``, the noised share of unclipped updates,
and sets ``C <- C · exp(-0.2 · (b - dp_clip_quantile))`` for the next round; the update
noise ``z`` is then lowered so both releases together cost the accountant's ``sigma``
(:func:`federated.privacy_accountant.update_noise_multiplier`).

:class:`ClientPrivacy` is the run's mechanism and accountant state (the clip norm, the
rounds accounted: checkpointed); :class:`PrivateMean` one round's aggregator.  Both the
packed and the sequential paths hand contributions to the aggregator in the round loop,
so both are clipped here, in one place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from federated.config.privacy_fields import (
    noise_on,
    privacy_on,
    run_accountant,
    run_noise_multiplier,
)
from federated.privacy_accountant import (
    ADAPTIVE_CLIP_LR,
    Accounting,
    clipped_count_std,
    update_noise_multiplier,
)
from federated.server.aggregation import Aggregator
from federated.server.contribution import Contribution

if TYPE_CHECKING:
    from federated.config.run_config import RunConfig


@dataclass(frozen=True)
class PrivacySettings:
    """A run's DP-FedAvg settings, resolved (units: norms in the model's weight units)."""

    noise_multiplier: float  # sigma: the noise the accountant charges, std over C (0: none)
    clip_norm: float  # C of the first round (the fixed C under fixed clipping)
    adaptive: bool  # adaptive clipping (Andrew et al. 2021)
    quantile: float  # adaptive clipping's target share of unclipped updates
    n_parties: int  # N
    per_round: int  # m, the parties drawn each round: the expected cohort
    delta: float | None  # the accountant's delta (None: no noise, no guarantee)
    sampling: str = "fixed"  # how parties are drawn: fixed or poisson
    accountant: str = "rdp"  # rdp or pld (privacy_accountant.ACCOUNTANTS)

    @classmethod
    def from_config(cls, config: RunConfig) -> PrivacySettings | None:
        """The settings of a resolved config; None when DP-FedAvg is off."""
        if not privacy_on(config):
            return None
        return cls(
            noise_multiplier=run_noise_multiplier(config) if noise_on(config) else 0.0,
            clip_norm=float(config.dp_clip_norm),
            adaptive=config.dp_clipping == "adaptive",
            quantile=float(config.dp_clip_quantile),
            n_parties=int(config.n_parties),
            per_round=int(config.parties_per_round),
            delta=None if config.dp_delta is None else float(config.dp_delta),
            sampling=config.party_sampling,
            accountant=run_accountant(config),
        )

    def accounting(self) -> dict[str, Any]:
        """What the accountant's epsilon depends on besides the round count."""
        return {
            "noise_multiplier": self.noise_multiplier,
            "delta": self.delta,
            "n_parties": self.n_parties,
            "per_round": self.per_round,
            "adaptive": self.adaptive,
            "sampling": self.sampling,
            "accountant": self.accountant,
        }

    def accounting_of(self) -> Accounting:
        """The accountant's view of the run (sampling, neighbours, accountant)."""
        return Accounting(self.n_parties, self.per_round, self.sampling, self.accountant)

    def epsilon_after(self, rounds: int) -> float:
        """epsilon spent by ``rounds`` rounds at the run's delta (unitless; inf without
        noise): what a run's rows say after each round and a sweep's dry run plans."""
        if self.delta is None:
            return math.inf
        return self.accounting_of().epsilon(rounds, self.noise_multiplier, self.delta)


#: the accounting of a checkpoint written before party sampling was a setting
BEFORE_SAMPLING = {"sampling": "fixed", "accountant": "rdp"}


class ClientPrivacy:
    """DP-FedAvg's state across rounds: the clip norm (adaptive clipping moves it) and
    the rounds accounted; makes each round's :class:`PrivateMean`."""

    def __init__(self, settings: PrivacySettings, generator: torch.Generator) -> None:
        self.settings = settings
        self.generator = generator  # the run's ``privacy`` stream (CPU)
        self.clip_norm = settings.clip_norm  # the next round's C
        self.round_clip_norm = settings.clip_norm  # the C of the round being run
        self.rounds = 0  # rounds released so far: all the accountant needs
        # the round being run's aggregator: its clipped count is the row's
        # dp_clipped_fraction (per round, so nothing of it crosses a checkpoint)
        self.round_mean: PrivateMean | None = None
        # z: the update noise's std over C (sigma itself, lowered under adaptive clipping)
        self.update_multiplier = update_noise_multiplier(
            settings.noise_multiplier, settings.per_round, settings.adaptive
        )

    @classmethod
    def from_config(cls, config: RunConfig, generator: torch.Generator) -> ClientPrivacy | None:
        settings = PrivacySettings.from_config(config)
        return None if settings is None else cls(settings, generator)

    def aggregator(
        self, global_state: Mapping[str, torch.Tensor], keys: Sequence[str]
    ) -> PrivateMean:
        """This round's aggregator over the entries ``keys`` of ``global_state`` (the
        round's global model, unchanged until the server step)."""
        self.round_clip_norm = self.clip_norm
        self.round_mean = PrivateMean(self, global_state, keys)
        return self.round_mean

    def gaussian(self, like: Sequence[torch.Tensor], std: float) -> list[torch.Tensor]:
        """N(0, std²) noise shaped as each of ``like``, drawn in order on the CPU from the
        run's privacy stream and moved to their device (the same numbers on any device)."""
        return [
            (torch.randn(t.shape, generator=self.generator, dtype=t.dtype) * std).to(t.device)
            for t in like
        ]

    def adapt(self, unclipped: float, reports: int) -> None:
        """Adaptive clipping's step after a round: ``unclipped`` of ``reports`` updates
        were within C; the share is released noised and moves C geometrically towards
        the target quantile (a no-op under fixed clipping)."""
        s = self.settings
        if not s.adaptive:
            return
        centred = unclipped - reports / 2.0  # sum of b_i in {-1/2, +1/2}: sensitivity 1
        if s.noise_multiplier > 0:
            noise = torch.randn((), generator=self.generator, dtype=torch.float64)
            centred += clipped_count_std(s.per_round) * float(noise)
        share = centred / s.per_round + 0.5
        self.clip_norm *= math.exp(-ADAPTIVE_CLIP_LR * (share - s.quantile))

    def epsilon(self) -> float:
        """epsilon spent by the rounds so far at the run's delta (inf without noise)."""
        return self.settings.epsilon_after(self.rounds)

    def end_round(self) -> dict[str, float]:
        """Count one more round (every round counts, one where nobody reported too: the
        accountant charges each round it could have released) and return the row's
        privacy columns: ``dp_epsilon`` (spent so far; inf without noise), what it was
        computed by (``dp_epsilon_accountant``: rdp or pld; ``dp_epsilon_neighbours``:
        replace-one or add-remove; ``dp_epsilon_sampling``: fixed or poisson),
        ``dp_round_clip_norm`` (the round's C), ``dp_noise_std`` (the standard
        deviation of the noise on each entry of the mean, in weight units: z·C/m) and
        ``dp_clipped_fraction`` (the share of this round's reported updates whose norm
        exceeded C; NaN where nobody reported).  The words of each: the results
        contract's :data:`~federated.contract.columns.PRIVACY_COLUMNS`."""
        self.rounds += 1
        clip = self.round_clip_norm
        mean, self.round_mean = self.round_mean, None
        accounting = self.settings.accounting_of()
        return {
            "dp_epsilon": self.epsilon(),
            "dp_epsilon_accountant": accounting.accountant,
            "dp_epsilon_neighbours": accounting.neighbours,
            "dp_epsilon_sampling": accounting.sampling,
            "dp_round_clip_norm": clip,
            "dp_noise_std": self.update_multiplier * clip / self.settings.per_round,
            "dp_clipped_fraction": math.nan if mean is None else mean.clipped_fraction(),
        }

    def divergence_words(self) -> str:
        """The settings a divergence under DP names: the clip norm of the round that
        diverged (adaptive clipping's where it moves) and the noise multiplier, since an
        absurd C (noise z·C/m beyond float range) or sigma is the likeliest cause."""
        s = self.settings
        clip = f"dp_clip_norm={self.round_clip_norm:g}"
        if s.adaptive:
            clip += " (adaptive: the diverged round's)"
        return f"{clip}, dp_noise_multiplier={s.noise_multiplier:.4g}"

    def state_dict(self) -> dict[str, Any]:
        """The accountant (round count and its parameters) and the clip norm: plain values."""
        return {"rounds": self.rounds, "clip_norm": self.clip_norm, **self.settings.accounting()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a checkpoint; ``ValueError`` if it accounted other parameters (a
        noise solved by another ``dp-accounting`` version would change every epsilon)."""
        mine = self.settings.accounting()
        for key, value in mine.items():
            # a checkpoint from before party sampling was a setting: fixed, RDP
            if state.get(key, BEFORE_SAMPLING.get(key)) != value:
                raise ValueError(
                    f"checkpoint's privacy accounting was made with {key}={state.get(key)!r}, "
                    f"this run has {key}={value!r}"
                )
        self.rounds = int(state["rounds"])
        self.clip_norm = float(state["clip_norm"])


class PrivateMean(Aggregator):
    """One round of DP-FedAvg: sums the parties' clipped updates as they are added (the
    contribution's tensors are read during :meth:`add` only, so packed slots and the
    sequential working model alike), noises the sum once and divides by m."""

    def __init__(
        self,
        privacy: ClientPrivacy,
        global_state: Mapping[str, torch.Tensor],
        keys: Sequence[str],
    ) -> None:
        self.privacy = privacy
        # under Poisson sampling an empty cohort is part of the mechanism: the round
        # still releases the noise alone (skipping it would tell that nobody was drawn)
        self.releases_empty = privacy.settings.sampling == "poisson"
        self.clip_norm = privacy.clip_norm  # fixed for the round
        self.global_state = global_state
        self.keys = list(keys)
        self.current = [global_state[k].detach() for k in self.keys]
        self.sum = [torch.zeros_like(t) for t in self.current]
        self.unclipped = 0  # reporting parties whose update was within C
        self.reports = 0
        # each update's L2 norm before clipping: for tests and inspection, never written
        # to the rows (only the round's share over C is, dp_clipped_fraction, a diagnostic)
        self.norms: list[float] = []

    def add(self, contribution: Contribution) -> None:
        with torch.no_grad():
            update = torch._foreach_sub(
                [contribution.weights[k].detach() for k in self.keys], self.current
            )
            norm = _l2_norm(update)
            # min(1, C/||u||): a zero update (a party that took no step) stays zero
            scale = min(1.0, self.clip_norm / norm) if norm > 0 else 1.0
            if self.current:
                torch._foreach_add_(self.sum, update, alpha=scale)
        self.norms.append(norm)
        self.unclipped += int(norm <= self.clip_norm)
        self.reports += 1

    def result(self) -> dict[str, torch.Tensor]:
        privacy = self.privacy
        std = privacy.update_multiplier * self.clip_norm
        with torch.no_grad():
            if privacy.settings.noise_multiplier > 0 and self.current:
                torch._foreach_add_(self.sum, privacy.gaussian(self.sum, std))
            out = {k: v.detach().clone() for k, v in self.global_state.items()}
            for key, current, total in zip(self.keys, self.current, self.sum):
                out[key] = current + total / privacy.settings.per_round
        privacy.adapt(self.unclipped, self.reports)
        return out

    def clipped_fraction(self) -> float:
        """The share of the updates added so far whose norm exceeded C (NaN before any):
        a diagnostic of the simulation, released unnoised, so outside the guarantee."""
        if self.reports == 0:
            return math.nan
        return (self.reports - self.unclipped) / self.reports


def _l2_norm(tensors: Sequence[torch.Tensor]) -> float:
    """The L2 norm of all of ``tensors`` as one vector, in float64."""
    if not tensors:
        return 0.0
    norms = torch._foreach_norm(list(tensors))
    return float(torch.linalg.vector_norm(torch.stack([n.double() for n in norms])))
