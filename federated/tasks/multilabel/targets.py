"""Multi-label targets: a multi-hot row per image.

Held as float32 ``(N, L)`` (1.0 where the image carries label l, else 0.0): the dtype
binary cross-entropy reads, so every generic path (a party's rows, the batch plan, a
split cut to its parties, packed execution) takes a batch's targets as a tensor's rows
without asking the task.  Four bytes a label and image: 80 KiB for 1,000 images of 20
labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def multi_hot(label_sets: Sequence[Sequence[int]], n_labels: int) -> torch.Tensor:
    """float32 ``(N, n_labels)``: row i is 1.0 at the labels of ``label_sets[i]``."""
    rows = torch.zeros(len(label_sets), n_labels, dtype=torch.float32)
    for i, labels in enumerate(label_sets):
        rows[i, list(labels)] = 1.0
    return rows


def images_per_label(targets: torch.Tensor, parts: Sequence[np.ndarray]) -> np.ndarray:
    """int64 ``(len(parts), L)``: how many of each part's images carry each label
    (``parts``: index arrays into ``targets``' rows); an image counts once for each
    label it carries."""
    counted = (targets > 0.5).to(torch.int64)
    return np.stack(
        [counted[torch.as_tensor(p, dtype=torch.long)].sum(dim=0).numpy() for p in parts]
    )
