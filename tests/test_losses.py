"""Party objectives against closed forms: MOON's contrastive loss, FedProx's gradient,
the l2-representation term."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from federated.algorithms import ALGORITHMS, LocalJob
from federated.algorithms.l2rep import l2_representation_term
from federated.algorithms.moon import moon_contrastive_loss
from federated.config.run_config import RunConfig
from federated.models import FedConModel


def cos(a, b) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def closed_form(z, z_glob, z_prevs, tau) -> float:
    """Mean over samples of -log(e^{s+/tau} / (e^{s+/tau} + sum_j e^{s_j/tau}))."""
    total = 0.0
    for b in range(len(z)):
        pos = math.exp(cos(z[b], z_glob[b]) / tau)
        negs = sum(math.exp(cos(z[b], zp[b]) / tau) for zp in z_prevs)
        total += -math.log(pos / (pos + negs))
    return total / len(z)


Z = [[1.0, 0.0, 2.0], [0.5, -1.0, 0.0]]
Z_GLOB = [[1.0, 0.1, 1.9], [0.0, -1.0, 0.5]]
Z_PREVS = [
    [[-1.0, 0.0, 1.0], [0.5, 1.0, 0.0]],
    [[0.0, 2.0, 0.0], [1.0, 1.0, 1.0]],
    [[3.0, 0.0, -1.0], [-0.5, -1.0, 0.2]],
]


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("tau", [0.5, 1.0])
def test_moon_contrastive_loss_equals_the_closed_form(k, tau):
    prevs = Z_PREVS[:k]
    got = moon_contrastive_loss(
        torch.tensor(Z, dtype=torch.float64),
        torch.tensor(Z_GLOB, dtype=torch.float64),
        [torch.tensor(p, dtype=torch.float64) for p in prevs],
        tau,
    )
    assert float(got) == pytest.approx(closed_form(Z, Z_GLOB, prevs, tau), rel=1e-12)


def test_moon_loss_is_log_two_when_local_global_and_previous_agree():
    z = torch.tensor(Z)
    assert float(moon_contrastive_loss(z, z, [z], 0.5)) == pytest.approx(math.log(2), rel=1e-6)


def test_l2_representation_term_equals_the_formula():
    z, zg = torch.tensor(Z, dtype=torch.float64), torch.tensor(Z_GLOB, dtype=torch.float64)
    expected = sum(math.dist(a, b) for a, b in zip(Z, Z_GLOB)) / len(Z)
    assert float(l2_representation_term(z, zg)) == pytest.approx(expected, rel=1e-12)


def _tiny_model(seed: int) -> FedConModel:
    torch.manual_seed(seed)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 6), torch.nn.ReLU())
    return FedConModel(encoder, 6, n_classes=3, out_dim=4).double()


def _job(model, global_model) -> LocalJob:
    return LocalJob(0, 0, model, global_model, {}, 8, torch.device("cpu"))


@pytest.mark.parametrize("mu", [0.0, 0.01, 1.0])
def test_fedprox_gradient_is_ce_gradient_plus_mu_times_drift(mu):
    local, global_model = _tiny_model(0), _tiny_model(1)
    x = torch.randn(8, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])

    F.cross_entropy(local(x).logits, y).backward()
    ce_grads = [p.grad.clone() for p in local.parameters()]
    local.zero_grad()

    config = RunConfig.from_dict({"algorithm": "fedprox", "mu": mu}).resolved()
    algo = ALGORITHMS["fedprox"](config, torch.Generator())
    job = _job(local, global_model)
    algo.begin_local(job)
    terms = algo.loss(job, local(x), x, y)
    terms.total.backward()
    parts = algo.after_backward(job)

    drift = [p.detach() - g.detach() for p, g in zip(local.parameters(), global_model.parameters())]
    for p, ce_grad, d in zip(local.parameters(), ce_grads, drift):
        torch.testing.assert_close(p.grad, ce_grad + mu * d, rtol=1e-12, atol=1e-12)
    expected_prox = 0.5 * mu * sum(float((d**2).sum()) for d in drift)
    assert float(parts["prox"]) == pytest.approx(expected_prox, rel=1e-10)


def test_fedprox_gradient_matches_autograd_of_the_proximal_term():
    local, global_model = _tiny_model(0), _tiny_model(1)
    x = torch.randn(8, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    mu = 0.3
    prox = sum(
        ((p - g.detach()) ** 2).sum() for p, g in zip(local.parameters(), global_model.parameters())
    )
    (F.cross_entropy(local(x).logits, y) + 0.5 * mu * prox).backward()
    autograd = [p.grad.clone() for p in local.parameters()]
    local.zero_grad()

    config = RunConfig.from_dict({"algorithm": "fedprox", "mu": mu}).resolved()
    algo = ALGORITHMS["fedprox"](config, torch.Generator())
    job = _job(local, global_model)
    algo.begin_local(job)
    algo.loss(job, local(x), x, y).total.backward()
    algo.after_backward(job)
    for p, expected in zip(local.parameters(), autograd):
        torch.testing.assert_close(p.grad, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mu", [0.0, 0.5])
def test_l2rep_objective_is_ce_plus_mu_times_distance_to_the_frozen_global_representation(mu):
    local, global_model = _tiny_model(0), _tiny_model(1).requires_grad_(False)
    x = torch.randn(8, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    config = RunConfig.from_dict({"algorithm": "l2rep", "mu": mu}).resolved()
    algo = ALGORITHMS["l2rep"](config, torch.Generator())
    job = _job(local, global_model)
    out = local(x)
    terms = algo.loss(job, out, x, y)

    ce = float(F.cross_entropy(out.logits.detach(), y))
    z, z_glob = out.projection.tolist(), global_model.project(x).tolist()
    distance = sum(math.dist(a, b) for a, b in zip(z, z_glob)) / len(z)
    assert float(terms.total.detach()) == pytest.approx(ce + mu * distance, rel=1e-12)
    assert float(terms.parts["l2"]) == pytest.approx(distance, rel=1e-12)
    assert float(terms.parts["ce"]) == pytest.approx(ce, rel=1e-12)
    terms.total.backward()
    assert all(p.grad is None for p in global_model.parameters())  # the global model is frozen
