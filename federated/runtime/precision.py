"""The run's arithmetic precision: ``fp32`` (default) or ``bf16-mixed``, in one place.

Under ``bf16-mixed`` (PyTorch Lightning's name for it) the forward passes and the loss
run under ``torch.autocast(<device type>, dtype=torch.bfloat16)``: convolutions and
matrix products in bfloat16, reductions and losses in float32 (autocast's own op lists).
Everything that persists stays float32: the weights (so their gradients are float32),
the SGD momentum, the methods' state (SCAFFOLD's control variates, FedDyn's h and g_k,
MOON's previous models) and aggregation.  No loss scaling: bfloat16 has float32's
exponent range.

:class:`Precision` is the context every training step and every evaluation pass enters
(:meth:`Precision.autocast`); a method or task needs no branch of its own.  What a
method must compute in float32 whatever the run's precision (MOON's similarities and
contrastive term) it computes under :func:`full_precision` on :func:`float32` inputs:
both are no-ops in an fp32 run.

Support is checked once per run on the machine that trains (:func:`precision_for_run`,
with an injectable probe):

* **CPU, x86**: ``/proc/cpuinfo`` flags ``avx512_bf16`` or ``amx_bf16`` — native bfloat16
  kernels (oneDNN).  AVX-512 without them (``avx512bw``) — oneDNN emulates bfloat16 by
  conversions: accepted with a warning (slower than fp32).  Neither: refused in one line.
* **CPU, Arm**: the ``bf16`` feature in ``/proc/cpuinfo``; else refused.
* **CPU without /proc/cpuinfo** (macOS, Windows): torch's own answer,
  ``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` — warned (native or emulated cannot
  be told apart there); no: refused.
* **CUDA**: ``torch.cuda.is_bf16_supported(including_emulation=False)`` native (Ampere
  and later); emulated on older GPUs (warned); else refused.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from federated.runtime.cpu_name import cpu_flags, cpu_model
from federated.runtime.device import DeviceUnavailableError
from federated.runtime.precision_names import (
    BF16_MIXED,
    FP32,
    EmulatedPrecisionWarning,
)

#: x86 flags of native bfloat16 arithmetic (AVX-512 BF16 dot products, AMX tiles)
NATIVE_X86_FLAGS = ("avx512_bf16", "amx_bf16")
#: the x86 flag under which oneDNN emulates bfloat16 (AVX-512 byte/word instructions)
EMULATING_X86_FLAG = "avx512bw"
#: the Arm feature of native bfloat16 arithmetic
NATIVE_ARM_FLAG = "bf16"

NATIVE, EMULATED, NONE = "native", "emulated", "none"


class PrecisionUnsupportedError(DeviceUnavailableError):
    """``precision=bf16-mixed`` on a processor without bfloat16 support (one line)."""


@dataclass(frozen=True)
class Bf16Support:
    """What a device offers for bfloat16: ``level`` native, emulated or none, and
    ``evidence``, the words saying how that was told (for the refusal or the warning)."""

    level: str
    evidence: str


#: how a run asks a device about bfloat16 (tests inject one: a processor without it)
Bf16Probe = Callable[[torch.device], Bf16Support]


def cpu_bf16_support(flags: frozenset[str], torch_says: bool) -> Bf16Support:
    """bfloat16 on a CPU whose ``/proc/cpuinfo`` lists ``flags`` (empty where it has
    none); ``torch_says``: torch's oneDNN reports bfloat16 kernels, asked only where the
    flags say nothing."""
    native = [f for f in (*NATIVE_X86_FLAGS, NATIVE_ARM_FLAG) if f in flags]
    if native:
        return Bf16Support(NATIVE, f"/proc/cpuinfo lists {native[0]}")
    if EMULATING_X86_FLAG in flags:
        return Bf16Support(
            EMULATED,
            f"/proc/cpuinfo lists {EMULATING_X86_FLAG} but neither "
            f"{' nor '.join(NATIVE_X86_FLAGS)}: oneDNN emulates bfloat16 by conversions",
        )
    if flags:
        return Bf16Support(
            NONE, f"/proc/cpuinfo lists none of {', '.join((*NATIVE_X86_FLAGS, NATIVE_ARM_FLAG))}"
        )
    if torch_says:
        return Bf16Support(
            EMULATED, "no /proc/cpuinfo; torch's oneDNN has bfloat16 kernels, native or emulated"
        )
    return Bf16Support(NONE, "no /proc/cpuinfo, and torch's oneDNN has no bfloat16 kernels")


def bf16_support(device: torch.device) -> Bf16Support:
    """The default probe: ``device``'s bfloat16 support (module docstring)."""
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return Bf16Support(NATIVE, "torch.cuda.is_bf16_supported()")
        if torch.cuda.is_bf16_supported(including_emulation=True):
            return Bf16Support(EMULATED, "the GPU emulates bfloat16 (before compute capability 8)")
        return Bf16Support(NONE, "torch.cuda.is_bf16_supported() is False")
    flags = cpu_flags()
    torch_says = not flags and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return cpu_bf16_support(flags, torch_says)


@dataclass(frozen=True)
class Precision:
    """A run's precision on its device type (``cpu``, ``cuda``): the context its
    training steps and evaluation passes enter."""

    name: str = FP32
    device_type: str = "cpu"

    @property
    def mixed(self) -> bool:
        """Whether forward passes run under bfloat16 autocast."""
        return self.name == BF16_MIXED

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The context of a forward pass and its loss: bfloat16 autocast under
        ``bf16-mixed``, nothing under ``fp32`` (a float32 run's arithmetic untouched)."""
        if not self.mixed:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=torch.bfloat16)


#: float32 on any device: the default of everything that takes a precision (a
#: null context wherever it is entered)
FLOAT32 = Precision(FP32)


def precision_for_run(
    name: str, device: torch.device, probe: Bf16Probe = bf16_support
) -> Precision:
    """The :class:`Precision` a run on ``device`` trains with.  ``bf16-mixed`` where the
    device has no bfloat16 is refused (:class:`PrecisionUnsupportedError`, one line);
    where it is emulated, warned about (:class:`EmulatedPrecisionWarning`)."""
    precision = Precision(name, device.type)
    if not precision.mixed:
        return precision
    support = probe(device)
    where = "this GPU" if device.type == "cuda" else f"this processor ({cpu_model()})"
    if support.level == NONE:
        raise PrecisionUnsupportedError(
            f"precision={name!r} but {where} has no bfloat16 support ({support.evidence}): "
            f"use precision={FP32}"
        )
    if support.level == EMULATED:
        warnings.warn(
            f"precision={name!r}: {where} runs bfloat16 emulated ({support.evidence}), "
            f"likely slower than precision={FP32}",
            EmulatedPrecisionWarning,
            stacklevel=3,
        )
    return precision


def float32(tree: Any) -> Any:
    """``tree`` (a tensor, or lists, tuples and dicts of them) with every floating tensor
    of lower precision as float32; float32 tensors are returned as they are (no copy)."""
    if isinstance(tree, torch.Tensor):
        return tree.float() if tree.is_floating_point() and tree.dtype != torch.float64 else tree
    if isinstance(tree, dict):
        return {k: float32(v) for k, v in tree.items()}
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a NamedTuple (ModelOutput)
        return type(tree)(*(float32(v) for v in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(float32(v) for v in tree)
    return tree


@contextlib.contextmanager
def full_precision(device: torch.device) -> Iterator[None]:
    """A region computed in float32 whatever the run's precision (autocast off on
    ``device``'s type; no-op in an fp32 run)."""
    with torch.autocast(device.type, enabled=False):
        yield
