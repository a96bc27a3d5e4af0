"""Finding the images of a ``folder:PATH`` dataset: its layout, classes, parties and files.

Two layouts are read (class and party names are folder names, sorted)::

    PATH/train/<class>/<image>            one pool of training images
    PATH/train/<party>/<class>/<image>    one folder per party (``--partition natural``)
    PATH/test/<class>/<image>             the test set (optional: else holdout_fraction)

Hidden files and folders (names starting with ``.``) are ignored; every other file under
a class folder must be an image torchvision can decode (PNG, JPEG, GIF, WebP, ...).
Links are followed; a link that loops, dangles or points to a folder above itself (a
``..`` link) is named as such.  One rule for too few images, whatever the layout: a
party needs at least :data:`MIN_PARTY_IMAGES` training images (natural parties here and
after a hold-out, federated/data/folder_dataset.py; drawn parties by the config's
check), and a dataset at least two classes.  The
scan only lists and stats files, so it is cheap; its fingerprint (relative paths, sizes,
mtimes) is the key of the decoded-tensor cache.  Problems are one-line
:class:`FolderDataError` messages naming the path.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from federated.data.image_data import DatasetUnavailableError

FOLDER_PREFIX = "folder:"
# The smallest party a natural partition accepts: the rule of the synthetic partitions
# (config_checks.MIN_PARTY_SAMPLES, not imported here: the config checks import this package).
MIN_PARTY_IMAGES = 10


class FolderDataError(DatasetUnavailableError):
    """An image folder cannot be used; the message is one line naming the path."""


@dataclass(frozen=True)
class ImageFile:
    """One image file: where it is, its class and party, and what the fingerprint hashes."""

    path: str  # absolute
    label: int
    party: int  # -1 outside the party layout
    size: int  # bytes
    mtime_ns: int
    # a score task's targets (score, then attributes; federated/tasks/score/scores_file.py);
    # empty in a classification folder
    target: tuple[float, ...] = ()


@dataclass(frozen=True)
class FolderLayout:
    """The scanned folder: training and test files in a fixed order, names of both axes.

    Training files are ordered by (party, class, file name); test files by (class, name).
    """

    root: Path
    class_names: tuple[str, ...]
    party_names: tuple[str, ...]  # empty for PATH/train/<class>/
    train: tuple[ImageFile, ...]
    test: tuple[ImageFile, ...]  # empty when PATH has no test/ folder
    # a score task's target columns (score, then attributes); empty: classification
    target_names: tuple[str, ...] = ()

    @property
    def has_test(self) -> bool:
        return bool(self.test)

    def fingerprint(self) -> str:
        """sha256 over every file's relative path, size and mtime (hex); a score task's
        target names and values too, so an edited scores file is a new fingerprint."""
        digest = hashlib.sha256()
        if self.target_names:
            digest.update(("targets\0" + "\0".join(self.target_names) + "\n").encode())
        for item in (*self.train, *self.test):
            rel = os.path.relpath(item.path, self.root)
            digest.update(f"{rel}\0{item.size}\0{item.mtime_ns}\n".encode())
            if item.target:
                digest.update((",".join(map(repr, item.target)) + "\n").encode())
        return digest.hexdigest()


def is_folder_dataset(name: str) -> bool:
    return isinstance(name, str) and name.startswith(FOLDER_PREFIX)


def folder_path(name: str) -> Path:
    """``folder:PATH`` -> PATH as an absolute path (``~`` expanded, relative to the cwd).

    A path the OS refuses to resolve (a symlink loop, a name too long) is a
    :class:`FolderDataError` naming it."""
    given = name[len(FOLDER_PREFIX) :]
    try:
        return Path(given).expanduser().resolve()
    except RuntimeError:  # Python before 3.13 reports a symlink loop so, not as OSError
        raise FolderDataError(f"{given}: a symbolic-link loop") from None
    except OSError as err:
        raise FolderDataError(_os_problem(err, given)) from None


def _os_problem(err: OSError, fallback: str | os.PathLike) -> str:
    """One line for an OS error on a dataset path: the path and the OS's reason."""
    where = err.filename if err.filename is not None else fallback
    what = err.strerror or type(err).__name__
    if err.errno == errno.ELOOP:
        what = "a symbolic-link loop"
    return f"{where}: {what}"


