"""Memory for the parties' own state, checked before work.

A method keeps something of every party's between rounds, on the CPU (the party state
of :mod:`federated.algorithms.base`, in every checkpoint), as its one declaration says
(``Algorithm.own_state``, :mod:`federated.algorithms.party_own_state`): the entries of
the model it keeps (SOLO every one, FedPer/FedRep/LG-FedAvg their layers, FedBN and
``batchnorm=local`` the BatchNorm layers' or statistics), a whole personal model and
its SGD momentum (Ditto, APFL), and state of its own (MOON's ``prev_models`` previous
models, SCAFFOLD's and FedDyn's per-parameter vectors).  With N parties that is N times
it, which a large model and many parties turn into more memory than the machine has;
PFLlib's deep copy per client runs into the same wall without a word.

The states need not all be in memory: the run keeps them in memory up to a budget
(``party_memory_mib``, default half the memory available as it starts:
:func:`memory_budget`) and on this node's disk beyond it
(:mod:`federated.engine.party_store`).  The estimate of one party's:
:meth:`~federated.algorithms.party_own_state.OwnState.party_bytes` on the model built on
torch's ``meta`` device (nothing allocated; a layer rule counted as the whole model,
what it could keep at most).  A run is refused when the parties one round trains do
not fit in the memory available now (they are in memory together), or when the states
it can come to hold do not fit in the budget and the disk's free space together: a
state is written only by a party that trains, so that is min(N, rounds x the parties a
round trains) states (N for a method whose parties all train every round), not N —
a 6-round run at 10⁵ parties, 1,000 a round, holds at most 6,000.  It counts neither
the run's working copies nor the data (small beside N copies when the check matters),
nor other trials running beside it, nor the checkpoint archive (in Tune's storage).  A
run whose parties keep nothing (FedAvg, FedProx) is not checked.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from federated.data.catalog import DatasetSpec
from federated.params import ConfigError
from federated.registry import load_method
from federated.runtime.machine_memory import available_memory, gib, physical_memory
from federated.runtime.owned_temp_files import named_temp_dir, system_temp_dir
from federated.runtime.writable_folder import folder_problem, nearest_existing

if TYPE_CHECKING:
    import torch


@functools.cache
def meta_model(
    model: str, spec: DatasetSpec, out_dim: int, projection_head: bool
) -> torch.nn.Module | None:
    """The model built on the ``meta`` device, or None when it cannot be built there (a
    user's factory computing on real tensors: no estimate, no refusal)."""
    import torch

    from federated.models import build_model

    try:
        with torch.device("meta"), torch.random.fork_rng(devices=[]):
            return build_model(model, spec, out_dim, projection_head)
    except Exception:  # any failure here only means "cannot estimate", never a refusal
        return None


def model_state_bytes(
    model: str, spec: DatasetSpec, out_dim: int, projection_head: bool
) -> int | None:
    """Bytes of the model's ``state_dict`` (parameters and buffers), or None when it
    cannot be built on the meta device."""
    net = meta_model(model, spec, out_dim, projection_head)
    if net is None:
        return None
    return sum(v.numel() * v.element_size() for v in net.state_dict().values())


def memory_budget(party_memory_mib: int | None) -> int | None:
    """Bytes of party state a run keeps in memory between rounds: ``party_memory_mib``
    where the user set it, else half the memory available now (None where that is
    unknown: all of it)."""
    if party_memory_mib is not None:
        return party_memory_mib * 2**20
    available = available_memory()
    return None if available is None else available // 2


def spill_folder(party_state_dir: str | None) -> Path:
    """Where a run's states pushed out of memory go: ``party_state_dir``, else the
    system's temporary folder as the environment names it (never another one instead)."""
    if party_state_dir:
        return Path(party_state_dir).expanduser().absolute()
    return system_temp_dir()


def spill_space(folder: Path) -> int | None:
    """Free bytes on the disk that holds ``folder`` (or will: its nearest existing
    ancestor's), or None where unknown."""
    try:
        return shutil.disk_usage(nearest_existing(folder)).free
    except OSError:
        return None


def check_party_settings(c: Any, keeps_state: bool) -> None:
    """Refuse (``ConfigError``) a ``party_memory_mib`` above this machine's physical
    memory, a ``party_state_dir`` that cannot be written, and (``keeps_state``: the run's
    parties keep state, which may be spilled) a default temporary folder that cannot."""
    physical = physical_memory()
    both_known = c.party_memory_mib is not None and physical is not None
    if both_known and c.party_memory_mib * 2**20 > physical:
        raise ConfigError(
            "party_memory_mib",
            c.party_memory_mib,
            f"at most {physical // 2**20}, this machine's physical memory in MiB "
            "(MemTotal of /proc/meminfo, else os.sysconf's pages)",
        )
    folder = spill_folder(c.party_state_dir)
    problem = folder_problem(folder) if c.party_state_dir or keeps_state else None
    if problem and c.party_state_dir:
        raise ConfigError("party_state_dir", c.party_state_dir, f"a writable folder; {problem}")
    if problem:
        where = named_temp_dir()[1]
        raise ConfigError(
            "party_state_dir",
            None,
            f"a writable folder; the default, the temporary folder {folder} ({where}), "
            f"cannot be used: {problem}; pass --party-state-dir",
        )


def party_state_bytes(c: Any, spec: DatasetSpec) -> tuple[int, int] | None:
    """(bytes of one party's state, bytes of one model state) for the run ``c``; None
    when its parties keep nothing or the model has no estimate."""
    method = load_method("algorithm", c.algorithm)
    declared = method.own_state
    model = c.model or spec.default_model
    net = meta_model(model, spec, c.out_dim, c.projection_head)
    if net is None:
        return None
    values = c.to_dict()
    per_party = declared.party_bytes(
        net,
        c.batchnorm or declared.batchnorm_default,
        bool(c.momentum),
        # only a method whose copies read its parameters (MOON) builds them here
        lambda: method.Params.build(values, values),
    )
    if per_party <= 0:
        return None
    state = model_state_bytes(model, spec, c.out_dim, c.projection_head)
    return per_party, state


def check_party_memory(c: Any, spec: DatasetSpec) -> None:
    """Refuse (``ConfigError`` on ``n_parties``) a run whose parties' own state would
    not fit (module docstring): one round's parties in the memory available, all of
    them in the memory budget and the free disk together."""
    needed = party_state_bytes(c, spec)
    check_party_settings(c, keeps_state=needed is not None)
    available = available_memory()
    if needed is None or available is None:
        return
    per_party, state = needed
    copies = per_party / state
    kept = (
        f"{c.algorithm} keeps {copies:.3g} cop{'y' if copies == 1 else 'ies'} of "
        f"{c.model}'s state ({gib(state)}) per party"
    )
    trains_alone = load_method("algorithm", c.algorithm).own_state.trains_alone
    per_round = c.n_parties if trains_alone else min(c.n_parties, c.parties_per_round)
    if per_round * per_party > available:
        raise ConfigError(
            "n_parties",
            c.n_parties,
            f"parties whose own state fits: {kept}, {gib(per_round * per_party)} for the "
            f"{per_round} parties a round trains, and this machine has {gib(available)} "
            "available; pass fewer --n-parties, a lower --sample-fraction or a smaller --model",
        )
    # a party's state is written only when it trains: the states the run can hold
    held = c.n_parties if trains_alone else min(c.n_parties, c.rounds * per_round)
    total = held * per_party
    budget = memory_budget(c.party_memory_mib)
    disk = spill_space(spill_folder(c.party_state_dir))
    if budget is None or disk is None or total <= budget + disk:
        return
    whose = (
        f"{c.n_parties} parties"
        if held == c.n_parties
        else f"the {held} parties its {c.rounds} rounds of {per_round} train"
    )
    raise ConfigError(
        "n_parties",
        c.n_parties,
        f"parties whose own state fits: {kept}, {gib(total)} for {whose}, "
        f"and this run keeps {gib(budget)} in memory (party_memory_mib) with "
        f"{gib(disk)} free on this node's disk (party_state_dir); pass fewer --n-parties, "
        "fewer --rounds or a smaller --model",
    )
