"""The one reader base of folder kinds with a layout of their own (a detection folder, a
segmentation folder, a fifth kind's): what every such reader does alike, so that a kind
writes only what its files are.

A kind subclasses :class:`KindFolder` in its own package and says how its folder is
scanned, how its targets are read and stored, and what its cache entry holds beyond the
images; the base does the rest, the same way for every kind:

* **layout**: the scan (the kind's :meth:`KindFolder.scan`), then the test-set rule: a
  test split of its own or ``holdout_fraction``, never both, never neither;
* **one size**: ``image_size`` ("H" or "HxW"), else the most common size of the images;
  grey-scale images beside RGB ones are repeated to three channels;
* **hold-out**: without a test split, ``holdout_fraction`` of the training images (a
  fixed draw, seed 0) within the groups the kind's task names
  (:meth:`~federated.tasks.base.Task.target_groups`);
* **parties by a field**: ``partition_by`` names a field of the training images; its
  values are the parties (:func:`~federated.data.party_field.parties_by_value`: a value
  under :data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` images is left out), at
  least two of them;
* **cache**: the decoded tensors in ``<data root>/folder-cache/<path hash>-<key>.pt``
  (:mod:`federated.data.folder_cache`, ``torch.load(weights_only=True)``), the key
  hashing the kind, the layout's fingerprint, the size and the hold-out; a damaged or
  foreign entry is decoded again; this process's loads are held in the one memory cache
  (:mod:`federated.data.memory_cache`);
* **payload spec**: the data set's :class:`~federated.data.catalog.DatasetSpec` from
  the cached tensors (:func:`~federated.data.folder_cache.payload_spec`);
* **errors**: every problem one line of the kind's own error (a
  :class:`~federated.data.folder_layout.FolderDataError`) naming the file, raised before
  anything is decoded or written.
"""

from __future__ import annotations

import hashlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from federated.data.folder_cache import FolderLoad, cache_entry_path, payload_spec, write_cache
from federated.data.folder_decode import (
    channel_stats,
    check_decode_memory,
    choose_size,
    decode_files,
    parse_image_size,
    stack_resized,
)
from federated.data.folder_kinds import folder_readers
from federated.data.folder_layout import MIN_PARTY_IMAGES, FolderDataError, ImageFile
from federated.data.holdout_draw import holdout_split
from federated.data.image_data import ImageData, Targets
from federated.data.memory_cache import held, hold
from federated.data.party_field import parties_by_value


