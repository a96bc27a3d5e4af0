"""The Fashion-MNIST laptop FedAvg round written in Flower (simulation, Ray backend):
one run of it, as a child process of ``python -m benchmarks.flower_side_by_side``.

    python -m benchmarks.flower_round PLAN_FILE THREADS ROUNDS OUT_JSON

This module imports ``flwr`` (not a dependency of fedsweep: the side-by-side benchmark
checks it is importable before it starts one of these); no test imports it.

``PLAN_FILE`` (written by the side-by-side benchmark from fedsweep's own run) holds the
initial global model (fedsweep's simple-cnn class, fedsweep's initial weights), each
party's training-set size and, per round and party, the training rows of every SGD step
in step order: fedsweep's partition and batch plan, so both loops train on the very
same batches.  The client is :mod:`benchmarks.flower_client`.  The server is Flower's
``FedAvg`` (weights by ``num-examples`` = the party's size, as fedsweep weights), every
party every round, no evaluation.  One Ray actor with ``THREADS`` CPUs and torch threads
trains the parties one after another (fedsweep's sequential schedule on the same cores).

Per round it records the wall seconds from the strategy's ``configure_train`` to the end
of its ``aggregate_train`` (sending, local training, replies, aggregation), the CPU
seconds of that span (this process's, which holds the server, the simulation engine and
Ray's driver side, plus the actor's while it trained each party; Ray's own daemons are
not counted) and, after round 1, the global weights; all go to ``OUT_JSON`` (weights
beside it as ``.pt``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation

from benchmarks.flower_client import client_app


class TimedFedAvg(FedAvg):
    """Flower's FedAvg, stamping each round's training phase and keeping round 1's
    aggregate."""

    def __init__(self, n_parties: int) -> None:
        super().__init__(
            fraction_train=1.0,
            fraction_evaluate=0.0,
            min_train_nodes=n_parties,
            min_available_nodes=n_parties,
        )
        self.began: dict[int, tuple[float, float]] = {}
        self.seconds: dict[int, float] = {}
        self.cpu_seconds: dict[int, float] = {}
        self.first: dict[str, torch.Tensor] | None = None

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self.began[server_round] = (time.perf_counter(), time.process_time())
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        clients = sum(float(r.content["metrics"]["cpu-s"]) for r in replies if r.has_content())
        arrays, metrics = super().aggregate_train(server_round, replies)
        wall, cpu = self.began[server_round]
        self.seconds[server_round] = time.perf_counter() - wall
        # this process's (server, simulation engine, Ray's driver side) and the actor's
        self.cpu_seconds[server_round] = time.process_time() - cpu + clients
        if server_round == 1 and arrays is not None:
            self.first = arrays.to_torch_state_dict()
        return arrays, metrics


def simulate(plan_file: Path, threads: int, rounds: int) -> TimedFedAvg:
    """``rounds`` rounds of the plan in Flower's simulation; the strategy holds the
    timings (s) and round 1's global weights."""
    plan = torch.load(plan_file, weights_only=False)
    n_parties = len(plan["sizes"])
    strategy = TimedFedAvg(n_parties)
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(plan["model"].state_dict()),
            num_rounds=rounds,
            train_config=ConfigRecord({"plan": str(plan_file), "threads": threads}),
        )

    run_simulation(
        server_app=server_app,
        client_app=client_app,
        num_supernodes=n_parties,
        backend_config={
            "client_resources": {"num_cpus": threads, "num_gpus": 0.0},
            "init_args": {"num_cpus": threads, "num_gpus": 0},
        },
    )
    return strategy


def main(argv: list[str]) -> int:
    plan_file, threads, rounds, out = Path(argv[0]), int(argv[1]), int(argv[2]), Path(argv[3])
    strategy = simulate(plan_file, threads, rounds)
    if len(strategy.seconds) != rounds or strategy.first is None:
        print(f"error: the Flower run finished {len(strategy.seconds)} of {rounds} rounds")
        return 1
    torch.save(strategy.first, out.with_suffix(".pt"))
    measured = range(1, rounds + 1)
    out.write_text(
        json.dumps(
            {
                "round_s": [strategy.seconds[r] for r in measured],
                "cpu_s": [strategy.cpu_seconds[r] for r in measured],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
