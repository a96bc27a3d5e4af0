"""What stays with a party: the one declaration a method makes of its parties' own
state (:class:`OwnState`), and that declaration applied to one run's model
(:class:`PartyOwnState`), which every layer reads.

A method declares, as ``Algorithm.own_state``:

* ``keeps`` — the entries of the shared model each party keeps (:class:`KeptEntries`):
  none (FedAvg), a layer rule (FedPer, FedRep, LG-FedAvg:
  :class:`~federated.algorithms.partly_personal.LayerRule`), every BatchNorm entry
  (FedBN: :class:`~federated.algorithms.fedbn.BatchNormLayers`) or every entry
  (:data:`WHOLE_MODEL`: SOLO's model instead of the global one, so every party trains
  every round, alone).  The run's ``batchnorm=local`` adds the BatchNorm statistics and
  counters to them (:mod:`federated.algorithms.batchnorm_rule`): the same mechanism.
  They train as part of the party's model, by the run's SGD rule.
* ``personal_model`` — a whole personal model beside the global one (Ditto, APFL;
  :mod:`federated.algorithms.personal_model`), stepped by the run's SGD rule.
* ``state_copies`` / ``parameter_copies`` — model-sized state the method keeps in
  ``init_party_state`` itself (MOON's previous models, SCAFFOLD's control variate,
  FedDyn's gradient correction), which the memory check counts.
* ``batchnorm_rules`` — the ``batchnorm`` rules it allows, the first its default;
  ``personal_test_every`` — its default period of scoring its parties' own models on
  the pooled test set.

The engine applies the run's :class:`PartyOwnState` in one place each: a local
training starts from the global weights with the party's kept entries loaded over them
and its personal model loaded (:meth:`PartyOwnState.start`) and ends by saving both as
CPU copies (:meth:`PartyOwnState.finish`); the server never moves the kept entries (nor
BatchNorm's step counters: :attr:`PartyOwnState.server_skips`), which is also what
DP-FedAvg leaves unclipped; a party is evaluated with its own model
(:meth:`PartyOwnState.evaluated`); the memory check counts :meth:`OwnState.party_bytes`.
The kept entries live in ``state["local"]`` (:data:`KEPT_KEY`), once, whoever asked for
them; a personal model in ``state["personal"]`` and ``state["personal_momenta"]``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from federated.algorithms.batchnorm_rule import batchnorm_entries, statistics_kept
from federated.algorithms.personal_model import MODEL_KEY, MOMENTA_KEY, PersonalModel
from federated.config.checks import BATCHNORM_RULES
from federated.models import FedConModel
from federated.params import MethodParams
from federated.sgd_rule import SgdRule

if TYPE_CHECKING:
    from federated.config.run_config import RunConfig

#: the party-state key of the entries a party keeps (None before its first training)
KEPT_KEY = "local"

#: a personalised method's default ``personal_test_every``: its own models on the pooled
#: test set (N passes where FedAvg makes one: the cost of a round for LG-FedAvg and FedBN,
#: whose parties share no leading stage with the global model) are for the report's
#: global-vs-personal trade-off, read at the last round, which is always scored; its
#: protocol's numbers, each party's model on its own test and validation splits, are
#: scored every round whatever this is (docs/methods.md, "How personal models are scored")
PERSONALISED_POOLED_TEST_EVERY = 5


@dataclass(frozen=True)
class KeptEntries:
    """Which entries of the shared model each party keeps; this base keeps none.  A
    kind names them on the run's real model (:meth:`names`) and bounds them before any
    model exists, for the memory check (:meth:`most_names`)."""

    #: whether it keeps every entry: the party's model is its own, not the global one
    whole: ClassVar[bool] = False

    def names(
        self, model: torch.nn.Module, params: MethodParams, model_name: str | None
    ) -> frozenset[str]:
        """The entries of ``model`` each party keeps under the method's ``params``;
        :class:`~federated.params.ConfigError` for a rule the model refutes."""
        return frozenset()

    def most_names(self, model: torch.nn.Module) -> frozenset[str]:
        """The entries it could keep for any parameter value (the memory check's bound)."""
        return frozenset()


@dataclass(frozen=True)
class WholeModel(KeptEntries):
    """Every entry: a model of the party's own instead of the global one (SOLO)."""

    whole: ClassVar[bool] = True

    def names(
        self, model: torch.nn.Module, params: MethodParams, model_name: str | None
    ) -> frozenset[str]:
        return frozenset(model.state_dict())

    def most_names(self, model: torch.nn.Module) -> frozenset[str]:
        return frozenset(model.state_dict())


NOTHING = KeptEntries()
WHOLE_MODEL = WholeModel()


def _bytes(state: dict[str, torch.Tensor], names: frozenset[str]) -> int:
    return sum(v.numel() * v.element_size() for k, v in state.items() if k in names)


@dataclass(frozen=True)
class OwnState:
    """What a method keeps at each party (module docstring): its one declaration."""

    keeps: KeptEntries = NOTHING
    personal_model: bool = False
    # model states' worth of the method's own party state: a number, or one read from
    # its parameters (MOON: its prev_models previous models)
    state_copies: float | Callable[[Any], float] = 0.0
    # parameter sets' worth of it (SCAFFOLD's c_i, FedDyn's g_i: one per parameter)
    parameter_copies: float = 0.0
    batchnorm_rules: tuple[str, ...] = BATCHNORM_RULES
    personal_test_every: int = 1

    @property
    def batchnorm_default(self) -> str:
        """The ``batchnorm`` rule a run of the method takes when nobody set one."""
        return self.batchnorm_rules[0]

    @property
    def trains_alone(self) -> bool:
        """Every party keeps its whole model: nothing reaches a server, so every party
        trains every round, continuing its own model (SOLO)."""
        return self.keeps.whole

    @property
    def evaluates_own_models(self) -> bool:
        """Whether a party is evaluated with a model of its own (kept entries or a
        personal model), whatever the run's ``batchnorm`` rule."""
        return self.personal_model or self.keeps != NOTHING

    def party_bytes(
        self,
        model: torch.nn.Module,
        batchnorm: str,
        momentum: bool,
        params: Callable[[], MethodParams],
    ) -> int:
        """Bytes of one party's own state at most, on ``model`` (built on ``meta``: no
        memory): the kept entries (every entry a layer rule could keep), a personal
        model (and its momentum when the run's SGD has one) and the method's copies;
        ``params`` builds the method's parameters, asked only where the copies read them."""
        state = model.state_dict()
        kept = self.keeps.most_names(model) | statistics_kept(list(state), batchnorm)
        state_bytes = _bytes(state, frozenset(state))
        param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        copies = self.state_copies(params()) if callable(self.state_copies) else self.state_copies
        total = _bytes(state, kept) + copies * state_bytes + self.parameter_copies * param_bytes
        if self.personal_model:
            total += state_bytes + (param_bytes if momentum else 0)
        return round(total)

    def for_run(self, model: FedConModel, params: MethodParams, config: RunConfig) -> PartyOwnState:
        """The declaration on the run's real ``model`` (its kept entries checked once,
        before any training) under the run's ``batchnorm`` rule."""
        names = list(model.state_dict())
        by_method = self.keeps.names(model, params, config.model)
        kept = by_method | statistics_kept(names, config.batchnorm or self.batchnorm_default)
        return PartyOwnState(self, kept, by_method, frozenset(batchnorm_entries(names).counters))


class PartyOwnState:
    """One run's :class:`OwnState`: the entries its parties keep, what the server never
    moves, and the work networks its starts and evaluations load a party into (never
    state: each holds one party at a time, rebuilt on each ask)."""

    def __init__(
        self,
        declared: OwnState,
        kept: frozenset[str],
        kept_by_method: frozenset[str],
        counters: frozenset[str],
    ) -> None:
        self.declared = declared
        #: the entries of the shared model each party keeps (the method's and the
        #: ``batchnorm=local`` statistics): loaded before, saved after its training
        self.kept = kept
        #: the entries the method itself keeps: the ones the report counts as never sent
        self.kept_by_method = kept_by_method
        #: the entries the server never moves: the kept ones, and BatchNorm's step
        #: counters (a mean of step counts is no step count), which the global model
        #: keeps as they are; DP-FedAvg clips and noises every other entry
        self.server_skips = kept | counters
        self._personal_net: FedConModel | None = None
        self._scratch: FedConModel | None = None

    @property
    def trains_alone(self) -> bool:
        return self.declared.trains_alone

    def initial(self) -> dict[str, Any]:
        """The own state of a party that has not trained yet (None: the global model's)."""
        state: dict[str, Any] = {}
        if self.kept:
            state[KEPT_KEY] = None
        if self.declared.personal_model:
            state.update({MODEL_KEY: None, MOMENTA_KEY: None})
        return state

    def kept_bytes(self, model: torch.nn.Module) -> int:
        """Bytes of the entries the method keeps at each party (never sent)."""
        return _bytes(model.state_dict(), self.kept_by_method)

    def _personal(self, like: FedConModel) -> FedConModel:
        if self._personal_net is None:
            self._personal_net = copy.deepcopy(like).requires_grad_(True)
        return self._personal_net

    def start(
        self,
        model: FedConModel,
        global_model: FedConModel,
        state: dict[str, Any],
        rule: SgdRule,
        device: torch.device,
    ) -> PersonalModel | None:
        """A local training's start, ``model`` holding the global weights: the party's
        kept entries (from its ``state``) over them; returns its personal model, loaded
        and ready to train by ``rule`` (None for a method without one)."""
        own = state.get(KEPT_KEY)
        if own is not None:
            model.load_state_dict(own, strict=False)
        if not self.declared.personal_model:
            return None
        net = self._personal(global_model)
        return PersonalModel.start(net, global_model, state, rule, device)

    def finish(
        self, model: FedConModel, state: dict[str, Any], personal: PersonalModel | None
    ) -> None:
        """A local training's end: the kept entries of the trained ``model`` and the
        ``personal`` model into the party's ``state`` (CPU copies)."""
        if self.kept:
            values = model.state_dict()
            state[KEPT_KEY] = {
                k: values[k].detach().to("cpu", copy=True) for k in sorted(self.kept)
            }
        if personal is not None:
            personal.save(state)

    def evaluated(self, global_model: FedConModel, state: dict[str, Any]) -> FedConModel | None:
        """The model a party with ``state`` is evaluated with: its personal model, else
        the (new) global model with its kept entries over it; None (the global model)
        before it first trained."""
        if self.declared.personal_model and state[MODEL_KEY] is not None:
            net = self._personal(global_model)
            net.load_state_dict(state[MODEL_KEY])
            return net
        own = state.get(KEPT_KEY)
        if own is None:
            return None
        if self._scratch is None:
            self._scratch = copy.deepcopy(global_model)
        self._scratch.load_state_dict(global_model.state_dict())
        self._scratch.load_state_dict(own, strict=False)
        return self._scratch