class KindFolder(ABC):
    """One folder kind's reading (module docstring): the base's :meth:`load` and the
    kind's hooks.  The layout a kind's :meth:`scan` returns has ``root``, ``train``,
    ``test``, ``has_test`` and ``class_names``; the hooks with a body are the common
    case, which the image folders (:mod:`federated.data.folder_dataset`: parties by
    folder, the size of the decoded images) override."""

    #: the kind's task name (the data's ``task``) and first word of its cache key
    task: ClassVar[str]
    #: the model its data name by default (the spec's ``default_model``)
    default_model: ClassVar[str]
    #: its one-line error
    error: ClassVar[type[FolderDataError]] = FolderDataError
    #: its cache entries' format (a new one decodes again)
    cache_format: ClassVar[int] = 1
    #: what stands for the test split in messages: ("a test folder exists", "no such
    #: folder (add test/images/ and test/masks/")
    test_words: ClassVar[tuple[str, str]]
    #: the hold-out's groups of the training targets (the task's ``target_groups``)
    groups: ClassVar[Callable[[Any], np.ndarray]]
    #: where its natural parties come from when they are no field ("its train/<party>/
    #: folders"): ``partition_by`` is then refused before the scan; None: a field
    party_folders: ClassVar[str | None] = None

    # ------------------------------------------------------------------ the kind's
    @abstractmethod
    def scan(self, root: Path) -> Any:
        """The checked layout of folder ``root`` (nothing decoded)."""

    @abstractmethod
    def test_place(self, layout: Any) -> Path:
        """The test split's file or folder, as messages name it."""

    @abstractmethod
    def train_place(self, layout: Any) -> Path:
        """The training images' file or folder, as messages name it."""

    @abstractmethod
    def sizes(self, layout: Any) -> list[tuple[int, int]]:
        """Every image's (height, width), training then test, from its header."""

    @abstractmethod
    def check_partition_field(self, layout: Any, partition_by: str) -> None:
        """Refuse a ``partition_by`` that is no field every training image carries."""

    def party_words(self, layout: Any, partition_by: str) -> str:
        """Where field ``partition_by`` comes from, for a refusal ("<file>: image field
        'device1_id'"; by default the folder's)."""
        return f"{layout.root}: field {partition_by!r}"

    @abstractmethod
    def read_targets(self, layout: Any, size: tuple[int, int]) -> Targets:
        """Every image's targets (training then test) at image size ``size``, read and
        checked before any image is decoded (a refusal costs nothing)."""

    @abstractmethod
    def image_paths(self, layout: Any) -> list[str]:
        """Every image's file, training then test."""

    @abstractmethod
    def fields(self, layout: Any, kept: np.ndarray) -> dict[str, list[str]]:
        """Each field's value for the kept training images ``kept`` (indices)."""

    @abstractmethod
    def stored(self, targets: Targets, rows: np.ndarray) -> Any:
        """The targets of ``rows`` as the cache stores them (tensors only)."""

    @abstractmethod
    def restored(self, stored: Any) -> Targets:
        """The targets a cache entry stored, in the kind's container."""

    @abstractmethod
    def targets_fit(self, payload: dict[str, Any]) -> bool:
        """Whether a cache entry's targets are whole and fit its images."""

    def spec_extras(self, payload: dict[str, Any]) -> dict[str, Any]:
        """More of the spec from a cache entry (a detection's ``target_names``)."""
        return {}

    def fingerprint(self, layout: Any) -> str:
        """The layout's content fingerprint (hex)."""
        return layout.fingerprint

    def settings(
        self, layout: Any, image_size: str | None, holdout: float | None
    ) -> tuple[tuple[int, int], str]:
        """The image size (given, else the most common of the headers') and the cache
        key: the kind, the cache format, the fingerprint, the size and the hold-out."""
        size = parse_image_size(image_size) if image_size else choose_size(self.sizes(layout))
        text = (
            f"{self.task}|{self.cache_format}|{self.fingerprint(layout)}|"
            f"{size[0]}x{size[1]}|{holdout!r}"
        )
        return size, hashlib.sha256(text.encode()).hexdigest()

    def payload_fits(self, payload: dict[str, Any]) -> bool:
        """Whether a cache entry is whole: its images, fields and targets."""
        return _images_fit(payload) and _fields_fit(payload) and self.targets_fit(payload)

    def parties(
        self, layout: Any, payload: dict[str, Any], partition_by: str | None, holdout: float | None
    ) -> tuple[torch.Tensor | None, list[str], list[tuple[str, int]]]:
        """Each kept training image's party under field ``partition_by`` (-1: a party
        left out), the parties' names and the values left out (with their image
        counts); no parties without a field."""
        if partition_by is None:
            return None, [], []
        values = np.array(payload["fields"][partition_by], dtype=object)
        parties, names, left_out = parties_by_value(values)
        if len(names) < 2:
            raise self.error(
                f"{self.party_words(layout, partition_by)} gives {len(names)} parties of at "
                f"least {MIN_PARTY_IMAGES} training images (allowed: at least 2)"
            )
        return parties, names, left_out

    def default_model_of(self, payload: dict[str, Any]) -> str:
        """The model the data name by default."""
        return self.default_model

    # ----------------------------------------------------------------- the base's
    def load(
        self,
        root: Path,
        image_size: str | None = None,
        holdout_fraction: float | None = None,
        data_root: str | os.PathLike | None = None,
        partition_by: str | None = None,
        *,
        use_memory: bool = True,
    ) -> FolderLoad:
        """Load the kind's folder ``root`` (module docstring)."""
        start = time.perf_counter()
        if partition_by is not None and self.party_folders is not None:
            fielded = ", or ".join(
                f"{r.party_field} of a {r.name} folder" for r in folder_readers() if r.party_field
            )
            raise self.error(
                f"{root}: partition_by={partition_by!r} names {fielded} (allowed here: unset; "
                f"this folder's natural parties are {self.party_folders})"
            )
        layout = self.scan(root)
        self._check_test_rule(layout, holdout_fraction)
        if partition_by is not None:
            self.check_partition_field(layout, partition_by)
        size, key = self.settings(layout, image_size, holdout_fraction)
        cache_file = cache_entry_path(layout.root, key, data_root)
        data = held((self.task, key, partition_by)) if use_memory else None
        source = "memory"
        if data is None:
            payload, source = self._read_cache(cache_file, key), "disk cache"
            if payload is None:
                payload, source = self.decode(layout, size, holdout_fraction, key), "decoded"
            parties = self.parties(layout, payload, partition_by, holdout_fraction)
            if source == "decoded":
                write_cache(cache_file, payload, self.error)
            data = self._image_data(payload, f"folder:{layout.root}", *parties)
            if use_memory:
                hold((self.task, key, partition_by), data)
        elapsed = time.perf_counter() - start
        return FolderLoad(data, self.fingerprint(layout), source, elapsed, cache_file)

    def _check_test_rule(self, layout: Any, holdout_fraction: float | None) -> None:
        exists, missing = self.test_words
        if layout.has_test and holdout_fraction is not None:
            raise self.error(
                f"{self.test_place(layout)}: {exists} and holdout_fraction={holdout_fraction} "
                "is set (allowed: one of the two)"
            )
        if not layout.has_test and holdout_fraction is None:
            raise self.error(
                f"{self.test_place(layout)}: {missing}, or hold out part of the training "
                "images with holdout_fraction, e.g. --holdout-fraction 0.2)"
            )

    def decode(
        self, layout: Any, size: tuple[int, int] | None, holdout: float | None, key: str
    ) -> dict[str, Any]:
        """Decode every image and target once into a cache entry (the kind's targets
        read first: a refusal costs nothing)."""
        targets = self.read_targets(layout, size)
        files = [ImageFile(path, -1, -1, 0, 0) for path in self.image_paths(layout)]
        check_decode_memory(layout.root, files, f"{size[0]}x{size[1]}")
        x = stack_resized(_three_channels_beside_rgb(decode_files(files)), size)
        n_train = len(layout.train)
        train, test = np.arange(n_train), np.arange(n_train, len(files))
        if holdout is not None:
            keep, held_out = holdout_split(self.groups(targets[torch.as_tensor(train)]), holdout)
            if len(held_out) == 0:
                raise self.error(
                    f"{self.train_place(layout)}: holdout_fraction={holdout} holds out no image "
                    "(allowed: a fraction that leaves at least one test image)"
                )
            train, test = keep, held_out
        mean, std = channel_stats(x[train])
        return {
            "format": self.cache_format,
            "key": key,
            "train_x": x[train].contiguous(),
            "train_y": self.stored(targets, train),
            "test_x": x[test].contiguous(),
            "test_y": self.stored(targets, test),
            "class_names": list(layout.class_names),
            "fields": self.fields(layout, train),
            "mean": list(mean),
            "std": list(std),
        }

    def _image_data(
        self,
        payload: dict[str, Any],
        name: str,
        parties: torch.Tensor | None,
        party_names: list[str],
        left_out: list[tuple[str, int]],
    ) -> ImageData:
        spec = payload_spec(
            payload,
            name=name,
            task=self.task,
            default_model=self.default_model_of(payload),
            party_names=party_names,
            left_out_parties=left_out,
            **self.spec_extras(payload),
        )
        train_y, test_y = self.restored(payload["train_y"]), self.restored(payload["test_y"])
        return ImageData(spec, payload["train_x"], train_y, payload["test_x"], test_y, parties)

    def _read_cache(self, path: Path, key: str) -> dict[str, Any] | None:
        """The cache entry at ``path`` when it is this key's and whole, else None (decode
        again: a truncated, foreign or damaged file is never a traceback later)."""
        if not path.is_file():
            return None
        try:
            payload = torch.load(path, weights_only=True)
            ok = (
                isinstance(payload, dict)
                and payload.get("key") == key
                and payload.get("format") == self.cache_format
                and self.payload_fits(payload)
            )
        except Exception:  # an unreadable or foreign file
            return None
        return payload if ok else None


