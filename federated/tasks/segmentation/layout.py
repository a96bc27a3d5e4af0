"""A segmentation folder's layout, scanned and checked (nothing decoded): its classes,
its images with their masks (by stem, sizes from the headers), the fields of
``parties.csv`` and the content fingerprint (the layout and rules:
:mod:`federated.tasks.segmentation.reader`).  Everything is parsed (``json.loads``,
``csv``), never executed; every problem is one :class:`SegmentationDataError` line
naming the file."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from federated.cli.error_reason import error_reason
from federated.data.folder_decode import declared_size, oversize
from federated.data.folder_layout import FolderDataError
from federated.tasks.segmentation.targets import IGNORE_INDEX, MAX_CLASSES

CLASSES_JSON, CLASSES_TXT, PARTIES_FILE = "classes.json", "classes.txt", "parties.csv"
IMAGES, MASKS, TEST = "images", "masks", "test"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
MASK_SUFFIX = ".png"  # lossless: a JPEG would blur class indices into one another
MASK_MODES = ("L", "P")  # one 8-bit channel: grey values or palette indices (VOC's)
# the largest classes or parties file read (bytes): a listing, never megabytes of it
MAX_LIST_BYTES = 64 * 2**20


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


def _header(path: Path, lossless: bool = False) -> tuple[tuple[int, int], str]:
    """(height, width) and Pillow's mode from the file's header (nothing decoded); an
    empty file, one beyond the decode limit and, with ``lossless`` (a mask), one whose
    bytes are not PNG whatever its name are refused in one line naming it."""
    from PIL import Image, UnidentifiedImageError

    if path.stat().st_size == 0:
        raise SegmentationDataError(f"{path}: an empty file (0 bytes; allowed: an image)")
    problem = oversize(declared_size(str(path)))
    if problem:
        raise SegmentationDataError(f"{path}: {problem}")
    try:
        with Image.open(path) as image:
            width, height = image.size
            written_as = image.format
            mode = image.mode
    except (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError) as err:
        raise SegmentationDataError(f"{path}: not a readable image ({error_reason(err)})") from None
    if lossless and written_as != "PNG":
        # a lossy codec moves labels at class edges: JPEG altered 147 of 256 pixels of a
        # mask in one check, which then trains on labels nobody drew
        raise SegmentationDataError(
            f"{path}: its bytes are {written_as}, not PNG (a lossy codec alters class labels; "
            "allowed: masks saved as PNG)"
        )
    return (height, width), mode


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
        mask_size, mode = _header(mask, lossless=True)
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


def check_partition_field(layout: SegmentationLayout, partition_by: str) -> None:
    """``partition_by`` is a field of ``parties.csv`` every training image has a value of."""
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
