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

The rule adds to what a party keeps (:mod:`federated.algorithms.party_own_state`): under
``local`` the statistics and counters join the method's kept entries (FedBN's keep
them already), loaded, saved, left unmoved by the server and evaluated as every kept
entry is, stored once.

Which entries are statistics is read from the model's state names: a module holding a
``running_mean`` buffer (every ``BatchNorm1d/2d/3d``, and an ``InstanceNorm`` that
tracks running statistics) is a BatchNorm layer; its ``weight``/``bias`` are its
affine part.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_STATISTICS = ("running_mean", "running_var")
_COUNTER = "num_batches_tracked"
_AFFINE = ("weight", "bias")


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


def statistics_kept(names: Sequence[str], rule: str) -> frozenset[str]:
    """The entries among state names ``names`` that rule ``rule`` keeps at each party:
    the statistics and their counters under ``local``, none under ``averaged``."""
    if rule != "local":
        return frozenset()
    entries = batchnorm_entries(names)
    return frozenset(entries.statistics + entries.counters)
