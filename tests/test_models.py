"""Model shapes, outputs and parameter counts against the layer descriptions."""

from __future__ import annotations

import pytest
import torch

from federated.data import dataset_spec
from federated.models import build_model


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def linear(i: int, o: int) -> int:
    return i * o + o


def conv(i: int, o: int, k: int) -> int:
    return i * o * k * k + o


def head(features: int, out_dim: int, classes: int) -> int:
    return linear(features, features) + linear(features, out_dim) + linear(out_dim, classes)


@pytest.mark.parametrize(("dataset", "flat"), [("cifar10", 400), ("fmnist", 256)])
def test_simple_cnn_matches_the_paper(dataset, flat):
    spec = dataset_spec(dataset)
    model = build_model("simple-cnn", spec, out_dim=256)
    encoder = conv(spec.channels, 6, 5) + conv(6, 16, 5) + linear(flat, 120) + linear(120, 84)
    assert n_params(model.encoder) == encoder
    assert n_params(model) == encoder + head(84, 256, 10)
    out = model(torch.zeros(5, *spec.shape))
    assert out.features.shape == (5, 84)
    assert out.projection.shape == (5, 256)
    assert out.logits.shape == (5, 10)


def test_without_projection_head_the_output_layer_sits_on_the_features():
    spec = dataset_spec("cifar10")
    model = build_model("simple-cnn", spec, out_dim=256, projection_head=False)
    out = model(torch.zeros(2, *spec.shape))
    assert torch.equal(out.projection, out.features)
    assert out.logits.shape == (2, 10)
    assert n_params(model) == n_params(model.encoder) + linear(84, 10)


def test_resnet50_cifar_stem():
    spec = dataset_spec("cifar100")
    model = build_model("resnet50", spec, out_dim=128)
    stem = model.encoder.conv1
    assert (stem.kernel_size, stem.stride, stem.in_channels) == ((3, 3), (1, 1), 3)
    assert isinstance(model.encoder.maxpool, torch.nn.Identity)
    # torchvision's ResNet-50 has 25,557,032 parameters: minus the 7x7 stem (9,408) and
    # fc (2,049,000), plus the 3x3 stem (1,728)
    assert n_params(model.encoder) == 25_557_032 - 9_408 - 2_049_000 + 1_728
    assert n_params(model) == n_params(model.encoder) + head(2048, 128, 100)
    model.eval()
    with torch.no_grad():
        out = model(torch.zeros(2, *spec.shape))
    assert out.features.shape == (2, 2048) and out.logits.shape == (2, 100)


def test_project_equals_the_forward_projection():
    spec = dataset_spec("cifar10")
    torch.manual_seed(0)
    model = build_model("simple-cnn", spec).eval()
    x = torch.randn(3, *spec.shape)
    assert torch.equal(model.project(x), model(x).projection)
