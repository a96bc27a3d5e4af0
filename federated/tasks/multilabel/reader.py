"""A multi-label folder: images and, for each, the set of labels it carries, as an
:class:`~federated.data.image_data.ImageData`, decoded once into the data root's cache.

Layout (a ``folder:PATH`` is one when PATH holds ``images/`` and ``labels.csv``)::

    PATH/classes.json             a JSON list of label names: label i is the i-th
                                  (or PATH/classes.txt: one name a line)
    PATH/images/<stem>.<ext>      training images (.png, .jpg, .jpeg, .gif, .webp)
    PATH/labels.csv               stem,labels[,<field>,...]: one row per training image,
                                  its labels' names joined by ';' (empty: no label), and
                                  its value of each field (a site, a camera)
    PATH/test/images/, PATH/test/labels.csv   the test set (optional: else
                                  holdout_fraction); its fields are not read

The rules:

* **one size**: images are resized to ``image_size`` ("H" or "HxW"; default the most
  common size) by a plain resize (bilinear, antialiased); grey-scale images beside RGB
  ones are repeated to three channels, an alpha channel is dropped;
* **test set**: ``test/``; without it, ``holdout_fraction`` of the training images (a
  fixed draw, seed 0, over the images as one group: a label set is no class to stratify
  by) becomes the test set; both, or neither, is an error;
* **natural parties**: ``partition_by`` names a field of ``labels.csv``; its values are
  the parties, sorted (numbers numerically), a value under
  :data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` training images is left out
  (its images train no party, said before the run), at least two parties must remain,
  and every training image needs a value;
* **targets**: multi-hot float32 ``(N, L)`` (:mod:`.targets`);
* **cache**: ``<data root>/folder-cache/<path hash>-<key>.pt`` (``torch.load(
  weights_only=True)``), the key hashing every image's relative path, size and
  modification time, the classes and labels files' contents, the size and the
  hold-out; the last :data:`MEMORY_ENTRIES` loads stay in memory (``functools.lru_cache``);
* normalisation: the training images' per-channel mean and std; no random augmentation.

Every problem is one :class:`~.labels_file.MultiLabelDataError` line naming the file,
raised before anything is written (:mod:`.layout`, :mod:`.labels_file`): an image
without a row or a row without an image, a label not in the classes file, a malformed
classes or labels file, an unreadable image.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.data.folder_cache import FolderLoad, cache_entry_path, payload_spec, write_cache
from federated.data.folder_dataset import default_model_for
from federated.data.folder_decode import (
    channel_stats,
    check_decode_memory,
    choose_size,
    decode_files,
    parse_image_size,
    stack_resized,
)
from federated.data.folder_kinds import FolderReader
from federated.data.folder_layout import MIN_PARTY_IMAGES, ImageFile
from federated.data.holdout_draw import holdout_split
from federated.data.image_data import ImageData
from federated.data.party_field import parties_by_value
from federated.tasks.multilabel.labels_file import LABELS_FILE, MultiLabelDataError
from federated.tasks.multilabel.layout import (
    IMAGES,
    MultiLabelLayout,
    check_settings,
    is_multilabel_folder,
    scan_multilabel,
)
from federated.tasks.multilabel.spec import MULTILABEL
from federated.tasks.multilabel.targets import multi_hot

CACHE_FORMAT = 1
MEMORY_ENTRIES = 2  # loaded folders kept in memory per process (sweep driver, trial)


@dataclass(frozen=True)
class _Request:
    """One load: equal (and hashed) by what decides its result, the cache key (the
    folder's contents, size and hold-out), the entry's path and ``partition_by``."""

    key: str
    cache_file: Path
    partition_by: str | None
    layout: MultiLabelLayout = field(compare=False)
    size: tuple[int, int] = field(compare=False)
    holdout: float | None = field(compare=False)


def load_multilabel_folder(
    root: Path,
    image_size: str | None = None,
    holdout_fraction: float | None = None,
    data_root: str | os.PathLike | None = None,
    partition_by: str | None = None,
    *,
    use_memory: bool = True,
) -> FolderLoad:
    """Load multi-label folder ``root`` (module docstring); every problem one
    :class:`MultiLabelDataError` line, raised before anything is written."""
    start = time.perf_counter()
    layout = scan_multilabel(root)
    check_settings(layout, holdout_fraction, partition_by)
    size = (
        parse_image_size(image_size)
        if image_size
        else choose_size([item.size for item in (*layout.train, *layout.test)])
    )
    text = (
        f"multilabel|{CACHE_FORMAT}|{layout.fingerprint}|{size[0]}x{size[1]}|{holdout_fraction!r}"
    )
    key = hashlib.sha256(text.encode()).hexdigest()
    cache_file = cache_entry_path(layout.root, key, data_root)
    request = _Request(key, cache_file, partition_by, layout, size, holdout_fraction)
    if use_memory:
        hits = _in_memory.cache_info().hits
        data, source = _in_memory(request)
        source = "memory" if _in_memory.cache_info().hits > hits else source
    else:
        data, source = _load(request)
    return FolderLoad(data, layout.fingerprint, source, time.perf_counter() - start, cache_file)


def _load(request: _Request) -> tuple[ImageData, str]:
    """The folder's data (from the disk cache, else decoded and the cache written) and
    where they came from."""
    payload, source = _read_cache(request.cache_file, request.key), "disk cache"
    if payload is None:
        payload, source = _decode(request), "decoded"
    parties, names, left_out = _parties(request.layout, payload, request.partition_by)
    if source == "decoded":
        write_cache(request.cache_file, payload, MultiLabelDataError)
    spec = payload_spec(
        payload,
        name=f"folder:{request.layout.root}",
        task=MULTILABEL,
        default_model=default_model_for(*payload["train_x"].shape[2:]),
        party_names=names,
        left_out_parties=left_out,
    )
    x, y = payload["train_x"], payload["train_y"]
    return ImageData(spec, x, y, payload["test_x"], payload["test_y"], parties), source


#: the last loads, in memory: a sweep driver and a trial read the same folder repeatedly
_in_memory = functools.lru_cache(maxsize=MEMORY_ENTRIES)(_load)


def _decode(request: _Request) -> dict[str, Any]:
    layout, size = request.layout, request.size
    items = (*layout.train, *layout.test)
    files = [ImageFile(str(item.path), -1, -1, 0, 0) for item in items]
    check_decode_memory(layout.root, files, f"{size[0]}x{size[1]}")
    decoded = decode_files(files)
    if any(im.shape[0] == 3 for im in decoded):  # grey beside RGB: three channels each
        decoded = [im.expand(3, -1, -1) if im.shape[0] == 1 else im for im in decoded]
    x = stack_resized(decoded, size)
    y = multi_hot([item.labels for item in items], len(layout.label_names))
    n_train = len(layout.train)
    train, test = np.arange(n_train), np.arange(n_train, len(items))
    if request.holdout is not None:
        train, test = holdout_split(np.zeros(n_train, dtype=np.int64), request.holdout)
        if len(test) == 0:
            raise MultiLabelDataError(
                f"{layout.root / IMAGES}: holdout_fraction={request.holdout} holds out no image "
                "(allowed: a fraction that leaves at least one test image)"
            )
    mean, std = channel_stats(x[train])
    return {
        "format": CACHE_FORMAT,
        "key": request.key,
        "train_x": x[train].contiguous(),
        "train_y": y[train].contiguous(),
        "test_x": x[test].contiguous(),
        "test_y": y[test].contiguous(),
        "class_names": list(layout.label_names),
        "fields": {name: [values[i] for i in train] for name, values in layout.fields.items()},
        "mean": list(mean),
        "std": list(std),
    }


def _parties(
    layout: MultiLabelLayout, payload: dict[str, Any], partition_by: str | None
) -> tuple[torch.Tensor | None, list[str], list[tuple[str, int]]]:
    """Each kept training image's party under ``partition_by`` (-1: a party left out),
    the parties' names and the values left out (with their image counts)."""
    if partition_by is None:
        return None, [], []
    parties, names, left_out = parties_by_value(
        np.array(payload["fields"][partition_by], dtype=object)
    )
    if len(names) < 2:
        raise MultiLabelDataError(
            f"{layout.root / LABELS_FILE}: field {partition_by!r} gives {len(names)} parties "
            f"of at least {MIN_PARTY_IMAGES} training images (allowed: at least 2)"
        )
    return parties, names, left_out


def _read_cache(path: Path, key: str) -> dict[str, Any] | None:
    """The cache entry at ``path`` when it is this key's and whole, else None (decode
    again: a truncated, foreign or damaged file is never a traceback later)."""
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, weights_only=True)
        whole = isinstance(payload, dict) and payload.get("key") == key and _whole(payload)
    except Exception:  # an unreadable or foreign file
        return None
    return payload if whole else None


