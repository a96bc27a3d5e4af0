"""How an ``hf:`` source's target column becomes a kind's targets: each kind that reads
Hub data declares a :class:`HubColumn` in its own package (its task class's
``hub_column``, an import path), and the Hub loader (:mod:`federated.data.hub_dataset`)
asks them in the registry's order: the first that decodes the column's feature gives the
run's task.  So the column's type decides the kind (class labels, integers or text:
classification; floats: a score task) without the loader naming one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


class HubColumnError(ValueError):
    """A target column of a kind's type holding a value the kind cannot take (a label
    beyond its classes, a row naming one twice): one line naming the column, the split
    and the row; the Hub loader puts the data set's name before it."""


@dataclass(frozen=True)
class ColumnTargets:
    """A target column decoded: each split's targets and what names them.

    Attributes:
        targets: split name -> the split's targets (int64 ``(N,)`` labels, float32
            ``(N, 1)`` scores ...).
        class_names: the classes, in label order (empty: no classes).
        target_names: the target columns' names (a score task's; empty otherwise).
    """

    targets: dict[str, torch.Tensor]
    class_names: list[str]
    target_names: list[str]


@dataclass(frozen=True)
class HubColumn:
    """One kind's reading of a Hub target column.

    Attributes:
        task: the kind's task name (the data's spec's ``task``).
        accepts: the features it reads, in a refusal's words ("floats for scores").
        target_ndim: its targets' dimensions (a cache entry of another shape is decoded
            again).
        groups: a hold-out's groups of the training targets (the task's
            :meth:`~federated.tasks.base.Task.target_groups`).
        decode: ``(feature, raw values per split, column name)`` -> the targets, or None
            where the feature is not of this kind; a :class:`HubColumnError` where it is
            and a value is not one the kind can take.
    """

    task: str
    accepts: str
    target_ndim: int
    groups: Callable[[torch.Tensor], np.ndarray]
    decode: Callable[[Any, dict[str, np.ndarray], str], ColumnTargets | None]
