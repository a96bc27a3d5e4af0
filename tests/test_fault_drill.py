"""Fault drill on a real local Ray: a sweep killed with SIGKILL and one interrupted with
SIGINT (Ctrl-C: the signal goes to the whole process group, as a terminal sends it),
each resumed with ``--resume``.  The SIGINT drill is an ad hoc sweep (``--vary``,
``--set``) on an own image folder (``--dataset folder:...``, parties by folder), resumed
by running the command it printed, as printed.  The manifest and the report say ``interrupted`` in
between and ``finished`` at the end, and every trial's per-round accuracies equal an
uninterrupted run's (the same config run in-process, as tests/test_sweep_ray.py does).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis.reading.loading import load_results
from federated.cli import exit_codes
from federated.config.data_checks import with_data_checked
from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun
from federated.engine.run_files import RunFiles
from federated.export_tree import export_parties as export_fmnist_parties
from study.plan import run_config_fields
from tests.conftest_analysis import DRILL_MUS, KILLED_ROUNDS, wait_until
from tests.listening_sockets import is_loopback, listening_sockets
from tests.test_sweep_ray import manifest, params, rounds, trial_dirs

pytestmark = pytest.mark.slow

ROUNDS = 8  # on 2% of the data a round is a tenth of a second: a window of 7 to stop in
ARGS = [
    "--vary",
    f"mu={','.join(map(str, DRILL_MUS))}",
    "--set",
    "algorithm=moon",
    "--set",
    "partition=natural",
    "--set",
    "data_fraction=1",  # the folder is already 2% of the training set
    "--set",
    "test_fraction=1",
    "--budget",
    "smoke",
    "--set",
    f"rounds={ROUNDS}",
    "--set",
    "checkpoint_every=1",
    # Fig. 2's representations before and after any checkpoint a trial resumes from
    "--set",
    "representations_at=2,7",
    "--max-concurrent",
    "1",
    "--quiet",
]
# The SIGINT drill's trials also run DP-FedAvg with adaptive clipping: the accountant's
# count, the clip norm that follows the updates and the noise stream cross the
# checkpoint, and each round's epsilon and clipped share must come out as uninterrupted.
PRIVATE = [
    "--set",
    "dp_noise_multiplier=0.1",
    "--set",
    "dp_clipping=adaptive",
]


def own_folder(fmnist, root: Path) -> str:
    """An own image folder: 5 parties' folders of real Fashion-MNIST images (2% of the
    training set) and 300 test images."""
    export_fmnist_parties(fmnist, root, n_parties=5, data_fraction=0.02, n_test=300)
    return f"folder:{root}"


def start(storage: Path, name: str, dataset: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "study.sweep", *ARGS, *PRIVATE, "--dataset", dataset]
    cmd += ["--name", name]
    return subprocess.Popen(
        [*cmd, "--storage-path", str(storage)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the signal reaches all of it
    )


def wait_until_one_done_and_one_started(sweep_dir: Path, timeout: float = 300) -> None:
    def one_done_one_started() -> bool:
        trials = trial_dirs(sweep_dir) if sweep_dir.is_dir() else []
        done = [t for t in trials if len(rounds(t)) == ROUNDS]
        started = [t for t in trials if 1 <= len(rounds(t)) < ROUNDS]
        return bool(done) and bool(started)

    wait_until(one_done_one_started, timeout)


# what each round of a resumed trial must equal, beside test_acc (the DP columns where the
# trial ran DP-FedAvg)
EXACT_KEYS = ("test_acc", "train_loss", "dp_epsilon", "dp_round_clip_norm", "dp_clipped_fraction")


def uninterrupted(trial_dir: Path, folder: Path) -> tuple[list[dict], bytes]:
    """The trial's config run in-process without a break: its per-round values of
    :data:`EXACT_KEYS` and the ``parties.csv`` it writes round by round (as a trial does;
    its representations too, into ``folder``)."""
    fields = run_config_fields(params(trial_dir))
    fields["device"] = "cpu"  # the trials ran on CPU (no GPU requested), also on a GPU machine
    run = FederatedRun(with_data_checked(RunConfig.from_dict(fields)))
    files = RunFiles.in_folder(folder)
    values = []
    while not run.finished:
        row = run.run_round()
        values.append({k: row[k] for k in EXACT_KEYS if k in row})
        files.record(run)
    return values, (folder / "parties.csv").read_bytes()


def assert_same_representations(trial: Path, folder: Path) -> None:
    """Fig. 2's files of a trial equal an uninterrupted run's: the same rounds, each
    array equal (an ``.npz`` is a zip whose entries carry their write time, so arrays
    are compared, not bytes)."""
    want = sorted(p.name for p in (folder / "representations").glob("*.npz"))
    got = sorted(p.name for p in (trial / "representations").glob("*.npz"))
    assert got == want, trial.name
    if params(trial).get("representations_at"):
        assert want == ["round_0002.npz", "round_0007.npz"]  # the drill did compare some
    for name in want:
        with (
            np.load(trial / "representations" / name) as a,
            np.load(folder / "representations" / name) as b,
        ):
            assert sorted(a.files) == sorted(b.files)
            for key in a.files:
                assert np.array_equal(a[key], b[key]), (trial.name, name, key)


def assert_finished_like_uninterrupted(
    sweep_dir: Path, last: int = ROUNDS, private: bool = False
) -> None:
    """Every trial of the resumed sweep holds what an uninterrupted run of its config
    gives: each round's :data:`EXACT_KEYS` (with ``private``, the DP columns among them),
    and ``parties.csv`` byte for byte (a resumed trial once kept only the rounds after
    its checkpoint)."""
    assert manifest(sweep_dir)["status"] == "finished"
    trials = trial_dirs(sweep_dir)
    assert len(trials) == len(DRILL_MUS)
    for trial in trials:
        assert sorted(rounds(trial)) == list(range(1, last + 1))
        folder = sweep_dir.parent / f"uninterrupted-{trial.name}"
        folder.mkdir()
        want_values, want_parties = uninterrupted(trial, folder)
        values = [{k: rounds(trial)[r][k] for k in want_values[0]} for r in range(1, last + 1)]
        assert values == want_values, trial.name
        assert ("dp_epsilon" in want_values[0]) == private
        assert (trial / "parties.csv").read_bytes() == want_parties, trial.name
        assert_same_representations(trial, folder)
    results = load_results(sweep_dir)
    assert results.sweeps[0].status == "finished"
    assert set(results.trials["status"]) == {"completed"}


def run_printed(command: str) -> subprocess.CompletedProcess:
    """The resume command a sweep printed, run as printed (``python`` is this venv's)."""
    argv = shlex.split(command)
    assert argv[0] == "python"
    return subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=600)


