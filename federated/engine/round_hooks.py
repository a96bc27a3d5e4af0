"""Cross-cutting features as hooks on the round, composed in one list.

A feature that is not the method's own — client-level differential privacy, the
representation probe, the party store's pinning of the parties that train — takes part
in a round at named points, never through a branch of the round loop
(:mod:`federated.engine.round_loop` reads no feature's fields).  The points, in the
order a round reaches them (docs/architecture.md, "The round"):

``before_round(parties)``
    the round's reporting parties are known, before any trains;
``wrap_aggregator(make)``
    returns the factory of the round's aggregator, given the one beneath it (the
    method's own): a wrapper in the manner of Flower's
    ``DifferentialPrivacyServerSideFixedClipping(strategy)`` or pfl-research's
    postprocessors.  DP-FedAvg's takes the method's place (its rule is the aggregation);
``after_local(job, round_number, index)``
    one party finished training (``index`` its place among the round's reporting
    parties); returns the seconds the hook spent, which are not training time;
``after_server_step(model)``
    the global model holds the round's released state: post-processing of it (no
    privacy cost under DP);
``row_fields()``
    the round's columns a hook adds to the row, once the round's model is released
    (kept in the row of a round that then diverges: the model was released);
``after_round(parties)``
    always, also when the round diverged or raised (``finally``);
``divergence_words()``
    the settings a divergence message names (``""``: none);
``state_for_checkpoint()`` / ``restore(state)``
    a hook's state across a checkpoint, under its own key of the run state.

:func:`round_hooks` builds a run's list from its config, in one place; a hook whose
feature is off is not in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from federated.config.privacy_fields import run_accountant
from federated.privacy_accountant import record_epsilon, sampling_rate
from federated.server.aggregation import Aggregator

if TYPE_CHECKING:
    from federated.algorithms import LocalJob
    from federated.config.run_config import RunConfig
    from federated.engine.party_store import PartyStates
    from federated.evaluation.representations import RepresentationProbe
    from federated.runtime.seeding import RunRandomness
    from federated.server.privacy import ClientPrivacy

AggregatorFactory = Callable[[], Aggregator]


class RoundHook:
    """One cross-cutting feature's part in a round; every point does nothing unless a
    hook defines it (module docstring).  ``state_key``: the run state's key of the
    hook's checkpointed state (None: it keeps none)."""

    state_key: str | None = None

    def before_round(self, parties: list[int]) -> None:
        """The round's reporting ``parties`` are about to train."""

    def wrap_aggregator(self, make: AggregatorFactory) -> AggregatorFactory:
        """The round's aggregator factory, given the one beneath (default: unchanged)."""
        return make

    def after_local(self, job: LocalJob, round_number: int, index: int) -> float:
        """Party ``job.party`` finished training, ``index``-th of the round (0-based);
        returns seconds spent here (left out of the round's training time)."""
        return 0.0

    def after_server_step(self, model: torch.nn.Module) -> None:
        """Post-process the global ``model`` after the round's server step."""

    def row_fields(self) -> dict[str, Any]:
        """The row's columns this hook adds for the round just released."""
        return {}

    def after_round(self, parties: list[int]) -> None:
        """The round is over (finished, diverged or raised)."""

    def party_values(self) -> dict[str, list[float]]:
        """Per-party columns of ``parties.csv``: name -> one value per party."""
        return {}

    def divergence_words(self) -> str:
        """The settings of this hook a divergence message names (``""``: none)."""
        return ""

    def state_for_checkpoint(self) -> Any:
        """The hook's state (plain values; checkpoints load with ``weights_only``)."""
        return None

    def restore(self, state: Any) -> None:
        """Continue from :meth:`state_for_checkpoint`'s value."""