def absolute_folder_name(name: str) -> str:
    """``folder:rel/path`` -> ``folder:/abs/rel/path``; other names unchanged.

    Done where a config is first built (the driver of a sweep), so every trial on every
    node reads the same files whatever its working directory."""
    if not is_folder_dataset(name):
        return name
    try:
        return FOLDER_PREFIX + str(folder_path(name))
    except FolderDataError:
        # a path the OS refuses stays as given: the config's dataset check, which every
        # caller (the sweep's plan too) reaches next, refuses it in one line
        return name


def dataset_slug(name: str) -> str:
    """A dataset name fit for file and folder names: ``folder:/data/street`` ->
    ``folder-street``, ``hf:flwrlabs/femnist`` -> ``hf-flwrlabs_femnist``; built-in names
    unchanged."""
    if isinstance(name, str) and name.startswith("hf:"):  # federated/data/hub_dataset.py
        given = name[len("hf:") :]
        local = given.startswith(("/", ".", "~")) or Path(given).exists()
        return "hf-" + re.sub(r"[^A-Za-z0-9._-]+", "_", Path(given).name if local else given)
    if not is_folder_dataset(name):
        return name
    return "folder-" + re.sub(r"[^A-Za-z0-9._-]+", "_", folder_path(name).name)


LAYOUTS = "layout: train/<class>/<image> or train/<party>/<class>/<image>"
# what makes a folder a detection folder (federated/tasks/detection/layout.py), for messages
DETECTION_FILES = "annotations/train.json and images/, or train_label.json and Images/"


def _visible(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as entries:
        return sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)


def _is_folder(entry: os.DirEntry) -> bool:
    """Whether ``entry`` is a folder, links followed.  A link that loops or dangles
    raises the OS's error (named by :func:`scan_folder`); a link to a folder above it
    (``..``, which would list the dataset inside itself) is a :class:`FolderDataError`."""
    if entry.is_symlink():
        try:
            target = Path(entry.path).resolve(strict=True)
        except RuntimeError:  # Python before 3.13 reports a symlink loop so
            raise FolderDataError(f"{entry.path}: a symbolic-link loop") from None
        here = Path(entry.path).parent.resolve()
        if target.is_dir() and (target == here or target in here.parents):
            raise FolderDataError(
                f"{entry.path}: a link to {target}, a folder above it (it would loop; "
                "allowed: links to images or to folders outside it)"
            )
    return stat.S_ISDIR(os.stat(entry.path).st_mode)


def check_party_size(party_dir: Path, images: int, after: str = "") -> None:
    """The one rule for a party's training images (:data:`MIN_PARTY_IMAGES`);
    ``after``: what left it with ``images`` (a hold-out), named in the message."""
    if images < MIN_PARTY_IMAGES:
        raise FolderDataError(
            f"{party_dir}: party with {images} images{after} (allowed: at least {MIN_PARTY_IMAGES})"
        )


def _images_of(class_dir: Path, label: int, party: int) -> list[ImageFile]:
    files = []
    for entry in _visible(class_dir):
        if _is_folder(entry):
            raise FolderDataError(
                f"{entry.path}: a folder inside a class folder (allowed: image files only)"
            )
        stat = entry.stat()
        files.append(ImageFile(entry.path, label, party, stat.st_size, stat.st_mtime_ns))
    if not files:
        raise FolderDataError(f"{class_dir}: class folder with no images")
    return files


def _subfolders(folder: Path, what: str) -> list[os.DirEntry]:
    entries = _visible(folder)
    loose = [e for e in entries if not _is_folder(e)]
    if loose:
        raise FolderDataError(
            f"{loose[0].path}: a file where {what} folders are expected ({LAYOUTS})"
        )
    return entries