def _three_channels_beside_rgb(images: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Grey-scale images beside RGB ones repeated to three channels (a set such as COCO
    mixes a few grey photographs into a colour set)."""
    if any(im.shape[0] == 3 for im in images):
        return [im.expand(3, -1, -1) if im.shape[0] == 1 else im for im in images]
    return list(images)


def _images_fit(payload: dict[str, Any]) -> bool:
    """Whether a cache entry's images, classes and statistics are whole."""
    x, test_x = payload.get("train_x"), payload.get("test_x")
    if not (isinstance(x, torch.Tensor) and isinstance(test_x, torch.Tensor)):
        return False
    return (
        x.dtype == torch.uint8 == test_x.dtype
        and x.ndim == 4 == test_x.ndim
        and x.shape[1:] == test_x.shape[1:]
        and isinstance(payload.get("class_names"), list)
        and all(
            isinstance(payload.get(k), list) and len(payload[k]) == x.shape[1]
            for k in ("mean", "std")
        )
    )


def _fields_fit(payload: dict[str, Any]) -> bool:
    """Whether a cache entry holds each training image's fields."""
    fields, n = payload.get("fields"), len(payload["train_x"])
    return isinstance(fields, dict) and all(
        isinstance(v, list) and len(v) == n for v in fields.values()
    )


class FieldTableFolder(KindFolder):
    """A kind whose targets are one tensor per image (rows stored as they are) and whose
    training images' fields come from one table read by the scan (``layout.fields``:
    field -> one value per training image; the kind's package names its table).  Its
    layout has ``root``,
    ``fingerprint``, ``train``, ``test``, ``class_names`` and ``fields``."""

    #: the manifest's word for the folder's files (``images+masks``)
    identity_format: ClassVar[str]

    def fields(self, layout: Any, kept: np.ndarray) -> dict[str, list[str]]:
        return {name: [values[i] for i in kept] for name, values in layout.fields.items()}

    def stored(self, targets: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        return targets[torch.as_tensor(rows)].contiguous()

    def restored(self, stored: torch.Tensor) -> torch.Tensor:
        return stored

    def identity(self, root: Path) -> dict[str, Any]:
        """What a sweep's manifest records of the folder: its path, format, content
        fingerprint, image counts, classes and the table's fields with their number of
        distinct values."""
        layout = self.scan(root)
        return {
            "path": str(layout.root),
            "format": self.identity_format,
            "fingerprint": layout.fingerprint,
            "task": self.task,
            "train_images": len(layout.train),
            "test_images": len(layout.test),
            "classes": list(layout.class_names),
            "party_fields": {
                name: len(set(values) - {""}) for name, values in sorted(layout.fields.items())
            },
        }
