"""How much memory this machine can give a run now, and how sizes are written.

Read before work that could exhaust it (decoding an image folder, training a model at
an image size), so a run that would not fit is refused in one line instead of being
killed by the kernel's out-of-memory killer with no message.  No federated imports:
the data layer and the config both use it.
"""

from __future__ import annotations

import os

MEMINFO = "/proc/meminfo"


def _meminfo_bytes(key: str, pages: str) -> int | None:
    """``key`` of /proc/meminfo in bytes, else ``os.sysconf(pages)`` x the page size, else
    None (unknown)."""
    try:
        with open(MEMINFO, encoding="ascii") as fh:
            for line in fh:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) * 1024  # the file's unit is kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def available_memory() -> int | None:
    """Bytes the machine can give a new allocation without swapping, or None if unknown.

    Linux's ``MemAvailable`` (free memory plus reclaimable caches) is the kernel's own
    estimate of exactly that; elsewhere the free physical pages (an underestimate, as
    caches are not counted)."""
    return _meminfo_bytes("MemAvailable", "SC_AVPHYS_PAGES")


def physical_memory() -> int | None:
    """Bytes of physical memory this machine has (used or not), or None if unknown:
    ``MemTotal`` of /proc/meminfo, else ``os.sysconf`` pages x page size."""
    return _meminfo_bytes("MemTotal", "SC_PHYS_PAGES")


def gib(n_bytes: float) -> str:
    """``12.3 GiB`` (MiB below one GiB, KiB below one MiB): sizes in one-line messages."""
    if n_bytes < 2**20:
        return f"{n_bytes / 2**10:.0f} KiB"
    if n_bytes < 2**30:
        return f"{n_bytes / 2**20:.0f} MiB"
    return f"{n_bytes / 2**30:.1f} GiB"
