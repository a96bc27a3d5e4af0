"""``folder:PATH`` datasets: a folder of images as an :class:`ImageData`, cached on disk.

Which reader loads a folder is decided in one place, :mod:`federated.data.folder_kinds`
(each registered kind's reader, the one that recognises every folder last);
:func:`load_folder` and :func:`folder_identity` ask it.  This module reads the folders
whose images each carry one target in a layout of files
(:class:`~federated.data.folder_layout.FolderLayout`): a kind's reader names its layout
and its targets (an :class:`ImageFolderKind`: classification's class folders, a score
task's scores file) and reads through :class:`ImageFolder`, the folder kinds' one
reader base (:class:`~federated.data.kind_folder.KindFolder`) with what image folders
do otherwise (parties by folder, the decoded images' size, one channel count).

Loading an image folder scans it (the kind's layout), then takes the first of:

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.data.folder_cache import FolderLoad, payload_spec
from federated.data.folder_decode import (
    channel_stats,
    check_channels,
    check_decode_memory,
    decode_files,
    header_shape,
    most_common_size,
    parse_image_size,
    stack_resized,
)
from federated.data.folder_kinds import FolderReader, folder_reader
from federated.data.folder_layout import (
    FolderDataError,
    FolderLayout,
    ImageFile,
    check_party_size,
    folder_path,
)
from federated.data.holdout_draw import holdout_split
from federated.data.image_data import ImageData
from federated.data.kind_folder import KindFolder

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
    """The encoder-and-head model image data of ``height`` x ``width`` pixels name by
    default (the module docstring)."""
    return "simple-cnn" if min(height, width) >= 16 and max(height, width) <= 32 else "resnet50"


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


class ImageFolder(KindFolder):
    """The reading of an image-folder kind (module docstring) on the folder kinds' base
    (:class:`~federated.data.kind_folder.KindFolder`): the same test-set rule, cache,
    memory and errors; its parties are party folders (no field), its size is the
    decoded images' most common one, and all images must share a channel count."""

    test_words = (
        "a test folder exists",
        "no such folder (add test/<class>/<image>",
    )
    party_folders = "its train/<party>/ folders"

    def __init__(self, kind: ImageFolderKind) -> None:
        self.kind = kind
        self.task = kind.task
        self.groups = kind.groups
        self.cache_format = CACHE_FORMAT

    def scan(self, root: Path) -> FolderLayout:
        return self.kind.layout(root)

    def fingerprint(self, layout: FolderLayout) -> str:
        return layout.fingerprint()

    def test_place(self, layout: FolderLayout) -> Path:
        return layout.root / "test"

    def train_place(self, layout: FolderLayout) -> Path:
        return layout.root / "train"

    def sizes(self, layout: FolderLayout) -> list[tuple[int, int]]:
        """The sizes the headers declare (an unreadable header left out): what the
        memory check plans with; the size used is the decoded images' (:meth:`settings`)."""
        shapes = (header_shape(f.path) for f in (*layout.train, *layout.test))
        return [(h, w) for _, h, w in filter(None, shapes)]

    def settings(
        self, layout: FolderLayout, image_size: str | None, holdout: float | None
    ) -> tuple[tuple[int, int] | None, str]:
        """The given size (None: the decoded images' most common) and the cache key
        (the fingerprint, the size setting and the hold-out)."""
        size = parse_image_size(image_size) if image_size else None
        key_size = "x".join(map(str, size)) if size else "auto"
        text = f"{CACHE_FORMAT}|{self.fingerprint(layout)}|{key_size}|{holdout!r}"
        return size, hashlib.sha256(text.encode()).hexdigest()

    def check_partition_field(self, layout: FolderLayout, partition_by: str) -> None:
        """An image folder has no field: :attr:`party_folders` already refused
        ``partition_by`` before the scan, and this says the same of a scanned one."""
        raise FolderDataError(f"{layout.root}: partition_by={partition_by!r} (allowed: unset)")

    def read_targets(self, layout: FolderLayout, size: tuple[int, int]) -> torch.Tensor:
        return self.kind.targets([*layout.train, *layout.test], layout)

    def image_paths(self, layout: FolderLayout) -> list[str]:
        return [f.path for f in (*layout.train, *layout.test)]

    def fields(self, layout: FolderLayout, kept: np.ndarray) -> dict[str, list[str]]:
        return {}

    def stored(self, targets: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        return targets[torch.as_tensor(rows)]

    def restored(self, stored: torch.Tensor) -> torch.Tensor:
        return stored

    def targets_fit(self, payload: dict[str, Any]) -> bool:
        return _payload_ok(payload, self.kind.target_ndim)

    def payload_fits(self, payload: dict[str, Any]) -> bool:
        return self.targets_fit(payload)

    def decode(
        self, layout: FolderLayout, size: tuple[int, int] | None, holdout: float | None, key: str
    ) -> dict[str, Any]:
        return _decode(self.kind, layout, size, holdout, key)

    def parties(
        self,
        layout: FolderLayout,
        payload: dict[str, Any],
        partition_by: str | None,
        holdout: float | None,
    ) -> tuple[torch.Tensor | None, list[str], list[tuple[str, int]]]:
        """The party folders' parties (checked against what a hold-out left them)."""
        if holdout is not None:  # the scan counted the parties before it
            _check_parties_after_holdout(layout, payload["train_parties"], holdout)
        names = list(payload["party_names"])
        left_out = [(v, n) for v, n in payload.get("left_out_parties", ())]
        return (payload["train_parties"] if names else None), names, left_out

    def default_model_of(self, payload: dict[str, Any]) -> str:
        _, _, h, w = payload["train_x"].shape
        return default_model_for(h, w)

    def spec_extras(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"target_names": tuple(payload.get("target_names", ()))}


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
        load=ImageFolder(kind).load,
        identity=functools.partial(image_folder_identity, kind),
        last=last,
    )


# ------------------------------------------------------------------------ decoding
def _decode(
    kind: ImageFolderKind,
    layout: FolderLayout,
    given: tuple[int, int] | None,
    holdout_fraction: float | None,
    key: str,
) -> dict[str, Any]:
    files = list(layout.train) + list(layout.test)
    check_decode_memory(layout.root, files, "x".join(map(str, given)) if given else None)
    images = decode_files(files)
    channels = check_channels(images, files)
    size = given or most_common_size(images)
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
    """The data set an ``hf:`` source's cached payload holds (the image folders' shape:
    targets, ``train_parties``, ``party_names``), of the kind ``task``."""
    _, _, h, w = payload["train_x"].shape
    spec = payload_spec(
        payload,
        name=name,
        task=task,
        default_model=default_model_for(h, w),
        party_names=payload["party_names"],
        target_names=tuple(payload.get("target_names", ())),
        # an hf: source's natural parties under the floor of images a party needs
        left_out_parties=[(v, n) for v, n in payload.get("left_out_parties", ())],
    )
    parties = payload["train_parties"] if payload["party_names"] else None
    return ImageData(
        spec, payload["train_x"], payload["train_y"], payload["test_x"], payload["test_y"], parties
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