class RoundHooks:
    """The run's hooks, called in list order at each point."""

    def __init__(self, hooks: Iterable[RoundHook]) -> None:
        self.hooks = list(hooks)

    def before_round(self, parties: list[int]) -> None:
        for hook in self.hooks:
            hook.before_round(parties)

    def aggregator(self, make: AggregatorFactory) -> Aggregator:
        """The round's aggregator: ``make`` (the method's) wrapped by each hook in turn."""
        for hook in self.hooks:
            make = hook.wrap_aggregator(make)
        return make()

    def after_local(self, job: LocalJob, round_number: int, index: int) -> float:
        """Seconds the hooks spent on this party (not training time)."""
        return sum(hook.after_local(job, round_number, index) for hook in self.hooks)

    def after_server_step(self, model: torch.nn.Module) -> None:
        for hook in self.hooks:
            hook.after_server_step(model)

    def row_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for hook in self.hooks:
            fields.update(hook.row_fields())
        return fields

    def after_round(self, parties: list[int]) -> None:
        for hook in self.hooks:
            hook.after_round(parties)

    def party_values(self) -> dict[str, list[float]]:
        values: dict[str, list[float]] = {}
        for hook in self.hooks:
            values.update(hook.party_values())
        return values

    def divergence_words(self) -> str:
        """``" with a=1, b=2"`` naming what the hooks say a divergence may come from."""
        words = [w for w in (hook.divergence_words() for hook in self.hooks) if w]
        return f" with {', '.join(words)}" if words else ""

    def state_for_checkpoint(self) -> dict[str, Any]:
        """Each stateful hook's state under its key."""
        return {
            hook.state_key: hook.state_for_checkpoint()
            for hook in self.hooks
            if hook.state_key is not None
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Each stateful hook from its key of ``state`` (a run state)."""
        for hook in self.hooks:
            if hook.state_key is not None:
                hook.restore(state[hook.state_key])


class PinTrainingParties(RoundHook):
    """The party store keeps the round's training parties in memory while they train and
    marks their states changed afterwards (:class:`PartyStates`: what a checkpoint
    writes, what may spill to disk)."""

    def __init__(self, party_states: PartyStates) -> None:
        self.party_states = party_states

    def before_round(self, parties: list[int]) -> None:
        self.party_states.pin(parties)

    def after_round(self, parties: list[int]) -> None:
        self.party_states.changed(parties)  # their states changed in place


class ProbeFirstParty(RoundHook):
    """The representation probe (Fig. 2 of the MOON paper) captures the round's first
    reporting party's model beside the global one, at its configured rounds."""

    def __init__(self, probe: RepresentationProbe, global_model: torch.nn.Module) -> None:
        self.probe = probe
        self.global_model = global_model

    def after_local(self, job: LocalJob, round_number: int, index: int) -> float:
        if index != 0:
            return 0.0
        return self.probe.capture(round_number, job.party, self.global_model, job.model)


class PrivateAggregation(RoundHook):
    """Client-level DP (DP-FedAvg, :mod:`federated.server.privacy`) as a wrapper of the
    round: its clipped, noised mean takes the method's aggregation's place; after the
    server step the released BatchNorm statistics are clamped into their valid range
    (post-processing); the row gets the accountant's columns; the accountant and the
    clip norm cross checkpoints under ``privacy``."""

    state_key = "privacy"

    def __init__(
        self,
        privacy: ClientPrivacy,
        global_model: torch.nn.Module,
        keys: list[str],
    ) -> None:
        self.privacy = privacy
        self.global_model = global_model
        self.keys = keys  # the floating-point entries the server moves
        self.variances = running_variance_keys(global_model, keys)

    def wrap_aggregator(self, make: AggregatorFactory) -> AggregatorFactory:
        # DP-FedAvg's rule is the aggregation (the method's would weight by |D_i|, which
        # lets one party's influence exceed C/m): the method's factory is never called
        return lambda: self.privacy.aggregator(self.global_model.state_dict(), self.keys)

    def after_server_step(self, model: torch.nn.Module) -> None:
        clamp_running_variances(model, self.variances)

    def row_fields(self) -> dict[str, Any]:
        return self.privacy.end_round()

    def divergence_words(self) -> str:
        return self.privacy.divergence_words()

    def state_for_checkpoint(self) -> dict[str, Any]:
        return self.privacy.state_dict()

    def restore(self, state: Any) -> None:
        self.privacy.load_state_dict(state)


class RecordAccountant(RoundHook):
    """Record-level DP-SGD's accountants, one per party (``dp_level=record``): each
    party's DP-SGD steps on Poisson batches (rate q_i = min(1, batch/n_i)) counted as it
    trains, its epsilon :func:`~federated.privacy_accountant.record_epsilon` of them by
    ``accountant``; the row states the worst party's, ``parties.csv`` each party's; the
    step counts cross checkpoints (epsilon is recomputed from them)."""

    state_key = "record_privacy"

    def __init__(
        self,
        noise_multiplier: float,
        clip_norm: float,
        delta: float,
        sizes: list[int],
        batch: int,
        accountant: str,
    ) -> None:
        self.noise_multiplier = noise_multiplier
        self.clip_norm = clip_norm
        self.delta = delta
        self.accountant = accountant
        self.rates = [sampling_rate(min(batch, n), n) for n in sizes]
        self.steps = [0] * len(sizes)

    def after_local(self, job: LocalJob, round_number: int, index: int) -> float:
        self.steps[job.party] += job.steps
        return 0.0

    def _epsilons(self) -> list[float]:
        return [
            record_epsilon(s, q, self.noise_multiplier, self.delta, self.accountant)
            for s, q in zip(self.steps, self.rates)
        ]

    def row_fields(self) -> dict[str, Any]:
        return {
            "dp_epsilon": max(self._epsilons()),
            "dp_epsilon_accountant": self.accountant,
            "dp_epsilon_neighbours": "add-remove record",
            "dp_epsilon_sampling": "poisson batches",
        }

    def party_values(self) -> dict[str, list[float]]:
        return {"party_dp_epsilon": self._epsilons()}

    def divergence_words(self) -> str:
        return (
            f"dp_clip_norm={self.clip_norm:g}, dp_noise_multiplier="
            f"{self.noise_multiplier:.4g} (dp_level=record)"
        )

    def state_for_checkpoint(self) -> dict[str, Any]:
        return {
            "steps": list(self.steps),
            "noise_multiplier": self.noise_multiplier,
            "delta": self.delta,
        }

    def restore(self, state: Any) -> None:
        if "steps" not in state:
            raise ValueError(
                "this checkpoint's record-level accountant counted shuffled epochs (before "
                "Poisson batches): it cannot be resumed by this version; start the run again"
            )
        self.steps = [int(s) for s in state["steps"]]


def running_variance_keys(model: torch.nn.Module, keys: Iterable[str]) -> list[str]:
    """The BatchNorm ``running_var`` entries of ``model`` among ``keys`` (those the
    server moves): a layer's running variance, found by the layer's type."""
    moved = set(keys)
    found = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._NormBase):
            key = f"{name}.running_var" if name else "running_var"
            if key in moved:
                found.append(key)
    return found


