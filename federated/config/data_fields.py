"""The dataset and model fields of a :class:`~federated.config.run_config.RunConfig`: image folders
(``folder:PATH``, ``image_size``, ``holdout_fraction``), Hugging Face data sets (``hf:SOURCE``,
``image_column``, ``label_column``, ``partition_by``), natural partitions (``n_parties``
from the data) and models named by import path.

``RunConfig.resolved`` calls these, so a bad folder or model is refused with one
:class:`~federated.config.run_config.ConfigError` line before any training: an image folder is
loaded
here (from its disk cache after the first time) for its spec, an import-path model is
built once on a dummy batch, and a start (``init``) is read and matched to the model.
"""

from __future__ import annotations

from typing import Any

import torch

from federated.data.catalog import DATASETS, DatasetSpec, dataset_spec
from federated.data.folder_dataset import folder_spec
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
from federated.data.hub_dataset import (
    HubColumns,
    HubDataError,
    absolute_hub_name,
    hub_spec,
    is_hub_dataset,
)
from federated.models import (
    MODELS,
    ModelError,
    build_model,
    check_model,
    is_import_path,
    model_families,
    model_family,
)
from federated.models.pretrained_start import (
    StartError,
    check_start,
    start_file,
)
from federated.params import ConfigError

DEFAULT_PARTIES = 10


def run_spec(c: Any) -> DatasetSpec:
    """The spec of config ``c``'s dataset (an image folder's from its cached load)."""
    if is_folder_dataset(c.dataset):
        return folder_spec(c.dataset, c.image_size, c.holdout_fraction, c.data_root, c.partition_by)
    if is_hub_dataset(c.dataset):
        columns = HubColumns.of(c)
        return hub_spec(c.dataset, c.image_size, c.holdout_fraction, c.data_root, columns)
    return dataset_spec(c.dataset)


def folder_path_resolved(dataset: str) -> str:
    """``dataset`` with a folder's or a local ``hf:PATH``'s path made absolute (in the
    driver: every trial on every node then reads the same files); other names as they are."""
    if is_hub_dataset(dataset):
        return absolute_hub_name(dataset)
    return absolute_folder_name(dataset) if is_folder_dataset(dataset) else dataset


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


def _check_folder_exists(dataset: str) -> None:
    """A missing folder is named first: the fields after it (``partition_by``) depend on
    what kind of folder it is."""
    try:
        check_root_exists(folder_path(dataset))
    except FolderDataError as err:
        raise ConfigError("dataset", dataset, f"a usable image folder; {err}") from None


def check_dataset(c: Any) -> DatasetSpec:
    """Check the dataset fields and return the spec (changes nothing)."""
    hub = is_hub_dataset(c.dataset)
    if c.image_size is not None and (hub or is_folder_dataset(c.dataset)):
        # a value check: before the folder or data set is looked at
        try:
            parse_image_size(c.image_size)
        except ImageSizeError as err:
            raise ConfigError("image_size", c.image_size, err.allowed) from None
    if is_folder_dataset(c.dataset):
        _check_folder_exists(c.dataset)
    # some folder kinds' natural parties are a field (a detection folder's camera), as an
    # hf: data set's are a column
    kind = _folder_kind(c.dataset) if is_folder_dataset(c.dataset) else None
    fielded = hub or (kind is not None and kind.party_field is not None)
    for name in ("image_column", "label_column", "partition_by"):
        if getattr(c, name) is not None and not (fielded if name == "partition_by" else hub):
            also = ""
            if name == "partition_by":
                kinds = " or ".join(r.name for r in folder_readers() if r.party_field)
                also = f" or a {kinds} folder:PATH"
            raise ConfigError(name, getattr(c, name), f"only with dataset=hf:SOURCE{also}")
        if getattr(c, name) is not None and not str(getattr(c, name)).strip():
            raise ConfigError(name, getattr(c, name), "a column name")
    if fielded and (c.partition == "natural") != (c.partition_by is not None):
        field = "partition_by" if c.partition_by is not None else "partition"
        value = getattr(c, field)
        what = "COLUMN for hf: data"
        if not hub:
            what = f"FIELD ({kind.party_field}) for a {kind.name} folder"
        raise ConfigError(field, value, f"partition=natural together with partition_by={what}")
    if not is_folder_dataset(c.dataset) and not hub:
        if c.dataset not in DATASETS:
            raise ConfigError(
                "dataset", c.dataset, "one of " + ", ".join(DATASETS) + ", folder:PATH, hf:SOURCE"
            )
        for name in ("image_size", "holdout_fraction"):
            if getattr(c, name) is not None:
                raise ConfigError(
                    name, getattr(c, name), "only with dataset=folder:PATH or hf:SOURCE"
                )
        return dataset_spec(c.dataset)
    if c.holdout_fraction is not None and not 0 < c.holdout_fraction < 1:
        raise ConfigError("holdout_fraction", c.holdout_fraction, "a number in (0, 1)")
    try:
        spec = run_spec(c)
    except FolderDataError as err:
        raise ConfigError("dataset", c.dataset, f"a usable image folder; {err}") from None
    except HubDataError as err:
        raise ConfigError("dataset", c.dataset, f"a usable data set; {err}") from None
    if spec.test_from_parties and c.party_test_fraction == 0.0:
        raise ConfigError(
            "party_test_fraction",
            c.party_test_fraction,
            f"a fraction in (0, 1) with {c.dataset}, which has one split: each party's own "
            "test split, the test set being their union; or holdout_fraction=F for a fixed "
            "test set",
        )
    return spec


