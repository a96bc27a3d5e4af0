"""Classification's folder: class folders, ``train/<class>/<image>`` or
``train/<party>/<class>/<image>`` (:func:`~federated.data.folder_layout.scan_folder`),
read by the image-folder loader (:mod:`federated.data.folder_dataset`) into int64 labels.

It recognises every folder and is asked last: a folder of no other kind's layout is read
as class folders, whose scan names what is missing."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from federated.data.folder_dataset import ImageFolderKind, image_folder_reader
from federated.data.folder_layout import FolderLayout, ImageFile, scan_folder
from federated.tasks.classification.spec import CLASSIFICATION
from federated.tasks.classification.task import Classification


def labels(files: Sequence[ImageFile], layout: FolderLayout) -> torch.Tensor:
    """The files' class labels, int64 ``(N,)``."""
    return torch.tensor([f.label for f in files], dtype=torch.int64)


CLASS_FOLDERS = ImageFolderKind(
    task=CLASSIFICATION,
    layout=scan_folder,
    targets=labels,
    target_ndim=1,
    groups=Classification.target_groups,
)
READER = image_folder_reader(CLASS_FOLDERS, "image", recognises=lambda root: True, last=True)
