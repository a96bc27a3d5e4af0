"""A segmentation folder: images and one mask each (a class per pixel) as an
:class:`~federated.data.image_data.ImageData`, decoded once into the data root's cache.

Layout (a ``folder:PATH`` is one when PATH holds both ``images/`` and ``masks/``)::

    PATH/classes.json             a JSON list of class names: class i is the i-th
                                  (or PATH/classes.txt: one name a line)
    PATH/images/<stem>.<ext>      training images (.png, .jpg, .jpeg, .gif, .webp)
    PATH/masks/<stem>.png         each image's mask: the same stem and size, one channel
                                  (8-bit grey or palette PNG), each pixel's value its class
                                  index, 255 = ignore (unlabelled: no loss, no metric)
    PATH/test/images/, PATH/test/masks/   the test set (optional: else holdout_fraction)
    PATH/parties.csv              optional: a header ``stem,<field>,...`` and one row per
                                  training image; ``partition_by`` names a field

The rules:

* **one size**: images are resized to ``image_size`` ("H" or "HxW"; default the most
  common size) by a plain resize (bilinear, antialiased), their masks to the same size by
  nearest neighbour (:func:`~federated.tasks.segmentation.targets.resize_masks`: a class is never
  blended with its neighbour's); grey-scale images beside RGB ones are repeated to three
  channels, an alpha channel is dropped;
* **test set**: ``test/``; without it, ``holdout_fraction`` of the training images (a
  fixed draw, seed 0) becomes the test set; both, or neither, is an error;
* **natural parties**: ``partition_by`` names a column of ``parties.csv`` (a site, a
  scanner, a background); its values are the parties, sorted (numbers numerically), a
  party under :data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` training images is
  left out, as for a detection folder's image field; every training image needs a value;
* **cache**: ``<data root>/folder-cache/<path hash>-<key>.pt`` (``torch.load(
  weights_only=True)``), the key hashing every file's relative path, size and
  modification time, the classes and parties files' contents, the size and the hold-out;
  masks are held as uint8 ``(N, H, W)`` (:mod:`federated.tasks.segmentation.targets`);
* normalisation: the training images' per-channel mean and std; no random augmentation
  (a crop or flip would have to move the masks too).

Everything is parsed (``json.loads``, ``csv``), never executed; every problem is one
:class:`SegmentationDataError` line naming the file, raised before anything is written:
a missing mask or image, a mask of another size than its image, a mask that is not one
channel, a pixel value beyond the classes, a malformed classes or parties file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from federated.data.folder_kinds import FolderReader
from federated.data.folder_layout import MIN_PARTY_IMAGES, FolderDataError, ImageFile
from federated.data.holdout_draw import holdout_split
from federated.data.image_data import ImageData
from federated.data.party_field import parties_by_value
from federated.tasks.segmentation.spec import SEGMENTATION
from federated.tasks.segmentation.targets import (
    IGNORE_INDEX,
    MAX_CLASSES,
    MaskTargetsError,
    check_mask_values,
    class_pixel_counts,
    resize_masks,
)

#: the data's task (DatasetSpec.task): federated/tasks/segmentation/task.py reads these targets
#: the model a segmentation folder names by default: the small network that trains at
#: laptop speed (federated/tasks/segmentation/models.py)
SEGMENTATION_DEFAULT_MODEL = "unet-tiny"
CLASSES_JSON, CLASSES_TXT, PARTIES_FILE = "classes.json", "classes.txt", "parties.csv"
IMAGES, MASKS, TEST = "images", "masks", "test"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
MASK_SUFFIX = ".png"  # lossless: a JPEG would blur class indices into one another
MASK_MODES = ("L", "P")  # one 8-bit channel: grey values or palette indices (VOC's)
# the largest classes or parties file read (bytes): a listing, never megabytes of it
MAX_LIST_BYTES = 64 * 2**20
CACHE_FORMAT = 1
MEMORY_ENTRIES = 2  # loaded folders kept in memory per process (sweep driver, trial)

_memory: dict[tuple[str, str | None], ImageData] = {}  # (cache key, partition_by) -> data


class SegmentationDataError(FolderDataError):
    """A segmentation folder cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class MaskedImage:
    """One image and its mask, their sizes read from the headers (nothing decoded)."""

    stem: str
    image: Path
    mask: Path
    size: tuple[int, int]  # (height, width), the image's and its mask's
    stats: tuple[int, int, int, int]  # image bytes, mtime_ns; mask bytes, mtime_ns


