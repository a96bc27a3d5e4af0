"""Where a sweep's results live and what they hold: the contract ``analysis`` reads.

::

    <storage path>/                       default ./results (--storage-path)
      <sweep name>/                       default <study>-<dataset>-<budget>[-optuna]-<time>
        fedsweep_sweep.json               manifest (this module), rewritten atomically
        partitions.json                   class counts per distinct partition (Fig. 5)
        <trial dir>/                      one per trial, named <trial id>_<point>_seed<k>
          params.json                     the trial's config: every RunConfig field,
                                          resolved, plus the study's labels (point, ...)
          result.json                     one JSON line per reported round (metrics,
                                          training_iteration, config); may repeat a
                                          round after a restore: keep the last
          progress.csv                    the same as CSV
          events.out.tfevents.*           TensorBoard scalars
          checkpoint_NNNNNN/run_state.pt  the last checkpoints (whole run state)
          error.txt                       only when the trial failed
        experiment_state-*.json, tuner.pkl, ...   Tune's own, used by --resume
        fedsweep_resume_digests.json      keyed digests of Tune's pickles, which --resume
                                          verifies (study/resume_digests.py)
        mlflow.db, mlartifacts/           with --track mlflow (the default local store)
        <trial dir>/wandb/offline-run-*   with --track wandb (offline by default)

The manifest records what was asked (study, budget, dataset, search, seeds, axes,
overrides, command, where ``--track`` sent the runs: ``tracking``), the driver process
(``driver``: host and pid, so readers can tell a killed driver), the state of the
sweep (``running``, ``finished``, ``interrupted``, ``failed``) and, once Tune returns,
each trial's final status (``TERMINATED``, ``INTERRUPTED`` or ``ERROR`` with the
error's first line) and ``not_started`` (trials an interrupted sweep never created).
Files are written to a temporary name and renamed (with the user's umask), so a reader
never sees a half-written manifest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from federated.contract.json_text import parse_json
from federated.contract.results import MANIFEST, PARTITIONS
from federated.runtime.atomic_file import atomic_open

# the file names are the results contract's (federated/contract/results.py), read here too
__all__ = [
    "MANIFEST",
    "MANIFEST_FORMAT",
    "PARTITIONS",
    "is_sweep_dir",
    "read_manifest",
    "update_manifest",
    "write_json_atomic",
]

MANIFEST_FORMAT = 1


def write_json_atomic(path: str | os.PathLike, payload: Any) -> None:
    """Write ``payload`` as JSON to ``path`` through a temporary file and a rename."""
    with atomic_open(path) as fh:
        json.dump(payload, fh, indent=2, default=str)


def read_manifest(sweep_dir: str | os.PathLike) -> dict[str, Any]:
    """The manifest's content; a ``ValueError`` (:class:`JsonTextError`, one line) for
    text that is not JSON we read, an over-long integer included."""
    return parse_json((Path(sweep_dir) / MANIFEST).read_text())


def update_manifest(sweep_dir: str | os.PathLike, **changes: Any) -> dict[str, Any]:
    manifest = read_manifest(sweep_dir)
    manifest.update(changes)
    write_json_atomic(Path(sweep_dir) / MANIFEST, manifest)
    return manifest


def is_sweep_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / MANIFEST).is_file()
