"""``folder:PATH`` datasets: a folder of images as an :class:`ImageData`, cached on disk.

Which reader loads a folder is decided in one place, :mod:`federated.data.folder_kinds`
(each registered kind's reader, the one that recognises every folder last);
:func:`load_folder` and :func:`folder_identity` ask it.  This module reads the folders
whose images each carry one target in a layout of files
(:class:`~federated.data.folder_layout.FolderLayout`): a kind's reader names its layout
and its targets (an :class:`ImageFolderKind`: classification's class folders, a score
task's scores file) and loads through :func:`load_image_folder`.

Loading an image folder scans it (:mod:`federated.data.folder_layout`), then takes the first of:

1. memory: this process already loaded the same files with the same settings
   (:mod:`federated.data.memory_cache`);
2. the disk cache: ``<data root>/folder-cache/<path hash>-<key>.pt``, written by an
   earlier load and read with ``torch.load(weights_only=True)``; the key hashes every
   file's relative path, size and mtime plus the image size and hold-out settings, so
   adding, removing, replacing or touching an image makes a new key (and the stale entry
   of that folder is deleted when the new one is written);
3. decoding every image (:mod:`federated.data.folder_decode`) and writing the cache.

Choices the issue leaves open:

* images are resized to ``image_size`` ("H" or "HxW"; default the most common size);
* without a ``test/`` folder, ``holdout_fraction`` of the training images of each group
  the kind's task names (:meth:`~federated.tasks.base.Task.target_groups`: each class,
  or all of a score task's images as one; a fixed draw, seed 0, the same for every run)
  becomes the test set;
* normalisation statistics are per-channel mean and std of the training images;
* no random augmentation (as for Fashion-MNIST): only normalisation;
* the default model follows the image size: ``simple-cnn`` (the paper's CIFAR-10 model)
  for 16 to 32 pixels a side, else ``resnet50`` (its Tiny-ImageNet model).
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

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
)
from federated.data.holdout_draw import holdout_split
from federated.data.image_data import ImageData
from federated.data.memory_cache import held, hold

CACHE_FORMAT = 1


@dataclass(frozen=True)
class ImageFolderKind:
    """What a kind whose folder gives each image one target tells the image-folder
    loader (its reader module builds one, with :func:`image_folder_reader`).

    Attributes:
        task: the kind's task name (the spec's ``task``).
        layout: scans folder ``root`` into its files and their targets (one error line
            naming the path).
        targets: the files' targets as one tensor (labels ``(N,)``, scores ``(N, T)``).
        target_ndim: that tensor's dimensions (a cache entry of another shape is
            decoded again).
        groups: the hold-out's groups of the training targets (the task's
            :meth:`~federated.tasks.base.Task.target_groups`).
    """

    task: str
    layout: Callable[[Path], FolderLayout]
    targets: Callable[[Sequence[ImageFile], FolderLayout], torch.Tensor]
    target_ndim: int
    groups: Callable[[torch.Tensor], np.ndarray]


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
    (:func:`federated.data.folder_kinds.folder_reader`: the first registered kind's
    reader that recognises it, class folders last); errors name the path.
    ``partition_by`` is read by the kinds whose natural parties are a field (a detection
    folder's image field)."""
    root = folder_path(name)
    return folder_reader(root).load(
        root, image_size, holdout_fraction, data_root, partition_by, use_memory=use_memory
    )


def load_image_folder(
    kind: ImageFolderKind,
    root: Path,
    image_size: str | None = None,
    holdout_fraction: float | None = None,
    data_root: str | os.PathLike | None = None,
    partition_by: str | None = None,
    *,
    use_memory: bool = True,
) -> FolderLoad:
    """Load image folder ``root`` of ``kind`` (the module docstring); errors name the
    path."""
    start = time.perf_counter()
    if partition_by is not None:
        fielded = ", or ".join(
            f"{r.party_field} of a {r.name} folder" for r in folder_readers() if r.party_field
        )
        raise FolderDataError(
            f"{root}: partition_by={partition_by!r} names {fielded} (allowed here: unset; "
            "this folder's natural parties are its train/<party>/ folders)"
        )
    layout = kind.layout(root)
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

    data = held(("folder", key)) if use_memory else None
    source = "memory"
    if data is None:
        payload = read_cache(cache_file, key, kind.target_ndim)
        source = "disk cache"
        if payload is None:
            payload = _decode(kind, layout, image_size, holdout_fraction, key)
            source = "decoded"
        if holdout_fraction is not None:  # the scan counted the parties before it
            _check_parties_after_holdout(layout, payload["train_parties"], holdout_fraction)
        if source == "decoded":
            write_cache(cache_file, payload)
        data = image_data(payload, f"folder:{root}", kind.task)
        if use_memory:
            hold(("folder", key), data)
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


