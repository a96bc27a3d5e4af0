"""The one place an execution path is chosen: ``RunConfig.execution`` and what the
method and model allow."""

from __future__ import annotations

import copy
import warnings

import torch

from federated.algorithms.base import Algorithm
from federated.algorithms.party_own_state import PartyOwnState
from federated.config.run_config import RunConfig
from federated.data import Augmenter, DatasetSpec
from federated.execution.packed import PackedTrainer
from federated.execution.packed_model import packing_obstacle
from federated.execution.record_private import (
    PartyRecords,
    RecordNoise,
    RecordPrivateReference,
    RecordPrivateSequential,
)
from federated.execution.sequential import ReferenceTrainer, SequentialTrainer
from federated.execution.trainer import LocalTrainer, TrainingSetup
from federated.heterogeneity.feature_skew import FeatureSkew
from federated.models import FedConModel
from federated.params import ConfigError
from federated.runtime.precision import Precision
from federated.sgd_rule import SgdRule


class PackingFallback(UserWarning):
    """Packed execution was asked for but does not apply; parties train one by one."""


def local_trainer(
    config: RunConfig,
    algorithm: Algorithm,
    own: PartyOwnState,
    global_model: FedConModel,
    spec: DatasetSpec,
    augmenter: Augmenter,
    images: torch.Tensor,
    labels: torch.Tensor,
    skew: FeatureSkew | None = None,
    records: PartyRecords | None = None,
) -> LocalTrainer:
    """The run's trainer.  ``packed`` whose method or model cannot pack says why, once
    (:class:`PackingFallback`), and trains sequentially.  ``records`` (each party's
    rows of ``images``) is what record-level DP-SGD draws its Poisson batches from."""
    rule = SgdRule(config.lr, config.momentum, config.weight_decay)
    precision = Precision(config.precision, images.device.type)
    setup = TrainingSetup(
        algorithm, own, global_model, augmenter, rule, images, labels, skew, precision
    )
    if config.execution == "packed":
        reason = (
            record_level_obstacle(config)
            or algorithm.task.packing_obstacle()
            or algorithm.packing_obstacle()
            or packing_obstacle(global_model, spec.shape)
        )
        if reason is None:
            return PackedTrainer(setup, config.pack_width)
        warnings.warn(
            f"packed execution does not apply ({reason}): parties train one by one "
            "(execution=sequential)",
            PackingFallback,
            stacklevel=4,
        )
    # the sequential paths' one working model, trained in place party after party
    working = copy.deepcopy(global_model).requires_grad_(True)
    if config.dp_level == "record":
        _check_no_batchnorm(config, global_model)
        private = (
            RecordPrivateReference if config.execution == "reference" else RecordPrivateSequential
        )
        trainer = private(setup, working)
        trainer.record_noise = RecordNoise(
            float(config.dp_clip_norm), float(config.dp_noise_multiplier), config.seed
        )
        if records is None:
            raise ValueError("dp_level=record needs each party's records (records=...)")
        trainer.records = records
        return trainer
    kind = ReferenceTrainer if config.execution == "reference" else SequentialTrainer
    return kind(setup, working)


def _check_no_batchnorm(config: RunConfig, model: torch.nn.Module) -> None:
    """Record-level DP-SGD needs each sample's gradient on its own, which BatchNorm's
    batch statistics do not allow (Opacus refuses it likewise): one line, before any
    training."""
    if any(isinstance(m, torch.nn.modules.batchnorm._NormBase) for m in model.modules()):
        raise ConfigError(
            "model",
            config.model,
            "a model without BatchNorm under dp_level=record (a sample's gradient through "
            "batch statistics depends on the whole batch; use GroupNorm, or simple-cnn)",
        )


def record_level_obstacle(config: RunConfig) -> str | None:
    """Why record-level DP-SGD cannot train packed (each sample's gradient is its own),
    or None: the trainer's fallback and a sweep's path choice (study/path_choice.py)
    say it."""
    if config.dp_level != "record":
        return None
    return "dp_level=record takes each sample's gradient on its own"