def test_sigint_then_resume(fmnist, tmp_path):
    """Ctrl-C once a trial finished and the next reports, then the printed resume
    command.  Just before the signal, with GCS, raylet, agents and a trial worker all up,
    every socket the sweep's local Ray listens on is on loopback (docs/clusters.md)."""
    driver = start(tmp_path, "ctrl-c", own_folder(fmnist, tmp_path / "own-folder"))
    sweep_dir = tmp_path / "ctrl-c"
    try:
        wait_until_one_done_and_one_started(sweep_dir)
        sockets = listening_sockets(driver.pid)
        os.killpg(driver.pid, signal.SIGINT)
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    print("listening sockets of a local sweep:", *sorted(sockets), sep="\n  ")
    names = {name for name, _, _ in sockets}
    assert {"gcs_server", "raylet"} <= names  # the check saw Ray's processes
    assert len(sockets) >= 5
    assert all(is_loopback(ip.removeprefix("::ffff:")) for _, ip, _ in sockets), sockets
    assert driver.returncode == exit_codes.INTERRUPTED, out[-2000:] + err[-2000:]
    assert "sweep finished" not in out
    # the short form: the manifest holds the study, its axes, --set and --dataset
    command = (
        f"python -m study.sweep --resume --name ctrl-c --storage-path {tmp_path} "
        "--max-concurrent 1 --quiet"
    )
    assert f"continue it with: {command}\n" in err
    written = manifest(sweep_dir)
    assert written["status"] == "interrupted"
    for trial in trial_dirs(sweep_dir):  # each trial's recorded state matches its files
        finished = len(rounds(trial)) == ROUNDS
        assert written["trials"][trial.name]["status"] == (
            "TERMINATED" if finished else "INTERRUPTED"
        )
    unfinished = [t for t in written["trials"].values() if t["status"] == "INTERRUPTED"]
    assert unfinished or written["not_started"] > 0  # the sweep really was cut short
    results = load_results(sweep_dir)
    assert results.sweeps[0].status == "interrupted"
    # a trial that had its actor (reused: no start-up) but no finished round when Ctrl-C
    # came reads "not started", as the results contract says of a trial without rounds
    assert set(results.trials["status"]) <= {"completed", "interrupted", "not started"}
    if written["not_started"]:  # the report names the trials that never started
        expected = f"{written['not_started']} trial(s) never started"
        assert any(expected in p for p in results.problems)

    proc = run_printed(command)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # no Tune ERROR line nor a traceback reaches the terminal during a resume
    assert "ERROR" not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert_finished_like_uninterrupted(sweep_dir, private=True)


def test_sigkill_then_resume(killed_sweep):
    """The SIGKILL drill of tests/conftest_analysis.py (moon_mu's 5 trials one at a time,
    killed once one finished and the next checkpointed), which tests/test_sweep_ray.py
    reads too: the folder between the kill and the resume, then the resumed sweep."""
    written = killed_sweep.manifest_after_kill
    assert written["status"] == "running"  # a killed driver cannot write...
    results = killed_sweep.results_after_kill  # ...but readers see that it is gone
    assert results.sweeps[0].status == "interrupted"
    assert "interrupted" in set(results.trials["status"])
    assert any("driver process is gone" in p for p in results.problems)

    proc = killed_sweep.resumed
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert_finished_like_uninterrupted(killed_sweep.sweep_dir, KILLED_ROUNDS, private=True)
