"""fedsweep's federated engine: datasets, partitions, models, algorithms, the round loop.

from federated import RunConfig, run_rounds
for row in run_rounds(RunConfig(algorithm="moon", dataset="fmnist", rounds=5)):
    print(row["round"], row["test_acc"])
"""

from federated.config import ConfigError, RunConfig
from federated.round_loop import FederatedRun, run_rounds

__all__ = ["ConfigError", "FederatedRun", "RunConfig", "run_rounds"]
