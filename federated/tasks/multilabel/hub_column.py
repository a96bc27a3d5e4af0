"""How an ``hf:`` column becomes multi-label targets: a list column, each row one image's
labels, as multi-hot float32 ``(N, L)`` rows (:mod:`.targets`).

* a list of class labels (``List(ClassLabel)``): each row its labels' ids, the labels the
  class label's names, in its order;
* a list of integers of no fixed length, or a list of text: each row its labels, the
  labels the values found, sorted (as a class column's integers or text are);
* a list of a fixed length L (``List(Value(...), length=L)``) of bools, integers or
  floats: each row the multi-hot row itself, every value 0 or 1, the labels named
  ``0`` to ``L-1``.

An image with no label is an empty list (or a row of zeros).  Refused in one line naming
the column, the split and the row: an empty value inside a row, a label named twice in
a row, a class label beyond the names (``-1``, no label, included), a multi-hot value
other than 0 or 1, no label at all, or more than
:data:`~.labels_file.MAX_LABELS` labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from federated.data.hub_column import ColumnTargets, HubColumn, HubColumnError
from federated.tasks.multilabel.labels_file import MAX_LABELS
from federated.tasks.multilabel.spec import MULTILABEL
from federated.tasks.multilabel.targets import multi_hot
from federated.tasks.multilabel.task import MultiLabel

_MULTI_HOT_DTYPES = ("bool", "int", "uint", "float")
_LABEL_DTYPES = ("int", "uint")
_TEXT_DTYPES = ("string", "large_string")


def decode_label_sets(
    feature: Any, raw: dict[str, np.ndarray], column: str
) -> ColumnTargets | None:
    """Each split's multi-hot targets and the label names (module docstring); None for
    a feature that is no list of labels."""
    import datasets  # the Hub loader imported it (telemetry off) before asking

    if not isinstance(feature, (datasets.List, datasets.LargeList)):
        return None
    inner, length = feature.feature, getattr(feature, "length", -1)
    dtype = getattr(inner, "dtype", "")
    if isinstance(inner, datasets.ClassLabel):
        decoded = _class_ids(raw, column, list(inner.names))
    elif length > 0 and dtype.startswith(_MULTI_HOT_DTYPES):
        decoded = _multi_hot_rows(raw, column, length)
    elif dtype.startswith(_LABEL_DTYPES) or dtype in _TEXT_DTYPES:
        decoded = _label_values(raw, column)
    else:
        return None
    if not 1 <= len(decoded.class_names) <= MAX_LABELS:
        raise HubColumnError(
            f"column {column!r}: {len(decoded.class_names)} labels (allowed: 1 to {MAX_LABELS})"
        )
    return decoded


def _rows(raw: dict[str, np.ndarray], column: str) -> dict[str, list[list[Any]]]:
    """Each split's rows as lists, an empty value or a label twice in a row refused."""
    rows: dict[str, list[list[Any]]] = {}
    for split, values in raw.items():
        rows[split] = [row.tolist() for row in values]
        for i, row in enumerate(rows[split]):
            if any(v is None or v != v for v in row):  # None, or NaN in a number row
                raise HubColumnError(
                    f"column {column!r}: split {split!r} row {i} holds an empty label (allowed: "
                    "labels only; an image with no label is an empty list)"
                )
            if len(set(row)) < len(row):
                twice = next(v for v in row if row.count(v) > 1)
                raise HubColumnError(
                    f"column {column!r}: split {split!r} row {i} names label {twice!r} twice "
                    "(allowed: each label once a row)"
                )
    return rows


def _class_ids(raw: dict[str, np.ndarray], column: str, names: list[str]) -> ColumnTargets:
    """Rows of class-label ids, each in ``0 .. len(names) - 1``."""
    targets = {}
    for split, rows in _rows(raw, column).items():
        for i, row in enumerate(rows):
            beyond = [v for v in row if not 0 <= v < len(names)]
            if beyond:
                raise HubColumnError(
                    f"column {column!r}: split {split!r} row {i} holds class label {beyond[0]} "
                    f"(allowed: 0 to {len(names) - 1}, the class label's {len(names)} names)"
                )
        targets[split] = multi_hot(rows, len(names))
    return ColumnTargets(targets, names, [])


def _label_values(raw: dict[str, np.ndarray], column: str) -> ColumnTargets:
    """Rows of label values (integers or text), the labels those found, sorted."""
    rows = _rows(raw, column)
    labels = sorted({v for split_rows in rows.values() for row in split_rows for v in row})
    index = {label: i for i, label in enumerate(labels)}
    targets = {
        split: multi_hot([[index[v] for v in row] for row in split_rows], len(labels))
        for split, split_rows in rows.items()
    }
    return ColumnTargets(targets, [str(label) for label in labels], [])


def _multi_hot_rows(raw: dict[str, np.ndarray], column: str, length: int) -> ColumnTargets:
    """Rows that are multi-hot already: ``length`` values each, every one 0 or 1."""
    targets = {}
    for split, values in raw.items():
        table = np.stack(list(values)) if len(values) else np.zeros((0, length))
        bad = np.argwhere(~np.isin(table, (0, 1)))
        if len(bad):
            i, j = bad[0]
            value = table[i, j].item() if isinstance(table[i, j], np.generic) else table[i, j]
            raise HubColumnError(
                f"column {column!r}: split {split!r} row {i} holds {value!r} at place "
                f"{j} (allowed: 0 or 1, a multi-hot row of {length} labels)"
            )
        targets[split] = torch.from_numpy(table.astype(np.float32))
    return ColumnTargets(targets, [str(label) for label in range(length)], [])


HUB_COLUMN = HubColumn(
    task=MULTILABEL,
    accepts=(
        "lists of class labels, integers or text, or 0/1 lists of a fixed length, for label sets"
    ),
    target_ndim=2,
    groups=MultiLabel.target_groups,
    decode=decode_label_sets,
)
