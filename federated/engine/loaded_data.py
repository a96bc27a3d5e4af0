"""A trial's data, loaded once per worker process.

A sweep's trials run one after another in the same Ray actor when actors are reused
(study/tune/tuners.py), and they read the same data set: the second trial takes the
decoded :class:`~federated.data.ImageData` the first one loaded instead of reading and
decoding the files again.  The key is what the loaded tensors depend on: the data set's
name, its resolved data folder, the image settings, the columns it names (the party
field of a natural partition among them) and a fingerprint of the source (an
image folder's content fingerprint; a built-in data set's folder's modification time),
so a changed folder is read again.  One data set is held at a time (a worker that moves
to another data set drops the first).  Runs only read it: the run's own tensors are
copies (:mod:`federated.engine.party_data` indexes them).  ``hf:`` data sets are
memoised per process by their own loader already.
"""

from __future__ import annotations

from typing import Any

from federated.config.run_config import RunConfig
from federated.data import ImageData, load_dataset
from federated.data.folder_dataset import folder_identity
from federated.data.folder_layout import is_folder_dataset
from federated.data.hub_dataset import HubColumns, is_hub_dataset
from federated.data.image_data import resolve_data_root

_HELD: dict[tuple[Any, ...], ImageData] = {}


def source_fingerprint(config: RunConfig) -> str:
    """What changes when the data set's files change: an image folder's content
    fingerprint, else the data folder's modification time (ns)."""
    if is_folder_dataset(config.dataset):
        identity = folder_identity(config.dataset)
        return str(identity.get("fingerprint") or identity)
    root = resolve_data_root(config.data_root)
    try:
        return str(root.stat().st_mtime_ns)
    except OSError:
        return "absent"


def run_data(config: RunConfig) -> ImageData:
    """The data set ``config`` (resolved) trains on, from this process's memory when the
    last trial here loaded the same one; else loaded and kept."""
    columns = HubColumns.of(config)
    if is_hub_dataset(config.dataset):  # memoised by federated.data.hub_dataset itself
        return _load(config, columns)
    # every argument of the load is in the key: the columns name the party field
    # (partition_by) whose ids the loaded data carry, so Street-5 and Street-20 trials
    # of one folder load apart (a Street-20 trial once took Street-5's party ids)
    key = (
        config.dataset,
        str(resolve_data_root(config.data_root)),
        config.image_size,
        config.holdout_fraction,
        columns,
        source_fingerprint(config),
    )
    data = _HELD.get(key)
    if data is None:
        _HELD.clear()  # one data set at a time: a worker's memory holds one
        data = _HELD[key] = _load(config, columns)
    return data


def _load(config: RunConfig, columns: HubColumns) -> ImageData:
    return load_dataset(
        config.dataset,
        config.data_root,
        image_size=config.image_size,
        holdout_fraction=config.holdout_fraction,
        columns=columns,
    )
