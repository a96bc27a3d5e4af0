"""2x2 max-pooling, bit-identical to ``F.max_pool2d(x, 2)`` and several times faster on CPU.

PyTorch's CPU ``max_pool2d`` forward scans each window element by element and costs
about 1.4 ms for a (64, 6, 28, 28) batch — a quarter of simple-cnn's whole training
step on one core — while the same maxima as three elementwise ``torch.maximum`` over
the four strided sub-grids cost about 0.18 ms.  When a gradient is needed, the forward
also records which window element ``max_pool2d`` would have picked (the first maximum in
its scan order: top-left, top-right, bottom-left, bottom-right) and the backward is
ATen's own ``max_pool2d_with_indices_backward`` with those indices.  Values and gradients
are therefore exactly those of ``max_pool2d`` for finite inputs (tests compare them bit
for bit, ties and odd sizes included), so swapping it in changes no result.  A NaN in a
window is where they part: the maximum is NaN either way, but the gradient goes to the
window's last element instead of the NaN (only a run that has already diverged sees
this).  On CUDA, and for channels-last tensors on the CPU (whose ATen kernel is
vectorised over channels, and returns channels-last gradients that the ReLU before it
needs to stay fast), ``max_pool2d`` is fast and is used as it is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _corners(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x[:, :, 0::2, 0::2], x[:, :, 0::2, 1::2], x[:, :, 1::2, 0::2], x[:, :, 1::2, 1::2]


def _window_origins(x: torch.Tensor) -> torch.Tensor:
    """(h/2, w/2) flat input index of each window's top-left element."""
    w = x.shape[-1]
    rows = torch.arange(0, x.shape[-2], 2, device=x.device).view(-1, 1) * w
    return rows + torch.arange(0, w, 2, device=x.device).view(1, -1)


class _MaxPool2x2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        a, b, c, d = _corners(x)
        out = torch.maximum(torch.maximum(a, b), torch.maximum(c, d))
        if ctx.needs_input_grad[0]:
            # Flat input index of the first corner equal to the maximum (max_pool2d's
            # choice on ties), for ATen's own max-pool backward.  Boolean arithmetic:
            # nested torch.where over scalars is several times slower here.
            first_a, first_b = a == out, b == out
            bottom = ~(first_a | first_b)  # neither top corner holds the maximum
            right = (~first_a & first_b) | (bottom & ~(c == out))
            small = torch.uint8 if x.shape[-1] < 255 else torch.int64  # the offset's range
            offset = bottom.to(small) * x.shape[-1] + right.to(small)
            ctx.save_for_backward(x, _window_origins(x) + offset)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        x, indices = ctx.saved_tensors
        return torch.ops.aten.max_pool2d_with_indices_backward(
            grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices
        )


class MaxPool2x2(torch.nn.Module):
    """Module form of :func:`max_pool2x2` (a drop-in for ``nn.MaxPool2d(2)``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_pool2x2(x)


def _channels_last(x: torch.Tensor) -> bool:
    return not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)


def max_pool2x2(x: torch.Tensor) -> torch.Tensor:
    """``F.max_pool2d(x, 2)`` for NCHW tensors (odd sizes drop the last row/column)."""
    # under a torch.func transform (record-level DP's per-sample gradients, vmap over
    # grad) the autograd.Function below cannot run: max_pool2d, the same values
    if x.device.type != "cpu" or _channels_last(x) or torch._C._are_functorch_transforms_active():
        return F.max_pool2d(x, 2)
    h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
    if (h, w) != tuple(x.shape[-2:]):
        x = x[:, :, :h, :w]
    return _MaxPool2x2.apply(x)