def _is_party_layout(train_dir: Path, top: list[os.DirEntry]) -> bool:
    """Whether ``train/``'s folders are parties (they hold class folders) or classes
    (they hold images); a mix names the folder that breaks the layout."""
    holds_folders = {t.name: [e for e in _visible(Path(t.path)) if _is_folder(e)] for t in top}
    parties = [t for t in top if holds_folders[t.name]]
    if not parties:
        return False
    for t in parties:
        files = [e for e in _visible(Path(t.path)) if not _is_folder(e)]
        if files:  # images and folders side by side: the folder is the odd one out
            raise FolderDataError(
                f"{holds_folders[t.name][0].path}: a folder beside the images of "
                f"{t.path} ({LAYOUTS}, not both)"
            )
    classes = [t for t in top if not holds_folders[t.name] and _visible(Path(t.path))]
    if classes:
        raise FolderDataError(
            f"{classes[0].path}: holds images while {parties[0].path} holds folders "
            f"({LAYOUTS}, not both)"
        )
    return True


def scan_folder(root: str | os.PathLike) -> FolderLayout:
    """List a folder dataset's images (see the module docstring); nothing is decoded.

    OS errors anywhere in the tree (a symlink loop, a name too long, a folder that cannot
    be listed) are one-line :class:`FolderDataError` messages naming the path."""
    try:
        return _scan(Path(root))
    except OSError as err:
        raise FolderDataError(_os_problem(err, root)) from None


def check_root_exists(root: Path) -> None:
    """Refuse (:class:`FolderDataError`, one line) a dataset folder that is not there,
    or whose path the OS refuses (a name too long)."""
    try:
        there = root.is_dir()
    except OSError as err:
        raise FolderDataError(_os_problem(err, root)) from None
    if not there:
        raise FolderDataError(
            f"{root}: no such folder (dataset folder:PATH needs PATH/train/, or {DETECTION_FILES})"
        )


def _scan(root: Path) -> FolderLayout:
    check_root_exists(root)
    train_dir = root / "train"
    if not train_dir.is_dir():
        raise FolderDataError(
            f"{train_dir}: no such folder (layout: train/<class>/<image> or "
            f"train/<party>/<class>/<image>; a detection folder: {DETECTION_FILES})"
        )
    top = _subfolders(train_dir, "class or party")
    if not top:
        raise FolderDataError(f"{train_dir}: no class folders")
    if _is_party_layout(train_dir, top):
        party_names = tuple(t.name for t in top)
        per_party = {t.name: _subfolders(Path(t.path), "class") for t in top}
        for name, classes in per_party.items():
            if not classes:
                raise FolderDataError(f"{train_dir / name}: party folder with no images")
        class_names = tuple(sorted({c.name for classes in per_party.values() for c in classes}))
        label_of = {name: i for i, name in enumerate(class_names)}
        train: list[ImageFile] = []
        for party, name in enumerate(party_names):
            files = [
                f
                for c in per_party[name]
                for f in _images_of(Path(c.path), label_of[c.name], party)
            ]
            check_party_size(train_dir / name, len(files))
            train += files
    else:
        party_names = ()
        class_names = tuple(t.name for t in top)
        train = [f for i, t in enumerate(top) for f in _images_of(Path(t.path), i, -1)]
    if len(class_names) < 2:
        raise FolderDataError(
            f"{train_dir}: one class ({class_names[0]}) (allowed: at least 2 class folders; "
            f"a classifier needs two classes; {LAYOUTS})"
        )
    test = _scan_test(root / "test", class_names)
    return FolderLayout(root, class_names, party_names, tuple(train), tuple(test))


def _scan_test(test_dir: Path, class_names: tuple[str, ...]) -> list[ImageFile]:
    if not test_dir.exists():
        return []
    if not test_dir.is_dir():
        raise FolderDataError(f"{test_dir}: not a folder (layout: test/<class>/<image>)")
    label_of = {name: i for i, name in enumerate(class_names)}
    test: list[ImageFile] = []
    classes = _subfolders(test_dir, "class")
    if not classes:
        raise FolderDataError(f"{test_dir}: no class folders")
    for entry in classes:
        if entry.name not in label_of:
            raise FolderDataError(
                f"{entry.path}: test class {entry.name!r} is not a training class "
                f"(training classes: {', '.join(class_names)})"
            )
        test += _images_of(Path(entry.path), label_of[entry.name], -1)
    return test
