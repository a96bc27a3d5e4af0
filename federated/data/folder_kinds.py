"""The one place a ``folder:PATH`` data set's kind is decided: ask each folder reader.

A folder's kind is what its files say: class folders or a scores file
(:mod:`federated.data.folder_dataset`), a detection annotation file
(:mod:`federated.data.detection_folder`), images with masks
(:mod:`federated.data.segmentation_folder`) ...  Each kind has one reader, a
:class:`FolderReader`: how it recognises a folder, loads it and describes it to a sweep's
manifest.  The readers are asked in order and the first that recognises
the folder reads it:

1. every registered task's own reader (:data:`federated.registry.TASK_PATHS`, in that
   order, each reader once): a task whose data are a folder layout of their own names its
   reader by import path (:attr:`federated.tasks.base.Task.folder_reader`), so a new task
   with a new layout is new files and its one line in ``TASK_PATHS``;
2. the image-folder reader (:data:`FALLBACK_READER`: class folders, or a scores file),
   last: it recognises every folder, and names what is missing when none of the layouts
   is there.

Import paths, not classes: the data layer does not import the tasks (nor the tasks their
readers), so neither side imports the other's modules at import time.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from federated.registry import TASK_PATHS, load_method

if TYPE_CHECKING:
    from federated.data.folder_cache import FolderLoad

#: the reader asked last, which recognises every folder (class folders or a scores file)
FALLBACK_READER = "federated.data.folder_dataset:IMAGE_FOLDERS"


#: how a reader loads a folder: (root, image_size, holdout_fraction, data_root,
#: partition_by, *, use_memory) -> FolderLoad, through the data root's cache; every
#: problem one line naming the path
Load = Callable[..., "FolderLoad"]

#: where the image-folder kind's natural parties come from (the default's words)
PARTY_FOLDERS = "party folders: partition=natural with PATH/train/<party>/"


@dataclass(frozen=True)
class FolderReader:
    """One kind of ``folder:PATH`` data set (module docstring): what a reader module
    declares, one value per kind; it holds no state beyond its module's caches.

    Attributes:
        name: the kind's name in messages ("a detection folder").
        recognises: whether folder ``root`` is of this kind (cheap: a few ``stat``
            calls; a path the OS cannot look at is not, and the fallback names it).
        load: the folder as ``ImageData`` (:data:`Load`).
        identity: what a sweep's manifest records of the folder: at least its
            ``path``, ``fingerprint`` and ``task``.
        natural_parties: where its natural parties come from, in words for a refusal
            (``partition=dirichlet`` on data without classes names it).
        party_field: what ``partition_by`` names in such a folder ("an image field");
            None: the kind reads no ``partition_by``.
    """

    name: str
    recognises: Callable[[Path], bool]
    load: Load
    identity: Callable[[Path], dict[str, Any]]
    natural_parties: str = PARTY_FOLDERS
    party_field: str | None = None


def _imported(path: str) -> Any:
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


@functools.cache
def _readers(tasks: tuple[tuple[str, str], ...]) -> tuple[FolderReader, ...]:
    found: dict[str, FolderReader] = {}
    for name, _ in tasks:
        path = getattr(load_method("task", name), "folder_reader", None)
        if path and path not in found:
            found[path] = _imported(path)
    fallback = _imported(FALLBACK_READER)
    return (*(r for r in found.values() if r is not fallback), fallback)


def folder_readers() -> tuple[FolderReader, ...]:
    """The readers in the order they are asked: the registered tasks' own, then the
    image-folder reader (module docstring).  Built once per registry content."""
    return _readers(tuple(TASK_PATHS.items()))


def folder_reader(root: str | os.PathLike) -> FolderReader:
    """The reader of folder ``root``: the first that recognises it (the image-folder
    reader, asked last, recognises every folder)."""
    root = Path(root)
    readers = folder_readers()
    return next((r for r in readers[:-1] if r.recognises(root)), readers[-1])
