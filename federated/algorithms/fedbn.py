"""FedBN (Li et al. 2021): every BatchNorm layer — its affine weights and its running
statistics — stays at each party; the server averages everything else.

The paper's claim is about feature shift: parties whose inputs differ (scanners,
domains, ``feature_skew``) keep their own normalisation, so the shared layers see
inputs normalised per party.  Its rule is fixed: the local entries are every module
holding running statistics (:func:`federated.algorithms.batchnorm_rule.batchnorm_entries`),
so the model must have BatchNorm layers (``simple-cnn-bn``, ``resnet50``); one without
any is refused in one line naming ``model``.  The run's ``batchnorm`` rule is ``local``
(the default here; ``averaged`` is refused: it would contradict the method).

Its declaration (``own_state``: :class:`BatchNormLayers` kept) is all of it: the party
state (the layers' entries, in every checkpoint: exact resume, stored once with the
``local`` rule's statistics among them), the evaluation (each party's own BatchNorm
layers on the new global model) and packed training are the engine's, as for
:mod:`federated.algorithms.partly_personal`.  The paper's code and
PFLlib's keep the entries whose names contain ``bn``; reading the module's buffers
instead finds a BatchNorm layer whatever it is called.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from federated.algorithms.batchnorm_rule import batchnorm_entries
from federated.algorithms.partly_personal import PartlyPersonal
from federated.algorithms.party_own_state import (
    PERSONALISED_POOLED_TEST_EVERY,
    KeptEntries,
    OwnState,
)
from federated.params import ConfigError, MethodParams, ModelNames

WITH_BATCHNORM = "a model with BatchNorm layers under algorithm fedbn (simple-cnn-bn, resnet50)"


def fedbn_local_names(names: list[str], model: str | None) -> frozenset[str]:
    """Every BatchNorm entry among state names ``names``; :class:`ConfigError` naming
    ``model`` when there is none."""
    entries = batchnorm_entries(names)
    if not entries.layers:
        raise ConfigError("model", model, WITH_BATCHNORM)
    return frozenset(entries.every)


@dataclass(frozen=True)
class FedBNParams(MethodParams):
    """FedBN has no parameter of its own; its one condition is on the run's model."""

    def check_model(self, names: ModelNames) -> None:
        fedbn_local_names(list(names.state), names.model)


@dataclass(frozen=True)
class BatchNormLayers(KeptEntries):
    """Every BatchNorm layer's entries: weights, biases, statistics and counters."""

    def names(
        self, model: torch.nn.Module, params: MethodParams, model_name: str | None
    ) -> frozenset[str]:
        return fedbn_local_names(list(model.state_dict()), model_name)

    def most_names(self, model: torch.nn.Module) -> frozenset[str]:
        return frozenset(batchnorm_entries(model.state_dict()).every)


class FedBN(PartlyPersonal):
    name = "fedbn"
    Params = FedBNParams
    own_state = OwnState(
        keeps=BatchNormLayers(),
        batchnorm_rules=("local",),
        personal_test_every=PERSONALISED_POOLED_TEST_EVERY,
    )
