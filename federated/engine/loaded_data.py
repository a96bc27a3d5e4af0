"""A trial's data, loaded once per worker process.

A sweep's trials run one after another in the same Ray actor when actors are reused
(study/tune/tuners.py), and they read the same data set: the second trial takes the
decoded :class:`~federated.data.ImageData` the first one loaded instead of reading and
decoding the files again.  Every data set is held in the one memory cache
(:mod:`federated.data.memory_cache`): folders and ``hf:`` data sets by their loaders,
keyed by their content and every setting of the load (the party field of a natural
partition among them), so a changed folder is read again; a built-in data set here,
keyed by its name, its resolved data folder and that folder's modification time.  Runs
only read it: on the CPU a run gathers its batches from these tensors themselves; on an
accelerator it copies the rows it uses to the device (:mod:`federated.engine.party_data`).
"""

from __future__ import annotations

from federated.config.run_config import RunConfig
from federated.data import ImageData
from federated.data.folder_layout import is_folder_dataset
from federated.data.hub_dataset import is_hub_dataset
from federated.data.image_data import resolve_data_root
from federated.data.loading import load_run_data
from federated.data.memory_cache import held, hold


def source_fingerprint(config: RunConfig) -> str:
    """What changes when a built-in data set's files change: its data folder's
    modification time (ns)."""
    root = resolve_data_root(config.data_root)
    try:
        return str(root.stat().st_mtime_ns)
    except OSError:
        return "absent"


def run_data(config: RunConfig) -> ImageData:
    """The data set ``config`` (resolved) trains on, from this process's memory when the
    last trial here loaded the same one; else loaded (and, a built-in one, kept)."""
    if is_folder_dataset(config.dataset) or is_hub_dataset(config.dataset):
        # their loaders hold them, keyed by their content and every setting of the load
        # (the party field among them): one cache, the loader's
        return load_run_data(config)
    key = (
        "built-in",
        config.dataset,
        str(resolve_data_root(config.data_root)),
        source_fingerprint(config),
    )
    return held(key) or hold(key, load_run_data(config))
