"""Record-level DP-SGD's gradient (Abadi et al., CCS 2016): each sample's gradient of
the supervised loss, clipped to L2 norm C over all parameters at once, summed, Gaussian
noise of standard deviation sigma·C added to the sum, divided by the batch size — what
Opacus computes for a module (``GradSampleModule`` and its optimizer), here with
``torch.func``: ``vmap`` over ``grad`` of the loss of one sample through
``functional_call`` (docs/privacy.md, "Record-level DP").

The noise is drawn on the CPU from a generator keyed by (seed, party, round, step), so
a run is the same on every device and a resumed run draws the same noise with no state;
each step's Poisson batch (each of the party's records kept independently with
probability q) comes from a second generator keyed the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from federated.runtime.seeding import STREAMS

#: the last key entry of a step's batch-sampling generator (its noise's key has none)
_SAMPLING = 1

#: one sample's supervised loss: (model, x of one sample, its target) -> scalar
SampleLoss = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


def per_sample_gradients(
    model: torch.nn.Module,
    names: list[str],
    loss: SampleLoss,
    x: torch.Tensor,
    y: torch.Tensor,
) -> list[torch.Tensor]:
    """Each sample's gradient of ``loss`` with respect to the parameters ``names`` of
    ``model``: one tensor per parameter, (B, *shape), the batch ``x``, ``y`` split into
    samples of one.  Buffers and the other parameters enter as constants.  An empty
    batch (a Poisson batch may be) has no gradients: (0, *shape) zeros."""
    weights = dict(model.named_parameters())
    if x.shape[0] == 0:
        return [weights[n].detach().new_zeros((0, *weights[n].shape)) for n in names]
    trained = {n: weights[n].detach() for n in names}
    fixed = {n: p.detach() for n, p in weights.items() if n not in trained}
    fixed.update(dict(model.named_buffers()))

    wrapped = _LossOf(model, loss)

    def one(params: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        # the wrapper holds the model as ``model``: its entries' names gain that prefix
        state = {f"model.{n}": t for n, t in {**params, **fixed}.items()}
        return functional_call(wrapped, state, (xi.unsqueeze(0), yi.unsqueeze(0)))

    grads = vmap(grad(one), in_dims=(None, 0, 0))(trained, x, y)
    return [grads[n] for n in names]


class _LossOf(torch.nn.Module):
    """``model`` under ``loss`` as one module, so ``functional_call`` swaps its weights."""

    def __init__(self, model: torch.nn.Module, loss: SampleLoss) -> None:
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.loss(self.model, x, y)


def clipped_sum(grads: list[torch.Tensor], clip_norm: float) -> list[torch.Tensor]:
    """The sum over samples of each sample's gradient scaled by min(1, C/||g_b||), its
    norm taken over all parameters as one vector (as Opacus's flat clipping)."""
    squares = torch.stack([g.flatten(1).pow(2).sum(1) for g in grads]).sum(0)
    norms = squares.sqrt()
    scale = (clip_norm / (norms + 1e-12)).clamp(max=1.0)
    return [torch.einsum("b,b...->...", scale.to(g.dtype), g) for g in grads]


def noise_generator(seed: int, party: int, round_index: int, step: int) -> torch.Generator:
    """The CPU generator of one local step's noise, keyed by the run's seed, the party,
    the round (0-based) and the step within its local training."""
    key = np.random.SeedSequence([seed, STREAMS["privacy"], party, round_index, step])
    return torch.Generator().manual_seed(int(key.generate_state(1, dtype=np.uint64)[0] >> 1))


def sampling_generator(seed: int, party: int, round_index: int, step: int) -> torch.Generator:
    """The CPU generator of one local step's Poisson batch (which records, then their
    augmentation), keyed as :func:`noise_generator` plus a tag that keeps the two apart."""
    key = np.random.SeedSequence([seed, STREAMS["privacy"], party, round_index, step, _SAMPLING])
    return torch.Generator().manual_seed(int(key.generate_state(1, dtype=np.uint64)[0] >> 1))


def poisson_sample(n_records: int, rate: float, generator: torch.Generator) -> torch.Tensor:
    """Positions ``0 .. n_records - 1`` each kept independently with probability
    ``rate`` (one uniform draw per record from ``generator``, in order): a Poisson
    batch, possibly empty, as a CPU long tensor in increasing order."""
    kept = torch.rand(n_records, generator=generator, dtype=torch.float64) < rate
    return kept.nonzero().flatten()


def private_gradient(
    grads: list[torch.Tensor],
    clip_norm: float,
    noise_multiplier: float,
    batch_size: float,
    generator: torch.Generator,
) -> list[torch.Tensor]:
    """DP-SGD's gradient from per-sample ``grads``: the clipped sum plus N(0, (sigma·C)²)
    per entry (drawn on the CPU in parameter order), divided by ``batch_size`` (under
    Poisson batches the expected batch size, a constant: the drawn size is private)."""
    total = clipped_sum(grads, clip_norm)
    std = noise_multiplier * clip_norm
    out = []
    for t in total:
        noise = torch.randn(t.shape, generator=generator, dtype=t.dtype) * std
        out.append((t + noise.to(t.device)) / batch_size)
    return out