def resolved_parties(c: Any, spec: DatasetSpec) -> int:
    """``n_parties`` once resolved: under ``partition="natural"`` the data's party count
    (a folder's: a different explicit value is an error; an ``hf:`` column's: a smaller
    one is a seeded draw of that many), else 10 when unset."""
    if c.partition != "natural":
        return DEFAULT_PARTIES if c.n_parties is None else c.n_parties
    check_parties(c, spec)
    return len(spec.party_names) if c.n_parties is None else c.n_parties


def check_parties(c: Any, spec: DatasetSpec) -> None:
    """Under ``partition="natural"``: a folder of parties, and ``n_parties`` unset or
    their count."""
    if c.partition != "natural":
        return
    if not spec.party_names:
        raise ConfigError(
            "partition",
            c.partition,
            "natural only with dataset=folder:PATH laid out as PATH/train/<party>/<class>/<image>",
        )
    found = len(spec.party_names)
    if is_hub_dataset(c.dataset):
        if c.n_parties is not None and not 2 <= c.n_parties <= found:
            raise ConfigError(
                "n_parties",
                c.n_parties,
                f"2 to {found} (the parties of column {c.partition_by}) or unset, under natural",
            )
        return
    if c.n_parties is not None and c.n_parties != found:
        raise ConfigError(
            "n_parties", c.n_parties, f"{found} (the folder's parties) or unset, under natural"
        )


def check_model_field(c: Any, spec: DatasetSpec) -> None:
    """A model of the family the data's task trains
    (:attr:`~federated.tasks.base.Task.model_family`): one of its built-in names, or,
    for an encoder and a head, an import path whose model builds for ``spec``; another
    family's name (a detector on class labels) is refused naming the family's own."""
    family = model_family(spec)
    if c.model is None or c.model in family.names:
        return
    if not family.import_paths or any(c.model in f.names for f in model_families()):
        raise ConfigError("model", c.model, f"for {spec.task} data one of {family.allowed()}")
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


def check_init_field(c: Any, spec: DatasetSpec) -> None:
    """``init``: a start that fits the run's model (:mod:`federated.models.pretrained_start`;
    resolution has made a file's path absolute, in the driver, so every trial on every node
    reads the same file).  Changes nothing."""
    if c.init is None:
        return
    model = c.model or spec.default_model
    try:
        _check_start_fits(c.init, model, spec, c.out_dim, c.projection_head)
    except (StartError, ModelError) as err:
        raise ConfigError("init", c.init, f"a start that fits the model; {err}") from None


_fitting_starts: set[tuple[Any, ...]] = set()


def _check_start_fits(
    init: str, model: str, spec: DatasetSpec, out_dim: int, projection_head: bool
) -> None:
    """Match start ``init`` to the model the run builds; each (start file version, model,
    shape) is checked once per process.  The model is built under a forked torch RNG, so
    checking changes no run's random numbers."""
    path = start_file(init, model)
    stat = path.stat()
    key = (init, stat.st_size, stat.st_mtime_ns, model, spec, out_dim, projection_head)
    if key in _fitting_starts:
        return
    with torch.random.fork_rng(devices=[]):
        built = build_model(model, spec, out_dim, projection_head)
    check_start(built, init, model)
    _fitting_starts.add(key)


def check_folder_memory(c: Any, spec: DatasetSpec) -> None:
    """An image folder sets the image size, and with it the model and its training memory:
    refuse a run that would not fit (:mod:`federated.models.memory_estimate`).  The built-in
    datasets have fixed, documented sizes and are not estimated."""
    if is_folder_dataset(c.dataset) or is_hub_dataset(c.dataset):
        from federated.models.memory_estimate import check_training_memory

        check_training_memory(c, spec)
