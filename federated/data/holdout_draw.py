"""The fixed hold-out draw of a data set without a test split (folder and ``hf:`` data
sets under ``holdout_fraction``): the same test images for every run and method."""

from __future__ import annotations

import numpy as np

HOLDOUT_SEED = 0


def holdout_split(labels: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Indices kept for training and held out for testing: round(fraction * n) of each
    class, a fixed draw (seed 0) so every run holds out the same images."""
    rng = np.random.default_rng(HOLDOUT_SEED)
    held = []
    for label in np.unique(labels):
        idx = np.flatnonzero(labels == label)
        held.append(rng.permutation(idx)[: round(fraction * len(idx))])
    held_idx = np.sort(np.concatenate(held))
    keep = np.setdiff1d(np.arange(len(labels)), held_idx)
    return keep, held_idx
