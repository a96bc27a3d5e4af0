"""The CPU's marketing name and identity: what a timing belongs to (a sweep's manifest,
the execution path's calibration cache)."""

from __future__ import annotations

import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpu_model() -> str:
    """The CPU's marketing name (``AMD EPYC 7763 64-Core Processor``), or the platform's
    processor string where ``/proc/cpuinfo`` is missing (macOS, Windows)."""
    try:
        for line in CPUINFO.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


#: instruction-set extensions that change which torch CPU kernels run (and so which
#: execution path is faster): AVX-512 and AMX kernels exist for convolutions and matmuls
VECTOR_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile")


def first_processor() -> dict[str, str]:
    """The first processor's block of ``/proc/cpuinfo`` (every core's), lower-case
    names; empty where the file is missing or unreadable."""
    fields: dict[str, str] = {}
    try:
        for line in CPUINFO.read_text(errors="replace").splitlines():
            if not line.strip():
                break  # the first processor's block is every core's
            name, _, value = line.partition(":")
            fields.setdefault(name.strip().lower(), value.strip())
    except OSError:
        return {}
    return fields


def cpu_flags() -> frozenset[str]:
    """The CPU's instruction-set flags: x86's ``flags``, Arm's ``Features`` (empty where
    ``/proc/cpuinfo`` is missing)."""
    fields = first_processor()
    return frozenset((fields.get("flags") or fields.get("features") or "").split())


def cpu_identity() -> str:
    """The processor beyond its marketing name: ``family/model/stepping`` and the vector
    extensions torch's kernels use (:data:`VECTOR_FLAGS`), e.g. ``25/17/1 avx2
    avx512f``.  Virtual machines often name a Zen 3 and a Zen 4 both just "AMD EPYC",
    and the faster execution path differs between them (issue 53); empty where
    ``/proc/cpuinfo`` is missing."""
    fields = first_processor()
    if not fields:
        return ""
    numbers = "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping"))
    flags = set(fields.get("flags", "").split())
    return " ".join([numbers, *(f for f in VECTOR_FLAGS if f in flags)])
