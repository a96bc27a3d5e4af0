"""The bare model step: the practical ceiling of training samples per second.

Forward, backward and SGD step of the same model (simple-cnn with its projection head)
on one batch of 64 normalised float images already in memory, with no data handling at
all, repeated.  Per algorithm, the step also does what its loss needs and nothing else:

* FedAvg: cross-entropy;
* FedProx: cross-entropy, then the proximal gradient mu·(w − w_global) added to the
  gradients (fused ``_foreach`` ops, the cheapest exact form);
* MOON: two frozen forwards up to the projection head (global and previous model), the
  contrastive loss of :mod:`federated.algorithms.moon`, cross-entropy.

The rate is the median over a few timed blocks of steps, after a warm-up.  The C
allocator is told to keep freed memory (:func:`federated.runtime.allocator.keep_freed_memory`):
otherwise a fresh process pays hundreds of page faults per step that a process which
has loaded a dataset may not, and the ceiling would depend on the process's history.
Page faults per step are reported (0 when the allocator keeps its memory).
"""

from __future__ import annotations

import copy
import statistics
import time
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.cases import BATCH_SIZE, MODEL
from benchmarks.memory import minor_faults
from federated.algorithms.moon import moon_contrastive_loss
from federated.config.run_config import RunConfig
from federated.models import build_model
from federated.runtime.allocator import keep_freed_memory
from federated.runtime.device import resolve_device

WARMUP_STEPS = 10
BLOCKS = 5


def step_function(config: RunConfig, device: torch.device):
    """A closure running one training step of ``config``'s algorithm on a fixed batch."""
    spec = config.spec
    torch.manual_seed(config.seed)
    model = build_model(MODEL, spec, config.out_dim, config.projection_head).to(device)
    frozen = [copy.deepcopy(model).eval().requires_grad_(False) for _ in range(2)]
    anchor = [p.detach().clone() for p in model.parameters()]
    params = list(model.parameters())
    optimizer = torch.optim.SGD(
        params,
        lr=config.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        fused=True,  # the engine's optimizer
    )
    x = torch.randn(BATCH_SIZE, *spec.shape, device=device)
    y = torch.randint(0, spec.n_classes, (BATCH_SIZE,), device=device)
    method = config.resolved().algorithm_params  # FedAvg declares neither mu nor tau
    algorithm = config.algorithm
    mu, tau = getattr(method, "mu", 0.0), getattr(method, "tau", 0.5)

    def step() -> None:
        out = model(x)
        loss = F.cross_entropy(out.logits, y)
        if algorithm == "moon":
            with torch.no_grad():
                z_glob = frozen[0].project(x)
                z_prev = frozen[1].project(x)
            loss = loss + mu * moon_contrastive_loss(out.projection, z_glob, [z_prev], tau)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if algorithm == "fedprox":
            with torch.no_grad():
                diffs = torch._foreach_sub([p.detach() for p in params], anchor)
                torch._foreach_add_([p.grad for p in params], diffs, alpha=mu)
        optimizer.step()

    return step


def measure_bare_step(
    algorithm: str, dataset: str, device: str = "cpu", threads: int = 1, seconds: float = 3.0
) -> dict[str, Any]:
    """Training samples per second of the bare step, about ``seconds`` of timing."""
    torch.set_num_threads(threads)
    kept = keep_freed_memory()
    config = RunConfig(algorithm=algorithm, dataset=dataset, model=MODEL, device=device)
    dev = resolve_device(device)
    step = step_function(config, dev)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    for _ in range(WARMUP_STEPS):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(WARMUP_STEPS):
        step()
    sync()
    per_step = (time.perf_counter() - start) / WARMUP_STEPS
    steps = max(1, round(seconds / BLOCKS / per_step))
    rates = []
    faults = minor_faults()
    for _ in range(BLOCKS):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        rates.append(steps * BATCH_SIZE / (time.perf_counter() - start))
    return {
        "samples_per_s": float(statistics.median(rates)),
        "steps_per_block": steps,
        "faults_per_step": (minor_faults() - faults) / (BLOCKS * steps),
        "allocator_pinned": kept,
    }
