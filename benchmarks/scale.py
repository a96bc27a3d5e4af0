"""``python -m benchmarks.scale``: cross-device scale — set-up, round time, peak memory
and checkpoint cost against the party count N and the parties drawn a round (issue 53).

    python -m benchmarks.scale                  # N = 10³, 10⁴, 8·10⁴ x 10, 100, 1,000 a round
    python -m benchmarks.scale --parties 1000 80000 --per-round 100 --methods scaffold \
        --party-memory-mib 64 --out docs/results/scale.json

Each case — one method, one N, one number of parties a round — runs in a process of its
own (peak RSS is a process's high-water mark, so cases must not share one).  The data:
the FEMNIST-shaped stand-in of :mod:`benchmarks.femnist_scale` (842,900 images, Fashion-
MNIST's 60,000 in turn; built into ``--stand-in`` when missing, decoded once into
fedsweep's data cache), read as ``hf:PATH`` with 1% held out as the test set; a case
uses ``N x`` :data:`SAMPLES_PER_PARTY` (10, the least a party of an own data set may
hold) of its images (``data_fraction``) over IID parties, so every party holds 10 images
at every N (up to 83,000 parties on this stand-in; 10⁵ needs 10⁶ images) and a round's
training work depends on the parties drawn, not on N (a systems benchmark, not an
accuracy one).  simple-cnn, E = 1, batch 16 (one step a party), one torch thread,
scored on a quarter of the held-out images, per-party scoring off
(``party_scores_every=0``: its cost is the cadence's, measured in
``benchmarks/scoring_cadence.py``).  A checkpoint after every round goes
through the party-state archive as a Tune trial's does
(:mod:`federated.engine.party_store`, into a temporary folder).  Reported per case:

- ``setup_s``: building the run (partition, models, evaluation) from loaded data;
- ``round_s``: the median of ``round_seconds`` over the rounds after the first (the
  warm-up), evaluation included;
- ``peak_rss_mib``: the process's peak resident memory (``ru_maxrss``), and
  ``data_mib``, the part of it the training images take (the whole stand-in as loaded,
  and the case's share in the run's party order);
- ``checkpoint_mib``/``checkpoint_s``: the last round's checkpoint, the run-state file
  and the party states it wrote (the parties drawn that round), and ``archive_mib``,
  what the archive holds then (the states the last two checkpoints name);
- ``spilled_mib``: party state pushed out of memory to disk (with ``--party-memory-mib``);
- ``resume_exact`` (SCAFFOLD): a fresh run restored from the checkpoint before the last
  round gives the last round's row exactly.

Units: seconds, MiB.  The machine is shared with other jobs: compare cases of one run only.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.femnist_scale import build_stand_in
from federated.config.data_checks import load_checked_data
from federated.config.run_config import RunConfig
from federated.engine.party_store import PartyArchive
from federated.engine.round_loop import FederatedRun
from federated.runtime.cpu_name import cpu_model
from federated.trainable import load_run_state, save_run_state

METHODS = ("fedavg", "scaffold", "moon", "ditto")
PARTIES = (1_000, 10_000, 80_000)
PER_ROUND = (10, 100, 1_000)
SAMPLES_PER_PARTY = 10
STAND_IN = Path("/tmp/femnist-like")


@dataclass(frozen=True)
class Case:
    """One case: a method at N parties, ``per_round`` of them a round (module docstring)."""

    method: str
    n_parties: int
    per_round: int
    rounds: int
    memory_mib: int | None
    stand_in: Path

    def argv(self) -> list[str]:
        """This case's command line (``--case``), for a process of its own."""
        memory = [] if self.memory_mib is None else ["--party-memory-mib", str(self.memory_mib)]
        return [
            "--case", self.method, str(self.n_parties), str(self.per_round),
            "--rounds", str(self.rounds), "--stand-in", str(self.stand_in), *memory,
        ]  # fmt: skip


def case_config(case: Case, n_parties: int, per_round: int, data_fraction: float) -> RunConfig:
    """The run ``case`` times (module docstring), at ``n_parties`` and ``per_round``."""
    return RunConfig(
        algorithm=case.method,
        dataset=f"hf:{case.stand_in}",
        model="simple-cnn",
        holdout_fraction=0.01,
        data_fraction=data_fraction,
        n_parties=n_parties,
        partition="iid",
        sample_fraction=per_round / n_parties,
        local_epochs=1,
        batch_size=16,
        rounds=case.rounds,
        threads=1,
        seed=0,
        test_fraction=0.25,
        party_scores_every=0,
        checkpoint_every=1,
        party_memory_mib=case.memory_mib,
    ).resolved()


