"""``hf:`` datasets: a Hugging Face ``datasets`` source as an :class:`ImageData`, cached on disk.

Sources (``SOURCE`` in ``hf:SOURCE``)::

    hf:NAME[:CONFIG]     a Hub data set (flwrlabs/femnist, uoft-cs/cifar10), from the Hub or
                         the local Hugging Face cache
    hf:PATH              a local copy: a folder written by ``save_to_disk``, a ``.parquet``
                         file or a folder of them, or an ``imagefolder`` tree
                         (``PATH/<split>/<class>/<image>``, optional ``metadata.csv``)

A ``PATH`` is told apart from a ``NAME`` by starting with ``/``, ``.`` or ``~``, or by
existing.  Nothing the source holds is executed: ``datasets`` 4 and later refuse data set
scripts, and local sources go through ``load_from_disk`` or the packaged ``parquet`` and
``imagefolder`` builders only.  Hub telemetry is off (``HF_HUB_DISABLE_TELEMETRY``).

Columns: the image column is ``image_column``, else ``image`` or ``img``, else the one
column of images; the target is ``label_column``, else ``label``, ``character``,
``fine_label`` or ``labels``, else the one class-label column.  The column's type decides
the kind: each registered kind's :class:`~federated.data.hub_column.HubColumn` is asked in
turn (a class-label, integer or text target is a classification task, classes in the
feature's order, else sorted; a float target is a score task).  ``partition_by`` names a
column whose values are the natural parties (``--partition natural --partition-by
writer_id``).

Splits: ``train``, and ``test`` when the source has one.  A source with one split (FEMNIST)
has no test set of its own (``spec.test_from_parties``): a run's test set is the union of its
parties' local test splits (``party_test_fraction``, which must then be above 0;
federated/engine/party_data.py), LEAF's rule for FEMNIST.  A ``holdout_fraction`` the user
writes is honoured instead: a fixed test set, drawn within the groups the kind's task
names (each class for classification), as for image folders.

Loading takes the first of: this process's memory (:mod:`federated.data.memory_cache`);
the disk cache ``<data root>/hub-cache/<source hash>-<key>.pt``
(``torch.load(weights_only=True)``; the key hashes the source's ``datasets``
fingerprints, a local source's file sizes and mtimes, the columns and the image
settings); decoding every image once and writing that cache.  Images are decoded with
the first rows' channel count (grey-scale when all of them are, else RGB; others
converted) and resized to ``image_size`` or the first rows' most common size, as image
folders are; memory is planned before decoding.

A Hub name with no network and no cached copy fails before any work, in one line naming
the data set and where it looked (``HF_HUB_OFFLINE=1``, or huggingface.co unreachable in
a few seconds; :mod:`federated.cli.hub_source`, torch-free, which ``federated.run`` calls
before importing torch).  Every problem is one :class:`HubDataError` line.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.cli.error_reason import error_reason
from federated.cli.hub_source import (
    HUB_PREFIX,
    HubSourceError,
    check_hub_reachable,
    hub_name,
    is_hub_dataset,
    local_path,
    truthy,
)

# the image folders' rules, shared so both sources hold and cache data alike
from federated.data.folder_cache import write_cache
from federated.data.folder_dataset import image_data, parse_image_size, read_cache
from federated.data.folder_decode import (
    channel_stats,
    choose_size,
    declared_size,
    oversize,
    read_header,
    to_uint8,
)
from federated.data.folder_layout import MIN_PARTY_IMAGES
from federated.data.holdout_draw import holdout_split
from federated.data.hub_column import ColumnTargets, HubColumn
from federated.data.image_data import (
    DatasetUnavailableError,
    ImageData,
    resolve_data_root,
)
from federated.data.kind_parts import kind_parts
from federated.data.memory_cache import held, hold
from federated.data.party_field import NaturalParties, parties_by_value
from federated.runtime.machine_memory import available_memory, gib

CACHE_FORMAT = 2  # 2: the values left out of the natural parties (left_out_parties)
CACHE_FOLDER = "hub-cache"
IMAGE_COLUMNS = ("image", "img")
LABEL_COLUMNS = ("label", "character", "fine_label", "labels")
SAMPLE_ROWS = 256  # rows whose images set the channel count and default size
BATCH_ROWS = 4096  # rows read from Arrow at a time while decoding
# a manifest's test_set for a one-split source: the union of the parties' local test splits
TEST_FROM_PARTIES = "parties"


class HubDataError(DatasetUnavailableError):
    """An ``hf:`` data set cannot be used; the message is one line naming it."""


@dataclass(frozen=True)
class HubColumns:
    """The columns a run names (None: detected); part of the cache key."""

    image: str | None = None
    label: str | None = None
    partition_by: str | None = None

    @classmethod
    def of(cls, config: Any) -> HubColumns:
        """The columns a :class:`~federated.config.run_config.RunConfig` names."""
        return cls(config.image_column, config.label_column, config.partition_by)


def absolute_hub_name(name: str) -> str:
    """``hf:rel/path`` -> ``hf:/abs/rel/path`` (done in a sweep's driver); Hub names as given."""
    path = local_path(name) if is_hub_dataset(name) else None
    return HUB_PREFIX + str(path) if path is not None else name


# ------------------------------------------------------------------ opening the source
def _datasets():
    """The ``datasets`` library, imported with telemetry and progress bars off."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    if truthy("HF_HUB_OFFLINE"):  # set after an earlier import read it
        import huggingface_hub.constants

        datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    return datasets


def open_source(name: str) -> dict[str, Any]:
    """The source's splits as ``{split: datasets.Dataset}``; one line when it cannot be had."""
    try:
        path = local_path(name)
        if path is None:
            check_hub_reachable(name)
    except HubSourceError as err:
        raise HubDataError(str(err)) from None
    if path is not None and not path.exists():
        raise HubDataError(f"{path}: no such file or folder (dataset {name})")
    ds = _datasets()
    try:
        if path is None:
            repo, config = hub_name(name)
            loaded = ds.load_dataset(repo, config)
        elif (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
            loaded = ds.load_from_disk(str(path))
        elif path.suffix == ".parquet":
            loaded = ds.load_dataset("parquet", data_files={"train": str(path)})
        elif path.is_dir() and any(path.rglob("*.parquet")):
            loaded = ds.load_dataset("parquet", data_dir=str(path))
        else:
            loaded = ds.load_dataset("imagefolder", data_dir=str(path))
    except HubDataError:
        raise
    except Exception as err:  # DatasetNotFoundError, ConnectionError, arrow errors ...
        raise HubDataError(f"dataset {name!r} cannot be loaded ({load_problem(err)})") from None
    return dict(loaded) if isinstance(loaded, ds.DatasetDict) else {"train": loaded}


def load_problem(err: BaseException) -> str:
    """What a failed load of an ``hf:`` source means in the user's words: a damaged JSON
    file (``dataset_info.json``, ``state.json``), a truncated Arrow file, a folder with no
    data files; else the library's reason, whole, with its exception's name."""
    kind = type(err).__name__
    text = error_reason(err, "")
    if isinstance(err, json.JSONDecodeError):
        return f"one of its JSON files (dataset_info.json, state.json ...) is damaged: {text}"
    if "Expected to be able to read" in text:  # pyarrow on an Arrow file cut short
        return f"an Arrow data file is truncated ({text})"
    if kind in ("EmptyDatasetError", "DataFilesNotFoundError") or "corresponds to no data" in text:
        return (
            "no data files in it (allowed: a saved data set, parquet files, or an image "
            f"folder of .png/.jpg files: {text})"
        )
    return f"{kind}: {text}"


# ----------------------------------------------------------------------- columns
def _column(name: str, features: Any, given: str | None, field: str, candidates, test) -> str:
    if given is not None:
        if given not in features:
            raise HubDataError(
                f"dataset {name!r}: no column {given!r} for {field} (columns: "
                f"{', '.join(features)})"
            )
        return given
    for candidate in candidates:
        if candidate in features:
            return candidate
    fitting = [c for c, f in features.items() if test(f)]
    if len(fitting) == 1:
        return fitting[0]
    raise HubDataError(
        f"dataset {name!r}: no {field.replace('_', ' ')} found among its columns "
        f"({', '.join(features)}); name it with --{field.replace('_', '-')}"
    )


def choose_columns(name: str, features: Any, given: HubColumns) -> HubColumns:
    """The image, target and party columns of a split's ``features``; one line for a
    missing or unfit one."""
    ds = _datasets()
    image = _column(
        name,
        features,
        given.image,
        "image_column",
        IMAGE_COLUMNS,
        lambda f: isinstance(f, ds.Image),
    )
    if not isinstance(features[image], ds.Image):
        raise HubDataError(
            f"dataset {name!r}: column {image!r} holds {features[image]!r}, not images "
            "(allowed: an Image column)"
        )
    label = _column(
        name,
        features,
        given.label,
        "label_column",
        LABEL_COLUMNS,
        lambda f: isinstance(f, ds.ClassLabel),
    )
    if given.partition_by is not None and given.partition_by not in features:
        raise HubDataError(
            f"dataset {name!r}: no column {given.partition_by!r} for partition_by (columns: "
            f"{', '.join(features)})"
        )
    for column in (label, given.partition_by):
        if column == image:
            raise HubDataError(f"dataset {name!r}: column {image!r} is the image column")
    return HubColumns(image, label, given.partition_by)


def _values(split: Any, column: str) -> np.ndarray:
    return (
        split.select_columns([column])
        .with_format("arrow")[:]
        .column(column)
        .to_numpy(zero_copy_only=False)
    )


def check_filled(name: str, splits: dict[str, Any], column: str, field: str) -> None:
    """Refuse a ``column`` (the target) with an empty cell (null) in any split, naming
    the first such row: an empty class would be a class of its own (``nan``, a KeyError
    on it, or a comparison of text with None, a TypeError), an empty score NaN."""
    import pyarrow.compute as pc

    for key, split in splits.items():
        values = split.select_columns([column]).with_format("arrow")[:].column(column)
        if values.null_count:
            row = pc.index(pc.is_null(values), True).as_py()
            count = values.null_count
            raise HubDataError(
                f"dataset {name!r}: column {column!r} ({field}) is empty in split {key!r} "
                f"row {row} ({count:,} empty row{'s' if count > 1 else ''} in all; allowed: "
                "a value in every row: drop or fill those rows first)"
            )


def hub_columns() -> tuple[HubColumn, ...]:
    """Each registered kind's reading of a target column, in the registry's order."""
    return kind_parts("hub_column")


def _targets(name: str, splits: dict[str, Any], label: str) -> tuple[HubColumn, ColumnTargets]:
    """The kind whose column reading decodes ``label`` (the first that does) and each
    split's targets; one line naming what the kinds accept where none does."""
    feature = splits["train"].features[label]
    raw = {key: _values(split, label) for key, split in splits.items()}
    for column in hub_columns():
        decoded = column.decode(feature, raw, label)
        if decoded is not None:
            return column, decoded
    allowed = ", ".join(c.accepts for c in hub_columns())
    raise HubDataError(f"dataset {name!r}: column {label!r} holds {feature!r} (allowed: {allowed})")


# ------------------------------------------------------------------------ images
def _unreadable(name: str, split: str, row: int, column: str, err: BaseException) -> HubDataError:
    if isinstance(err, FileNotFoundError):  # an imagefolder row's file is gone
        reason = f"its file {err.filename or ''} does not exist"
    elif isinstance(err, OSError) and err.filename:
        reason = f"its file {err.filename} cannot be read ({err.strerror or error_reason(err)})"
    else:
        reason = error_reason(err)
    return HubDataError(
        f"dataset {name!r}: split {split!r} row {row}, column {column!r}: not a readable "
        f"image ({reason})"
    )


def _decode_one(
    name: str, split: str, row: int, column: str, cell: dict | None, channels: int
) -> torch.Tensor:
    from torchvision.io import ImageReadMode, decode_image

    mode = ImageReadMode.GRAY if channels == 1 else ImageReadMode.RGB
    try:
        data = cell.get("bytes") if cell else None
        if data is None and cell and cell.get("path"):
            data = Path(cell["path"]).read_bytes()  # an imagefolder row keeps its file's path
        if data is None:
            raise ValueError("empty cell")
    except (ValueError, OSError) as err:
        raise _unreadable(name, split, row, column, err) from None
    # a huge image is refused from its header, as an image folder's file is: decoding it
    # whole could exhaust memory before any check saw it
    problem = oversize(declared_size(io.BytesIO(data)))
    if problem:
        raise HubDataError(f"dataset {name!r}: split {split!r} row {row}: {problem}")
    try:
        image = decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode=mode)
    except (RuntimeError, ValueError, OSError) as err:
        raise _unreadable(name, split, row, column, err) from None
    # an animated GIF: its first frame; a 16-bit PNG scaled to 8 bits, not wrapped
    return to_uint8(image[0] if image.ndim == 4 else image)


def _cells(split: Any, image: str, start: int = 0, stop: int | None = None):
    part = split if (start, stop) == (0, None) else split.select(range(start, stop))
    column = part.select_columns([image]).with_format("arrow")
    for batch in column.iter(batch_size=BATCH_ROWS):
        yield from batch.column(image).to_pylist()


def _sample_shape(name: str, split: Any, image: str, image_size: str | None) -> tuple[int, tuple]:
    """Channels and (height, width) from the headers of the first :data:`SAMPLE_ROWS` rows:
    grey-scale when all are, else RGB; ``image_size``, else their most common size.  A
    row whose header declares more than ``MAX_DECODE_PIXELS`` is refused here, before
    its size could choose the others' or plan the memory."""
    headers = [_header(cell) for cell in _cells(split, image, 0, min(SAMPLE_ROWS, len(split)))]
    for row, header in enumerate(headers):
        problem = oversize(None if header is None else header[1][::-1])
        if problem:
            raise HubDataError(f"dataset {name!r}: split 'train' row {row}: {problem}")
    known = [h for h in headers if h is not None]
    if not known:  # no header readable: decoding names the first bad row
        _decode_one(name, "train", 0, image, next(_cells(split, image, 0, 1)), 3)
    grey = all(g for g, _ in known)
    size = parse_image_size(image_size) if image_size else choose_size([s for _, s in known])
    return (1 if grey else 3), size


def _header(cell: dict | None) -> tuple[bool, tuple[int, int]] | None:
    """(grey-scale?, (height, width)) from an image cell's header, or None if unreadable."""
    data = (cell or {}).get("bytes")
    source = io.BytesIO(data) if data is not None else (cell or {}).get("path")
    header = read_header(source) if source is not None else None
    if header is None:
        return None
    width, height, mode = header
    return mode in ("1", "L", "LA", "I", "I;16", "F"), (height, width)


def _decode_split(name: str, key: str, split: Any, image: str, channels: int, size) -> torch.Tensor:
    import torchvision.transforms.v2.functional as TF

    out = torch.empty(len(split), channels, *size, dtype=torch.uint8)
    for row, cell in enumerate(_cells(split, image)):
        picture = _decode_one(name, key, row, image, cell, channels)
        if tuple(picture.shape[1:]) != size:
            picture = TF.resize(picture, list(size), antialias=True)
        out[row] = picture
    return out


def check_memory(name: str, rows: int, channels: int, size: tuple[int, int]) -> None:
    """Refuse, before decoding, images that would not fit: the decoded (N, C, H, W) uint8
    tensor and a hold-out's copy of it (bytes)."""
    needed = 2 * rows * channels * size[0] * size[1]
    available = available_memory()
    if available is not None and needed > available:
        raise HubDataError(
            f"dataset {name!r}: {rows} images at {size[0]}x{size[1]} ({channels} channel(s)) "
            f"need about {gib(needed)} to decode and hold, and this machine has "
            f"{gib(available)} available (pass a smaller --image-size)"
        )


# ----------------------------------------------------------------------- parties
def natural_parties(name: str, column: str, values: np.ndarray) -> NaturalParties:
    """Each training row's party, the parties' names and the values left out
    (:func:`parties_by_value`'s rule); fewer than two parties is an error naming the column."""
    parties, names, left_out = parties_by_value(values)
    if len(names) < 2:
        raise HubDataError(
            f"dataset {name!r}: column {column!r} gives {len(names)} parties of at least "
            f"{MIN_PARTY_IMAGES} training images (allowed: at least 2)"
        )
    return NaturalParties(parties, names, left_out)


# ------------------------------------------------------------------- loading
def _source_key(name: str, splits: dict[str, Any], columns: HubColumns, image_size, holdout) -> str:
    digest = hashlib.sha256(f"{CACHE_FORMAT}|{name}|{columns}|{image_size}|{holdout!r}".encode())
    for key in sorted(splits):
        digest.update(f"{key}\0{getattr(splits[key], '_fingerprint', '')}\n".encode())
    path = local_path(name)
    if path is not None:  # a local copy edited in place keeps its datasets fingerprint
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            stat = file.stat()
            digest.update(f"{file}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _cache_file(name: str, key: str, data_root) -> Path:
    source_hash = hashlib.sha256(name.encode()).hexdigest()[:12]
    return resolve_data_root(data_root) / CACHE_FOLDER / f"{source_hash}-{key[:24]}.pt"


def load_hub(
    name: str,
    image_size: str | None = None,
    holdout_fraction: float | None = None,
    data_root: str | os.PathLike | None = None,
    columns: HubColumns = HubColumns(),
) -> ImageData:
    """Load ``hf:SOURCE`` (see the module docstring); errors are one line naming it."""
    return _load_hub(name, image_size, holdout_fraction, data_root, columns)[0]


def _load_hub(
    name: str,
    image_size: str | None,
    holdout_fraction: float | None,
    data_root: str | os.PathLike | None,
    columns: HubColumns,
) -> tuple[ImageData, str, HubColumns]:
    """:func:`load_hub`'s data with its cache key and the columns it chose (detected or
    named), for the manifest."""
    memory_key = ("hub", name, image_size, holdout_fraction, str(data_root), columns)
    loaded = held(memory_key)
    if loaded is not None:
        return loaded
    splits = open_source(name)
    if "train" not in splits:
        raise HubDataError(f"dataset {name!r}: no 'train' split (splits: {', '.join(splits)})")
    splits = {k: v for k, v in splits.items() if k in ("train", "test")}
    if "test" in splits and holdout_fraction is not None:
        raise HubDataError(
            f"dataset {name!r}: it has a test split and holdout_fraction={holdout_fraction} "
            "is set (allowed: one of the two)"
        )
    chosen = choose_columns(name, splits["train"].features, columns)
    key = _source_key(name, splits, chosen, image_size, holdout_fraction)
    cache_file = _cache_file(name, key, data_root)
    payload = _cached(cache_file, key)
    if payload is None:
        payload = _decode(name, splits, chosen, image_size, holdout_fraction, key)
        write_cache(cache_file, payload, HubDataError)
    data = image_data(payload, name, payload["task"])
    if "test" not in splits and holdout_fraction is None:  # the parties' splits test
        data = replace(data, spec=replace(data.spec, test_from_parties=True))
    return hold(memory_key, (data, key, chosen))


def _cached(path: Path, key: str) -> dict[str, Any] | None:
    """The cache entry ``path`` under ``key`` whose targets are those of the kind it
    names (``task``); None: decode again."""
    payload = read_cache(path, key, None)
    if payload is None:
        return None
    ndim = payload["train_y"].ndim
    kinds = [c for c in hub_columns() if c.task == payload.get("task") and c.target_ndim == ndim]
    return payload if kinds else None


def _decode(name, splits, columns: HubColumns, image_size, holdout_fraction, key) -> dict:
    # an empty label is named before any image is decoded (an empty party value is not
    # an error: its rows are left out of every party, docs/own-data-and-models.md)
    check_filled(name, splits, columns.label, "label_column")
    train = splits["train"]
    channels, size = _sample_shape(name, train, columns.image, image_size)
    check_memory(name, sum(len(s) for s in splits.values()), channels, size)
    kind, decoded = _targets(name, splits, columns.label)
    targets = decoded.targets
    train_x = _decode_split(name, "train", train, columns.image, channels, size)
    train_y = targets["train"]
    party_values = _values(train, columns.partition_by) if columns.partition_by else np.empty(0)
    if "test" in splits:
        test_x = _decode_split(name, "test", splits["test"], columns.image, channels, size)
        test_y = targets["test"]
    elif holdout_fraction is None:  # no test set of its own: the parties' splits are it
        test_x, test_y = train_x[:0], train_y[:0]
    else:
        keep, held_out = holdout_split(kind.groups(train_y), holdout_fraction)
        if len(held_out) == 0:
            raise HubDataError(
                f"dataset {name!r}: holdout_fraction={holdout_fraction} holds out no image "
                "(allowed: a fraction that leaves at least one test image)"
            )
        test_x, test_y = train_x[held_out], train_y[held_out]
        train_x, train_y = train_x[keep], train_y[keep]
        party_values = party_values[keep] if columns.partition_by else party_values
    parties, party_names = torch.zeros(len(train_y), dtype=torch.int64), []
    left_out: list[tuple[str, int]] = []
    if columns.partition_by:
        parties, party_names, left_out = natural_parties(name, columns.partition_by, party_values)
    mean, std = channel_stats(train_x)
    return {
        "format": CACHE_FORMAT,
        "key": key,
        "task": kind.task,
        "train_x": train_x.contiguous(),
        "train_y": train_y,
        "train_parties": parties,
        "test_x": test_x.contiguous(),
        "test_y": test_y,
        "class_names": list(decoded.class_names),
        "party_names": party_names,
        "left_out_parties": [[v, n] for v, n in left_out],
        "target_names": list(decoded.target_names),
        "mean": list(mean),
        "std": list(std),
    }


def hub_identity(config: Any) -> dict[str, Any]:
    """What a sweep manifest records of an ``hf:`` data set (a config's): the source, the
    columns, the cache key (which data and settings were decoded), the sizes and where the
    test set comes from (``test_set``: ``split``, ``holdout`` or :data:`TEST_FROM_PARTIES`).  The
    sweep's plan has loaded it in this process: read from memory."""
    data, key, chosen = _load_hub(
        config.dataset,
        config.image_size,
        config.holdout_fraction,
        config.data_root,
        HubColumns.of(config),
    )
    return {
        "source": config.dataset,
        "columns": {"image": chosen.image, "label": chosen.label, "party": chosen.partition_by},
        "fingerprint": key,
        "task": data.spec.task,
        "train_images": data.spec.train_size,
        "test_images": data.spec.test_size,
        # where the run's test set comes from: the source's test split, a fixed hold-out
        # (holdout_fraction), or the union of the parties' local test splits (one split)
        "test_set": (
            TEST_FROM_PARTIES
            if data.spec.test_from_parties
            else "holdout"
            if config.holdout_fraction is not None
            else "split"
        ),
        "classes": list(data.spec.class_names),
        "parties": list(data.spec.party_names),
    }
