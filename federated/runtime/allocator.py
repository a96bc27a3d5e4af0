"""Keeping freed memory in the process: glibc's allocator thresholds, pinned.

A training step frees and reallocates its activations every step.  By default glibc
returns freed blocks above a threshold to the kernel, so the next step takes them back
as fresh pages: hundreds of minor page faults per simple-cnn step, about a tenth of the
step on one CPU core.  glibc raises those thresholds by itself after large frees, so
whether a process pays depended on what it had done before.  Pinning them makes every
run (and the benchmark's bare step) pay nothing, deterministically.
"""

from __future__ import annotations

import ctypes
import ctypes.util

MIB = 1024 * 1024
# glibc mallopt parameters, and the largest mmap threshold it allows on 64-bit systems
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * MIB
TRIM_THRESHOLD = 1024 * MIB


def keep_freed_memory() -> bool:
    """Have glibc keep freed memory in the process instead of returning it to the kernel
    (blocks below 32 MiB come from the heap; the heap is trimmed only above 1 GiB free).
    Returns False where the C library is not glibc (nothing is changed then)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) == 1 and (
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    )
