"""How an ``hf:`` column becomes a score task's targets: a float column, as float32
``(N, 1)`` scores named by the column."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from federated.data.hub_column import ColumnTargets, HubColumn
from federated.tasks.score.spec import SCORE
from federated.tasks.score.task import ScoreTask


def decode_scores(feature: Any, raw: dict[str, np.ndarray], column: str) -> ColumnTargets | None:
    """Each split's scores; None for a column that holds no floats."""
    if not getattr(feature, "dtype", "").startswith("float"):
        return None
    scores = {k: torch.from_numpy(v.astype(np.float32)).reshape(-1, 1) for k, v in raw.items()}
    return ColumnTargets(scores, [], [column])


HUB_COLUMN = HubColumn(
    task=SCORE,
    accepts="floats for scores",
    target_ndim=2,
    groups=ScoreTask.target_groups,
    decode=decode_scores,
)
