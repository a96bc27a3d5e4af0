"""Finding a detection folder's annotations and images, checked, before anything is decoded.

A ``folder:PATH`` data set is a detection folder when PATH holds one of two layouts
(:mod:`~federated.tasks.detection.coco_annotations`,
:mod:`~federated.tasks.detection.street_annotations`)::

    COCO-style                          Street (the release's own files)
    PATH/annotations/train.json         PATH/train_label.json
    PATH/annotations/test.json (opt.)   PATH/test_label.json (optional)
    PATH/images/<file_name>             PATH/Images/<image_id>.jpg

Both at once is refused (which would be read is not obvious).  The scan reads the
annotation files and every listed image's header (its pixel size, nothing decoded) and
refuses, in one :class:`~federated.tasks.detection.annotations.DetectionDataError` line naming
the file and the entry: malformed, non-UTF-8 or oversized JSON, an unknown category, a
duplicate id or image, a missing or unreadable image, a declared size that is not the
file's, an empty box or one outside its image, and a training set without any box.
Its fingerprint (annotation files' and images' relative paths, sizes and modification
times) keys the decoded-tensor cache.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from federated.data.folder_decode import check_decode_size, header_shape
from federated.tasks.detection.annotations import (
    AnnotatedImage,
    DetectionDataError,
    check_box_inside,
)
from federated.tasks.detection.coco_annotations import (
    COCO_TEST,
    COCO_TRAIN,
    is_coco_folder,
    read_coco_split,
)
from federated.tasks.detection.street_annotations import (
    STREET_CLASSES_FILE,
    STREET_TEST,
    STREET_TRAIN,
    is_street_folder,
    read_street_split,
    street_class_names,
)

COCO_FORMAT = "coco"
STREET_FORMAT = "street"
DETECTION_LAYOUTS = (
    f"{COCO_TRAIN} [+ {COCO_TEST}] + images/, or {STREET_TRAIN} [+ {STREET_TEST}] + Images/"
)

MEMORY_ENTRIES = 4  # checked layouts kept per process: a few folders (versions)


@dataclass(frozen=True)
class DetectionLayout:
    """A checked detection folder: its format, classes and images (train, then test, in
    annotation-file order) with each image's pixel size from its header."""

    root: Path
    format: str  # COCO_FORMAT or STREET_FORMAT
    annotation_files: tuple[Path, ...]  # the training file first
    test_file: Path  # the test annotation file, whether it exists or not
    class_names: tuple[str, ...]
    train: tuple[AnnotatedImage, ...]
    test: tuple[AnnotatedImage, ...]  # empty without a test annotation file
    sizes: tuple[tuple[int, int], ...]  # (height, width) of train then test images
    fingerprint: str

    @property
    def has_test(self) -> bool:
        return bool(self.test)

    def field_names(self) -> tuple[str, ...]:
        """The scalar fields some training image carries (partition candidates), sorted."""
        return tuple(sorted({name for image in self.train for name in image.fields}))


def is_detection_folder(root: str | os.PathLike) -> bool:
    """Whether folder ``root`` holds a detection layout's training annotation file.  A
    path the OS cannot look at is not one (the folder scan names its problem)."""
    try:
        return is_coco_folder(Path(root)) or is_street_folder(Path(root))
    except OSError:
        return False


def scan_detection(root: str | os.PathLike) -> DetectionLayout:
    """Read and check the detection folder ``root`` (see the module docstring).  A scan
    whose files are unchanged since an earlier one in this process is that one's result."""
    root = Path(root)
    try:
        fmt, files, _, class_names, train, test = _read_once(root)
        return _checked_layout(str(root), _fingerprint(root, fmt, files, class_names, train, test))
    except OSError as err:
        where = err.filename if err.filename is not None else root
        raise DetectionDataError(f"{where}: {err.strerror or type(err).__name__}") from None


@functools.lru_cache(maxsize=MEMORY_ENTRIES)
def _checked_layout(root: str, fingerprint: str) -> DetectionLayout:
    """The layout of folder ``root`` in the version ``fingerprint`` names, its image
    sizes checked from the headers (once per version in this process)."""
    fmt, files, test_file, class_names, train, test = _read_once(Path(root))
    sizes = _checked_sizes((*train, *test))
    return DetectionLayout(
        Path(root),
        fmt,
        files,
        test_file,
        class_names,
        tuple(train),
        tuple(test),
        sizes,
        fingerprint,
    )


