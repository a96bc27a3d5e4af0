"""The dataset and model fields of a :class:`~federated.config.RunConfig`: image folders
(``folder:PATH``, ``image_size``, ``holdout_fraction``), natural partitions (``n_parties``
from the data) and models named by import path.

``RunConfig`` calls these during validation, so a bad folder or model is refused with one
:class:`~federated.config.ConfigError` line before any training: an image folder is loaded
here (from its disk cache after the first time) for its spec, and an import-path model is
built once on a dummy batch.
"""

from __future__ import annotations

from typing import Any

from federated.data.catalog import DATASETS, DatasetSpec, dataset_spec
from federated.data.folder_dataset import folder_spec, parse_image_size
from federated.data.folder_layout import FolderDataError, absolute_folder_name, is_folder_dataset
from federated.models import MODELS, ModelError, check_model, is_import_path
from federated.params import ConfigError

DEFAULT_PARTIES = 10


def run_spec(c: Any) -> DatasetSpec:
    """The spec of config ``c``'s dataset (an image folder's from its cached load)."""
    if is_folder_dataset(c.dataset):
        return folder_spec(c.dataset, c.image_size, c.holdout_fraction, c.data_root)
    return dataset_spec(c.dataset)


def check_dataset(c: Any) -> DatasetSpec:
    """Check the dataset fields and return the spec; a folder's path is made absolute
    (in the driver: every trial on every node then reads the same files)."""
    if not is_folder_dataset(c.dataset):
        if c.dataset not in DATASETS:
            raise ConfigError(
                "dataset", c.dataset, "one of " + ", ".join(DATASETS) + ", folder:PATH"
            )
        for name in ("image_size", "holdout_fraction"):
            if getattr(c, name) is not None:
                raise ConfigError(name, getattr(c, name), "only with dataset=folder:PATH")
        return dataset_spec(c.dataset)
    object.__setattr__(c, "dataset", absolute_folder_name(c.dataset))
    if c.image_size is not None:
        try:
            parse_image_size(c.image_size)
        except ValueError:
            raise ConfigError(
                "image_size", c.image_size, "N or HxW pixels, e.g. 32 or 64x48"
            ) from None
    if c.holdout_fraction is not None and not 0 < c.holdout_fraction < 1:
        raise ConfigError("holdout_fraction", c.holdout_fraction, "a number in (0, 1)")
    try:
        return run_spec(c)
    except FolderDataError as err:
        raise ConfigError("dataset", c.dataset, f"a usable image folder; {err}") from None


def resolve_parties(c: Any, spec: DatasetSpec) -> None:
    """``n_parties``: the folder's party count under ``partition="natural"`` (a different
    explicit value is an error), else 10 when unset."""
    if c.partition != "natural":
        object.__setattr__(c, "n_parties", DEFAULT_PARTIES if c.n_parties is None else c.n_parties)
        return
    if not spec.party_names:
        raise ConfigError(
            "partition",
            c.partition,
            "natural only with dataset=folder:PATH laid out as PATH/train/<party>/<class>/<image>",
        )
    found = len(spec.party_names)
    if c.n_parties is not None and c.n_parties != found:
        raise ConfigError(
            "n_parties", c.n_parties, f"{found} (the folder's parties) or unset, under natural"
        )
    object.__setattr__(c, "n_parties", found)


def check_model_field(c: Any, spec: DatasetSpec) -> None:
    """A built-in model name, or an import path whose model builds for ``spec``."""
    if c.model is None or c.model in MODELS:
        return
    if not is_import_path(c.model):
        raise ConfigError(
            "model",
            c.model,
            "one of " + ", ".join(MODELS) + ", torchvision:NAME or package.module:factory",
        )
    try:
        check_model(c.model, spec)
    except ModelError as err:
        raise ConfigError("model", c.model, f"a working model; {err.problem}") from None


def check_folder_memory(c: Any, spec: DatasetSpec) -> None:
    """An image folder sets the image size, and with it the model and its training memory:
    refuse a run that would not fit (:mod:`federated.memory_estimate`).  The built-in
    datasets have fixed, documented sizes and are not estimated."""
    if is_folder_dataset(c.dataset):
        from federated.memory_estimate import check_training_memory

        check_training_memory(c, spec)
