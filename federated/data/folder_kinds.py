"""The one place a ``folder:PATH`` data set's kind is decided: ask each kind's folder reader.

A folder's kind is what its files say: class folders
(:mod:`federated.tasks.classification.reader`), a scores file
(:mod:`federated.tasks.score.reader`), a detection annotation file
(:mod:`federated.tasks.detection.reader`), images with masks
(:mod:`federated.tasks.segmentation.reader`) ...  Each kind has one reader, a
:class:`FolderReader`, in its own package, named by its task class
(:attr:`federated.tasks.base.Task.folder_reader`): how it recognises a folder, loads it
and describes it to a sweep's manifest.  The readers are asked in the registry's order
(:data:`federated.registry.TASK_PATHS`, each reader once) and the first that recognises
the folder reads it; a reader that recognises every folder (``last``: classification's
class folders, which names what is missing when no layout is there) is asked after all
the others.  So a new kind with a new layout is its own folder and its one line in
``TASK_PATHS``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from federated.data.kind_parts import kind_parts

if TYPE_CHECKING:
    from federated.data.folder_cache import FolderLoad

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
        last: it recognises every folder (class folders): asked after the others.
    """

    name: str
    recognises: Callable[[Path], bool]
    load: Load
    identity: Callable[[Path], dict[str, Any]]
    natural_parties: str = PARTY_FOLDERS
    party_field: str | None = None
    last: bool = False


def folder_readers() -> tuple[FolderReader, ...]:
    """The readers in the order they are asked: the registered kinds' own, the one that
    recognises every folder last (module docstring)."""
    readers: tuple[FolderReader, ...] = kind_parts("folder_reader")
    return (*(r for r in readers if not r.last), *(r for r in readers if r.last))


def folder_reader(root: str | os.PathLike) -> FolderReader:
    """The reader of folder ``root``: the first that recognises it (the one asked last
    recognises every folder)."""
    root = Path(root)
    return next(r for r in folder_readers() if r.last or r.recognises(root))
