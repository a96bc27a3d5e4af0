"""A multi-label folder: images and, for each, the set of labels it carries, as an
:class:`~federated.data.image_data.ImageData`, decoded once into the data root's cache.

Layout (a ``folder:PATH`` is one when PATH holds ``images/`` and ``labels.csv``)::

    PATH/classes.json             a JSON list of label names: label i is the i-th
                                  (or PATH/classes.txt: one name a line)
    PATH/images/<stem>.<ext>      training images (.png, .jpg, .jpeg, .gif, .webp)
    PATH/labels.csv               stem,labels[,<field>,...]: one row per training image,
                                  its labels' names joined by ';' (empty: no label), and
                                  its value of each field (a site, a camera)
    PATH/test/images/, PATH/test/labels.csv   the test set (optional: else
                                  holdout_fraction); its fields are not read

The rules:

* **one size**: images are resized to ``image_size`` ("H" or "HxW"; default the most
  common size) by a plain resize (bilinear, antialiased); grey-scale images beside RGB
  ones are repeated to three channels, an alpha channel is dropped;
* **test set**: ``test/``; without it, ``holdout_fraction`` of the training images (a
  fixed draw, seed 0, over the images as one group: a label set is no class to stratify
  by) becomes the test set; both, or neither, is an error;
* **natural parties**: ``partition_by`` names a field of ``labels.csv``; its values are
  the parties, sorted (numbers numerically), a value under
  :data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` training images is left out
  (its images train no party, said before the run), at least two parties must remain,
  and every training image needs a value;
* **targets**: multi-hot float32 ``(N, L)`` (:mod:`.targets`);
* **cache**: ``<data root>/folder-cache/<path hash>-<key>.pt`` (``torch.load(
  weights_only=True)``), the key hashing every image's relative path, size and
  modification time, the classes and labels files' contents, the size and the
  hold-out; this process's last loads stay in the one memory cache
  (:mod:`federated.data.memory_cache`);
* normalisation: the training images' per-channel mean and std; no random augmentation.

What every folder kind's reader does alike (the test-set rule, the size, the hold-out,
parties by a field, the cache) is :class:`~federated.data.kind_folder.KindFolder`'s;
this module says what a multi-label folder's files are, the scan is :mod:`.layout`.
Every problem is one :class:`~.labels_file.MultiLabelDataError` line naming the file,
raised before anything is written (:mod:`.layout`, :mod:`.labels_file`): an image
without a row or a row without an image, a label not in the classes file, a malformed
classes or labels file, an unreadable image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from federated.data.folder_dataset import default_model_for
from federated.data.folder_kinds import FolderReader
from federated.data.kind_folder import FieldTableFolder
from federated.tasks.multilabel.labels_file import LABELS_FILE, MultiLabelDataError
from federated.tasks.multilabel.layout import (
    IMAGES,
    TEST,
    MultiLabelLayout,
    check_partition_field,
    is_multilabel_folder,
    scan_multilabel,
)
from federated.tasks.multilabel.spec import MULTILABEL
from federated.tasks.multilabel.targets import multi_hot
from federated.tasks.multilabel.task import MultiLabel


class MultiLabelFolder(FieldTableFolder):
    """A multi-label folder's files (module docstring)."""

    identity_format = "images+labels.csv"
    task = MULTILABEL
    error = MultiLabelDataError
    test_words = (
        "a test folder exists",
        f"no such folder (add test/{IMAGES}/ and test/{LABELS_FILE}",
    )
    # one group: a label set is no class to stratify the hold-out by
    groups = MultiLabel.target_groups

    def scan(self, root: Path) -> MultiLabelLayout:
        return scan_multilabel(root)

    def test_place(self, layout: MultiLabelLayout) -> Path:
        return layout.root / TEST

    def train_place(self, layout: MultiLabelLayout) -> Path:
        return layout.root / IMAGES

    def sizes(self, layout: MultiLabelLayout) -> list[tuple[int, int]]:
        return [item.size for item in (*layout.train, *layout.test)]

    def check_partition_field(self, layout: MultiLabelLayout, partition_by: str) -> None:
        check_partition_field(layout, partition_by)

    def party_words(self, layout: MultiLabelLayout, partition_by: str) -> str:
        return f"{layout.root / LABELS_FILE}: field {partition_by!r}"

    def read_targets(self, layout: MultiLabelLayout, size: tuple[int, int]) -> torch.Tensor:
        """Multi-hot float32 ``(N, L)`` (the labels were checked by the scan)."""
        items = (*layout.train, *layout.test)
        return multi_hot([item.labels for item in items], len(layout.class_names))

    def image_paths(self, layout: MultiLabelLayout) -> list[str]:
        return [str(item.path) for item in (*layout.train, *layout.test)]

    def targets_fit(self, payload: dict[str, Any]) -> bool:
        x, test_x = payload["train_x"], payload["test_x"]
        y, test_y = payload.get("train_y"), payload.get("test_y")
        n_labels = len(payload["class_names"])
        return (
            isinstance(y, torch.Tensor)
            and isinstance(test_y, torch.Tensor)
            and y.dtype == torch.float32 == test_y.dtype
            and tuple(y.shape) == (len(x), n_labels)
            and tuple(test_y.shape) == (len(test_x), n_labels)
        )

    def default_model_of(self, payload: dict[str, Any]) -> str:
        """By size, as for class folders (``simple-cnn`` up to 32 x 32)."""
        return default_model_for(*payload["train_x"].shape[2:])


MULTILABEL_FOLDER = MultiLabelFolder()
#: :meth:`KindFolder.load` of a multi-label folder (every problem one
#: :class:`MultiLabelDataError` line, raised before anything is written)
load_multilabel_folder = MULTILABEL_FOLDER.load


#: what a sweep's manifest records of such a folder (:meth:`FieldTableFolder.identity`)
multilabel_identity = MULTILABEL_FOLDER.identity


READER = FolderReader(
    name="multi-label",
    recognises=is_multilabel_folder,
    load=load_multilabel_folder,
    identity=multilabel_identity,
    natural_parties=(
        "a field of labels.csv: partition=natural with partition_by=FIELD, e.g. a site"
    ),
    party_field="a field of labels.csv",
)
