"""The CPU's marketing name: what a timing belongs to (a sweep's manifest, the execution
path's calibration cache)."""

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
