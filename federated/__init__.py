"""fedsweep's federated engine: datasets, partitions, models, algorithms, the round loop.

from federated import RunConfig, run_rounds
for row in run_rounds(RunConfig(algorithm="moon", dataset="fmnist", rounds=5)):
    print(row["round"], row["test_acc"])

The names below are imported on first use, so that importing a torch-free submodule
(``federated.cli.input_checks``, ``federated.cli.exit_codes``) does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ConfigError": "federated.config.run_config",
    "RunConfig": "federated.config.run_config",
    "FederatedRun": "federated.engine.round_loop",
    "run_rounds": "federated.engine.round_loop",
}

__all__ = ["ConfigError", "FederatedRun", "RunConfig", "run_rounds"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'federated' has no attribute {name!r}")
