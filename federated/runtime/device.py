"""Choosing the run's device and CPU threads."""

from __future__ import annotations

import torch


class DeviceUnavailableError(RuntimeError):
    """CUDA was asked for on a machine without it."""


def resolve_device(name: str) -> torch.device:
    """``auto`` -> ``cuda`` when available, else ``cpu``; ``cuda`` must exist when asked for."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailableError(
            f"device={name!r} but CUDA is not available here (use cpu or auto)"
        )
    return device


def set_threads(threads: int | None) -> None:
    """Limit torch's intra-op CPU threads (one trial per core packs trials side by side)."""
    if threads is not None:
        torch.set_num_threads(threads)
