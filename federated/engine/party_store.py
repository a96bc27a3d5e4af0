"""Each party's own state between its trainings: in memory up to a budget, on disk
beyond it, and in checkpoints only for the parties that changed.

A method's parties keep state between rounds (MOON's previous models, SCAFFOLD's
control variate, a personal model and its momentum, FedPer's head:
:mod:`federated.algorithms.party_own_state`).  Cross-device runs hold 10⁴–10⁵ parties
and draw a few hundred a round, so this store, like pfl-research's per-user state on
disk, keeps:

* **in memory** the states touched most recently, up to ``budget`` bytes of tensors
  (least recently used first out); states without tensors (a party that has not
  trained, FedAvg's empty ones) always stay;
* **on this node's disk** (a folder in ``party_state_dir``, default the system's
  temporary folder, removed with the store) a state pushed out of memory that no
  checkpoint holds yet; a state is loaded back only when its party is drawn, scored or
  checkpointed.  The folder is named after its process
  (:mod:`federated.runtime.owned_temp_files`), so what a killed run left there is
  removed by the next start; a disk that fills while a state is written ends the run
  in one line naming the folder and the bytes needed (:class:`SpillSpaceError`);
* **in the checkpoint archive** (:class:`PartyArchive`, a folder in the trial's storage,
  beside Tune's checkpoints, so a trial restarted on another node reads it) one file
  per party and checkpoint round, written once: a checkpoint writes the parties that
  changed since the previous one and an index (the archive round of every party's
  state), so its cost follows the parties drawn, not N.  Files that neither of the
  last two checkpoints' indexes names are deleted (Tune keeps two checkpoints).

The engine tells the store which parties a round trains (:meth:`PartyStates.pin`:
never pushed out while they train) and that they changed (:meth:`PartyStates.changed`);
every read is ``states[party]``.  Where a state lives never changes a value: a state
written and read back is the same tensors (``torch.save``, read with
``weights_only=True``), so a run's rows are the same at any budget and a resumed run's
equal an uninterrupted one's.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.fs
import torch

from federated.contract.results import PARTY_STATES
from federated.runtime.atomic_file import atomic_open
from federated.runtime.machine_memory import gib
from federated.runtime.owned_temp_files import (
    SPILL_PREFIX,
    owned_prefix,
    remove_stale,
    system_temp_dir,
)
from federated.runtime.saved_dict import load_saved_dict

#: an index entry for "the party's initial state" (nothing in the archive)
INITIAL = -1

#: parties per archive sub-folder (a folder of 10⁵ files is slow to list)
PARTIES_PER_FOLDER = 1000


def state_bytes(tree: Any) -> int:
    """Bytes of the tensors in ``tree`` (dicts, lists, tuples of tensors and values)."""
    if isinstance(tree, torch.Tensor):
        return tree.numel() * tree.element_size()
    if isinstance(tree, dict):
        return sum(state_bytes(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return sum(state_bytes(v) for v in tree)
    return 0


class SpillSpaceError(OSError):
    """The disk holding the spilled party states is full; the message is one line
    naming the folder, the bytes the state needed and what to do."""


def _read_state(data: bytes | str, name: str) -> dict[str, Any]:
    """A party state written by :func:`torch.save`, read with ``weights_only=True``."""
    source: Any = io.BytesIO(data) if isinstance(data, bytes) else data
    return load_saved_dict(source, name, "party state")


class PartyArchive:
    """The checkpointed party states of one trial: ``<root>/<party // 1000>/<party>-<round>.pt``,
    each written once (whole: a temporary file renamed into place) and deleted once no
    kept checkpoint names it.  ``filesystem`` is Tune's storage file system (None: this
    machine's), so a trial restarted on another node reads what this one wrote."""

    def __init__(self, root: str | os.PathLike, filesystem: pyarrow.fs.FileSystem | None = None):
        local = filesystem is None or isinstance(filesystem, pyarrow.fs.LocalFileSystem)
        self.root = str(root)
        self.filesystem = None if local else filesystem

    @classmethod
    def in_trial_folder(
        cls, trial_path: str, filesystem: pyarrow.fs.FileSystem | None = None
    ) -> PartyArchive:
        """The archive of the trial whose folder is ``trial_path`` on ``filesystem``
        (Tune's storage, as the trainable finds it: the engine never imports Ray)."""
        return cls(f"{trial_path.rstrip('/')}/{PARTY_STATES}", filesystem)

    def path(self, party: int, version: int) -> str:
        """Where party ``party``'s state of checkpoint round ``version`` is."""
        return f"{self.root}/{party // PARTIES_PER_FOLDER:03d}/{party}-{version}.pt"

    def write(self, party: int, version: int, state: dict[str, Any]) -> int:
        """Write one party's state; returns the bytes written."""
        buffer = io.BytesIO()
        torch.save(state, buffer)
        data = buffer.getvalue()
        path = self.path(party, version)
        if self.filesystem is None:
            with atomic_open(path, "wb") as fh:
                fh.write(data)
        else:  # an object store's writes are whole already
            self.filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
            with self.filesystem.open_output_stream(path) as fh:
                fh.write(data)
        return len(data)

    def read(self, party: int, version: int) -> dict[str, Any]:
        path = self.path(party, version)
        if self.filesystem is None:
            return _read_state(path, path)
        with self.filesystem.open_input_stream(path) as fh:
            return _read_state(fh.readall(), path)

    def delete(self, party: int, version: int) -> None:
        """Delete one file; one already gone (a run killed after deleting it) is fine."""
        path = self.path(party, version)
        try:
            if self.filesystem is None:
                os.unlink(path)
            else:
                self.filesystem.delete_file(path)
        except FileNotFoundError:
            pass