@dataclass(frozen=True)
class SegmentationLayout:
    """A checked segmentation folder: classes, training then test images with their
    masks (by stem), and each training image's fields from ``parties.csv``."""

    root: Path
    class_names: tuple[str, ...]
    train: tuple[MaskedImage, ...]
    test: tuple[MaskedImage, ...]  # empty without test/
    fields: dict[str, tuple[str, ...]]  # field -> each training image's value ("" none)
    fingerprint: str

    @property
    def has_test(self) -> bool:
        return bool(self.test)

    @property
    def test_dir(self) -> Path:
        return self.root / TEST


# ------------------------------------------------------------------- scanning
def is_segmentation_folder(root: str | os.PathLike) -> bool:
    """Whether folder ``root`` holds ``images/`` and ``masks/``.  A path the OS cannot
    look at is not one (the image-folder scan names its problem)."""
    try:
        return (Path(root) / IMAGES).is_dir() and (Path(root) / MASKS).is_dir()
    except OSError:
        return False


def _read_text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_LIST_BYTES:
            raise SegmentationDataError(
                f"{path}: over {MAX_LIST_BYTES // 2**20} MiB (allowed: a listing, at most that)"
            )
        raw = path.read_bytes()
    except OSError as err:
        raise SegmentationDataError(f"{path}: cannot be read ({err.strerror or err})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise SegmentationDataError(
            f"{path}: line {line}: byte 0x{raw[err.start]:02x} is not UTF-8 (allowed: UTF-8 text)"
        ) from None


def read_class_names(root: Path) -> tuple[tuple[str, ...], bytes]:
    """The class names (class i the i-th) and the bytes they were read from."""
    as_json, as_text = root / CLASSES_JSON, root / CLASSES_TXT
    if as_json.is_file() and as_text.is_file():
        raise SegmentationDataError(
            f"{root}: both {CLASSES_JSON} and {CLASSES_TXT} (allowed: one of the two)"
        )
    if as_json.is_file():
        text = _read_text(as_json)
        try:
            names = json.loads(text)
        except json.JSONDecodeError as err:
            raise SegmentationDataError(
                f"{as_json}: line {err.lineno}, column {err.colno}: {err.msg} (allowed: JSON)"
            ) from None
        except (RecursionError, ValueError):
            raise SegmentationDataError(f"{as_json}: not usable JSON (allowed: JSON)") from None
        where = as_json
        odd = (
            f"a JSON {type(names).__name__}"
            if not isinstance(names, list)
            else next(
                (f"entry {k} is {n!r}" for k, n in enumerate(names) if not isinstance(n, str)),
                None,
            )
        )
        if odd is not None:
            raise SegmentationDataError(
                f"{as_json}: {odd} (allowed: a JSON list of class names, e.g. "
                '["background", "shirt", "bag"]: class i is the i-th)'
            )
    elif as_text.is_file():
        text = _read_text(as_text)
        names = text.splitlines()
        while names and not names[-1].strip():  # a last line's newline is no class
            names.pop()
        where = as_text
    else:
        raise SegmentationDataError(
            f"{as_json}: no such file (add it: a JSON list of class names, class i the i-th; "
            f"or {CLASSES_TXT}, one name a line)"
        )
    names = [n.strip() for n in names]
    for index, name in enumerate(names):
        if not name:
            raise SegmentationDataError(
                f"{where}: class {index} has an empty name (allowed: a name for each class)"
            )
        if name in names[:index]:
            raise SegmentationDataError(
                f"{where}: class name {name!r} twice (classes {names.index(name)} and {index}; "
                "allowed: distinct names)"
            )
    if not 2 <= len(names) <= MAX_CLASSES:
        raise SegmentationDataError(
            f"{where}: {len(names)} classes (allowed: 2 to {MAX_CLASSES}; mask value "
            f"{IGNORE_INDEX} is reserved for unlabelled pixels)"
        )
    return tuple(names), text.encode()


