"""A run saved after its first round and restored into a new run, for the checks that a
restored run continues exactly as the uninterrupted one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun
from federated.trainable import load_run_state, save_run_state
from tests.test_round_loop import results


def restored_results(config: RunConfig, data: Any, folder: Path) -> list[dict[str, Any]]:
    """The rows (without timings, :func:`results`) of ``config.rounds`` rounds on ``data``:
    the first from a run that is then saved to ``folder``, the rest from a new run restored
    from it."""
    first = FederatedRun(config, data)
    head = results([first.run_round()])
    save_run_state(first, folder)
    restored = FederatedRun(config, data)
    restored.load_state_dict(load_run_state(folder))
    return head + results([restored.run_round() for _ in range(config.rounds - 1)])
