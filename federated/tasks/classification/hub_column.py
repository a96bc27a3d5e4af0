"""How an ``hf:`` column becomes class labels: a ``ClassLabel`` feature (classes in its
order), or integers or text (classes sorted), as int64 labels ``(N,)``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from federated.data.hub_column import ColumnTargets, HubColumn
from federated.tasks.classification.spec import CLASSIFICATION
from federated.tasks.classification.task import Classification


def decode_labels(feature: Any, raw: dict[str, np.ndarray], column: str) -> ColumnTargets | None:
    """Each split's labels and the class names; None for a feature of no classes."""
    import datasets  # the Hub loader imported it (telemetry off) before asking

    if isinstance(feature, datasets.ClassLabel):
        labels = {k: torch.from_numpy(v.astype(np.int64)) for k, v in raw.items()}
        return ColumnTargets(labels, list(feature.names), [])
    dtype = getattr(feature, "dtype", "")
    if not (dtype.startswith(("int", "uint")) or dtype in ("string", "large_string")):
        return None
    classes = sorted({v for values in raw.values() for v in values.tolist()})
    index = {c: i for i, c in enumerate(classes)}
    labels = {k: torch.tensor([index[v] for v in values.tolist()]) for k, values in raw.items()}
    return ColumnTargets(labels, [str(c) for c in classes], [])


HUB_COLUMN = HubColumn(
    task=CLASSIFICATION,
    accepts="class labels, integers or text for classes",
    target_ndim=1,
    groups=Classification.target_groups,
    decode=decode_labels,
)