def _listing(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError as err:
        raise SegmentationDataError(f"{folder}: cannot be listed ({err.strerror or err})") from None


def _header(path: Path) -> tuple[tuple[int, int], str]:
    """(height, width) and Pillow's mode from the file's header (nothing decoded)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            width, height = image.size
            return (height, width), image.mode
    except (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError) as err:
        reason = str(err).splitlines()[0][:80] if str(err) else type(err).__name__
        raise SegmentationDataError(f"{path}: not a readable image ({reason})") from None


def _stat(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_size, info.st_mtime_ns


def scan_split(folder: Path) -> tuple[MaskedImage, ...]:
    """The images of ``folder/images`` paired with ``folder/masks`` by stem, sorted by
    stem, each pair's sizes checked from the headers."""
    images_dir, masks_dir = folder / IMAGES, folder / MASKS
    if not masks_dir.is_dir():
        raise SegmentationDataError(
            f"{masks_dir}: no such folder (allowed: masks/<stem>.png beside images/<stem>.*)"
        )
    images: dict[str, Path] = {}
    for entry in _listing(images_dir):
        path = Path(entry.path)
        if path.suffix.lower() not in IMAGE_SUFFIXES or not entry.is_file():
            raise SegmentationDataError(
                f"{path}: not an image file (allowed in {IMAGES}/: {', '.join(IMAGE_SUFFIXES)})"
            )
        if path.stem in images:
            raise SegmentationDataError(
                f"{path}: stem {path.stem!r} twice (with {images[path.stem].name}; allowed: one "
                "image per stem, its mask masks/<stem>.png)"
            )
        images[path.stem] = path
    masks: dict[str, Path] = {}
    for entry in _listing(masks_dir):
        path = Path(entry.path)
        if path.suffix.lower() != MASK_SUFFIX or not entry.is_file():
            raise SegmentationDataError(
                f"{path}: not a PNG mask (allowed in {MASKS}/: <stem>.png, lossless class indices)"
            )
        if path.stem not in images:
            raise SegmentationDataError(
                f"{path}: no image {images_dir}/{path.stem}.* for this mask (allowed: one "
                "mask per image, the same stem)"
            )
        masks[path.stem] = path
    if not images:
        raise SegmentationDataError(f"{images_dir}: no image (allowed: at least one)")
    out = []
    for stem, image in images.items():
        mask = masks.get(stem)
        if mask is None:
            raise SegmentationDataError(
                f"{image}: no mask {masks_dir}/{stem}.png (allowed: one PNG mask per image, "
                "the same stem)"
            )
        size, _ = _header(image)
        mask_size, mode = _header(mask)
        if mode not in MASK_MODES:
            raise SegmentationDataError(
                f"{mask}: a {mode} image (allowed: one channel of class indices, an 8-bit grey "
                "or palette PNG)"
            )
        if mask_size != size:
            raise SegmentationDataError(
                f"{mask}: {mask_size[1]}x{mask_size[0]} (width x height), but its image "
                f"{image.name} is {size[1]}x{size[0]} (allowed: the image's size)"
            )
        try:
            stats = (*_stat(image), *_stat(mask))
        except OSError as err:
            raise SegmentationDataError(f"{image}: {err.strerror or err}") from None
        out.append(MaskedImage(stem, image, mask, size, stats))
    return tuple(out)


def read_parties_file(path: Path, stems: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``parties.csv``'s fields: field -> each training image's value ("" without one),
    in the order of ``stems``."""
    rows = list(csv.reader(io.StringIO(_read_text(path))))
    if not rows or not rows[0] or rows[0][0].strip() != "stem":
        raise SegmentationDataError(
            f"{path}: line 1: the header must begin with 'stem' (allowed: stem,<field>,... "
            "then one row per training image)"
        )
    header = [name.strip() for name in rows[0]]
    fields = header[1:]
    for index, name in enumerate(fields):
        if not name or name in fields[:index] or name == "stem":
            raise SegmentationDataError(
                f"{path}: line 1: field {index + 1} {name!r} (allowed: distinct non-empty "
                "names besides 'stem')"
            )
    known = set(stems)
    values: dict[str, list[str]] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue  # a blank line
        if len(row) != len(header):
            raise SegmentationDataError(
                f"{path}: line {line}: {len(row)} values (allowed: {len(header)}, one per "
                f"header column: {','.join(header)})"
            )
        stem = row[0].strip()
        if stem not in known:
            raise SegmentationDataError(
                f"{path}: line {line}: stem {stem!r} is no training image (allowed: the stem "
                f"of an image in {IMAGES}/)"
            )
        if stem in values:
            raise SegmentationDataError(
                f"{path}: line {line}: stem {stem!r} twice (allowed: one row per image)"
            )
        values[stem] = [cell.strip() for cell in row[1:]]
    empty = [""] * len(fields)
    return {
        name: tuple(values.get(stem, empty)[k] for stem in stems) for k, name in enumerate(fields)
    }


def _fingerprint(
    root: Path, classes: bytes, parties: bytes, images: tuple[MaskedImage, ...]
) -> str:
    digest = hashlib.sha256()
    digest.update(b"classes\0" + classes + b"\0parties\0" + parties + b"\n")
    for item in images:
        image, mask = os.path.relpath(item.image, root), os.path.relpath(item.mask, root)
        digest.update(f"{image}\0{mask}\0{item.stats}\n".encode())
    return digest.hexdigest()


def scan_segmentation(root: str | os.PathLike) -> SegmentationLayout:
    """Read and check segmentation folder ``root`` (module docstring): the classes, every
    image's mask and both sizes from the headers, ``parties.csv``; nothing decoded."""
    root = Path(root)
    class_names, classes_text = read_class_names(root)
    train = scan_split(root)
    test_dir = root / TEST
    test = scan_split(test_dir) if (test_dir / IMAGES).is_dir() else ()
    if test_dir.is_dir() and not test:
        raise SegmentationDataError(
            f"{test_dir}: no {IMAGES}/ folder (allowed: test/images/ and test/masks/, or no "
            "test/ and holdout_fraction)"
        )
    seen = {item.stem: item.image for item in train}
    for item in test:
        if item.stem in seen:
            raise SegmentationDataError(
                f"{item.image}: stem {item.stem!r} is a training image's too ({seen[item.stem]}; "
                "allowed: distinct stems)"
            )
    parties_path = root / PARTIES_FILE
    fields: dict[str, tuple[str, ...]] = {}
    parties_text = b""
    if parties_path.is_file():
        text = _read_text(parties_path)
        fields = read_parties_file(parties_path, tuple(item.stem for item in train))
        parties_text = text.encode()
    fingerprint = _fingerprint(root, classes_text, parties_text, (*train, *test))
    return SegmentationLayout(root, class_names, train, test, fields, fingerprint)


# ------------------------------------------------------------------- loading
def load_segmentation_folder(
    root: Path,
    image_size: str | None = None,
    holdout_fraction: float | None = None,
    data_root: str | os.PathLike | None = None,
    partition_by: str | None = None,
    *,
    use_memory: bool = True,
) -> FolderLoad:
    """Load segmentation folder ``root`` (module docstring); every problem one
    :class:`SegmentationDataError` line, raised before anything is written."""
    start = time.perf_counter()
    layout = scan_segmentation(root)
    if layout.has_test and holdout_fraction is not None:
        raise SegmentationDataError(
            f"{layout.test_dir}: a test folder exists and holdout_fraction={holdout_fraction} "
            "is set (allowed: one of the two)"
        )
    if not layout.has_test and holdout_fraction is None:
        raise SegmentationDataError(
            f"{layout.test_dir}: no such folder (add test/images/ and test/masks/, or hold out "
            "part of the training images with holdout_fraction, e.g. --holdout-fraction 0.2)"
        )
    _check_partition_field(layout, partition_by)
    size = (
        parse_image_size(image_size)
        if image_size
        else choose_size([item.size for item in (*layout.train, *layout.test)])
    )
    key = _settings_key(layout.fingerprint, size, holdout_fraction)
    cache_file = cache_entry_path(layout.root, key, data_root)
    if use_memory and (key, partition_by) in _memory:
        data = _memory[(key, partition_by)]
        return FolderLoad(
            data, layout.fingerprint, "memory", time.perf_counter() - start, cache_file
        )
    payload, source = _read_cache(cache_file, key), "disk cache"
    if payload is None:
        payload, source = _decode(layout, size, holdout_fraction, key), "decoded"
    parties, party_names, left_out = _parties(layout, payload, partition_by)
    if source == "decoded":
        write_cache(cache_file, payload, SegmentationDataError)
    data = _image_data(payload, f"folder:{layout.root}", parties, party_names, left_out)
    if use_memory:
        _memory[(key, partition_by)] = data
        while len(_memory) > MEMORY_ENTRIES:
            _memory.pop(next(iter(_memory)))
    return FolderLoad(data, layout.fingerprint, source, time.perf_counter() - start, cache_file)


def segmentation_identity(root: Path) -> dict[str, Any]:
    """What a sweep's manifest records of a segmentation folder: its path, format,
    content fingerprint, image counts, classes and the fields of ``parties.csv`` with
    their number of distinct values."""
    layout = scan_segmentation(root)
    return {
        "path": str(layout.root),
        "format": "images+masks",
        "fingerprint": layout.fingerprint,
        "task": SEGMENTATION,
        "train_images": len(layout.train),
        "test_images": len(layout.test),
        "classes": list(layout.class_names),
        "party_fields": {
            name: len(set(values) - {""}) for name, values in sorted(layout.fields.items())
        },
    }


def _check_partition_field(layout: SegmentationLayout, partition_by: str | None) -> None:
    """``partition_by`` is a field of ``parties.csv`` every training image has a value of."""
    if partition_by is None:
        return
    where = layout.root / PARTIES_FILE
    if not layout.fields:
        raise SegmentationDataError(
            f"{where}: no such file or no field in it, for partition_by={partition_by!r} "
            "(allowed: a header stem,<field>,... and one row per training image)"
        )
    if partition_by not in layout.fields:
        raise SegmentationDataError(
            f"{where}: no field {partition_by!r} for partition_by (fields: "
            f"{', '.join(layout.fields)})"
        )
    for item, value in zip(layout.train, layout.fields[partition_by]):
        if not value:
            raise SegmentationDataError(
                f"{item.image}: no {partition_by} in {PARTIES_FILE} (allowed: every training "
                f"image names its party under partition_by={partition_by})"
            )


def _settings_key(fingerprint: str, size: tuple[int, int], holdout: float | None) -> str:
    text = f"segmentation|{CACHE_FORMAT}|{fingerprint}|{size[0]}x{size[1]}|{holdout!r}"
    return hashlib.sha256(text.encode()).hexdigest()


def read_mask(item: MaskedImage, n_classes: int) -> torch.Tensor:
    """Image ``item``'s mask as uint8 (H, W) class indices, every value checked."""
    from PIL import Image

    try:
        with Image.open(item.mask) as mask:
            if mask.mode not in MASK_MODES:  # changed since the scan
                raise SegmentationDataError(
                    f"{item.mask}: a {mask.mode} image (allowed: one channel of class indices, "
                    "an 8-bit grey or palette PNG)"
                )
            # a palette PNG's array is its palette indices: VOC's masks are stored so
            values = np.array(mask, dtype=np.uint8)
    except OSError as err:
        raise SegmentationDataError(f"{item.mask}: not a readable image ({err})") from None
    try:
        check_mask_values(values, n_classes, str(item.mask))
    except MaskTargetsError as err:
        raise SegmentationDataError(str(err)) from None
    return torch.from_numpy(values)


def _decode(
    layout: SegmentationLayout, size: tuple[int, int], holdout: float | None, key: str
) -> dict[str, Any]:
    items = (*layout.train, *layout.test)
    n_classes = len(layout.class_names)
    # masks first: a bad pixel value is refused before any image is decoded
    masks = torch.stack([resize_masks(read_mask(item, n_classes), size) for item in items])
    files = [ImageFile(str(item.image), -1, -1, 0, 0) for item in items]
    check_decode_memory(layout.root, files, f"{size[0]}x{size[1]}")
    decoded = decode_files(files)
    if any(im.shape[0] == 3 for im in decoded):  # grey beside RGB: three channels each
        decoded = [im.expand(3, -1, -1) if im.shape[0] == 1 else im for im in decoded]
    x = stack_resized(decoded, size)
    n_train = len(layout.train)
    train, test = np.arange(n_train), np.arange(n_train, len(items))
    if holdout is not None:
        keep, held = holdout_split(np.zeros(n_train, dtype=np.int64), holdout)
        if len(held) == 0:
            raise SegmentationDataError(
                f"{layout.root / IMAGES}: holdout_fraction={holdout} holds out no image "
                "(allowed: a fraction that leaves at least one test image)"
            )
        train, test = keep, held
    mean, std = channel_stats(x[train])
    return {
        "format": CACHE_FORMAT,
        "key": key,
        "train_x": x[train].contiguous(),
        "train_y": masks[train].contiguous(),
        "test_x": x[test].contiguous(),
        "test_y": masks[test].contiguous(),
        "class_names": list(layout.class_names),
        "fields": {name: [values[i] for i in train] for name, values in layout.fields.items()},
        "mean": list(mean),
        "std": list(std),
    }


def _parties(
    layout: SegmentationLayout, payload: dict[str, Any], partition_by: str | None
) -> tuple[torch.Tensor | None, list[str], list[tuple[str, int]]]:
    """Each kept training image's party under ``partition_by`` (-1: a party left out),
    the parties' names and the values left out (with their image counts)."""
    if partition_by is None:
        return None, [], []
    parties, names, left_out = parties_by_value(
        np.array(payload["fields"][partition_by], dtype=object)
    )
    if len(names) < 2:
        raise SegmentationDataError(
            f"{layout.root / PARTIES_FILE}: field {partition_by!r} gives {len(names)} parties "
            f"of at least {MIN_PARTY_IMAGES} training images (allowed: at least 2)"
        )
    return parties, names, left_out


def _image_data(
    payload: dict[str, Any],
    name: str,
    parties: torch.Tensor | None,
    party_names: list[str],
    left_out: list[tuple[str, int]],
) -> ImageData:
    spec = payload_spec(
        payload,
        name=name,
        task=SEGMENTATION,
        default_model=SEGMENTATION_DEFAULT_MODEL,
        party_names=party_names,
        left_out_parties=left_out,
    )
    train_x = payload["train_x"]
    return ImageData(
        spec, train_x, payload["train_y"], payload["test_x"], payload["test_y"], parties
    )


def train_pixels_per_class(data: ImageData) -> list[int]:
    """The training masks' pixels of each class (ignored pixels left out)."""
    return [int(v) for v in class_pixel_counts(data.train_y, data.spec.n_classes)]


# ---------------------------------------------------------------------- cache
def _read_cache(path: Path, key: str) -> dict[str, Any] | None:
    """The cache entry at ``path`` when it is this key's and whole, else None (decode
    again: a truncated, foreign or damaged file is never a traceback later)."""
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, weights_only=True)
        ok = (
            isinstance(payload, dict)
            and payload.get("key") == key
            and payload.get("format") == CACHE_FORMAT
            and _payload_ok(payload)
        )
    except Exception:  # an unreadable or foreign file
        return None
    return payload if ok else None


def _payload_ok(payload: dict[str, Any]) -> bool:
    x, test_x = payload.get("train_x"), payload.get("test_x")
    y, test_y = payload.get("train_y"), payload.get("test_y")
    if not all(isinstance(t, torch.Tensor) for t in (x, test_x, y, test_y)):
        return False
    fields = payload.get("fields")
    return (
        x.dtype == torch.uint8 == test_x.dtype == y.dtype == test_y.dtype
        and x.ndim == 4 == test_x.ndim
        and y.ndim == 3 == test_y.ndim
        and x.shape[1:] == test_x.shape[1:]
        and tuple(y.shape) == (x.shape[0], *x.shape[2:])
        and tuple(test_y.shape) == (test_x.shape[0], *test_x.shape[2:])
        and isinstance(payload.get("class_names"), list)
        and isinstance(fields, dict)
        and all(isinstance(v, list) and len(v) == len(x) for v in fields.values())
        and all(
            isinstance(payload.get(k), list) and len(payload[k]) == x.shape[1]
            for k in ("mean", "std")
        )
    )


# ---------------------------------------------------------------------- reader
READER = FolderReader(
    name=SEGMENTATION,
    recognises=is_segmentation_folder,
    load=load_segmentation_folder,
    identity=segmentation_identity,
    natural_parties=(
        "a column of parties.csv: partition=natural with partition_by=FIELD, e.g. a site's id"
    ),
    party_field="a column of parties.csv",
)
