"""``python -m benchmarks.scale``: cross-device scale — set-up, round time, peak memory
and checkpoint cost against the party count N at ten parties a round (issue 53, item 5).

    python -m benchmarks.scale                               # N = 100, 1,000, 10,000
    python -m benchmarks.scale --parties 100 1000 --rounds 3 --out docs/results/scale.json

Each case — one method at one N — runs in a process of its own (peak RSS is a process's
high-water mark, so cases must not share one): Fashion-MNIST, simple-cnn, IID parties
(every N up to the training set's 60,000 samples is accepted), ten parties drawn a round
(``sample_fraction = 10 / N``), E = 1, batch 16, packed execution, one torch thread,
per-party scoring at its default cadence (``party_scores_every`` unset).  Reported per case:

- ``setup_s``: building the run (partition, models, evaluation) from loaded data;
- ``round_s``: the median of ``round_seconds`` over the rounds after the first (the
  warm-up), evaluation included;
- ``peak_rss_mib``: the process's peak resident memory (``ru_maxrss``), data loaded;
- ``checkpoint_mib`` and ``checkpoint_s``: one ``torch.save`` of the run's state after the
  last round (what a Tune checkpoint holds: every party's own state among it).

Units: seconds, MiB.  The machine is shared with other jobs: compare cases of one run only.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from federated.config.run_config import RunConfig
from federated.data import load_dataset
from federated.engine.round_loop import FederatedRun
from federated.runtime.cpu_name import cpu_model

METHODS = ("fedavg", "scaffold", "moon", "ditto")
PARTIES = (100, 1_000, 10_000)
PER_ROUND = 10


def case_config(method: str, n_parties: int, rounds: int) -> RunConfig:
    """The run one case times (module docstring)."""
    return RunConfig(
        algorithm=method,
        dataset="fmnist",
        model="simple-cnn",
        n_parties=n_parties,
        partition="iid",
        sample_fraction=PER_ROUND / n_parties,
        local_epochs=1,
        batch_size=16,
        rounds=rounds,
        threads=1,
        seed=0,
        checkpoint_every=0,
    ).resolved()


def measure_case(method: str, n_parties: int, rounds: int) -> dict[str, Any]:
    """One case, in this process (module docstring)."""
    torch.set_num_threads(1)
    config = case_config(method, n_parties, rounds)
    data = load_dataset(config.dataset, config.data_root)
    start = time.perf_counter()
    run = FederatedRun(config, data)
    setup = time.perf_counter() - start
    seconds = []
    for _ in range(rounds):
        seconds.append(float(run.run_round()["round_seconds"]))
    start = time.perf_counter()
    buffer = io.BytesIO()
    torch.save(run.state_dict(), buffer)
    saved = time.perf_counter() - start
    return {
        "method": method,
        "n_parties": n_parties,
        "rounds": rounds,
        "path": run.trainer.path,
        "setup_s": setup,
        "round_s": statistics.median(seconds[1:] or seconds),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "checkpoint_mib": buffer.getbuffer().nbytes / 2**20,
        "checkpoint_s": saved,
    }


def run_case(method: str, n_parties: int, rounds: int) -> dict[str, Any]:
    """One case in a fresh process (its own peak RSS); a case the run refuses (the
    party-memory check, say) comes back as ``refused``: its one-line reason."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", "--case", method, str(n_parties),
         "--rounds", str(rounds)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        reason = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no message"
        return {"method": method, "n_parties": n_parties, "refused": reason}
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(results: list[dict[str, Any]]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| method | N | path | set-up s | s/round | peak RSS MiB | checkpoint MiB | checkpoint s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if "refused" in r:
            lines.append(f"| {r['method']} | {r['n_parties']:,} | refused: {r['refused']} |")
            continue
        lines.append(
            f"| {r['method']} | {r['n_parties']:,} | {r['path']} | {r['setup_s']:.2f} | "
            f"{r['round_s']:.2f} | {r['peak_rss_mib']:.0f} | {r['checkpoint_mib']:.2f} | "
            f"{r['checkpoint_s']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parties", type=int, nargs="+", default=list(PARTIES))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per case (>= 2)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--case", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error(f"--rounds {args.rounds}: at least 2 (the first is the warm-up)")
    if args.case:
        print(json.dumps(measure_case(args.case[0], int(args.case[1]), args.rounds)))
        return
    results = []
    for n_parties in args.parties:
        for method in args.methods:
            results.append(run_case(method, n_parties, args.rounds))
            print(json.dumps(results[-1]), flush=True)
    print(f"machine: {cpu_model()}")
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps({"machine": cpu_model(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
