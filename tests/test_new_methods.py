"""FedNova, FedDyn and FedAdam/FedYogi against hand computations: two parties, a linear
model (logistic regression, float64), two rounds, through the real local training
(:mod:`federated.execution.sequential`), the methods' hooks and aggregators and
the server optimizers.  The hand side re-derives every SGD step (momentum, weight decay)
from the analytic gradient and applies each paper's formulas directly.
"""

from __future__ import annotations

import copy

import pytest
import torch

from federated.algorithms import ALGORITHMS, Contribution, LocalJob
from federated.config.run_config import RunConfig
from federated.server import SERVER_OPTIMIZERS
from tests.linear_models import PassThrough, ce_gradient, linear_model
from tests.party_training import train_party

LR, MOMENTUM, WD = 0.1, 0.5, 0.01


def party_data(gen: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [
        (torch.randn(6, 4, generator=gen, dtype=torch.float64), torch.tensor([0, 1, 2, 1, 0, 2])),
        (torch.randn(3, 4, generator=gen, dtype=torch.float64), torch.tensor([2, 2, 1])),
    ]


def config(algorithm: str, server_optimizer: str = "avg", **options) -> RunConfig:
    return RunConfig.from_dict(
        dict(
            algorithm=algorithm,
            server_optimizer=server_optimizer,
            n_parties=2,
            lr=LR,
            momentum=MOMENTUM,
            weight_decay=WD,
            batch_size=3,
            local_epochs=1,
            **options,
        )
    )


class Engine:
    """The run's server-side wiring for a hand-made linear model: states, aggregator,
    server optimizer, one shared batch generator."""

    def __init__(self, cfg: RunConfig, model) -> None:
        self.config = cfg
        self.model = model.requires_grad_(False)
        self.algorithm = ALGORITHMS[cfg.algorithm](cfg, torch.Generator())
        self.server = SERVER_OPTIMIZERS[cfg.server_optimizer](cfg)
        self.server_state = self.algorithm.init_server_state(self.model)
        self.states = [self.algorithm.init_party_state(i) for i in range(cfg.n_parties)]
        self.batches = torch.Generator().manual_seed(7)

    def round(self, round_index: int, data) -> list[int]:
        aggregator = self.algorithm.aggregator(self.server_state, self.model)
        total = sum(len(y) for _, y in data)
        steps = []
        for party, (xs, ys) in enumerate(data):
            local = copy.deepcopy(self.model).requires_grad_(True)
            job = LocalJob(
                party,
                round_index,
                local,
                self.model,
                self.states[party],
                len(ys),
                xs.device,
                server=self.server_state,
            )
            self.algorithm.begin_local(job)
            result = train_party(
                job, self.algorithm, xs, ys, PassThrough(), self.config, self.batches
            )
            extras = self.algorithm.end_local(job)
            weights = local.state_dict()
            contribution = Contribution(
                party, weights, len(ys) / total, len(ys), result.steps, extras
            )
            aggregator.add(contribution)
            steps.append(result.steps)
        combined = aggregator.result()
        state = self.model.state_dict()
        keys = list(state)
        self.server.step([state[k] for k in keys], [combined[k] for k in keys])
        return steps

    def weights(self) -> list[torch.Tensor]:
        return [p.detach().clone() for p in self.model.parameters()]


class HandBatches:
    """The batch order train_party draws: one permutation per epoch from the same seed."""

    def __init__(self) -> None:
        self.gen = torch.Generator().manual_seed(7)

    def epoch(self, n: int, batch: int) -> list[torch.Tensor]:
        order = torch.randperm(n, generator=self.gen)
        per_epoch = max(1, n // batch)
        size = min(batch, n)
        return [order[i * size : (i + 1) * size] for i in range(per_epoch)]


def sgd_by_hand(w, xs, ys, batches, extra_gradient=None):
    """Local SGD with momentum and weight decay, as torch's SGD: returns (weights, steps)."""
    w = [t.clone() for t in w]
    buf = None
    for idx in batches:
        g = ce_gradient(w[0], w[1], xs[idx], ys[idx])
        if extra_gradient is not None:
            g = [a + b for a, b in zip(g, extra_gradient(w))]
        g = [gi + WD * wi for gi, wi in zip(g, w)]
        buf = g if buf is None else [MOMENTUM * b + gi for b, gi in zip(buf, g)]
        w = [wi - LR * bi for wi, bi in zip(w, buf)]
    return w, len(batches)


def assert_close(a, b, tol=1e-10):
    for s, t in zip(a, b):
        torch.testing.assert_close(s, t, rtol=tol, atol=tol)


def start(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    data = party_data(gen)
    w0 = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    b0 = torch.randn(3, generator=gen, dtype=torch.float64)
    return data, [w0, b0]


def test_fednova_normalises_by_step_counts_with_the_momentum_correction():
    """Party 0 (6 samples, batch 3) takes two steps, party 1 (3 samples) one:
    a_0 = 1 + (1 + rho), a_1 = 1; x <- x - tau_eff · sum_i p_i (x - y_i) / a_i."""
    data, x = start()
    engine = Engine(config("fednova"), linear_model(*x))
    hand = HandBatches()
    sizes = [len(y) for _, y in data]
    p = [n / sum(sizes) for n in sizes]
    for round_index in range(2):
        ys, taus = [], []
        for xs, labels in data:
            y, tau = sgd_by_hand(x, xs, labels, hand.epoch(len(labels), 3))
            ys.append(y)
            taus.append(tau)
        assert taus == [2, 1]
        a = [1 + (1 + MOMENTUM), 1.0]
        tau_eff = p[0] * a[0] + p[1] * a[1]
        x = [
            xk - tau_eff * sum(p[i] * (xk - ys[i][k]) / a[i] for i in range(2))
            for k, xk in enumerate(x)
        ]
        assert engine.round(round_index, data) == [2, 1]
        assert_close(engine.weights(), x)
    # the normalisation matters here: plain averaging gives another model
    fedavg = Engine(config("fedavg"), linear_model(*start()[1]))
    fedavg.round(0, data)
    fedavg.round(1, data)
    assert not torch.allclose(fedavg.weights()[0], engine.weights()[0])


def test_fednova_with_equal_step_counts_is_fedavg():
    data, x = start()
    equal = [(xs[:3], ys[:3]) for xs, ys in data]
    nova, avg = (Engine(config(m), linear_model(*x)) for m in ("fednova", "fedavg"))
    for r in range(2):
        nova.round(r, equal)
        avg.round(r, equal)
    assert_close(nova.weights(), avg.weights(), tol=1e-12)


def test_feddyn_follows_algorithm_1_of_its_paper():
    """Party objective L_k(w) - <g_k, w> + alpha/2 ||w - theta||²; after training
    g_k <- g_k - alpha (w_k - theta); server h <- h - alpha/N sum_k (w_k - theta),
    theta <- sum_k p_k w_k - h / alpha.  Two full-batch epochs per party."""
    alpha = 0.3
    data, theta = start(1)
    cfg = config("feddyn", alpha=alpha).replace(batch_size=6, local_epochs=2)
    engine = Engine(cfg, linear_model(*theta))
    sizes = [len(y) for _, y in data]
    p = [n / sum(sizes) for n in sizes]
    g = [[torch.zeros_like(t) for t in theta] for _ in data]
    h = [torch.zeros_like(t) for t in theta]
    for round_index in range(2):
        locals_ = []
        for k, (xs, labels) in enumerate(data):
            full = [torch.arange(len(labels))] * 2

            def dyn(w, k=k, anchor=theta):
                return [alpha * (wi - ai) - gi for wi, ai, gi in zip(w, anchor, g[k])]

            w_k, _ = sgd_by_hand(theta, xs, labels, full, dyn)
            locals_.append(w_k)
        for k, w_k in enumerate(locals_):
            g[k] = [gi - alpha * (wi - ti) for gi, wi, ti in zip(g[k], w_k, theta)]
        h = [
            hj - alpha / 2 * sum(locals_[k][j] - theta[j] for k in range(2))
            for j, hj in enumerate(h)
        ]
        theta = [sum(p[k] * locals_[k][j] for k in range(2)) - h[j] / alpha for j in range(len(h))]
        engine.round(round_index, data)
        assert_close(engine.weights(), theta)
        assert_close(engine.server_state["h"], h)
        for state, g_k in zip(engine.states, g):
            assert_close(state["g"], g_k)
    assert float(h[0].abs().max()) > 0


@pytest.mark.parametrize("rule", ["fedadam", "fedyogi"])
def test_adaptive_server_optimizers_follow_reddi_et_al(rule):
    """FedAvg parties, then m <- b1 m + (1-b1) d, v <- Adam/Yogi rule, x <- x + eta m /
    (sqrt(v) + eps), with d = weighted mean - x, m_0 = 0, v_0 = eps²."""
    eta, b1, b2, eps = 0.05, 0.8, 0.9, 0.01
    data, x = start(2)
    options = dict(adaptive_lr=eta, adaptive_beta1=b1, adaptive_beta2=b2, adaptive_eps=eps)
    engine = Engine(config("fedavg", rule, **options), linear_model(*x))
    hand = HandBatches()
    sizes = [len(y) for _, y in data]
    p = [n / sum(sizes) for n in sizes]
    m = [torch.zeros_like(t) for t in x]
    v = [torch.full_like(t, eps**2) for t in x]
    for round_index in range(2):
        ys = [sgd_by_hand(x, xs, lab, hand.epoch(len(lab), 3))[0] for xs, lab in data]
        d = [p[0] * ys[0][k] + p[1] * ys[1][k] - x[k] for k in range(len(x))]
        m = [b1 * mk + (1 - b1) * dk for mk, dk in zip(m, d)]
        if rule == "fedadam":
            v = [b2 * vk + (1 - b2) * dk**2 for vk, dk in zip(v, d)]
        else:
            v = [vk - (1 - b2) * dk**2 * torch.sign(vk - dk**2) for vk, dk in zip(v, d)]
        x = [xk + eta * mk / (vk.sqrt() + eps) for xk, mk, vk in zip(x, m, v)]
        engine.round(round_index, data)
        assert_close(engine.weights(), x)


@pytest.mark.parametrize(
    ("values", "field", "allowed"),
    [
        (dict(algorithm="feddyn", alpha=0.0), "alpha", "a number > 0"),
        (dict(server_optimizer="fedadam", adaptive_beta2=1.0), "adaptive_beta2", "[0, 1)"),
        (dict(server_optimizer="fedyogi", adaptive_eps="x"), "adaptive_eps", "a number"),
        # a name no registered method declares (a plug-in's, not chosen) is refused; one
        # that some method declares is inert here, warned about (test_inert_settings)
        (dict(algorithm="fedavg", smoothing=0.1), "smoothing", "a parameter of algorithm fedavg"),
    ],
)
def test_method_parameters_are_checked_where_configs_are(values, field, allowed):
    from federated.config.run_config import ConfigError

    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(values).resolved()
    assert info.value.field == field and allowed in str(info.value)


def test_method_options_are_flat_resolved_and_follow_the_method():
    feddyn = RunConfig.from_dict({"algorithm": "feddyn", "server_optimizer": "fedyogi"}).resolved()
    flat = feddyn.to_dict()
    assert flat["alpha"] == 0.01 and flat["adaptive_beta2"] == 0.99  # defaults, resolved
    assert feddyn.algorithm_params.alpha == 0.01
    assert RunConfig.from_dict(flat).resolved() == feddyn  # params.json rebuilds the run
    fedavg = feddyn.replace(algorithm="fedavg", server_optimizer="avg")
    assert "alpha" not in fedavg.to_dict() and "adaptive_lr" not in fedavg.to_dict()
    assert feddyn.replace(alpha=0.5).algorithm_params.alpha == 0.5
