"""A dataset in memory (:class:`ImageData`), the error that says it cannot be had, and
where datasets and their caches live on disk (the data root).  The loaders
(:mod:`federated.data.loading`, :mod:`federated.data.folder_dataset`) build on these."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from federated.data.catalog import DatasetSpec
from federated.runtime.atomic_file import atomic_open


class DatasetUnavailableError(RuntimeError):
    """The dataset is not on disk and could not be downloaded."""


class Targets(Protocol):
    """N samples' targets in the container their kind declares (``federated/tasks/<kind>/``):
    a tensor (labels, scores, masks) or a kind's own (a detection's boxes); the data layer
    only counts them and takes rows of them."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: Any) -> Any: ...


@dataclass(frozen=True)
class ImageData:
    """A dataset in memory: uint8 images (N, C, H, W) of one size and their targets, in
    the container of the run's kind (:class:`Targets`: int64 labels (N,) for
    classification, float32 scores (N, T) for a score task, each image's boxes for
    detection ..., each kind's ``targets`` module).

    ``train_parties`` (int64 (N,), data with natural parties only: one folder per party,
    an ``hf:`` column, a detection image's camera field) is each training sample's
    party, an index into ``spec.party_names``.
    """

    spec: DatasetSpec
    train_x: torch.Tensor
    train_y: Targets
    test_x: torch.Tensor
    test_y: Targets
    train_parties: torch.Tensor | None = None


def default_data_root() -> Path:
    """``$FEDSWEEP_DATA`` if set, else ``~/.cache/fedsweep/data``."""
    env = os.environ.get("FEDSWEEP_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fedsweep" / "data"


def resolve_data_root(data_root: str | os.PathLike | None) -> Path:
    return Path(data_root).expanduser().resolve() if data_root else default_data_root()


def atomic_torch_save(obj, path: Path) -> None:
    """``torch.save`` through :func:`federated.runtime.atomic_file.atomic_open` (dataset caches)."""
    with atomic_open(path, "wb") as fh:
        torch.save(obj, fh)
