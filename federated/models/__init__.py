"""Model registry: ``build_model(name, spec, ...)`` -> :class:`FedConModel`.

``name`` is a built-in model (:data:`MODELS`), a detector for detection data
(:data:`~federated.models.detection.DETECTORS`) or an import path
(``package.module:factory``, ``torchvision:NAME``; :mod:`federated.models.import_path`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from federated.data.catalog import DatasetSpec
from federated.models.cnn_transformer import CNNTransformer
from federated.models.detection import DETECTORS, build_detector, is_detector
from federated.models.fedcon import FedConModel, ModelOutput
from federated.models.import_path import ModelError, ModelSpec, build_encoder, is_import_path
from federated.models.resnet import RESNET50_FEATURES, cifar_resnet50
from federated.models.simple_cnn import SimpleCNN, SimpleCNNBN


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


def build_model(
    name: str,
    spec: DatasetSpec,
    out_dim: int = 256,
    projection_head: bool = True,
    outputs: int | None = None,
) -> FedConModel:
    """A freshly initialised model ``name`` for images of ``spec`` (uses torch's RNG);
    ``outputs``: the head's width, as the run's task asks (None: the data's own task's,
    ``spec.outputs``)."""
    outputs = spec.outputs if outputs is None else outputs
    if is_detector(name):  # a detector is no encoder + head: its own model
        return build_detector(name, spec, outputs, out_dim, projection_head)  # type: ignore[return-value]
    if name in MODELS:
        encoder, feature_dim = MODELS[name](spec)
    else:
        encoder, feature_dim = build_encoder(name, model_spec(spec, outputs))
    return FedConModel(encoder, feature_dim, outputs, out_dim, projection_head)


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
    if name in MODELS or is_detector(name) or key in _checked:
        return
    with torch.random.fork_rng(devices=[]):
        build_encoder(name, key[1])
    _checked.add(key)


__all__ = [
    "DETECTORS",
    "MODELS",
    "FedConModel",
    "ModelError",
    "ModelOutput",
    "ModelSpec",
    "build_model",
    "check_model",
    "is_detector",
    "is_import_path",
]
