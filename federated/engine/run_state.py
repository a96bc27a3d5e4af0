"""Checkpoint compatibility of a run's saved state, and moving state between devices.

A checkpoint may be restored under a config that differs only in fields declared
``execution_only`` on :class:`~federated.config.run_config.RunConfig` (device, threads, evaluation
batch size, checkpoint period, fault injection, per-party scoring period, representation
rounds): those never change a run's results on a given device.  The data folder
(``data_root``) is not among them: another folder may hold other data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any

import torch

from federated.config.checks import EXECUTION_ALIASES
from federated.config.run_config import (
    BEFORE_FIELD,
    RunConfig,
    execution_fields,
    field_types,
)

# 2: a party's kept entries under one key (state["local"]: SOLO's weights and the
# batchnorm=local statistics were "weights" and "batchnorm_statistics") and the server
# optimizer's state over the entries the server moves (those kept at the parties left
# out, where format 1 stepped them by zero)
STATE_FORMAT = 2


def unreadable_format(saved: object) -> str:
    """The one line refusing a checkpoint of run-state format ``saved``."""
    if saved == 1:
        return (
            "checkpoint of run-state format 1 (before a party's own state was one "
            f"declaration); this fedsweep reads format {STATE_FORMAT}: start the run afresh"
        )
    return f"unsupported run-state format {saved!r} (this fedsweep reads {STATE_FORMAT})"


EXECUTION_FIELDS = execution_fields()


def check_compatible(saved: Mapping[str, Any], config: RunConfig) -> None:
    """Raise ``ValueError`` naming the first result-changing field where the config a
    checkpoint was made with (``saved``, flat) differs from ``config``."""
    mine = config.to_dict()
    execution = saved.get("execution")
    if execution in EXECUTION_ALIASES:  # a checkpoint of an earlier version
        saved = {**saved, "execution": EXECUTION_ALIASES[execution]}
    # a field added after the checkpoint was made holds its default there: the run
    # that made it behaved as the default says (e.g. no stragglers, no feature skew)
    defaults = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING}
    defaults.update(BEFORE_FIELD)
    saved = {**{k: v for k, v in defaults.items() if k not in saved}, **saved}
    # what acts on this run: its run-level fields and its chosen methods' parameters; a
    # saved method parameter that this run's methods do not declare had no effect there
    # either (a FedAvg checkpoint of a version whose rows carried mu and tau for all)
    acting = set(field_types())
    for params in (config.algorithm_params, config.server_params):
        if params is not None:
            acting |= set(params.flat())
    keys = ((set(mine) | set(saved)) & acting) - EXECUTION_FIELDS
    differing = sorted(k for k in keys if saved.get(k) != mine.get(k))
    if differing:
        k = differing[0]
        raise ValueError(
            f"checkpoint was made with {k}={saved.get(k)!r}, this run has {k}={mine.get(k)!r}"
        )


def tree_to(tree: Any, device: torch.device | str) -> Any:
    """``tree`` (dicts, lists, tuples of tensors and plain values) with every tensor
    detached and copied to ``device``."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().to(device, copy=True)
    if isinstance(tree, dict):
        return {k: tree_to(v, device) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_to(v, device) for v in tree)
    return tree
