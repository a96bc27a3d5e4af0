"""Model factories importable by path (``tests.model_factories:NAME``) for the tests."""

from __future__ import annotations

from torch import nn

from federated.models import ModelSpec

FEATURES = 32


def small_encoder(spec: ModelSpec) -> nn.Module:
    """A working encoder: conv, ReLU, 2x2 average pool, flatten -> 32 features."""
    return nn.Sequential(
        nn.Conv2d(spec.channels, FEATURES // 4, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
    )


def layer_norm_encoder(spec: ModelSpec) -> nn.Module:
    """A working encoder that packed execution cannot group: LayerNorm normalises over
    all of a sample's features, which a packed batch would share between parties."""
    return nn.Sequential(
        nn.Conv2d(spec.channels, FEATURES // 4, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
        nn.LayerNorm(FEATURES),
    )


def not_a_module(spec: ModelSpec) -> int:
    """Breaks the contract: returns no module."""
    return spec.n_classes


def feature_maps(spec: ModelSpec) -> nn.Module:
    """Breaks the contract: returns (B, C, H, W) feature maps, not (B, F) features."""
    return nn.Conv2d(spec.channels, 4, 3, padding=1)


NOT_CALLABLE = 3
