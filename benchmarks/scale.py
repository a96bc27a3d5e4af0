"""``python -m benchmarks.scale``: cross-device scale — set-up, round time, peak memory
and checkpoint cost against the party count N and the parties drawn a round (issue 53).

    python -m benchmarks.scale                  # N = 10³, 10⁴, 10⁵ x 10, 100, 1,000 a round
    python -m benchmarks.scale --parties 1000 100000 --per-round 100 --methods scaffold \
        --party-memory-mib 64 --out docs/results/scale.json
    python -m benchmarks.scale --alternate --per-round 10 100 --rounds 21   # s/round vs N

Each case — one method, one N, one number of parties a round — runs in a process of its
own (its peak memory must not be another case's).  The data: a FEMNIST-shaped stand-in
of :mod:`benchmarks.femnist_scale` with :data:`STAND_IN_WRITERS` writers (1,047,927
images, Fashion-MNIST's 60,000 in turn; built into ``--stand-in`` when missing, decoded
once into fedsweep's data cache), read as ``hf:PATH`` with 1% held out as the test set;
a case uses ``N x`` :data:`SAMPLES_PER_PARTY` (10, the least a party of an own data set
may hold) of its images (``data_fraction``) over IID parties, so every party holds 10
images at every N up to 10⁵ and a round's training work depends on the parties drawn,
not on N (a systems benchmark, not an accuracy one).  simple-cnn, E = 1, batch 16 (one
step a party), one torch thread, scored on a quarter of the held-out images, per-party
scoring off (``party_scores_every=0``: its cost is the cadence's, measured in
``benchmarks/scoring_cadence.py``).  A checkpoint after every round goes through the
party-state archive as a Tune trial's does (:mod:`federated.engine.party_store`, into a
temporary folder).  Reported per case:

- ``setup_s``: building the run (partition, models, evaluation) from loaded data, after
  a run of 10 parties built and dropped in the same process (what every process pays
  once, imports and first uses, is not the case's);
- ``round_s``: the median of ``round_seconds`` over the rounds after the first (the
  warm-up), evaluation included, and ``round_s_range``, their least and greatest;
- ``peak_rss_mib``: the process's peak resident memory (``VmHWM``), data loading
  included; ``run_peak_mib``: the peak from the moment the data were loaded (the
  high-water mark reset then) less the resident memory at that moment, the run's own,
  and ``run_data_mib``, the run's copy of its parties' images (none on the CPU since the
  sixth session: the batches are gathered from the loaded set);
- ``checkpoint_mib``/``checkpoint_s``: the last round's checkpoint, the run-state file
  and the party states it wrote (the parties drawn that round), and ``archive_mib``,
  what the archive holds then (the states the last two checkpoints name);
- ``spilled_mib``: party state pushed out of memory to disk (with ``--party-memory-mib``);
- ``resume_exact`` (SCAFFOLD): the run again in a process of its own, killed with
  SIGKILL in the middle of its last round, then a fresh process restored from the last
  checkpoint before the kill: its last round's row equals the uninterrupted run's.

``--alternate`` measures the round time alone, side by side: one process per method and
rate builds a run for every N and runs their rounds in turn (:func:`alternate`).

Units: seconds, MiB.  The machine is shared with other jobs: compare cases of one run only.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.femnist_scale import build_stand_in
from benchmarks.memory import MIB, peak_rss_bytes, reset_peak_rss, rss_bytes
from federated.config.data_checks import load_checked_data
from federated.config.run_config import RunConfig
from federated.data.image_data import ImageData
from federated.engine.party_store import PartyArchive
from federated.engine.round_loop import FederatedRun
from federated.params import ConfigError
from federated.runtime.cpu_name import cpu_model
from federated.trainable import load_run_state, save_run_state

METHODS = ("fedavg", "scaffold", "moon", "ditto")
PARTIES = (1_000, 10_000, 100_000)
PER_ROUND = (10, 100, 1_000)
SAMPLES_PER_PARTY = 10
STAND_IN_WRITERS = 4_500  # 1,047,927 images: 10 each for 10⁵ parties after the 1% held out
STAND_IN = Path("/tmp/scale-stand-in")


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


def loaded_case(case: Case) -> tuple[RunConfig, ImageData]:
    """The case's config and the whole stand-in, loaded (from the disk cache's decoded
    images after the first case), and a run of 10 parties built and dropped: the imports
    and first uses a process pays once (about 1.3 s and 160 MiB, the memory check's meta-
    device model among them) are then not the case's set-up or memory."""
    torch.set_num_threads(1)
    data = load_checked_data(case_config(case, 10, 10, 1.0))
    share = SAMPLES_PER_PARTY / data.spec.train_size
    FederatedRun(case_config(case, 10, 10, 10 * share), data)
    gc.collect()
    return case_config(case, case.n_parties, case.per_round, case.n_parties * share), data


