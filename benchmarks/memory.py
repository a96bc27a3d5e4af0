"""Memory of the running process: resident set size, its peak, page faults and tensor
payloads.

Peak RSS is Linux's ``VmHWM`` (``/proc/self/status``), falling back to
``getrusage(RUSAGE_SELF).ru_maxrss`` elsewhere.  Writing ``5`` to
``/proc/self/clear_refs`` resets ``VmHWM`` to the current RSS, so measurements that share
a process (``--isolation inline``) can still report their own peak.

Minor page faults (``getrusage().ru_minflt``) count memory the kernel had to hand the
process again: glibc returns freed blocks above its thresholds to the kernel, so a
training step whose activations are freed and reallocated every step can pay hundreds
of faults per step (about a tenth of a simple-cnn step on one CPU thread).  glibc
raises those thresholds on its own after large frees, so whether a process pays
depends on what it did before; :func:`federated.runtime.allocator.keep_freed_memory` pins them
(the engine calls it for every run).
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
MIB = 1024 * 1024


def _status_kib(key: str) -> int | None:
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_bytes() -> int:
    """Current resident set size of this process, in bytes (0 where unknown)."""
    kib = _status_kib("VmRSS")
    return 1024 * kib if kib is not None else 0


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (since start or the last reset), in bytes."""
    kib = _status_kib("VmHWM")
    if kib is not None:
        return 1024 * kib
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else 1024 * peak  # macOS reports bytes


def reset_peak_rss() -> bool:
    """Reset the peak RSS to the current RSS; False where the kernel does not allow it."""
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def minor_faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def reset_device_peak(device: torch.device) -> None:
    """Start counting a CUDA device's peak allocated memory afresh (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def device_peak_bytes(device: torch.device) -> int:
    """Peak memory allocated by torch on a CUDA device since the last reset; 0 on CPU."""
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))


def tensor_bytes(obj: Any) -> int:
    """Bytes held by the tensors inside nested dicts, lists and tuples (storage not
    deduplicated: each tensor counts its own elements)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, Mapping):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, Iterable) and not isinstance(obj, (str, bytes)):
        return sum(tensor_bytes(v) for v in obj)
    return 0