def _read_once(root: Path):
    """:func:`_read`, once per version of the annotation files (a config is resolved
    several times per trial); the images they list are statted again by the fingerprint."""
    names = (COCO_TRAIN, COCO_TEST, STREET_TRAIN, STREET_TEST, STREET_CLASSES_FILE)
    stats = tuple(
        (name, st.st_size, st.st_mtime_ns) for name in names if (st := _stat(root / name))
    )
    return _read_version(str(root), stats)


@functools.lru_cache(maxsize=1)  # one folder's reading at a time: they hold every box
def _read_version(root: str, stats: tuple[tuple[str, int, int], ...]):
    """What folder ``root``'s annotation files say, in the version their ``stats``
    (name, bytes, mtime) name."""
    return _read(Path(root))


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _read(root: Path):
    coco, street = is_coco_folder(root), is_street_folder(root)
    if coco and street:
        raise DetectionDataError(
            f"{root}: holds both {COCO_TRAIN} and {STREET_TRAIN} (allowed: one layout)"
        )
    if coco:
        seen: dict[str, str] = {}
        class_names, train = read_coco_split(root, COCO_TRAIN, seen, None)
        test_file = root / COCO_TEST
        test = read_coco_split(root, COCO_TEST, seen, class_names)[1] if test_file.exists() else []
        files = [root / COCO_TRAIN] + ([test_file] if test_file.exists() else [])
        fmt = COCO_FORMAT
    else:
        class_names = street_class_names(root)
        seen = {}
        train = read_street_split(root, STREET_TRAIN, class_names, seen)
        test_file = root / STREET_TEST
        test = read_street_split(root, STREET_TEST, class_names, seen) if test_file.exists() else []
        files = [root / STREET_TRAIN] + ([test_file] if test_file.exists() else [])
        if (root / STREET_CLASSES_FILE).exists():
            files.append(root / STREET_CLASSES_FILE)
        fmt = STREET_FORMAT
    if not train:
        raise DetectionDataError(f"{files[0]}: no images (allowed: at least one training image)")
    if not any(len(image.labels) for image in train):
        raise DetectionDataError(
            f"{files[0]}: no boxes in any training image (allowed: images without boxes, "
            "beside some with boxes: a detector needs objects to learn)"
        )
    if test_file.exists() and not test:
        raise DetectionDataError(f"{test_file}: no images (allowed: at least one, or no file)")
    return fmt, tuple(files), test_file, class_names, train, test


def _fingerprint(root, fmt, files, class_names, train, test) -> str:
    """sha256 (hex) of the format, the classes and every annotation file's and image's
    relative path, size and modification time."""
    digest = hashlib.sha256(f"{fmt}\0{chr(0).join(class_names)}\n".encode())
    for path in (*files, *(Path(image.path) for image in (*train, *test))):
        stat = path.stat()
        digest.update(
            f"{os.path.relpath(path, root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode()
        )
    return digest.hexdigest()


def _checked_sizes(images: tuple[AnnotatedImage, ...]) -> tuple[tuple[int, int], ...]:
    """Each image's (height, width) from its header; an unreadable header, a declared
    size that is not the file's, a box outside its image are named."""
    sizes = []
    for image in images:
        check_decode_size(image.path)
        shape = header_shape(image.path)
        if shape is None:
            raise DetectionDataError(
                f"{image.entry}: {image.path} is not a readable image (allowed: PNG, JPEG, ...)"
            )
        _, height, width = shape
        if image.declared_size is not None and image.declared_size != (height, width):
            h, w = image.declared_size
            raise DetectionDataError(
                f"{image.entry}: width x height {w}x{h}, but {Path(image.path).name} is "
                f"{width}x{height} (allowed: the file's own size; its boxes are in its pixels)"
            )
        check_box_inside(image, height, width)
        sizes.append((height, width))
    return tuple(sizes)
