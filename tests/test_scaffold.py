"""SCAFFOLD (option II) against a hand computation, its server-side scaling and its bytes.

With one local step the option II control variate has a closed form: the step is
``y = x - lr·(g + wd·x) - lr·(c - c_i)`` (SGD momentum does nothing on a first step;
weight decay does), so ``c_i+ = c_i - c + (x - y)/lr = g + wd·x`` and
``delta_i = c_i+ - c_i``; the server moves ``c`` by ``sum_{drawn} delta_i / N``.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from federated.algorithms import ALGORITHMS
from federated.algorithms.base import Contribution, LocalJob
from federated.config.run_config import RunConfig
from federated.data import dataset_spec
from federated.engine.round_loop import FederatedRun
from federated.models import build_model
from tests.conftest import tiny
from tests.linear_models import PassThrough, ce_gradient, linear_model
from tests.party_training import train_party
from tests.short_runs import short_run

LR, WD = 0.1, 0.05


def by_hand(x, c, c_locals, grads, sizes, n_parties):
    """One SCAFFOLD round with one local step per party: (new global, new c, new c_i's)."""
    total = sum(sizes)
    new_global = [torch.zeros_like(t) for t in x]
    new_c = [t.clone() for t in c]
    new_locals = []
    for g, c_i, size in zip(grads, c_locals, sizes):
        y = [xt - LR * (gt + WD * xt) - LR * (ct - cit) for xt, gt, ct, cit in zip(x, g, c, c_i)]
        c_plus = [cit - ct + (xt - yt) / LR for cit, ct, xt, yt in zip(c_i, c, x, y)]
        new_locals.append(c_plus)
        for k in range(len(x)):
            new_global[k] += size / total * y[k]
            new_c[k] += (c_plus[k] - c_i[k]) / n_parties
    return new_global, new_c, new_locals


def close(a: list[torch.Tensor], b: list[torch.Tensor], **tol) -> None:
    assert len(a) == len(b)
    for s, t in zip(a, b):
        torch.testing.assert_close(s, t, **tol)


def test_one_step_update_matches_the_hand_computation_on_a_linear_model():
    """Two rounds through the real local training (train_party) and Scaffold's hooks:
    round 1 from zero control variates, round 2 with a non-zero correction."""
    gen = torch.Generator().manual_seed(0)
    data = [
        (torch.randn(5, 4, generator=gen, dtype=torch.float64), torch.tensor([0, 1, 2, 1, 0])),
        (torch.randn(3, 4, generator=gen, dtype=torch.float64), torch.tensor([2, 2, 1])),
    ]
    sizes = [len(y) for _, y in data]
    config = RunConfig(
        algorithm="scaffold", n_parties=2, lr=LR, weight_decay=WD, momentum=0.9, local_epochs=1
    )
    w0 = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    b0 = torch.randn(3, generator=gen, dtype=torch.float64)
    global_model = linear_model(w0, b0).requires_grad_(False)
    algo = ALGORITHMS["scaffold"](config, torch.Generator())
    server = algo.init_server_state(global_model)
    states = [algo.init_party_state(i) for i in range(2)]

    # control variates start at zero
    assert all(float(t.abs().max()) == 0.0 for t in server["c"])
    assert all(s["c"] is None for s in states)  # None: the zero variate, not yet materialised

    c = [torch.zeros_like(w0), torch.zeros_like(b0)]
    c_locals = [[torch.zeros_like(w0), torch.zeros_like(b0)] for _ in data]
    for round_index in range(2):
        x = [t.detach().clone() for t in global_model.parameters()]
        grads = [ce_gradient(x[0], x[1], xs, ys) for xs, ys in data]
        expected = by_hand(x, c, c_locals, grads, sizes, config.n_parties)

        aggregator = algo.aggregator(server, global_model)
        for party, ((xs, ys), size) in enumerate(zip(data, sizes)):
            local = copy.deepcopy(global_model).requires_grad_(True)
            job = LocalJob(
                party,
                round_index,
                local,
                global_model,
                states[party],
                size,
                xs.device,
                server=server,
            )
            algo.begin_local(job)
            result = train_party(job, algo, xs, ys, PassThrough(), config, torch.Generator())
            assert result.steps == 1
            extras = algo.end_local(job)
            weights = local.state_dict()
            aggregator.add(Contribution(party, weights, size / sum(sizes), size, 1, extras))
        global_model.load_state_dict(aggregator.result())

        exp_global, c, c_locals = expected
        close(list(global_model.parameters()), exp_global, rtol=1e-12, atol=1e-12)
        close(server["c"], c, rtol=1e-10, atol=1e-10)
        for state, c_i in zip(states, c_locals):
            close(state["c"], c_i, rtol=1e-10, atol=1e-10)
            assert all(t.device.type == "cpu" for t in state["c"])
        # option II with one step: c_i is the party's full gradient (weight decay included)
        for c_i, g in zip(c_locals, grads):
            close(c_i, [g[0] + WD * x[0], g[1] + WD * x[1]], rtol=1e-10, atol=1e-10)
    assert float(torch.linalg.vector_norm(c[0])) > 0  # the correction was non-zero in round 2


def norm(tensors: list[torch.Tensor]) -> float:
    return float(torch.linalg.vector_norm(torch.cat([t.flatten() for t in tensors])))


def party_gradient(run: FederatedRun, party: int) -> list[torch.Tensor]:
    """Mean cross-entropy gradient of ``party``'s whole data at the current global model."""
    model = copy.deepcopy(run.global_model).requires_grad_(True).train()
    images, labels = run.party_data(party)
    F.cross_entropy(model(run.augmenter.normalize(images)).logits, labels).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def test_federated_run_matches_the_hand_computation_with_one_step_per_party(fmnist):
    """The round loop's wiring (steps, receive, server scaling): real Fashion-MNIST
    images, a batch larger than any party so each party takes exactly one step."""
    values = short_run("fmnist", parties=3, rounds=2, fractions=(0.002, 0.01), device="auto")
    config = RunConfig(**values, algorithm="scaffold", batch_size=10_000, lr=LR, weight_decay=WD)
    run = FederatedRun(config, fmnist)
    n = config.n_parties
    zeros = [torch.zeros_like(p) for p in run.global_model.parameters()]
    c, c_locals = zeros, [zeros] * n
    for _ in range(2):
        x = [p.detach().clone() for p in run.global_model.parameters()]
        grads = [party_gradient(run, i) for i in range(n)]
        exp_global, c, c_locals = by_hand(x, c, c_locals, grads, run.party_sizes, n)
        row = run.run_round()
        close(list(run.global_model.parameters()), exp_global, rtol=1e-5, atol=1e-6)
        # c = (x - y)/lr amplifies float32 rounding of y by 1/lr
        close(run.server_state["c"], c, rtol=1e-4, atol=1e-5)
        for state, c_i in zip(run.party_states, c_locals):
            close(state["c"], c_i, rtol=1e-4, atol=1e-5)
        assert row["c_global_norm"] == pytest.approx(norm(c), rel=1e-4)
        assert row["c_local_norm"] == pytest.approx(sum(norm(ci) for ci in c_locals) / n, rel=1e-4)


def test_server_variate_is_the_mean_over_all_parties_under_sampling(synthetic):
    """c <- c + sum_{drawn} delta_i / N keeps c = (1/N)·sum over all N parties of c_i
    (never-drawn parties count as zero); dividing by the number drawn would break it."""
    config = tiny(algorithm="scaffold", n_parties=4, sample_fraction=0.5, rounds=3)
    run = FederatedRun(config, synthetic)
    for _ in range(3):
        run.run_round()
    drawn_once = [s["c"] for s in run.party_states if s["c"] is not None]
    assert 2 <= len(drawn_once) <= 4
    for k, c_k in enumerate(run.server_state["c"]):
        expected = sum(c_i[k] for c_i in drawn_once) / 4
        torch.testing.assert_close(c_k, expected, rtol=1e-5, atol=1e-7)
    assert float(torch.linalg.vector_norm(run.server_state["c"][0])) > 0


@pytest.mark.parametrize("sample_fraction", [1.0, 0.5])
def test_bytes_are_model_state_plus_one_variate_each_way(synthetic, sample_fraction):
    config = tiny(algorithm="scaffold", n_parties=4, sample_fraction=sample_fraction)
    model = build_model(config.model, dataset_spec("synthetic"), config.out_dim)
    state_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    rows = [FederatedRun(config, synthetic).run_round()]
    drawn = round(4 * sample_fraction)
    assert rows[0]["parties_this_round"] == drawn
    assert rows[0]["bytes_up"] == rows[0]["bytes_down"] == drawn * (state_bytes + param_bytes)
    assert rows[0]["cum_bytes"] == 2 * drawn * (state_bytes + param_bytes)
