"""``folder:PATH`` datasets: a folder of images as an :class:`ImageData`, cached on disk.

Which reader loads a folder is decided in one place, :mod:`federated.data.folder_kinds`
(a detection folder's, another task's own layout's, this module's image-folder reader
last); :func:`load_folder` and :func:`folder_identity` ask it.  This
module reads image folders: class folders, or a scores file.

Loading an image folder scans it (:mod:`federated.data.folder_layout`), then takes the first of:

1. memory: this process already loaded the same files with the same settings;
2. the disk cache: ``<data root>/folder-cache/<path hash>-<key>.pt``, written by an
   earlier load and read with ``torch.load(weights_only=True)``; the key hashes every
   file's relative path, size and mtime plus the image size and hold-out settings, so
   adding, removing, replacing or touching an image makes a new key (and the stale entry
   of that folder is deleted when the new one is written);
3. decoding every image (:mod:`federated.data.folder_decode`) and writing the cache.

Choices the issue leaves open:

* images are resized to ``image_size`` ("H" or "HxW"; default the most common size);
* without a ``test/`` folder, ``holdout_fraction`` of each class's training images (a
  fixed draw, seed 0, the same for every run) becomes the test set;
* normalisation statistics are per-channel mean and std of the training images;
* no random augmentation (as for Fashion-MNIST): only normalisation;
* the default model follows the image size: ``simple-cnn`` (the paper's CIFAR-10 model)
  for 16 to 32 pixels a side, else ``resnet50`` (its Tiny-ImageNet model).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.contract.builtin_tasks import CLASSIFICATION_TASK, SCORE_TASK
from federated.data.catalog import DatasetSpec
from federated.data.folder_cache import FolderLoad, cache_entry_path, write_cache
from federated.data.folder_decode import (
    channel_stats,
    check_channels,
    check_decode_memory,
    decode_files,
    most_common_size,
    parse_image_size,
    stack_resized,
)
from federated.data.folder_kinds import FolderReader, folder_reader, folder_readers
from federated.data.folder_layout import (
    FolderDataError,
    FolderLayout,
    ImageFile,
    check_party_size,
    folder_path,
    scan_folder,
)
from federated.data.holdout_draw import holdout_split as _holdout  # hub_dataset's name too
from federated.data.image_data import ImageData
from federated.data.scores_file import has_scores_file, score_layout

CACHE_FORMAT = 1
MEMORY_ENTRIES = 2  # loaded folders kept in memory per process (sweep driver, trial)

_memory: dict[str, ImageData] = {}


def default_model_for(height: int, width: int) -> str:
    return "simple-cnn" if min(height, width) >= 16 and max(height, width) <= 32 else "resnet50"


def _settings_key(
    layout_fingerprint: str, image_size: str | None, holdout_fraction: float | None
) -> str:
    size = "x".join(map(str, parse_image_size(image_size))) if image_size else "auto"
    text = f"{CACHE_FORMAT}|{layout_fingerprint}|{size}|{holdout_fraction!r}"
    return hashlib.sha256(text.encode()).hexdigest()


def load_folder(
    name: str,
    image_size: str | None = None,
    holdout_fraction: float | None = None,
    data_root: str | os.PathLike | None = None,
    *,
    partition_by: str | None = None,
    use_memory: bool = True,
) -> FolderLoad:
    """Load dataset ``folder:PATH`` by the reader of its kind
    (:func:`federated.data.folder_kinds.folder_reader`: a detection folder's, another
    task's own layout's, else this module's image-folder reader, the module docstring);
    errors name the path.  ``partition_by`` is read by the kinds whose natural parties
    are a field (a detection folder's image field)."""
    root = folder_path(name)
    return folder_reader(root).load(
        root, image_size, holdout_fraction, data_root, partition_by, use_memory=use_memory
    )


def load_image_folder(
    root: Path,
    image_size: str | None = None,
    holdout_fraction: float | None = None,
    data_root: str | os.PathLike | None = None,
    partition_by: str | None = None,
    *,
    use_memory: bool = True,
) -> FolderLoad:
    """Load image folder ``root`` (class folders, or a scores file: the module
    docstring); errors name the path."""
    start = time.perf_counter()
    if partition_by is not None:
        fielded = ", or ".join(
            f"{r.party_field} of a {r.name} folder" for r in folder_readers() if r.party_field
        )
        raise FolderDataError(
            f"{root}: partition_by={partition_by!r} names {fielded} (allowed here: unset; "
            "this folder's natural parties are its train/<party>/ folders)"
        )
    layout = folder_layout(root)
    if layout.has_test and holdout_fraction is not None:
        raise FolderDataError(
            f"{root / 'test'}: a test folder exists and holdout_fraction={holdout_fraction} "
            "is set (allowed: one of the two)"
        )
    if not layout.has_test and holdout_fraction is None:
        raise FolderDataError(
            f"{root / 'test'}: no such folder (add test/<class>/<image>, or hold out part of "
            "the training images with holdout_fraction, e.g. --holdout-fraction 0.2)"
        )
    fingerprint = layout.fingerprint()
    key = _settings_key(fingerprint, image_size, holdout_fraction)
    cache_file = cache_entry_path(root, key, data_root)

    if use_memory and key in _memory:
        data, source = _memory[key], "memory"
    else:
        payload = _read_cache(cache_file, key)
        source = "disk cache"
        if payload is None:
            payload = _decode(layout, image_size, holdout_fraction, key)
            source = "decoded"
        if holdout_fraction is not None:  # the scan counted the parties before it
            _check_parties_after_holdout(layout, payload["train_parties"], holdout_fraction)
        if source == "decoded":
            write_cache(cache_file, payload)
        data = _image_data(payload, f"folder:{root}")
        if use_memory:
            _memory[key] = data
            while len(_memory) > MEMORY_ENTRIES:
                _memory.pop(next(iter(_memory)))
    return FolderLoad(data, fingerprint, source, time.perf_counter() - start, cache_file)


def _check_parties_after_holdout(
    layout: FolderLayout, train_parties: torch.Tensor, holdout_fraction: float
) -> None:
    """The one rule for a party's images (:func:`check_party_size`) on what the hold-out
    left each natural party to train on (decoded or read from the cache alike), before
    anything is written."""
    if not layout.party_names:
        return
    kept = np.bincount(train_parties.numpy(), minlength=len(layout.party_names))
    for party, name in enumerate(layout.party_names):
        check_party_size(
            layout.root / "train" / name,
            int(kept[party]),
            f" left after holdout_fraction={holdout_fraction}",
        )


def folder_identity(name: str) -> dict[str, Any]:
    """What a sweep manifest records of a folder dataset (its reader's
    :meth:`~federated.data.folder_kinds.FolderReader.identity`): at least its path,
    content fingerprint and task."""
    root = folder_path(name)
    return folder_reader(root).identity(root)


def image_folder_identity(root: Path) -> dict[str, Any]:
    """What a sweep manifest records of an image folder: its path, content fingerprint,
    task, image counts, classes, score targets and party folders."""
    layout = folder_layout(root)
    return {
        "path": str(root),
        "fingerprint": layout.fingerprint(),
        "task": (SCORE_TASK if layout.target_names else CLASSIFICATION_TASK).name,
        "train_images": len(layout.train),
        "test_images": len(layout.test),
        "classes": list(layout.class_names),
        "targets": list(layout.target_names),
        "parties": list(layout.party_names),
    }


def folder_layout(root: Path) -> FolderLayout:
    """The folder's layout: a score task's when it holds a scores file (read first, so
    its party folders are never taken for classes), else the class-folder scan."""
    return score_layout(root) if has_scores_file(root) else scan_folder(root)


#: the image-folder kind (class folders, or a scores file): the fallback reader of
#: :mod:`federated.data.folder_kinds` (``FALLBACK_READER``), asked last, recognising
#: every folder
IMAGE_FOLDERS = FolderReader(
    name="image",
    recognises=lambda root: True,
    load=load_image_folder,
    identity=image_folder_identity,
)


# ------------------------------------------------------------------------ decoding
def _decode(
    layout: FolderLayout, image_size: str | None, holdout_fraction: float | None, key: str
) -> dict[str, Any]:
    files = list(layout.train) + list(layout.test)
    check_decode_memory(layout.root, files, image_size)
    images = decode_files(files)
    channels = check_channels(images, files)
    size = parse_image_size(image_size) if image_size else most_common_size(images)
    n_train = len(layout.train)
    train_x = stack_resized(images[:n_train], size)
    test_x = stack_resized(images[n_train:], size).reshape(-1, channels, *size)
    train_y, test_y = _targets(layout.train, layout), _targets(layout.test, layout)
    parties = torch.tensor([f.party for f in layout.train], dtype=torch.int64)
    if holdout_fraction is not None:
        # a score task has no classes to stratify by: one group, a plain seeded draw
        groups = np.zeros(n_train, dtype=np.int64) if layout.target_names else train_y.numpy()
        keep, held = _holdout(groups, holdout_fraction)
        test_x, test_y = train_x[held], train_y[held]
        train_x, train_y, parties = train_x[keep], train_y[keep], parties[keep]
        if len(held) == 0:
            raise FolderDataError(
                f"{layout.root / 'train'}: holdout_fraction={holdout_fraction} holds out no "
                "image (allowed: a fraction that leaves at least one test image)"
            )
    mean, std = channel_stats(train_x)
    return {
        "format": CACHE_FORMAT,
        "key": key,
        "train_x": train_x.contiguous(),
        "train_y": train_y,
        "train_parties": parties,
        "test_x": test_x.contiguous(),
        "test_y": test_y,
        "class_names": list(layout.class_names),
        "party_names": list(layout.party_names),
        "target_names": list(layout.target_names),
        "mean": list(mean),
        "std": list(std),
    }


def _targets(files: Sequence[ImageFile], layout: FolderLayout) -> torch.Tensor:
    """Classification: int64 labels (N,); a score task: float32 targets (N, T)."""
    if layout.target_names:
        width = len(layout.target_names)
        return torch.tensor([f.target for f in files], dtype=torch.float32).reshape(-1, width)
    return torch.tensor([f.label for f in files], dtype=torch.int64)


def _image_data(payload: dict[str, Any], name: str) -> ImageData:
    train_x = payload["train_x"]
    _, c, h, w = train_x.shape
    targets = tuple(payload.get("target_names", ()))
    spec = DatasetSpec(
        name=name,
        task=(SCORE_TASK if targets else CLASSIFICATION_TASK).name,
        target_names=targets,
        n_classes=len(payload["class_names"]),
        channels=c,
        height=h,
        width=w,
        train_size=train_x.shape[0],
        test_size=payload["test_x"].shape[0],
        default_model=default_model_for(h, w),
        mean=tuple(payload["mean"]),
        std=tuple(payload["std"]),
        class_names=tuple(payload["class_names"]),
        party_names=tuple(payload["party_names"]),
        # an hf: source's natural parties (an image folder refuses a small party instead)
        left_out_parties=tuple((v, n) for v, n in payload.get("left_out_parties", ())),
    )
    parties = payload["train_parties"] if payload["party_names"] else None
    return ImageData(
        spec, train_x, payload["train_y"], payload["test_x"], payload["test_y"], parties
    )


# --------------------------------------------------------------------------- cache
def _read_cache(path: Path, key: str) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, weights_only=True)
    except Exception:  # a truncated or foreign file: decode again and overwrite it
        return None
    if not isinstance(payload, dict) or payload.get("key") != key or not _payload_ok(payload):
        return None
    return payload


def _payload_ok(payload: dict[str, Any]) -> bool:
    """Whether a cache entry holds what :func:`_decode` writes (a file with the right key
    but damaged or foreign contents is decoded again, never a traceback later)."""
    x, test_x = payload.get("train_x"), payload.get("test_x")
    tensors = ("train_y", "train_parties", "test_y")
    return (
        isinstance(x, torch.Tensor)
        and isinstance(test_x, torch.Tensor)
        and x.dtype == torch.uint8 == test_x.dtype
        and x.ndim == 4 == test_x.ndim
        and x.shape[1:] == test_x.shape[1:]
        and all(isinstance(payload.get(k), torch.Tensor) for k in tensors)
        and len(payload["train_y"]) == len(x) == len(payload["train_parties"])
        and len(payload["test_y"]) == len(test_x)
        and all(isinstance(payload.get(k), list) for k in ("class_names", "party_names"))
        and isinstance(payload.get("target_names", []), list)
        and payload["train_y"].ndim == (2 if payload.get("target_names") else 1)
        and all(
            isinstance(payload.get(k), list) and len(payload[k]) == x.shape[1]
            for k in ("mean", "std")
        )
    )