def _whole(payload: dict[str, Any]) -> bool:
    x, test_x = payload.get("train_x"), payload.get("test_x")
    y, test_y = payload.get("train_y"), payload.get("test_y")
    names, fields = payload.get("class_names"), payload.get("fields")
    return (
        payload.get("format") == CACHE_FORMAT
        and all(isinstance(t, torch.Tensor) for t in (x, test_x, y, test_y))
        and x.dtype == torch.uint8 == test_x.dtype
        and y.dtype == torch.float32 == test_y.dtype
        and x.ndim == 4 == test_x.ndim
        and x.shape[1:] == test_x.shape[1:]
        and isinstance(names, list)
        and tuple(y.shape) == (len(x), len(names))
        and tuple(test_y.shape) == (len(test_x), len(names))
        and isinstance(fields, dict)
        and all(isinstance(v, list) and len(v) == len(x) for v in fields.values())
        and all(
            isinstance(payload.get(k), list) and len(payload[k]) == x.shape[1]
            for k in ("mean", "std")
        )
    )


def multilabel_identity(root: Path) -> dict[str, Any]:
    """What a sweep's manifest records of a multi-label folder: its path, format,
    content fingerprint, image counts, labels and the fields of ``labels.csv`` with
    their number of distinct values."""
    layout = scan_multilabel(root)
    return {
        "path": str(layout.root),
        "format": "images+labels.csv",
        "fingerprint": layout.fingerprint,
        "task": MULTILABEL,
        "train_images": len(layout.train),
        "test_images": len(layout.test),
        "classes": list(layout.label_names),
        "party_fields": {
            name: len(set(values) - {""}) for name, values in sorted(layout.fields.items())
        },
    }


READER = FolderReader(
    name="multi-label",
    recognises=is_multilabel_folder,
    load=load_multilabel_folder,
    identity=multilabel_identity,
    natural_parties=(
        "a field of labels.csv: partition=natural with partition_by=FIELD, e.g. a site"
    ),
    party_field="a field of labels.csv",
)
