"""Model registry: ``build_model(name, spec, ...)`` -> a fresh model of the family the
data's task trains (:attr:`federated.tasks.base.Task.model_family`,
:mod:`federated.models.family`).

For classification and score data (:data:`ENCODER_HEAD`, a :class:`FedConModel`) ``name``
is a built-in encoder (:data:`MODELS`) or an import path (``package.module:factory``,
``torchvision:NAME``; :mod:`federated.models.import_path`); every other kind's family
lives in its own package (``federated/tasks/<kind>/models.py``) and names its own models.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from federated.data.catalog import DatasetSpec
from federated.data.kind_parts import imported, kind_parts
from federated.models.cnn_transformer import CNNTransformer
from federated.models.family import ModelFamily
from federated.models.fedcon import FedConModel, ModelOutput
from federated.models.import_path import ModelError, ModelSpec, build_encoder, is_import_path
from federated.models.resnet import RESNET50_FEATURES, cifar_resnet50
from federated.models.simple_cnn import SimpleCNN, SimpleCNNBN
from federated.registry import load_method


def _simple_cnn(spec: DatasetSpec) -> tuple[nn.Module, int]:
    return SimpleCNN(spec.channels, spec.height, spec.width), SimpleCNN.feature_dim


def _simple_cnn_bn(spec: DatasetSpec) -> tuple[nn.Module, int]:
    return SimpleCNNBN(spec.channels, spec.height, spec.width), SimpleCNN.feature_dim


def _resnet50(spec: DatasetSpec) -> tuple[nn.Module, int]:
    return cifar_resnet50(spec.channels), RESNET50_FEATURES


def _cnn_transformer(spec: DatasetSpec) -> tuple[nn.Module, int]:
    return CNNTransformer(spec.channels, spec.height, spec.width), CNNTransformer.feature_dim


# name -> builder(spec) returning (encoder, feature_dim)
MODELS: dict[str, Callable[[DatasetSpec], tuple[nn.Module, int]]] = {
    "simple-cnn": _simple_cnn,
    "simple-cnn-bn": _simple_cnn_bn,
    "resnet50": _resnet50,
    "cnn-transformer": _cnn_transformer,
}


def _encoder_and_head(
    name: str, spec: DatasetSpec, outputs: int, out_dim: int, projection_head: bool
) -> FedConModel:
    """A built-in encoder (:data:`MODELS`) or an import path's, under MOON's projection
    head and an output layer ``outputs`` wide."""
    if name in MODELS:
        encoder, feature_dim = MODELS[name](spec)
    else:
        encoder, feature_dim = build_encoder(name, model_spec(spec, outputs))
    return FedConModel(encoder, feature_dim, outputs, out_dim, projection_head)


#: classification's and score tasks' family (the default of every task): an encoder, the
#: projection head and an output layer
ENCODER_HEAD = ModelFamily("an encoder and a head", MODELS, _encoder_and_head, import_paths=True)


def model_family(spec: DatasetSpec) -> ModelFamily:
    """The family of networks data ``spec`` train: its task's
    (:attr:`~federated.tasks.base.Task.model_family`, imported by path: the tasks import
    this package)."""
    return imported(load_method("task", spec.task).model_family)


def model_families() -> tuple[ModelFamily, ...]:
    """Every registered task's family, each once (:data:`federated.registry.TASK_PATHS`
    order)."""
    return kind_parts("model_family")


def build_model(
    name: str,
    spec: DatasetSpec,
    out_dim: int = 256,
    projection_head: bool = True,
    outputs: int | None = None,
) -> nn.Module:
    """A freshly initialised model ``name`` of the family data ``spec`` train
    (:func:`model_family`; uses torch's RNG); ``outputs``: the head's width, as the run's
    task asks (None: the data's own task's, ``spec.outputs``)."""
    outputs = spec.outputs if outputs is None else outputs
    return model_family(spec).build(name, spec, outputs, out_dim, projection_head)


def model_spec(spec: DatasetSpec, outputs: int | None = None) -> ModelSpec:
    """What a model factory is told about a dataset (``outputs``: the head's width, by
    default the data's own task's)."""
    width = spec.outputs if outputs is None else outputs
    return ModelSpec(spec.channels, spec.height, spec.width, width)


_checked: set[tuple[str, ModelSpec]] = set()


def check_model(name: str, spec: DatasetSpec) -> None:
    """Raise :class:`ModelError` unless import-path model ``name`` builds for ``spec`` and
    maps a dummy batch to (batch, features); each (name, shape) is built once per process.
    The torch RNG is forked, so checking changes no run's random numbers."""
    key = (name, model_spec(spec))
    if key in _checked or any(name in family.names for family in model_families()):
        return
    with torch.random.fork_rng(devices=[]):
        build_encoder(name, key[1])
    _checked.add(key)


__all__ = [
    "ENCODER_HEAD",
    "MODELS",
    "FedConModel",
    "ModelError",
    "ModelFamily",
    "ModelOutput",
    "ModelSpec",
    "build_model",
    "check_model",
    "is_import_path",
    "model_families",
    "model_family",
]
