"""Memory for the parties' own state, checked before work.

A personalised method keeps something of every party's between rounds, on the CPU
(the party state of :mod:`federated.algorithms.base`, in every checkpoint): SOLO and
FedPer/FedRep/LG-FedAvg/FedBN a model's worth at most (their own weights, or the
entries they keep local), Ditto and APFL a whole personal model and its SGD momentum.
With N parties that is N copies, which a large model and many parties turn into more
memory than the machine has; PFLlib's deep copy per client runs into the same wall
without a word.

The estimate: N x the method's ``party_state_copies`` (declared on its class) x the
bytes of the model's state (parameters and buffers, counted on torch's ``meta``
device: nothing allocated), against the memory this machine has available now.  It
counts neither the run's working copies nor the data (small beside N copies when the
check matters), nor other trials running beside it.  A method that declares no copies
(FedAvg, the default) is not checked.
"""

from __future__ import annotations

import functools
from typing import Any

from federated.data.catalog import DatasetSpec
from federated.params import ConfigError
from federated.registry import load_method
from federated.runtime.machine_memory import available_memory, gib


@functools.cache
def model_state_bytes(
    model: str, spec: DatasetSpec, out_dim: int, projection_head: bool
) -> int | None:
    """Bytes of the model's ``state_dict`` (parameters and buffers), or None when it
    cannot be built on the meta device (a user's factory computing on real tensors: no
    estimate, no refusal)."""
    import torch

    from federated.models import build_model

    try:
        with torch.device("meta"), torch.random.fork_rng(devices=[]):
            net = build_model(model, spec, out_dim, projection_head)
    except Exception:  # any failure here only means "cannot estimate", never a refusal
        return None
    return sum(v.numel() * v.element_size() for v in net.state_dict().values())


def party_state_bytes(c: Any, spec: DatasetSpec) -> tuple[int, float, int] | None:
    """(bytes all parties' state needs, copies per party, bytes of one model state) for
    the run ``c``; None when its method keeps no copies or the model has no estimate."""
    copies = float(load_method("algorithm", c.algorithm).party_state_copies)
    if copies <= 0:
        return None
    state = model_state_bytes(c.model or spec.default_model, spec, c.out_dim, c.projection_head)
    if state is None:
        return None
    return round(c.n_parties * copies * state), copies, state


def check_party_memory(c: Any, spec: DatasetSpec) -> None:
    """Refuse (``ConfigError`` on ``n_parties``) a run whose parties' own state would
    not fit in the memory this machine has available (module docstring)."""
    needed = party_state_bytes(c, spec)
    available = available_memory()
    if needed is None or available is None:
        return
    total, copies, state = needed
    if total > available:
        raise ConfigError(
            "n_parties",
            c.n_parties,
            f"parties whose own state fits: {c.algorithm} keeps {copies:g} cop"
            f"{'y' if copies == 1 else 'ies'} of {c.model}'s state ({gib(state)}) per "
            f"party, {gib(total)} for {c.n_parties} parties, and this machine has "
            f"{gib(available)} available; pass fewer --n-parties or a smaller --model",
        )
