"""The dataset fields of a :class:`~federated.config.run_config.RunConfig`, checked as values:
image folders (``folder:PATH``, ``image_size``, ``holdout_fraction``), Hugging Face data sets
(``hf:SOURCE``, ``image_column``, ``label_column``, ``partition_by``) and natural partitions.

Nothing here reads a file or builds a model.  :func:`check_dataset_fields` is resolution's
(:meth:`RunConfig.resolved`): every rule that the values alone decide.  :func:`check_source`
is the data step's first look at a folder (:mod:`federated.config.data_checks`), before it
loads: that the folder is there, and that what kind of folder it is reads the fields given
(``partition_by`` names a detection image's field, not an image folder's).  What needs the
loaded data (its spec, its parties, the model built for it) is
:mod:`federated.config.data_checks`'.
"""

from __future__ import annotations

from typing import Any

from federated.cli.hub_source import HubSourceError
from federated.data.catalog import DATASETS, DatasetSpec, dataset_spec
from federated.data.folder_decode import ImageSizeError, parse_image_size
from federated.data.folder_kinds import (
    PARTY_FOLDERS,
    FolderReader,
    folder_reader,
    folder_readers,
)
from federated.data.folder_layout import (
    FolderDataError,
    absolute_folder_name,
    check_root_exists,
    folder_path,
    is_folder_dataset,
)
from federated.data.hub_dataset import absolute_hub_name, is_hub_dataset
from federated.params import ConfigError

DEFAULT_PARTIES = 10


def declared_spec(dataset: str) -> DatasetSpec | None:
    """The spec of a built-in data set (:data:`~federated.data.catalog.DATASETS`, a
    table: no file is read); None for a folder's or an ``hf:`` data set's, which only
    their files say (:func:`federated.config.data_checks.data_spec` loads them)."""
    return dataset_spec(dataset) if dataset in DATASETS else None


def folder_path_resolved(dataset: str) -> str:
    """``dataset`` with a folder's or a local ``hf:PATH``'s path made absolute (in the
    driver: every trial on every node then reads the same files); other names as they are.
    A path look-up (no file is opened): a path the OS refuses is a :class:`ConfigError`."""
    if is_hub_dataset(dataset):
        try:
            return absolute_hub_name(dataset)
        except HubSourceError as err:  # no source, the disk's root, no such ~user
            raise ConfigError("dataset", dataset, f"a usable data set; {err}") from None
    if not is_folder_dataset(dataset):
        return dataset
    try:
        folder_path(dataset)  # a path the OS refuses to look up (a symlink loop, too long)
    except FolderDataError as err:
        raise ConfigError("dataset", dataset, f"a usable image folder; {err}") from None
    return absolute_folder_name(dataset)


def _folder_kind(dataset: str) -> FolderReader | None:
    """The reader of folder ``dataset`` (:mod:`federated.data.folder_kinds`), or None
    for a path the OS refuses (the folder's own check names it)."""
    try:
        return folder_reader(folder_path(dataset))
    except FolderDataError:
        return None


def natural_parties_source(dataset: str) -> str:
    """Where ``dataset``'s natural parties come from, in words for a refusal: an
    ``hf:`` column, a folder kind's own (a detection folder's image field), or an image
    folder's party folders."""
    if is_hub_dataset(dataset):
        return "a column: partition=natural with partition_by=COLUMN"
    kind = _folder_kind(dataset) if is_folder_dataset(dataset) else None
    return kind.natural_parties if kind is not None else PARTY_FOLDERS


def check_source(c: Any) -> None:
    """Before a folder loads: that it is there (a missing folder is named first: the
    fields after it depend on what kind of folder it is), and that its kind reads the
    fields given (``partition_by`` names a field of a detection or segmentation folder's
    images; an image folder's parties are its party folders).  A few ``stat`` calls;
    nothing for a built-in or an ``hf:`` data set, whose fields are values alone."""
    if not is_folder_dataset(c.dataset):
        return
    try:
        check_root_exists(folder_path(c.dataset))
    except FolderDataError as err:
        raise ConfigError("dataset", c.dataset, f"a usable image folder; {err}") from None
    kind = _folder_kind(c.dataset)
    fielded = kind is not None and kind.party_field is not None
    if c.partition_by is not None and not fielded:
        kinds = " or ".join(r.name for r in folder_readers() if r.party_field)
        raise ConfigError(
            "partition_by", c.partition_by, f"only with dataset=hf:SOURCE or a {kinds} folder:PATH"
        )
    if fielded and (c.partition == "natural") != (c.partition_by is not None):
        _natural_needs_field(c, f"FIELD ({kind.party_field}) for a {kind.name} folder")


def _natural_needs_field(c: Any, what: str) -> None:
    """Refuse a natural partition without ``partition_by``, or ``partition_by`` under
    another partition, where the parties are a field's values."""
    field = "partition_by" if c.partition_by is not None else "partition"
    raise ConfigError(
        field, getattr(c, field), f"partition=natural together with partition_by={what}"
    )


def check_dataset_fields(c: Any) -> None:
    """The dataset fields as values (no file is looked at): a known data set name,
    ``folder:PATH`` or ``hf:SOURCE``; an image size the decoder reads; the settings
    each kind of data set reads only with that kind."""
    hub, folder = is_hub_dataset(c.dataset), is_folder_dataset(c.dataset)
    if c.image_size is not None and (hub or folder):
        try:
            parse_image_size(c.image_size)
        except ImageSizeError as err:
            raise ConfigError("image_size", c.image_size, err.allowed) from None
    for name in ("image_column", "label_column", "partition_by"):
        value = getattr(c, name)
        # a folder's kind says whether it reads partition_by (check_source, before it loads)
        if value is not None and not (hub or (folder and name == "partition_by")):
            also = ""
            if name == "partition_by":
                kinds = " or ".join(r.name for r in folder_readers() if r.party_field)
                also = f" or a {kinds} folder:PATH"
            raise ConfigError(name, value, f"only with dataset=hf:SOURCE{also}")
        if value is not None and not str(value).strip():
            raise ConfigError(name, value, "a column name")
    if hub and (c.partition == "natural") != (c.partition_by is not None):
        _natural_needs_field(c, "COLUMN for hf: data")
    if not folder and not hub:
        if c.dataset not in DATASETS:
            raise ConfigError(
                "dataset", c.dataset, "one of " + ", ".join(DATASETS) + ", folder:PATH, hf:SOURCE"
            )
        for name in ("image_size", "holdout_fraction"):
            if getattr(c, name) is not None:
                raise ConfigError(
                    name, getattr(c, name), "only with dataset=folder:PATH or hf:SOURCE"
                )
        return
    if c.holdout_fraction is not None and not 0 < c.holdout_fraction < 1:
        raise ConfigError("holdout_fraction", c.holdout_fraction, "a number in (0, 1)")
