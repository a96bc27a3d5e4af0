"""The rule for BatchNorm statistics (``batchnorm``): averaged like weights, or each
party's own.

A BatchNorm layer holds trained parameters (``weight``, ``bias``: the affine part, a
method's rule decides them like any other parameter) and running statistics
(``running_mean``, ``running_var``: estimates of the layer's input moments on the data
it has seen, plus the integer step counter ``num_batches_tracked``).  The statistics are
no gradient's business, so a federated method must say what happens to them; the
references differ:

* ``averaged`` (fedsweep's default for every method but FedBN; the FedAvg paper's
  "average the model" read literally): the server averages ``running_mean`` and
  ``running_var`` with the parties' |D_i| weights, as it averages weights, and the
  server optimizer steps them; every party starts its round from those.
* ``local`` (FedBN's rule; what PFLlib's FedAvg does silently, as its server averages
  ``parameters()`` only, and what the Street benchmark's code does the same way): each
  party keeps its own statistics from round to round (party state, in every checkpoint)
  and is evaluated with them; the server never moves the global model's statistics,
  which stay the initial model's (mean 0, variance 1), as in those references' global
  model.

Under both, ``num_batches_tracked`` is never averaged: the global model keeps its own
counter (a mean of step counts is no step count; with a BatchNorm ``momentum`` set, as
in every fedsweep model, the counter changes no output).

Which entries are statistics is read from the model's state names: a module holding a
``running_mean`` buffer (every ``BatchNorm1d/2d/3d``, and an ``InstanceNorm`` that
tracks running statistics) is a BatchNorm layer; its ``weight``/``bias`` are its
affine part.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from federated.config.checks import BATCHNORM_RULES
from federated.params import ConfigError

FIELD = "batchnorm"
#: the party-state key under which a party's own statistics live (``local``)
STATE_KEY = "batchnorm_statistics"

_STATISTICS = ("running_mean", "running_var")
_COUNTER = "num_batches_tracked"
_AFFINE = ("weight", "bias")


def check_batchnorm(value: str) -> None:
    """Refuse a value that is no rule, in one line naming the field."""
    if value not in BATCHNORM_RULES:
        raise ConfigError(FIELD, value, " or ".join(BATCHNORM_RULES))


@dataclass(frozen=True)
class BatchNormEntries:
    """A model's BatchNorm entries by kind (state names, in state order)."""

    layers: tuple[str, ...]  # the BatchNorm modules' names
    statistics: tuple[str, ...]  # running_mean, running_var
    counters: tuple[str, ...]  # num_batches_tracked
    affine: tuple[str, ...]  # weight, bias

    @property
    def every(self) -> tuple[str, ...]:
        """All of the layers' entries: what FedBN keeps at each party."""
        return self.statistics + self.counters + self.affine


def batchnorm_entries(names: Iterable[str]) -> BatchNormEntries:
    """The BatchNorm entries among a model's state names ``names`` (module docstring)."""
    names = list(names)
    layers = tuple(n.rpartition(".")[0] for n in names if n.rpartition(".")[2] == "running_mean")
    owned = set(layers)

    def of_kind(kinds: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(
            n for n in names if n.rpartition(".")[0] in owned and n.rpartition(".")[2] in kinds
        )

    return BatchNormEntries(layers, of_kind(_STATISTICS), of_kind((_COUNTER,)), of_kind(_AFFINE))


class BatchNormRule:
    """One run's rule (module docstring): what the server never moves and, under
    ``local``, each party's statistics loaded before its local training, saved after it
    and put in the model it is evaluated with.  The entries are read from the first
    model state it is shown (every model of a run has the same names)."""

    def __init__(self, rule: str) -> None:
        check_batchnorm(rule)
        self.rule = rule
        self._entries: BatchNormEntries | None = None
        self._scratch: torch.nn.Module | None = None  # evaluation's copy, never state

    def entries(self, model: torch.nn.Module) -> BatchNormEntries:
        """``model``'s BatchNorm entries (read once per run)."""
        if self._entries is None:
            self._entries = batchnorm_entries(model.state_dict())
        return self._entries

    def keeps_local(self, model: torch.nn.Module) -> bool:
        """Whether parties keep their own statistics (``local`` on a model with some)."""
        return self.rule == "local" and bool(self.entries(model).statistics)

    def server_skips(self, model: torch.nn.Module) -> frozenset[str]:
        """The entries of ``model`` the server never moves: the counters always, the
        statistics under ``local``."""
        entries = self.entries(model)
        skipped = set(entries.counters)
        if self.keeps_local(model):
            skipped |= set(entries.statistics)
        return frozenset(skipped)

    def start(self, model: torch.nn.Module, state: dict[str, Any]) -> None:
        """Before a party's local training (``model`` holds the global weights): its own
        statistics over the global ones (none before its first training)."""
        own = state.get(STATE_KEY) if self.keeps_local(model) else None
        if own is not None:
            model.load_state_dict(own, strict=False)

    def finish(self, model: torch.nn.Module, state: dict[str, Any]) -> None:
        """After a party's local training: its statistics into its state (CPU copies)."""
        if not self.keeps_local(model):
            return
        entries, values = self.entries(model), model.state_dict()
        kept = entries.statistics + entries.counters
        state[STATE_KEY] = {k: values[k].detach().to("cpu", copy=True) for k in kept}

    def evaluated(
        self,
        model: torch.nn.Module | None,
        global_model: torch.nn.Module,
        state: dict[str, Any],
        whole_personal: bool,
    ) -> torch.nn.Module | None:
        """The model a party is evaluated with, its own statistics in it: ``model`` is
        the method's (None: the global model); a whole personal model
        (``whole_personal``: Ditto, APFL, SOLO) already holds its own."""
        own = state.get(STATE_KEY) if self.keeps_local(global_model) else None
        if own is None or whole_personal:
            return model
        if model is None:
            if self._scratch is None:
                self._scratch = copy.deepcopy(global_model)
            self._scratch.load_state_dict(global_model.state_dict())
            model = self._scratch
        # the method's model is its work copy, rebuilt from the global model on each ask
        model.load_state_dict(own, strict=False)
        return model