def image_folder_identity(kind: ImageFolderKind, root: Path) -> dict[str, Any]:
    """What a sweep manifest records of an image folder of ``kind``: its path, content
    fingerprint, task, image counts, classes, score targets and party folders."""
    layout = kind.layout(root)
    return {
        "path": str(root),
        "fingerprint": layout.fingerprint(),
        "task": kind.task,
        "train_images": len(layout.train),
        "test_images": len(layout.test),
        "classes": list(layout.class_names),
        "targets": list(layout.target_names),
        "parties": list(layout.party_names),
    }


def image_folder_reader(
    kind: ImageFolderKind, name: str, *, recognises: Callable[[Path], bool], last: bool = False
) -> FolderReader:
    """The :class:`~federated.data.folder_kinds.FolderReader` of an image-folder ``kind``
    (``name``: the kind in messages; ``last``: it recognises every folder, asked after
    the others)."""
    return FolderReader(
        name=name,
        recognises=recognises,
        load=functools.partial(load_image_folder, kind),
        identity=functools.partial(image_folder_identity, kind),
        last=last,
    )


# ------------------------------------------------------------------------ decoding
def _decode(
    kind: ImageFolderKind,
    layout: FolderLayout,
    image_size: str | None,
    holdout_fraction: float | None,
    key: str,
) -> dict[str, Any]:
    files = list(layout.train) + list(layout.test)
    check_decode_memory(layout.root, files, image_size)
    images = decode_files(files)
    channels = check_channels(images, files)
    size = parse_image_size(image_size) if image_size else most_common_size(images)
    n_train = len(layout.train)
    train_x = stack_resized(images[:n_train], size)
    test_x = stack_resized(images[n_train:], size).reshape(-1, channels, *size)
    train_y, test_y = kind.targets(layout.train, layout), kind.targets(layout.test, layout)
    parties = torch.tensor([f.party for f in layout.train], dtype=torch.int64)
    if holdout_fraction is not None:
        keep, held_out = holdout_split(kind.groups(train_y), holdout_fraction)
        test_x, test_y = train_x[held_out], train_y[held_out]
        train_x, train_y, parties = train_x[keep], train_y[keep], parties[keep]
        if len(held_out) == 0:
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


def image_data(payload: dict[str, Any], name: str, task: str) -> ImageData:
    """The data set a cached image payload holds (an image folder's or an ``hf:``
    source's), of the kind ``task``."""
    train_x = payload["train_x"]
    _, c, h, w = train_x.shape
    targets = tuple(payload.get("target_names", ()))
    spec = DatasetSpec(
        name=name,
        task=task,
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
def read_cache(path: Path, key: str, target_ndim: int | None) -> dict[str, Any] | None:
    """The cache entry ``path`` written under ``key`` whose targets have ``target_ndim``
    dimensions (None: any, the caller checks them); None where it is missing, damaged or
    foreign (decode again)."""
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, weights_only=True)
    except Exception:  # a truncated or foreign file: decode again and overwrite it
        return None
    if not isinstance(payload, dict) or payload.get("key") != key:
        return None
    if not _payload_ok(payload, target_ndim):
        return None
    return payload


def _payload_ok(payload: dict[str, Any], target_ndim: int | None) -> bool:
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
        and payload["train_y"].ndim == (target_ndim or payload["train_y"].ndim)
        and all(
            isinstance(payload.get(k), list) and len(payload[k]) == x.shape[1]
            for k in ("mean", "std")
        )
    )