def tree_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def checkpoint(run: FederatedRun, work: Path, archive: PartyArchive) -> tuple[float, int]:
    """Save the run's state after its round k into ``work/checkpoint_k`` through the
    archive; returns the seconds it took and the bytes it wrote."""
    folder = work / f"checkpoint_{run.round}"
    start = time.perf_counter()
    save_run_state(run, folder, archive)
    saved = time.perf_counter() - start
    state_file = (folder / "run_state.pt").stat().st_size
    return saved, load_run_state(folder)["parties"]["bytes"] + state_file


def measure_case(case: Case) -> dict[str, Any]:
    """One case, in this process (module docstring)."""
    config, data = loaded_case(case)
    peak_before = peak_rss_bytes()
    if not reset_peak_rss():
        raise RuntimeError("this kernel cannot reset the peak RSS (/proc/self/clear_refs)")
    resident = rss_bytes()
    start = time.perf_counter()
    run = FederatedRun(config, data)
    setup = time.perf_counter() - start
    seconds, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        archive = PartyArchive(Path(tmp) / "party_states")
        for _ in range(case.rounds):
            rows.append(run.run_round())
            seconds.append(float(rows[-1]["round_seconds"]))
            saved, wrote = checkpoint(run, Path(tmp), archive)
        run_peak = peak_rss_bytes()
        # the run's own copy of its training images (on an accelerator; none on the CPU)
        copied = run.data.rows is None
        ordered = run.train_x.numel() * run.train_x.element_size() if copied else 0
        timed = seconds[1:]
        return {
            "method": case.method,
            "n_parties": case.n_parties,
            "per_round": case.per_round,
            "rounds": case.rounds,
            "party_memory_mib": case.memory_mib,
            "path": run.trainer.path,
            "setup_s": setup,
            "round_s": statistics.median(timed),
            "round_s_range": [min(timed), max(timed)],
            "peak_rss_mib": max(peak_before, run_peak) / MIB,
            "run_peak_mib": (run_peak - resident) / MIB,
            "run_data_mib": ordered / MIB,
            "checkpoint_mib": wrote / MIB,
            "checkpoint_s": saved,
            "archive_mib": tree_bytes(Path(tmp) / "party_states") / MIB,
            "spilled_mib": run.party_states.spilled_bytes / MIB,
            "last_row": rows[-1],
        }


def run_until_killed(case: Case, work: Path) -> None:
    """Run the case with its checkpoints in ``work``, and SIGKILL this process halfway
    through the last round (the time of the rounds before it)."""
    config, data = loaded_case(case)
    run = FederatedRun(config, data)
    archive = PartyArchive(work / "party_states")
    seconds = []
    for _ in range(case.rounds - 1):
        seconds.append(float(run.run_round()["round_seconds"]))
        checkpoint(run, work, archive)
    delay = statistics.median(seconds[1:] or seconds) / 2
    threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
    run.run_round()
    time.sleep(3600)  # a round shorter than the delay: the kill still comes first


def resume_after_kill(case: Case, work: Path) -> dict[str, Any]:
    """A fresh run restored from the last checkpoint in ``work``: its next round's row."""
    config, data = loaded_case(case)
    run = FederatedRun(config, data)
    run.load_state_dict(
        load_run_state(work / f"checkpoint_{case.rounds - 1}"), PartyArchive(work / "party_states")
    )
    return run.run_round()


def alternate(method: str, per_round: int, args: argparse.Namespace) -> dict[str, Any]:
    """Round time against N side by side: one run per N in this process, their rounds in
    turn (the order reversed every round), so that the machine's drift (tens of percent
    between minutes on a shared machine) falls on every N alike.  Per N: the median of
    ``round_seconds`` over the rounds after the first, and the ratio of each round's to
    the same round's at the smallest N, its median and quartiles."""
    parties = sorted(args.parties)
    first = Case(method, parties[0], per_round, args.rounds, args.party_memory_mib, args.stand_in)
    _, data = loaded_case(first)
    share = SAMPLES_PER_PARTY / data.spec.train_size
    runs, refused = {}, {}
    for n in parties:
        try:
            runs[n] = FederatedRun(case_config(first, n, per_round, n * share), data)
        except ConfigError as error:  # the party-memory check, say: that N is left out
            refused[n] = str(error)
    parties = list(runs)
    seconds: dict[int, list[float]] = {n: [] for n in parties}
    for k in range(args.rounds):
        for n in parties if k % 2 == 0 else parties[::-1]:
            seconds[n].append(float(runs[n].run_round()["round_seconds"]))
    timed = {n: seconds[n][1:] for n in parties}
    ratios = {n: [a / b for a, b in zip(timed[n], timed[parties[0]])] for n in parties}
    return {
        "method": method,
        "per_round": per_round,
        "rounds": args.rounds,
        "party_memory_mib": args.party_memory_mib,
        "round_s": {n: statistics.median(timed[n]) for n in parties},
        "ratio": {n: statistics.median(ratios[n]) for n in parties},
        "ratio_quartiles": {n: statistics.quantiles(ratios[n], n=4)[::2] for n in parties},
        "refused": refused,
    }


