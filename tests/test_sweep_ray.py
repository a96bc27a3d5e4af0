"""The study platform end to end on a real local Ray (no mocks): each test runs
``python -m study.sweep`` as a user would and reads what it wrote.

Accuracies are compared with the same configs run in-process by ``run_rounds``: on CPU
with one thread a sweep's trials must reproduce them exactly, also after a failure.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from federated.config.run_config import RunConfig
from federated.contract.results import PARTY_STATES
from federated.engine.round_loop import run_rounds
from study.plan import run_config_fields
from study.tune.ray_head import TRIALS_AT_THE_SWEEPS_PRIORITY
from tests.conftest_analysis import (
    DRILL_MUS,
    KILLED_ROUNDS,
    OPTUNA_SEARCH_ROUNDS,
    OPTUNA_SEARCH_TRIALS,
    wait_until,
)

pytestmark = pytest.mark.slow


def sweep(
    storage: Path,
    *args: str,
    timeout: int = 600,
    env: dict[str, str] | None = None,
    exit_codes: tuple[int, ...] = (0, 130),
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "study.sweep", *args, "--storage-path", str(storage), "--quiet"]
    full_env = None if env is None else {**os.environ, **env}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    assert proc.returncode in exit_codes, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def sweep_dirs(storage: Path) -> list[Path]:
    return sorted(p for p in storage.iterdir() if (p / "fedsweep_sweep.json").is_file())


def trial_dirs(sweep_dir: Path) -> list[Path]:
    return sorted(p for p in sweep_dir.iterdir() if (p / "params.json").is_file())


def raw_rows(trial_dir: Path) -> list[dict]:
    path = trial_dir / "result.json"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line still being written
            break
    return rows


def rounds(trial_dir: Path) -> dict[int, dict]:
    """One row per round, the last occurrence winning (a restore may repeat rounds)."""
    return {row["round"]: row for row in raw_rows(trial_dir)}


def params(trial_dir: Path) -> dict:
    return json.loads((trial_dir / "params.json").read_text())


def reference_accuracies(trial_dir: Path, **changes) -> list[float]:
    fields = run_config_fields(params(trial_dir))
    fields["device"] = "cpu"  # the trials ran on CPU (no GPU requested), also on a GPU machine
    fields.update(changes)
    return [row["test_acc"] for row in run_rounds(RunConfig.from_dict(fields))]


def manifest(sweep_dir: Path) -> dict:
    return json.loads((sweep_dir / "fedsweep_sweep.json").read_text())


def test_smoke_sweep_reports_every_round_and_leaves_what_analysis_needs(moon_mu_smoke):
    # `moon_mu --budget smoke`, run once per session (tests/conftest_analysis.py), which
    # the analysis tests read too; (--dashboard, which keeps the driver up until Ctrl-C:
    # tests/test_dashboards.py)
    proc, sweep_dir = moon_mu_smoke, moon_mu_smoke.sweep_dir
    assert manifest(sweep_dir)["status"] == "finished"
    assert manifest(sweep_dir)["study"] == "moon_mu"
    trials = trial_dirs(sweep_dir)
    assert len(trials) == 5
    assert sorted(params(t)["mu"] for t in trials) == [0.0, 0.1, 1.0, 5.0, 10.0]
    for trial in trials:
        assert sorted(rounds(trial)) == [1, 2]
        assert list(trial.glob("events.out.tfevents.*")), "TensorBoard events for every trial"
        config = params(trial)
        assert config["algorithm"] == "moon" and config["rounds"] == 2 and config["threads"] == 1
        assert config["point"] == f"mu={config['mu']}"
        # per-party outcomes: the row's summary and the trial's parties.csv (10 parties)
        assert 0 <= rounds(trial)[2]["party_acc_worst10"] <= rounds(trial)[2]["party_acc_mean"]
        assert len((trial / "parties.csv").read_text().splitlines()) == 1 + 2 * 10
    partitions = json.loads((sweep_dir / "partitions.json").read_text())
    assert len(partitions) == 1 and len(partitions[0]["class_counts"]) == 10
    assert sum(map(sum, partitions[0]["class_counts"])) == 3000  # 5% of 60,000
    assert "report: python -m analysis.report" in proc.stdout


def test_injected_failure_resumes_from_checkpoint_with_identical_accuracies(tmp_path):
    sweep(
        tmp_path,
        *("--vary", "tau=0.1,0.5", "--set", "algorithm=moon"),  # 2 trials: the 2 slots, one wave
        "--budget",
        "smoke",
        "--set",
        "rounds=4",
        "--set",
        "checkpoint_every=1",
        "--set",
        "fail_at_round=3",
        "--set",
        "data_fraction=0.02",  # what is asserted holds for any data: the least that trains
        "--set",
        "test_fraction=0.05",
        "--max-failures",
        "1",
    )
    (sweep_dir,) = sweep_dirs(tmp_path)
    for trial in trial_dirs(sweep_dir):
        rows = raw_rows(trial)
        assert [r["round"] for r in rows] == [1, 2, 3, 4]
        # round 3 was reported by the restarted attempt, restored at round 2
        assert rows[2]["iterations_since_restore"] == 1 and rows[2]["training_iteration"] == 3
        got = [r["test_acc"] for r in rows]
        assert got == reference_accuracies(trial, fail_at_round=None)
    assert all(t["status"] == "TERMINATED" for t in manifest(sweep_dir)["trials"].values())


def test_without_retries_a_failed_trial_errors_and_the_others_finish(all_errored_sweep):
    # 2 trials (MOON's tau), each failing after round 1, --max-failures 0: one sweep for
    # this test and tests/test_local_ray_network.py's (tests/conftest_analysis.py)
    proc, sweep_dir = all_errored_sweep, all_errored_sweep.sweep_dir
    assert proc.returncode == 4  # every trial errored: its own exit status
    assert "error: all 2 trials errored" in proc.stderr
    statuses = [t["status"] for t in manifest(sweep_dir)["trials"].values()]
    assert statuses == ["ERROR"] * 2
    assert all((t / "error.txt").is_file() for t in trial_dirs(sweep_dir))
    assert all(
        "injected failure after round 1" in t["error"]
        for t in manifest(sweep_dir)["trials"].values()
    )


def test_hard_killed_sweep_resumes_completely_without_duplicates(killed_sweep):
    """Three of moon_mu's trials one at a time, killed with SIGKILL (the driver and
    everything it started) once one trial finished and the next checkpointed, then
    ``--resume``d: the SIGKILL drill of tests/conftest_analysis.py.  Each trial's rows
    against an uninterrupted run: tests/test_fault_drill.py's reading of the same drill."""
    sweep_dir, last = killed_sweep.sweep_dir, KILLED_ROUNDS
    assert killed_sweep.rows_of_finished
    proc = killed_sweep.resumed
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resuming" in proc.stdout
    assert manifest(sweep_dir)["status"] == "finished"
    trials = trial_dirs(sweep_dir)
    assert len(trials) == len(DRILL_MUS), "no trial was duplicated"
    assert sorted(params(t)["mu"] for t in trials) == list(DRILL_MUS)
    for trial in trials:
        assert sorted(rounds(trial)) == list(range(1, last + 1))
    for name, count in killed_sweep.rows_of_finished.items():
        assert len(raw_rows(sweep_dir / name)) == count, f"{name} finished before: not re-run"


