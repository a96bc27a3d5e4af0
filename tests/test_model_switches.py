"""Model switches on real images: the CNN-Transformer, no projection head for every
method, MOON with k > 1 previous models; parameter counts against the layer description."""

from __future__ import annotations

import math

import pytest
import torch

from federated.algorithms import ALGORITHMS
from federated.config.run_config import RunConfig
from federated.data import dataset_spec
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.models import build_model
from federated.registry import load_method
from tests.conftest import batchnorm_model_for
from tests.short_runs import short_run
from tests.test_models import conv, head, linear, n_params


def batch_norm(channels: int) -> int:
    return 2 * channels  # weight and bias (running statistics are buffers)


def transformer_layer(width: int, feedforward: int) -> int:
    attention = 3 * width * width + 3 * width + linear(width, width)  # in_proj + out_proj
    mlp = linear(width, feedforward) + linear(feedforward, width)
    return attention + mlp + 2 * 2 * width  # two LayerNorms


def cnn_transformer_encoder(channels: int, height: int, width: int) -> int:
    convs = 0
    for cin, cmid, cout in ((channels, 32, 64), (64, 128, 128), (128, 256, 256)):
        convs += conv(cin, cmid, 3) + batch_norm(cmid) + conv(cmid, cout, 3) + batch_norm(cout)
    tokens = (height // 8) * (width // 8)  # three 2x2 max-pools
    return convs + tokens * 256 + 6 * transformer_layer(256, 2048)


@pytest.mark.parametrize(("dataset", "tokens"), [("fmnist", 9), ("cifar10", 16)])
@pytest.mark.parametrize("projection_head", [True, False])
def test_cnn_transformer_matches_the_layer_description(dataset, tokens, projection_head):
    spec = dataset_spec(dataset)
    model = build_model("cnn-transformer", spec, out_dim=128, projection_head=projection_head)
    encoder = cnn_transformer_encoder(spec.channels, spec.height, spec.width)
    assert n_params(model.encoder) == encoder
    assert model.encoder.position.shape == (1, tokens, 256)
    rest = head(256, 128, 10) if projection_head else linear(256, 10)
    assert n_params(model) == encoder + rest
    model.eval()
    with torch.no_grad():
        out = model(torch.zeros(2, *spec.shape))
    assert out.features.shape == (2, 256)
    assert out.projection.shape == (2, 128 if projection_head else 256)
    assert out.logits.shape == (2, 10)


def fmnist_config(**overrides) -> RunConfig:
    values = short_run("fmnist", parties=3, rounds=1, fractions=(0.01, 0.05), device="auto")
    values |= dict(seed=0, out_dim=64) | overrides
    return RunConfig.from_dict(values).resolved()


def assert_trained(rows: list[dict], rounds: int) -> None:
    assert len(rows) == rounds
    for row in rows:
        assert row["diverged"] is False
        assert 0.0 <= row["test_acc"] <= 1.0
        assert math.isfinite(row["test_loss"]) and math.isfinite(row["train_loss"])


def test_cnn_transformer_trains_with_moon_on_fashion_mnist(fmnist):
    """Two rounds so that the second has MOON's contrastive term (global and previous
    models are frozen copies of the transformer, in eval mode)."""
    config = fmnist_config(
        algorithm="moon",
        model="cnn-transformer",
        n_parties=2,
        data_fraction=0.004,
        test_fraction=0.02,
        rounds=2,
    )
    run = FederatedRun(config, fmnist)
    before = {k: v.clone() for k, v in run.global_model.state_dict().items()}
    rows = [run.run_round() for _ in range(2)]
    assert_trained(rows, 2)
    assert math.isnan(rows[0]["con_loss"]) and math.isfinite(rows[1]["con_loss"])
    changed = [k for k, v in run.global_model.state_dict().items() if not torch.equal(v, before[k])]
    assert "encoder.position" in changed
    assert "encoder.transformer.layers.5.linear2.weight" in changed
    assert any("running_mean" in k for k in changed)  # BatchNorm statistics are averaged too


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_method_trains_without_a_projection_head(fmnist, algorithm):
    """Two rounds: MOON and l2rep compare representations (here the 84 features)."""
    # every round's pooled test values are checked: own-model methods score them each round
    own = load_method("algorithm", algorithm).evaluates_own_models()
    config = fmnist_config(
        algorithm=algorithm,
        projection_head=False,
        rounds=2,
        **batchnorm_model_for(algorithm),
        **({"personal_test_every": 1} if own else {}),
    )
    run = FederatedRun(config, fmnist)
    assert isinstance(run.global_model.head, torch.nn.Identity)
    assert n_params(run.global_model) == n_params(run.global_model.encoder) + linear(84, 10)
    rows = [run.run_round() for _ in range(2)]
    assert_trained(rows, 2)
    if algorithm == "moon":
        assert math.isfinite(rows[1]["con_loss"])
    if algorithm == "l2rep":
        assert rows[1]["l2_loss"] > 0


@pytest.mark.parametrize(("k", "negatives"), [(2, [0, 1, 2, 2]), (3, [0, 1, 2, 3])])
def test_moon_with_k_previous_models_uses_those_that_exist(fmnist, k, negatives):
    """Round t has min(t - 1, k) negatives (Appendix G); the pool keeps the newest k."""
    run = FederatedRun(fmnist_config(algorithm="moon", prev_models=k, rounds=4), fmnist)
    rows = []
    for _ in range(4):
        rows.append(run.run_round())
        pools = [state["prev"] for state in run.party_states]
        assert all(len(pool) == min(len(rows), k) for pool in pools)
    assert_trained(rows, 4)
    assert [r["negatives"] for r in rows] == negatives
    assert math.isnan(rows[0]["con_loss"])
    assert all(math.isfinite(r["con_loss"]) for r in rows[1:])


def test_moon_pool_keeps_the_newest_models(fmnist):
    """After three rounds with k = 2, a party's pool is its round-2 and round-3 models."""
    config = fmnist_config(algorithm="moon", prev_models=2, n_parties=2, rounds=3)
    run = FederatedRun(config, fmnist)
    ended = []
    for _ in range(3):
        run.run_round()
        ended.append(run.party_states[0]["prev"][-1])
    pool = run.party_states[0]["prev"]
    assert len(pool) == 2
    assert not torch.equal(ended[0]["classifier.weight"], pool[0]["classifier.weight"])
    for saved, expected in zip(pool, ended[1:]):
        assert all(torch.equal(saved[key], expected[key]) for key in saved)


def test_same_seed_same_rows_for_a_switched_configuration(fmnist):
    config = fmnist_config(algorithm="moon", prev_models=2, projection_head=False, rounds=2)
    a = [r["test_loss"] for r in run_rounds(config, fmnist)]
    b = [r["test_loss"] for r in run_rounds(config, fmnist)]
    assert a == b