def clamp_running_variances(model: torch.nn.Module, keys: list[str]) -> None:
    """Clamp each of ``keys`` (running variances) of ``model`` to >= 0 in place: noise
    can leave a released variance negative, where BatchNorm's ``sqrt(var + eps)`` is
    NaN; a function of the released value only, so it costs no privacy.  The floor is 0,
    not above, so a valid variance never moves (BatchNorm adds its eps)."""
    if not keys:
        return
    state = model.state_dict()
    with torch.no_grad():
        for key in keys:
            state[key].clamp_(min=0.0)


def round_hooks(
    config: RunConfig,
    rng: RunRandomness,
    probe: RepresentationProbe | None,
    party_states: PartyStates,
    global_model: torch.nn.Module,
    moved_float_keys: list[str],
    party_sizes: list[int],
) -> RoundHooks:
    """A run's hooks, built from its config in this one place: the party store's
    pinning, the representation probe (``probe``: the evaluation's, None when off),
    record-level DP-SGD's accountants (``dp_level=record``; ``party_sizes`` in records),
    client-level DP (the ``dp_*`` fields; noise from the run's ``privacy`` stream of
    ``rng``), in that order."""
    from federated.server.privacy import ClientPrivacy

    hooks: list[RoundHook] = [PinTrainingParties(party_states)]
    if probe is not None:
        hooks.append(ProbeFirstParty(probe, global_model))
    if config.dp_level == "record":
        sizes = list(party_sizes)
        hooks.append(
            RecordAccountant(
                float(config.dp_noise_multiplier),
                float(config.dp_clip_norm),
                float(config.dp_delta),
                sizes,
                config.batch_size,
                run_accountant(config),
            )
        )
    privacy = ClientPrivacy.from_config(config, rng.privacy)
    if privacy is not None:
        hooks.append(PrivateAggregation(privacy, global_model, moved_float_keys))
    return RoundHooks(hooks)