def test_optuna_with_asha_and_diverging_trials_completes_and_reruns_the_best(
    optuna_search, tmp_path
):
    """The session's Optuna search with ASHA and ``--rerun-best 2`` (tests/conftest_analysis.py),
    one trial at a time, some of whose learning rates diverge: the search completes; Optuna
    is told COMPLETE (the final val_acc) for trials that ran all their rounds, PRUNED for
    those ASHA stopped, FAIL (never a value) for diverged ones; the rerun ranks complete
    trials only; the report names the diverged trials."""
    proc, search_dir = optuna_search, optuna_search.sweep_dir
    best_dir = search_dir.parent / f"{search_dir.name}-best"
    assert manifest(search_dir)["status"] == "finished"
    trials = trial_dirs(search_dir)
    assert len(trials) == OPTUNA_SEARCH_TRIALS
    mus = [params(t)["mu"] for t in trials]
    assert len(set(mus)) == OPTUNA_SEARCH_TRIALS and all(0.01 <= m <= 10 for m in mus)
    found = {name: t["outcome"] for name, t in manifest(search_dir)["trials"].items()}
    # ASHA stopped some, some diverged, some ran every round (which of each may vary)
    assert set(found.values()) == {"completed", "stopped", "diverged"}, found
    by_outcome = {o: [t for t in trials if found[t.name] == o] for o in set(found.values())}
    for trial in by_outcome["stopped"]:
        assert len(rounds(trial)) < OPTUNA_SEARCH_ROUNDS
    for trial in trials:
        last = rounds(trial)[max(rounds(trial))]
        entry = manifest(search_dir)["trials"][trial.name]
        if found[trial.name] == "diverged":
            # the ranking metric's key is in the diverged row, without a value
            assert last["diverged"] and math.isnan(last["val_acc"])
            assert entry["last_good_round"] == last["round"] - 1
        elif found[trial.name] == "completed":
            assert entry["last_good_round"] == OPTUNA_SEARCH_ROUNDS
            assert math.isfinite(last["val_acc"])
    assert "diverged" in proc.stdout  # the end-of-sweep summary names it
    # the search selected on validation: every trial held out val_fraction=0.1 (the
    # searches' default, said on stderr) and Optuna's values are the final val_acc
    assert {params(t)["val_fraction"] for t in trials} == {0.1}
    assert "selects on validation" in proc.stderr
    assert manifest(search_dir)["metric"] == "val_acc"
    study = optuna.load_study(
        study_name=search_dir.name, storage=f"sqlite:///{search_dir / 'optuna.db'}"
    )
    finals = sorted(rounds(t)[OPTUNA_SEARCH_ROUNDS]["val_acc"] for t in by_outcome["completed"])
    state = optuna.trial.TrialState
    values = sorted(t.value for t in study.trials if t.state == state.COMPLETE)
    assert values == pytest.approx(finals)
    # stopped: PRUNED (Optuna keeps their last intermediate value as its own record);
    # diverged: FAIL, never a value
    expected = {"completed": "COMPLETE", "stopped": "PRUNED", "diverged": "FAIL"}
    assert sorted(t.state.name for t in study.trials) == sorted(expected[o] for o in found.values())
    assert all(t.value is None for t in study.trials if t.state == state.FAIL)
    # the rerun: the best complete point on fresh seeds, none of the search's, ranked on
    # the complete trials only
    reruns = trial_dirs(best_dir)
    assert sorted(params(t)["seed"] for t in reruns) == [10_000, 10_001]
    assert len({params(t)["mu"] for t in reruns}) == 1
    assert all(params(t)["lr"] < 2 for t in reruns)
    assert all(sorted(rounds(t)) == list(range(1, OPTUNA_SEARCH_ROUNDS + 1)) for t in reruns)
    selection = manifest(best_dir)["selection"]
    assert manifest(best_dir)["rerun_of"] == search_dir.name
    assert selection["metric"] == "val_acc" and selection["search_seeds"] == [0]
    assert selection["compared_trials"] == len(by_outcome["completed"])
    assert selection["stopped_early"] == len(by_outcome["stopped"])
    assert "re-running the configuration chosen on val_acc" in proc.stdout
    # the report: validation-selected, test-reported, the optimism and the noise table,
    # the diverged trials named
    from analysis.report import main as report

    out = tmp_path / "report"
    assert report([str(search_dir), str(best_dir), "--out", str(out), "--no-pdf"]) == 0
    text = (out / "report.md").read_text()
    assert f"## Selection: {search_dir.name}" in text
    assert "Trials ranked by **val_acc**" in text and "optimism (search − rerun)" in text
    assert "| k | choice changed (%)" in text
    assert "diverged" in text


