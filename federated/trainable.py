"""The Ray Tune function trainable: the round loop, one report per round, full checkpoints.

``train_federated(config)`` builds a :class:`~federated.config.run_config.RunConfig` from the
trial's
config (keys that are neither RunConfig fields nor parameters of the trial's methods
are the sweep's labels, e.g. ``setting``, ``study``, and are ignored here), reports
each round's metrics dict (plus ``node_id``, the Ray node that ran it), and every
``checkpoint_every`` rounds (and at the end) checkpoints the whole run state: global
model, server state (FedAvgM velocity, SCAFFOLD control variate), the round number and
every random generator in the checkpoint; the parties' states (MOON previous models,
SCAFFOLD control variates, annealed tau) that changed since the last checkpoint in the
trial's ``party_states/`` folder in Tune's storage, which the checkpoint indexes
(:mod:`federated.engine.party_store`).  A restarted trial restores that state and continues exactly;
on CPU its remaining per-round
accuracies equal an uninterrupted run's.

Besides its rows a trial writes ``parties.csv`` (per-party accuracies) and, with
``representations_at``, ``representations/round_NNNN.npz`` into its trial folder
(:mod:`federated.engine.run_files`), before it reports the round.  A restored trial
continues its ``parties.csv`` from the checkpoint's round: the trial folder's, or, in a
fresh folder (a resumed sweep), the copy each checkpoint holds (:func:`checkpoint_parties`:
exact, where the copy in Tune's storage may lag a killed driver's last checkpoint; that
copy, :func:`stored_parties`, serves checkpoints written before they held one).  The
checkpoint's copy costs a file copy of the rows so far per checkpoint.

Device: with ``device="auto"`` a trial uses CUDA only when Ray gave it a GPU
(``ray.get_gpu_ids()``), never merely because one is visible.  CPU threads follow
``threads`` (``study.sweep`` sets it to the trial's CPUs).

Idle cores: a trial on one torch thread whose machine has cores no trial holds (the
sweep's last wave) trains its packs side by side on them
(:mod:`federated.runtime.idle_cores`); its rows are the same, ``spare_core_seconds``
says how much it used.

Data: loaded once per worker process (every loader holds what it loaded in
:mod:`federated.data.memory_cache`), so a trial that reuses an earlier trial's actor does
not read and decode the files again.

Fault injection (``fail_at_round=k``): after finishing round k, before reporting it, the
trial raises :class:`InjectedFailureError` — unless it started from a checkpoint, so with
``checkpoint_every <= k`` it fails exactly once.  Tests use it to exercise
``max_failures`` recovery.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from federated.cli.error_reason import error_reason
from federated.config.checks import ExecutionAliasWarning
from federated.config.run_config import RunConfig, config_values
from federated.contract.results import PARTIES
from federated.data.loading import load_run_data
from federated.engine.party_store import PartyArchive
from federated.engine.round_loop import FederatedRun
from federated.engine.run_files import RunFiles
from federated.runtime.atomic_file import atomic_open
from federated.runtime.idle_cores import IdleCores
from federated.runtime.owned_temp_files import remove_stale
from federated.runtime.saved_dict import load_saved_dict

STATE_FILE = "run_state.pt"


class InjectedFailureError(RuntimeError):
    """Raised on purpose by ``fail_at_round`` to test recovery."""


def run_config_from_trial(config: dict[str, Any]) -> RunConfig:
    """The RunConfig part of a Tune trial config; the device follows Ray's GPU grant."""
    import ray

    fields = config_values(config)
    if fields.get("device", "auto") == "auto" and ray.is_initialized():
        fields["device"] = "cuda" if ray.get_gpu_ids() else "cpu"
    # the driver resolved and checked this trial's values against its data (study/);
    # resolving them here checks them as values, and FederatedRun checks them against
    # the node's view of the data, which makes no other change
    return RunConfig.from_dict(fields).resolved()


def save_run_state(
    run: FederatedRun, folder: str | os.PathLike, archive: PartyArchive | None = None
) -> Path:
    """Write the run state into ``folder`` atomically; returns the file.  With
    ``archive`` the parties' states changed since the last checkpoint go there and the
    file holds their index; without, the file holds every party's state."""
    path = Path(folder) / STATE_FILE
    with atomic_open(path, "wb") as fh:
        torch.save(run.state_dict(archive), fh)
    return path


class CheckpointError(ValueError):
    """A checkpoint file is not a run state fedsweep wrote (one line naming the file)."""


def load_run_state(folder: str | os.PathLike) -> dict[str, Any]:
    """The run state saved in ``folder``, read with ``weights_only=True``.

    A run state holds only tensors, numbers, strings and containers of them, so the
    restricted unpickler reads it; a file that needs anything else (a crafted pickle
    that would run code on load) is refused with :class:`CheckpointError`.
    """
    path = Path(folder) / STATE_FILE
    return load_saved_dict(str(path), str(path), "run state", CheckpointError)


def checkpoint_parties(folder: str | os.PathLike) -> bytes | None:
    """The ``parties.csv`` a checkpoint folder holds (its rows up to the checkpoint's
    round, copied in as it was written); None for a checkpoint without one."""
    path = Path(folder) / PARTIES
    return path.read_bytes() if path.is_file() else None