def alternate_table(results: list[dict[str, Any]]) -> str:
    """The side-by-side results as a Markdown table."""
    lines = [
        "| method | a round | N | s/round | ratio to the smallest N: median (quartiles) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        for n, seconds in r["round_s"].items():
            low, high = r["ratio_quartiles"][n]
            lines.append(
                f"| {r['method']} | {r['per_round']:,} | {int(n):,} | {seconds:.3f} | "
                f"{r['ratio'][n]:.3f} ({low:.3f}–{high:.3f}) |"
            )
        for n, reason in r["refused"].items():
            lines.append(f"| {r['method']} | {r['per_round']:,} | {int(n):,} | refused: {reason} |")
    return "\n".join(lines)


def same_row(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two rows equal in every value but their timings (NaN equal to NaN)."""

    def value(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v

    keep = [k for k in a if "second" not in k]
    return keep == [k for k in b if "second" not in k] and all(
        value(a[k]) == value(b[k]) for k in keep
    )


def in_process(case: Case, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "benchmarks.scale", *case.argv(), *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


def last_line(out: subprocess.CompletedProcess[str]) -> str:
    line = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no message"
    return line.removeprefix("federated.params.ConfigError: ")


def run_case(case: Case) -> dict[str, Any]:
    """One case in a fresh process, and for SCAFFOLD the kill and the resume in two
    more; a case the run refuses (the party-memory check, say) comes back as
    ``refused``: its one-line reason."""
    out = in_process(case)
    if out.returncode != 0:
        return {"method": case.method, "n_parties": case.n_parties,
                "per_round": case.per_round, "refused": last_line(out)}  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    last = result.pop("last_row")
    if case.method == "scaffold":
        with tempfile.TemporaryDirectory() as work:
            killed = in_process(case, "--kill-in-last-round", work)
            resumed = in_process(case, "--resume-from", work)
            if killed.returncode != -signal.SIGKILL or resumed.returncode != 0:
                raise RuntimeError(
                    f"{case}: the kill ended {killed.returncode} ({last_line(killed)}), "
                    f"the resume {resumed.returncode} ({last_line(resumed)})"
                )
            result["resume_exact"] = same_row(json.loads(resumed.stdout.splitlines()[-1]), last)
    return result


def table(results: list[dict[str, Any]]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| method | N | a round | path | set-up s | s/round (least–greatest) | peak RSS MiB | "
        "run's peak MiB | of it images | checkpoint MiB | checkpoint s | archive MiB | "
        "spilled MiB | resume exact after a kill |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        head = f"| {r['method']} | {r['n_parties']:,} | {r['per_round']:,} |"
        if "refused" in r:
            lines.append(f"{head} refused: {r['refused']} |")
            continue
        exact = {True: "yes", False: "**no**"}.get(r.get("resume_exact"), "")
        least, greatest = r["round_s_range"]
        lines.append(
            f"{head} {r['path']} | {r['setup_s']:.2f} | {r['round_s']:.3f} ({least:.3f}–"
            f"{greatest:.3f}) | {r['peak_rss_mib']:.0f} | {r['run_peak_mib']:.0f} | "
            f"{r['run_data_mib']:.0f} | {r['checkpoint_mib']:.2f} | {r['checkpoint_s']:.3f} | "
            f"{r['archive_mib']:.1f} | {r['spilled_mib']:.0f} | {exact} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parties", type=int, nargs="+", default=list(PARTIES))
    parser.add_argument("--per-round", type=int, nargs="+", default=list(PER_ROUND))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--rounds", type=int, default=6, help="rounds per case (>= 3)")
    parser.add_argument("--party-memory-mib", type=int, help="the runs' party_memory_mib")
    parser.add_argument(
        "--stand-in", type=Path, default=STAND_IN,
        help="the FEMNIST-shaped stand-in's folder (built there when missing)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--alternate", action="store_true",
        help="round time only: every N in one process per method and rate, rounds in turn",
    )  # fmt: skip
    parser.add_argument("--case", nargs=3, metavar=("METHOD", "N", "K"), help=argparse.SUPPRESS)
    parser.add_argument("--kill-in-last-round", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--resume-from", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error(f"--rounds {args.rounds}: at least 3 (a warm-up, a checkpoint to resume)")
    if args.case:
        method, n_parties, per_round = args.case[0], int(args.case[1]), int(args.case[2])
        case = Case(method, n_parties, per_round, args.rounds, args.party_memory_mib, args.stand_in)
        if args.kill_in_last_round:
            run_until_killed(case, args.kill_in_last_round)
        elif args.resume_from:
            print(json.dumps(resume_after_kill(case, args.resume_from)))
        else:
            print(json.dumps(measure_case(case)))
        return
    build_stand_in(args.stand_in, STAND_IN_WRITERS)
    if args.alternate:
        compared = []
        for per_round in args.per_round:
            for method in args.methods:
                compared.append(alternate(method, per_round, args))
                print(json.dumps(compared[-1]), flush=True)
        print(f"machine: {cpu_model()}")
        print(alternate_table(compared))
        if args.out:
            record = {"machine": cpu_model(), "alternate": compared}
            args.out.write_text(json.dumps(record, indent=1))
        return
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
