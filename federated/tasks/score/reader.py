"""A score task's folder: images with a scores file (:mod:`federated.tasks.score.scores_file`),
read by the image-folder loader (:mod:`federated.data.folder_dataset`) into float32
targets ``(N, T)``: the score, then the attribute scores.

Asked before the class folders: a folder with a scores file is a score task's, so its
party folders are never taken for classes."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from federated.data.folder_dataset import ImageFolderKind, image_folder_reader
from federated.data.folder_layout import FolderLayout, ImageFile
from federated.tasks.score.scores_file import has_scores_file, score_layout
from federated.tasks.score.spec import SCORE
from federated.tasks.score.task import ScoreTask


def scores(files: Sequence[ImageFile], layout: FolderLayout) -> torch.Tensor:
    """The files' score and attribute targets, float32 ``(N, T)``."""
    width = len(layout.target_names)
    return torch.tensor([f.target for f in files], dtype=torch.float32).reshape(-1, width)


SCORE_FOLDERS = ImageFolderKind(
    task=SCORE,
    layout=score_layout,
    targets=scores,
    target_ndim=2,
    groups=ScoreTask.target_groups,
)
READER = image_folder_reader(SCORE_FOLDERS, "image", recognises=has_scores_file)
