"""Arithmetic yardsticks: the model's FLOPs per training sample and the matmul peak.

FLOPs are counted by :class:`torch.utils.flop_counter.FlopCounterMode` on one forward
pass (convolutions and matrix products; element-wise ops are not counted).  By the
usual convention a training step costs the forward once and the backward twice, so
3 x forward per sample; MOON adds two frozen forwards (global and previous model, up to
the projection head).  The matmul peak is the best of several large float32 matrix
products on the chosen device and thread count: what the machine's BLAS sustains.
"""

from __future__ import annotations

import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.cases import BATCH_SIZE, MODEL
from federated.config.run_config import RunConfig
from federated.models import build_model

# Frozen forwards up to the projection head per training sample: MOON runs this round's
# global model and one previous model (k = 1).
FROZEN_FORWARDS = {"moon": 2}


def forward_flops_per_sample(dataset: str, out_dim: int = 256) -> dict[str, float]:
    """FLOPs of one sample's forward pass (``forward``) and of its projection only
    (``projection``: what a frozen model computes for MOON)."""
    spec = RunConfig(dataset=dataset).spec
    model = build_model(MODEL, spec, out_dim)
    x = torch.zeros(BATCH_SIZE, *spec.shape)
    with torch.no_grad():
        with FlopCounterMode(display=False) as counter:
            model(x)
        forward = counter.get_total_flops() / BATCH_SIZE
        with FlopCounterMode(display=False) as counter:
            model.project(x)
        projection = counter.get_total_flops() / BATCH_SIZE
    return {"forward": forward, "projection": projection}


def train_flops_per_sample(algorithm: str, forward: float, projection: float) -> float:
    """FLOPs of one training sample: 3 x forward, plus the method's frozen forwards."""
    return 3.0 * forward + FROZEN_FORWARDS.get(algorithm, 0) * projection


def matmul_peak_gflops(device: str = "cpu", size: int = 2048, repeats: int = 5) -> float:
    """Best float32 ``size`` x ``size`` matmul rate on ``device``, in GFLOP/s (10^9/s).

    Uses the process's current torch thread count."""
    dev = torch.device(device)
    a = torch.randn(size, size, device=dev)
    b = torch.randn(size, size, device=dev)
    torch.mm(a, b)  # first call: BLAS set-up, CUDA context
    best = float("inf")
    for _ in range(repeats):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        start = time.perf_counter()
        torch.mm(a, b)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e9