class TwoNodes:
    """A Ray cluster of two 1-CPU nodes made with ``ray.cluster_utils``: a head and a
    worker node, a new worker added whenever the last one was removed."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        self.worker = None

    def with_worker(self):
        """The cluster's live worker node (one is added if there is none)."""
        if self.worker is None:
            self.worker = self.cluster.add_node(num_cpus=1)
            self.cluster.wait_for_nodes()
        return self.worker

    def remove_worker(self) -> None:
        self.cluster.remove_node(self.worker)
        self.worker = None


@pytest.fixture(scope="module")
def two_nodes():
    """The two-node cluster a sweep joins with ``--address`` (its own Ray job), shut down
    with the module."""
    # a user's cluster runs at its owner's settings; this one, as a sweep's own local Ray
    # does (study/tune/ray_head.py), runs its trials at the test's priority, not Ray's
    # niceness 15 for workers, which starved them beside the suite's other work (the
    # drill did not end within 600 s on a loaded machine)
    # (every node's raylet reads it as it starts, the worker nodes added later too)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in TRIALS_AT_THE_SWEEPS_PRIORITY.items():
            patch.setenv(name, value)
        nodes = TwoNodes()
        try:
            yield nodes
        finally:
            nodes.cluster.shutdown()


def test_a_lost_worker_node_restarts_its_trial_from_its_checkpoint_on_the_survivor(
    tmp_path, two_nodes
):
    """Two nodes, one trial each (a sweep joined with ``--address`` runs trials on both
    nodes); the worker node is removed while its trial runs: the trial restarts from its
    last checkpoint on the head node, its rows (one per round, the last occurrence of a
    repeated round winning) equal an uninterrupted run's, no trial is lost or duplicated
    and the manifest says finished.  SCAFFOLD, half the parties a round: each party's
    control variate crosses the restart through the trial's archive in Tune's storage
    (federated/engine/party_store.py), never a path on the lost node."""
    args = [
        *("--vary", "lr=0.02,0.05", "--set", "algorithm=scaffold", "--budget", "smoke"),
        *("--set", "sample_fraction=0.5"),
        # the smoke budget's data, not less, and 16 rounds: a smoke round takes about a
        # quarter of a second, and a narrower window was once passed unseen (timed out)
        *("--set", "rounds=16", "--set", "checkpoint_every=1", "--name", "lost"),
    ]
    worker = two_nodes.with_worker()
    cmd = [
        sys.executable, "-m", "study.sweep", *args, "--address", two_nodes.cluster.address,
        "--storage-path", str(tmp_path), "--quiet",
    ]  # fmt: skip
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sweep_dir = tmp_path / "lost"
    try:

        def worker_trial_mid_run() -> bool:
            trials = trial_dirs(sweep_dir) if sweep_dir.is_dir() else []
            for trial in trials:
                rows = raw_rows(trial)
                if 3 <= len(rows) < 16 and rows[-1]["node_id"] == worker.node_id:
                    return True
            return False

        wait_until(worker_trial_mid_run, timeout=400)
        two_nodes.remove_worker()
        output, _ = driver.communicate(timeout=600)
        assert driver.returncode == 0, output[-3000:]
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert manifest(sweep_dir)["status"] == "finished"
    trials = trial_dirs(sweep_dir)
    assert len(trials) == 2, "no trial lost or duplicated"
    nodes = {row["node_id"] for t in trials for row in raw_rows(t)}
    assert worker.node_id in nodes and len(nodes) == 2
    for trial in trials:
        assert sorted(rounds(trial)) == list(range(1, 17))
        accuracies = [rounds(trial)[r]["test_acc"] for r in range(1, 17)]
        assert accuracies == reference_accuracies(trial)
        assert manifest(sweep_dir)["trials"][trial.name]["outcome"] == "completed"
        assert list((trial / PARTY_STATES).rglob("*.pt")), "the parties' states in storage"
