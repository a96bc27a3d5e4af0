"""Natural parties from a field's values: an ``hf:`` data set's column (a writer id), a
detection image's own field (Street's camera, ``device1_id`` or ``device2_id``).  One rule
for both: a value is a party when at least
:data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` training images carry it (smaller
ones are left out, their images belong to no party), and parties are sorted, numbers
numerically."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import torch

from federated.data.folder_layout import MIN_PARTY_IMAGES


def party_sort_key(value: str) -> tuple:
    """Integers by value, before other names in text order."""
    return (0, int(value), "") if re.fullmatch(r"-?\d+", value) else (1, 0, value)


def parties_by_value(values: np.ndarray) -> tuple[torch.Tensor, list[str]]:
    """Each training image's party, int64 (N,): an index into the names, -1 for an image
    without a value or of a party under MIN_PARTY_IMAGES images; and the names, sorted."""
    text = np.array(["" if v is None else str(v) for v in values.tolist()], dtype=object)
    counts = Counter(text.tolist())
    names = sorted(
        (v for v, n in counts.items() if v and n >= MIN_PARTY_IMAGES), key=party_sort_key
    )
    index = {v: i for i, v in enumerate(names)}
    return torch.tensor([index.get(v, -1) for v in text.tolist()], dtype=torch.int64), names
