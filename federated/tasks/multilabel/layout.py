"""A multi-label folder's layout, read and checked without decoding a pixel.

The layout and its rules: :mod:`federated.tasks.multilabel.reader`.  The scan lists
``images/`` (and ``test/images/``), reads each image's size from its header, pairs every
image with its row of ``labels.csv`` (:mod:`.labels_file`) and fingerprints what it read:
every image's relative path, size and modification time, and the classes and labels
files' bytes.  Every problem is one :class:`~.labels_file.MultiLabelDataError` line
naming the file.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from federated.data.folder_decode import declared_size
from federated.tasks.multilabel.labels_file import (
    LABELS_FILE,
    MultiLabelDataError,
    read_label_names,
    read_labels_file,
    read_text,
)

IMAGES, TEST = "images", "test"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


@dataclass(frozen=True)
class LabelledImage:
    """One image, its size from its header (nothing decoded) and its label indices."""

    stem: str
    path: Path
    size: tuple[int, int]  # (height, width)
    stats: tuple[int, int]  # bytes, mtime_ns
    labels: tuple[int, ...]


@dataclass(frozen=True)
class MultiLabelLayout:
    """A checked multi-label folder: label names, training then test images (by stem),
    each training image's fields from ``labels.csv``, and the content fingerprint (what
    :class:`~federated.data.kind_folder.KindFolder` reads of a layout)."""

    root: Path
    class_names: tuple[str, ...]  # the label names, label i the i-th
    train: tuple[LabelledImage, ...]
    test: tuple[LabelledImage, ...]  # empty without test/
    fields: dict[str, tuple[str, ...]]
    fingerprint: str

    @property
    def has_test(self) -> bool:
        """Whether the folder has a test split of its own (``test/``)."""
        return bool(self.test)


# ------------------------------------------------------------------- scanning
def is_multilabel_folder(root: str | os.PathLike) -> bool:
    """Whether folder ``root`` holds ``images/`` and ``labels.csv``.  A path the OS
    cannot look at is not one (the image-folder scan names its problem)."""
    try:
        return (Path(root) / IMAGES).is_dir() and (Path(root) / LABELS_FILE).is_file()
    except OSError:
        return False


def _image_paths(folder: Path) -> dict[str, Path]:
    """``folder``'s images by stem, sorted by name (hidden files left out)."""
    try:
        with os.scandir(folder) as entries:
            listed = sorted(
                (e for e in entries if not e.name.startswith(".")), key=lambda e: e.name
            )
    except OSError as err:
        raise MultiLabelDataError(f"{folder}: cannot be listed ({err.strerror or err})") from None
    images: dict[str, Path] = {}
    for entry in listed:
        path = Path(entry.path)
        if path.suffix.lower() not in IMAGE_SUFFIXES or not entry.is_file():
            raise MultiLabelDataError(
                f"{path}: not an image file (allowed in {IMAGES}/: {', '.join(IMAGE_SUFFIXES)})"
            )
        if path.stem in images:
            raise MultiLabelDataError(
                f"{path}: stem {path.stem!r} twice (with {images[path.stem].name}; allowed: one "
                f"image per stem, its row in {LABELS_FILE})"
            )
        images[path.stem] = path
    if not images:
        raise MultiLabelDataError(f"{folder}: no image (allowed: at least one)")
    return images


def _labelled(path: Path, labels: tuple[int, ...]) -> LabelledImage:
    size = declared_size(str(path))
    if size is None:
        raise MultiLabelDataError(f"{path}: not a readable image (its header cannot be read)")
    try:
        info = path.stat()
    except OSError as err:
        raise MultiLabelDataError(f"{path}: {err.strerror or err}") from None
    return LabelledImage(
        path.stem, path, (size[1], size[0]), (info.st_size, info.st_mtime_ns), labels
    )


def scan_split(
    folder: Path, label_names: tuple[str, ...]
) -> tuple[tuple[LabelledImage, ...], dict[str, tuple[str, ...]], bytes]:
    """The images of ``folder/images`` with their labels from ``folder/labels.csv``
    (sorted by stem), the file's fields, and its bytes (for the fingerprint)."""
    images = _image_paths(folder / IMAGES)
    labels_path = folder / LABELS_FILE
    if not labels_path.is_file():
        raise MultiLabelDataError(
            f"{labels_path}: no such file (allowed: {LABELS_FILE} beside {IMAGES}/, a header "
            "stem,labels[,<field>,...] and one row per image)"
        )
    text = read_text(labels_path)
    rows = read_labels_file(labels_path, text, tuple(images), label_names)
    items = tuple(_labelled(p, s) for p, s in zip(images.values(), rows.label_sets))
    return items, rows.fields, text.encode()


def _fingerprint(root: Path, texts: tuple[bytes, ...], images: tuple[LabelledImage, ...]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text + b"\0")
    for item in images:
        digest.update(f"{os.path.relpath(item.path, root)}\0{item.stats}\n".encode())
    return digest.hexdigest()


def scan_multilabel(root: str | os.PathLike) -> MultiLabelLayout:
    """Read and check multi-label folder ``root`` (module docstring): the label names,
    every image's row and size from its header; nothing decoded."""
    root = Path(root)
    label_names, classes_text = read_label_names(root)
    train, fields, train_text = scan_split(root, label_names)
    test_dir = root / TEST
    test: tuple[LabelledImage, ...] = ()
    test_text = b""
    if test_dir.is_dir():
        if not (test_dir / IMAGES).is_dir():
            raise MultiLabelDataError(
                f"{test_dir}: no {IMAGES}/ folder (allowed: test/images/ and test/{LABELS_FILE}, "
                "or no test/ and holdout_fraction)"
            )
        test, _, test_text = scan_split(test_dir, label_names)
    seen = {item.stem: item.path for item in train}
    for item in test:
        if item.stem in seen:
            raise MultiLabelDataError(
                f"{item.path}: stem {item.stem!r} is a training image's too ({seen[item.stem]}; "
                "allowed: distinct stems)"
            )
    fingerprint = _fingerprint(root, (classes_text, train_text, test_text), (*train, *test))
    return MultiLabelLayout(root, label_names, train, test, fields, fingerprint)


def check_partition_field(layout: MultiLabelLayout, partition_by: str) -> None:
    """Refuse a ``partition_by`` that is no field of ``labels.csv`` or that a training
    image has no value of (the test-set rule is the reader base's)."""
    where = layout.root / LABELS_FILE
    if partition_by not in layout.fields:
        fields = ", ".join(layout.fields) or "none: its header is stem,labels"
        raise MultiLabelDataError(
            f"{where}: no field {partition_by!r} for partition_by (fields: {fields})"
        )
    for item, value in zip(layout.train, layout.fields[partition_by]):
        if not value:
            raise MultiLabelDataError(
                f"{item.path}: no {partition_by} in {LABELS_FILE} (allowed: every training "
                f"image names its party under partition_by={partition_by})"
            )