def no_space_message(folder: Path, party: int, needed: int) -> str:
    """The one line of a full spill disk: the folder, the bytes of party ``party``'s
    tensors (``needed``; the file adds well under 1 KiB) and the space left there, and
    the settings that avoid it."""
    try:
        free = f", {gib(shutil.disk_usage(folder).free)} free"
    except OSError:
        free = ""
    return (
        f"no space left on the disk of {folder} to spill party {party}'s state "
        f"({needed} bytes needed{free}); free space there, or pass --party-state-dir on a "
        "disk with room or a larger --party-memory-mib"
    )


class PartyStates(Sequence[dict[str, Any]]):
    """The parties' own states of one run (module docstring): ``states[i]`` is party
    ``i``'s state dict, loaded into memory if it was not there; ``budget`` bytes of
    tensors at most stay in memory between rounds beside the pinned ones (None: all);
    the others wait in a folder made in ``spill_root`` when the first is pushed out
    (None: the system's temporary folder)."""

    def __init__(
        self,
        initial: list[dict[str, Any]],
        budget: int | None = None,
        spill_root: str | os.PathLike | None = None,
    ) -> None:
        self.budget = budget
        self.spill_root = Path(spill_root) if spill_root else system_temp_dir()
        self._n = len(initial)
        # states holding no tensors: never pushed out (a dict of None costs ~0.2 KiB)
        self._light: dict[int, dict[str, Any]] = {}
        # states holding tensors, least recently used first
        self._heavy: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._sizes: dict[int, int] = {}
        self._heavy_bytes = 0
        # where a party not in memory is: ("spill", path) or ("archive", version); also
        # kept for a party in memory whose copy there is current (pushing it out is free)
        self._copy: dict[int, tuple[str, Any]] = {}
        self._pinned: set[int] = set()
        self._changed: set[int] = set()  # since the last checkpoint
        self._index = np.full(self._n, INITIAL, dtype=np.int32)
        self._previous = np.full(self._n, INITIAL, dtype=np.int32)
        self._archive: PartyArchive | None = None
        self._spill: Path | None = None
        self._finalizer: weakref.finalize | None = None
        self.spilled_bytes = 0  # written to this node's disk so far
        self._reset(initial)

    def _reset(self, states: list[dict[str, Any]]) -> None:
        self._light.clear()
        self._heavy.clear()
        self._sizes.clear()
        self._heavy_bytes = 0
        self._copy.clear()
        self._pinned.clear()
        self._changed.clear()
        self._index[:] = INITIAL
        self._previous[:] = INITIAL
        for party, state in enumerate(states):
            self._hold(party, state)

    # --------------------------------------------------------------- reading
    def __len__(self) -> int:
        return self._n

    def __getitem__(self, party: int) -> dict[str, Any]:  # type: ignore[override]
        if party < 0:
            party += self._n
        if not 0 <= party < self._n:
            raise IndexError(f"party {party} of {self._n}")
        if party in self._light:
            return self._light[party]
        if party in self._heavy:
            self._heavy.move_to_end(party)
            return self._heavy[party]
        kind, where = self._copy[party]
        if kind == "spill":
            state = _read_state(str(where), str(where))
        else:
            if self._archive is None:
                raise RuntimeError(f"party {party}'s state is in an archive this run was not given")
            state = self._archive.read(party, where)
        self._hold(party, state)
        self._trim(keep=party)
        return state

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(self._n))

    @property
    def changed_since_checkpoint(self) -> frozenset[int]:
        """The parties whose states the next checkpoint writes."""
        return frozenset(self._changed)

    @property
    def resident_bytes(self) -> int:
        """Bytes of tensors the states in memory hold now."""
        return self._heavy_bytes

    # --------------------------------------------------------------- a round
    def pin(self, parties: Iterable[int]) -> None:
        """Keep ``parties`` in memory until :meth:`changed` (they are training)."""
        self._pinned.update(parties)

    def changed(self, parties: Iterable[int]) -> None:
        """``parties`` trained: their states changed in place (no copy elsewhere is
        current); unpinned; memory trimmed to the budget."""
        for party in parties:
            self._pinned.discard(party)
            if party in self._light:
                state = self._light.pop(party)
            elif party in self._heavy:
                state = self._heavy.pop(party)
                self._heavy_bytes -= self._sizes.pop(party)
            else:  # never loaded (a round that diverged before it): it did not change
                continue
            self._changed.add(party)
            self._copy.pop(party, None)
            self._hold(party, state)
        self._trim()

    def _hold(self, party: int, state: dict[str, Any]) -> None:
        size = state_bytes(state)
        if size == 0:
            self._light[party] = state
            return
        self._heavy[party] = state
        self._sizes[party] = size
        self._heavy_bytes += size

    def _trim(self, keep: int | None = None) -> None:
        # every load calls this: under the budget it must not walk the resident states
        if self.budget is None or self._heavy_bytes <= self.budget:
            return
        for party in list(self._heavy):
            if self._heavy_bytes <= self.budget:
                return
            if party in self._pinned or party == keep:
                continue
            state = self._heavy.pop(party)
            self._heavy_bytes -= self._sizes.pop(party)
            if party not in self._copy:
                self._copy[party] = ("spill", self._spill_to(party, state))

    def _spill_to(self, party: int, state: dict[str, Any]) -> Path:
        if self._spill is None:
            self.spill_root.mkdir(parents=True, exist_ok=True)
            remove_stale([self.spill_root])  # what killed runs of this host left there
            folder = tempfile.mkdtemp(prefix=owned_prefix(SPILL_PREFIX), dir=self.spill_root)
            self._spill = Path(folder)
            self._finalizer = weakref.finalize(self, shutil.rmtree, self._spill, True)
        path = self._spill / f"{party}.pt"
        try:
            with atomic_open(path, "wb") as fh:  # a part written is removed with it
                torch.save(state, fh)
        except OSError as err:
            if err.errno != errno.ENOSPC:
                raise
            needed = state_bytes(state)
            raise SpillSpaceError(no_space_message(self._spill, party, needed)) from None
        self.spilled_bytes += path.stat().st_size
        return path

    def close(self) -> None:
        """Remove this node's spill folder (also done when the store is collected)."""
        if self._finalizer is not None:
            self._finalizer()

    # --------------------------------------------------------------- checkpoints
    def checkpoint(self, archive: PartyArchive, version: int) -> dict[str, Any]:
        """Write the parties changed since the last checkpoint into ``archive`` as
        round ``version``'s files; returns what the run state holds instead of the
        states: this checkpoint's index, the previous one's, and the bytes written."""
        index = self._index.copy()
        written = 0
        for party in sorted(self._changed):
            state = self[party]
            if not state:  # an empty state is every party's start (nothing to keep)
                index[party] = INITIAL
                continue
            written += archive.write(party, version, state)
            index[party] = version
            self._copy[party] = ("archive", version)  # pushing it out of memory is free
        # the checkpoint before the previous one is Tune's to drop now: its files that
        # neither the previous nor this checkpoint names go with it
        stale = (
            (self._previous != INITIAL)
            & (self._previous != self._index)
            & (self._previous != index)
        )
        for party in np.flatnonzero(stale):
            archive.delete(int(party), int(self._previous[party]))
        self._previous, self._index = self._index, index
        self._changed.clear()
        self._archive = archive
        return {
            "index": torch.from_numpy(self._index.copy()),
            "previous": torch.from_numpy(self._previous.copy()),
            "bytes": written,
        }

    def restore(self, saved: dict[str, Any], archive: PartyArchive) -> None:
        """Point every party at its checkpointed state (:meth:`checkpoint`'s ``saved``)
        in ``archive``; a state is read when it is first asked for."""
        index = saved["index"].numpy().astype(np.int32)
        if index.shape != (self._n,):
            raise ValueError(
                f"checkpoint indexes {index.shape[0]} parties' states; this run has {self._n}"
            )
        self._archive = archive
        self._index = index.copy()
        self._previous = saved["previous"].numpy().astype(np.int32).copy()
        self._changed.clear()
        for party in np.flatnonzero(index != INITIAL):
            party = int(party)
            if self._light.pop(party, None) is None and party in self._heavy:
                self._heavy.pop(party)
                self._heavy_bytes -= self._sizes.pop(party)
            self._copy[party] = ("archive", int(index[party]))

    def verify_archived(self) -> None:
        """Read every state a restored checkpoint indexes once, as a check (nothing is
        kept): a missing or damaged file is a ``ValueError``/``OSError`` naming it now,
        at the restore, rather than in whichever round first asks for that party."""
        for party, (kind, where) in list(self._copy.items()):
            if kind == "archive" and self._archive is not None:
                self._archive.read(party, where)

    def replace(self, states: list[dict[str, Any]]) -> None:
        """Every party's state from a full list (a checkpoint holding them all)."""
        if len(states) != self._n:
            raise ValueError(
                f"checkpoint holds {len(states)} parties' states; this run has {self._n}"
            )
        self._reset(states)
        self._changed = set(range(self._n))  # the next checkpoint writes them all
