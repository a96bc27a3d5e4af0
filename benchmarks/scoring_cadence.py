"""``python -m benchmarks.scoring_cadence``: a round's time with every party scored every
round beside the default cadence (issue 53, must-have 2).

    python -m benchmarks.scoring_cadence               # N = 1,000, 10 timed rounds each

Two runs of one trial — Fashion-MNIST, simple-cnn, N IID parties, ten drawn a round, E = 1,
batch 16, ``party_test_fraction=0.2``, one torch thread — one with ``party_scores_every=1``,
one with it unset (:mod:`federated.config.scoring_cadence`: every ``ceil(N/100)``-th
round).  They alternate round by round after one warm-up round each, so a change in the
machine's load falls on both alike.  Reported: each run's resolved period and the median
and mean ``round_seconds`` (evaluation included).  Units: seconds.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from federated.config.run_config import RunConfig
from federated.data import load_dataset
from federated.engine.round_loop import FederatedRun


def config(n_parties: int, rounds: int, every: int | None) -> RunConfig:
    """The trial (module docstring) at scoring period ``every`` (None: the default)."""
    return RunConfig(
        algorithm="fedavg",
        dataset="fmnist",
        model="simple-cnn",
        n_parties=n_parties,
        partition="iid",
        sample_fraction=10 / n_parties,
        local_epochs=1,
        batch_size=16,
        rounds=rounds + 1,
        threads=1,
        seed=0,
        checkpoint_every=0,
        party_test_fraction=0.2,
        party_scores_every=every,
    ).resolved()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parties", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds per run")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    configs = {
        "every round": config(args.parties, args.rounds, 1),
        "default": config(args.parties, args.rounds, None),
    }
    data = load_dataset("fmnist", configs["default"].data_root)
    runs = {name: FederatedRun(c, data) for name, c in configs.items()}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for index in range(args.rounds + 1):
        for name, run in runs.items():
            row = run.run_round()
            if index > 0:  # the first round of each is the warm-up
                seconds[name].append(float(row["round_seconds"]))
    for name, values in seconds.items():
        print(
            f"{name}: party_scores_every={configs[name].party_scores_every} "
            f"median {statistics.median(values):.3f} s/round, mean {statistics.mean(values):.3f}"
        )


if __name__ == "__main__":
    main()
