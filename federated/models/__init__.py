"""Model registry: ``build_model(name, spec, ...)`` -> :class:`FedConModel`."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from federated.data.catalog import DatasetSpec
from federated.models.cnn_transformer import CNNTransformer
from federated.models.fedcon import FedConModel, ModelOutput
from federated.models.resnet import RESNET50_FEATURES, cifar_resnet50
from federated.models.simple_cnn import SimpleCNN


def _simple_cnn(spec: DatasetSpec) -> tuple[nn.Module, int]:
    return SimpleCNN(spec.channels, spec.height, spec.width), SimpleCNN.feature_dim


def _resnet50(spec: DatasetSpec) -> tuple[nn.Module, int]:
    return cifar_resnet50(spec.channels), RESNET50_FEATURES


def _cnn_transformer(spec: DatasetSpec) -> tuple[nn.Module, int]:
    return CNNTransformer(spec.channels, spec.height, spec.width), CNNTransformer.feature_dim


# name -> builder(spec) returning (encoder, feature_dim)
MODELS: dict[str, Callable[[DatasetSpec], tuple[nn.Module, int]]] = {
    "simple-cnn": _simple_cnn,
    "resnet50": _resnet50,
    "cnn-transformer": _cnn_transformer,
}


def build_model(
    name: str, spec: DatasetSpec, out_dim: int = 256, projection_head: bool = True
) -> FedConModel:
    """A freshly initialised model ``name`` for images of ``spec`` (uses torch's RNG)."""
    encoder, feature_dim = MODELS[name](spec)
    return FedConModel(encoder, feature_dim, spec.n_classes, out_dim, projection_head)


__all__ = ["MODELS", "FedConModel", "ModelOutput", "build_model"]