def stored_parties(checkpoint: Any) -> bytes | None:
    """The trial's ``parties.csv`` as Tune's storage holds it (None: it holds none).

    Tune keeps a trial's checkpoints inside its trial folder in storage
    (``<trial>/checkpoint_NNNNNN``), and the driver copies the trial's files there; a
    resumed trial runs in a fresh staging folder that Tune fills with its JSON files
    only, so the rows it wrote before are read back from there."""
    trial_folder = posixpath.dirname(str(checkpoint.path).rstrip("/"))
    path = posixpath.join(trial_folder, PARTIES)
    try:
        if checkpoint.filesystem is None:
            return Path(path).read_bytes()
        with checkpoint.filesystem.open_input_stream(path) as fh:
            return fh.readall()
    except OSError:  # none there (pyarrow's FileNotFoundError is one), or unreadable
        return None


def restore_candidates(checkpoint: Any) -> list[Any]:
    """Tune's checkpoint to continue from, then the trial's older kept checkpoints in its
    storage folder, newest first (empty: the trial starts at round 0)."""
    if checkpoint is None:
        return []
    from pyarrow import fs as pyarrow_fs
    from ray import tune

    filesystem = checkpoint.filesystem or pyarrow_fs.LocalFileSystem()
    path = str(checkpoint.path).rstrip("/")
    parent = posixpath.dirname(path)
    try:
        found = filesystem.get_file_info(pyarrow_fs.FileSelector(parent))
    except OSError:
        found = []
    older = sorted(
        (
            info.path
            for info in found
            if info.type == pyarrow_fs.FileType.Directory
            and posixpath.basename(info.path).startswith("checkpoint_")
            and info.path.rstrip("/") < path
        ),
        reverse=True,
    )
    return [checkpoint, *(tune.Checkpoint(p, filesystem=checkpoint.filesystem) for p in older)]


def restored_run(
    run_config: RunConfig, candidates: list[Any], archive: PartyArchive
) -> tuple[FederatedRun, Any, bytes | None]:
    """The run continued from the newest of ``candidates`` (Tune checkpoints) whose run
    state and every party state it indexes read back; the checkpoint used (None: round
    0) and the ``parties.csv`` it holds.  A damaged or missing file is one warning line
    naming it and where the trial continues from instead — never a retry that reads the
    same file again."""
    for checkpoint in candidates:
        # a reused actor's earlier trial loaded the same data: taken from this process
        run = FederatedRun(run_config, data=load_run_data(run_config))
        try:
            with checkpoint.as_directory() as folder:
                run.load_state_dict(load_run_state(folder), archive)
                run.party_states.verify_archived()
                return run, checkpoint, checkpoint_parties(folder)
        except (CheckpointError, ValueError, OSError) as err:
            later = "an older checkpoint" if checkpoint is not candidates[-1] else "round 0"
            print(
                f"warning: {posixpath.basename(str(checkpoint.path))} of this trial cannot "
                f"be restored ({error_reason(err)}); continuing from {later}",
                file=sys.stderr,
                flush=True,
            )
    return FederatedRun(run_config, data=load_run_data(run_config)), None, None


def train_federated(config: dict[str, Any]) -> None:
    """Tune function trainable (see the module docstring)."""
    import ray
    from ray import tune

    # the sweep's driver said so once, in its notice line, for every trial
    warnings.simplefilter("ignore", ExecutionAliasWarning)
    run_config = run_config_from_trial(config)
    remove_stale([run_config.party_state_dir])  # what killed runs left on this node
    # the parties' states beside Tune's checkpoints, in the trial's storage folder:
    # a trial restarted on another node reads them there
    storage = tune.get_context().get_storage()
    archive = PartyArchive.in_trial_folder(storage.trial_fs_path, storage.storage_filesystem)
    run, checkpoint, saved_parties = restored_run(
        run_config, restore_candidates(tune.get_checkpoint()), archive
    )
    node_id = ray.get_runtime_context().get_node_id()

    def previous_parties() -> bytes | None:
        # the checkpoint's own copy is exact; a checkpoint written before it held one
        # has the storage copy, which a kill may have left behind the checkpoint
        if saved_parties is not None:
            return saved_parties
        return stored_parties(checkpoint)

    # parties.csv and representations/ go into the trial folder (study/sweep_folder.py)
    files = RunFiles.in_folder(
        tune.get_context().get_trial_dir(),
        start_round=run.round,
        previous=None if checkpoint is None else previous_parties,
    )
    every = run_config.checkpoint_every
    with IdleCores() as idle:  # polls Ray from its first look until the trial ends
        while not run.finished:
            if run.spreads_packs:  # a lone trial's packs side by side: the same rows
                run.use_idle_cores(idle.threads())
            row = run.run_round()
            row["node_id"] = node_id
            files.record(run)
            if run_config.fail_at_round == run.round and checkpoint is None:
                raise InjectedFailureError(
                    f"injected failure after round {run.round} (fail_at_round)"
                )
            if every and (run.round % every == 0 or run.finished):
                with tempfile.TemporaryDirectory() as folder:
                    save_run_state(run, folder, archive)
                    if files.parties.is_file():  # its rows so far, restored with the state
                        shutil.copyfile(files.parties, Path(folder) / PARTIES)
                    tune.report(row, checkpoint=tune.Checkpoint.from_directory(folder))
            else:
                tune.report(row)
