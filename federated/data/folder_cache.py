"""The decoded-tensor cache of ``folder:PATH`` data sets (every folder kind's): where an
entry lives, how it is written, and what a load reports.

An entry is ``<data root>/folder-cache/<path hash>-<key>.pt``: the path hash names the
folder, the key its contents and settings, so writing a folder's new entry deletes its
stale ones.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from federated.data.catalog import DatasetSpec
from federated.data.folder_layout import FolderDataError
from federated.data.image_data import ImageData, atomic_torch_save, resolve_data_root

CACHE_FOLDER = "folder-cache"


@dataclass(frozen=True)
class FolderLoad:
    """A loaded folder dataset and how it was obtained."""

    data: ImageData
    fingerprint: str  # sha256 of the file list, sizes and mtimes (hex)
    source: str  # "decoded", "disk cache" or "memory"
    seconds: float  # wall time of the load, scan included
    cache_file: Path


def cache_entry_path(root: Path, key: str, data_root: str | os.PathLike | None) -> Path:
    """The cache entry of folder ``root`` under ``key`` (sha256 hex) in the data root."""
    folder_hash = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return resolve_data_root(data_root) / CACHE_FOLDER / f"{folder_hash}-{key[:24]}.pt"


def write_cache(
    path: Path, payload: dict[str, Any], error: type[Exception] = FolderDataError
) -> None:
    """Write ``payload`` to ``path`` atomically and delete the folder's stale entries; a
    cache that cannot be written is ``error`` (the loader's own one-line error)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_torch_save(payload, path)
        prefix = path.name.split("-")[0] + "-"
        for stale in path.parent.glob(prefix + "*.pt"):
            if stale != path:
                stale.unlink(missing_ok=True)
    except OSError as err:  # a file where the cache folder should be, a full disk ...
        where = err.filename or path
        raise error(
            f"{where}: the decoded-image cache cannot be written ({err.strerror or err}); "
            "fix or remove it, or pass another --data-root"
        ) from None


def payload_spec(
    payload: dict[str, Any],
    *,
    name: str,
    task: str,
    default_model: str,
    party_names: list[str],
    target_names: tuple[str, ...] = (),
    left_out_parties: list[tuple[str, int]] | None = None,
) -> DatasetSpec:
    """The spec of a folder kind's cached payload (its ``train_x``, ``test_x``,
    ``class_names``, ``mean`` and ``std``): what a detection and a segmentation folder
    describe alike."""
    train_x = payload["train_x"]
    _, c, h, w = train_x.shape
    names = tuple(payload["class_names"])
    return DatasetSpec(
        name=name,
        task=task,
        target_names=target_names,
        n_classes=len(names),
        channels=c,
        height=h,
        width=w,
        train_size=train_x.shape[0],
        test_size=payload["test_x"].shape[0],
        default_model=default_model,
        mean=tuple(payload["mean"]),
        std=tuple(payload["std"]),
        class_names=names,
        party_names=tuple(party_names),
        left_out_parties=tuple((v, n) for v, n in left_out_parties or ()),
    )