def tree_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def measure_case(case: Case) -> dict[str, Any]:
    """One case, in this process (module docstring)."""
    torch.set_num_threads(1)
    # the disk cache's decoded images after the first case
    data = load_checked_data(case_config(case, 10, 10, 1.0))
    fraction = case.n_parties * SAMPLES_PER_PARTY / data.spec.train_size
    config = case_config(case, case.n_parties, case.per_round, fraction)
    rounds = case.rounds
    start = time.perf_counter()
    run = FederatedRun(config, data)
    setup = time.perf_counter() - start
    seconds, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        archive = PartyArchive(Path(tmp) / "party_states")
        for k in range(1, rounds + 1):
            rows.append(run.run_round())
            seconds.append(float(rows[-1]["round_seconds"]))
            folder = Path(tmp) / f"checkpoint_{k}"
            start = time.perf_counter()
            save_run_state(run, folder, archive)
            saved = time.perf_counter() - start
            state_file = (folder / "run_state.pt").stat().st_size
            wrote = load_run_state(folder)["parties"]["bytes"] + state_file
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        images = data.train_x.numel() * data.train_x.element_size()
        ordered = run.train_x.numel() * run.train_x.element_size()
        result = {
            "method": case.method,
            "n_parties": case.n_parties,
            "per_round": case.per_round,
            "rounds": rounds,
            "path": run.trainer.path,
            "setup_s": setup,
            "round_s": statistics.median(seconds[1:] or seconds),
            "peak_rss_mib": peak,
            "data_mib": (images + ordered) / 2**20,
            "checkpoint_mib": wrote / 2**20,
            "checkpoint_s": saved,
            "archive_mib": tree_bytes(Path(tmp) / "party_states") / 2**20,
            "spilled_mib": run.party_states.spilled_bytes / 2**20,
        }
        if case.method == "scaffold":
            resumed = FederatedRun(config, data)
            resumed.load_state_dict(load_run_state(Path(tmp) / f"checkpoint_{rounds - 1}"), archive)
            last = resumed.run_round()
            result["resume_exact"] = same_row(last, rows[-1])
    return result


def same_row(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two rows equal in every value but their timings (NaN equal to NaN)."""

    def value(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v

    keep = [k for k in a if "second" not in k]
    return keep == [k for k in b if "second" not in k] and all(
        value(a[k]) == value(b[k]) for k in keep
    )


def run_case(case: Case) -> dict[str, Any]:
    """One case in a fresh process (its own peak RSS); a case the run refuses (the
    party-memory check, say) comes back as ``refused``: its one-line reason."""
    cmd = [sys.executable, "-m", "benchmarks.scale", *case.argv()]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        reason = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no message"
        return {"method": case.method, "n_parties": case.n_parties,
                "per_round": case.per_round, "refused": reason}  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(results: list[dict[str, Any]]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| method | N | a round | path | set-up s | s/round | peak RSS MiB | of it data | "
        "checkpoint MiB | checkpoint s | archive MiB | spilled MiB | resume exact |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        head = f"| {r['method']} | {r['n_parties']:,} | {r['per_round']:,} |"
        if "refused" in r:
            lines.append(f"{head} refused: {r['refused']} |")
            continue
        exact = {True: "yes", False: "**no**"}.get(r.get("resume_exact"), "")
        lines.append(
            f"{head} {r['path']} | {r['setup_s']:.2f} | {r['round_s']:.2f} | "
            f"{r['peak_rss_mib']:.0f} | {r['data_mib']:.0f} | {r['checkpoint_mib']:.2f} | "
            f"{r['checkpoint_s']:.3f} | {r['archive_mib']:.1f} | {r['spilled_mib']:.0f} | "
            f"{exact} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parties", type=int, nargs="+", default=list(PARTIES))
    parser.add_argument("--per-round", type=int, nargs="+", default=list(PER_ROUND))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--rounds", type=int, default=4, help="rounds per case (>= 3)")
    parser.add_argument("--party-memory-mib", type=int, help="the runs' party_memory_mib")
    parser.add_argument(
        "--stand-in", type=Path, default=STAND_IN,
        help="the FEMNIST-shaped stand-in's folder (built there when missing)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--case", nargs=3, metavar=("METHOD", "N", "K"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error(f"--rounds {args.rounds}: at least 3 (a warm-up, a checkpoint to resume)")
    if args.case:
        method, n_parties, per_round = args.case[0], int(args.case[1]), int(args.case[2])
        case = Case(method, n_parties, per_round, args.rounds, args.party_memory_mib, args.stand_in)
        print(json.dumps(measure_case(case)))
        return
    build_stand_in(args.stand_in)
    results = []
    for n_parties in args.parties:
        for per_round in (k for k in args.per_round if k <= n_parties):
            for method in args.methods:
                case = Case(
                    method, n_parties, per_round, args.rounds, args.party_memory_mib, args.stand_in
                )
                results.append(run_case(case))
                print(json.dumps(results[-1]), flush=True)
    print(f"machine: {cpu_model()}")
    print(table(results))
    if args.out:
        record = {"machine": cpu_model(), "party_memory_mib": args.party_memory_mib,
                  "results": results}  # fmt: skip
        args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
