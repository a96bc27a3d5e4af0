"""The loss read-out every execution path shares: per-party sums of the logged loss
parts kept on the device, read with one host transfer for all parties."""

from __future__ import annotations

from collections.abc import Sequence

import torch


class LossSums:
    """One local training's running sums of loss parts (``ce``, ``con``, ...)."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, int] = {}

    def add(self, parts: dict[str, torch.Tensor]) -> None:
        """Add one step's detached parts (on the device): no host sync."""
        for key, value in parts.items():
            if key in self.sums:
                self.sums[key] += value
                self.counts[key] += 1
            else:
                self.sums[key] = value.clone()
                self.counts[key] = 1


def read_means(all_sums: Sequence[LossSums]) -> list[dict[str, float]]:
    """Each training's mean of every part over the steps where it was computed, with
    one device-to-host read for all of them."""
    flat = [value for s in all_sums for value in s.sums.values()]
    values = iter(torch.stack(flat).tolist() if flat else [])
    return [{key: next(values) / s.counts[key] for key in s.sums} for s in all_sums]
