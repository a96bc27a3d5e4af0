"""Monitoring a sweep in the browser (docs/dashboards.md), read through each tool's own API.

One tiny Optuna sweep (synthetic data, smoke budget, two trials one at a time) with
``--dashboard --track mlflow --track wandb``, interrupted with Ctrl-C while a trial runs
and resumed, with a second, unwatched sweep run beside the resumed one:

* Ray's state API (``ray.util.state.list_actors``, what the dashboard's Actors page
  shows): while the sweep runs, the running trial's actor is named by its point and
  seed; after the resumed sweep every trial's actor is, with its state;
* ``--dashboard`` keeps the dashboard up after the sweep until Ctrl-C, then exits 0, and
  once the sweep is over its Jobs API reports the sweep's job SUCCEEDED, not RUNNING;
* two sweeps side by side, each with its own local Ray: nothing failed to bind a port,
  the unwatched sweep prints no ERROR or warning line and never reaches for the
  dashboard's port 8265 nor Ray's fixed agent port 52365 nor its client server's 10001
  (study/local_ray.py gives every Ray port of a local sweep a free one); both finish;
* MLflow's client: the sweep's run is KILLED after Ctrl-C and FINISHED after
  ``--resume``; the trials' runs are named by point and seed, tagged with the study,
  sweep, budget and seed, none left RUNNING; the report lands in the sweep's run;
* MLflow's metric histories, TensorBoard's event files and W&B's offline runs hold every
  round of every trial, each value the trial's row, through the interruption and the
  resume;
* the live view: a summary line per update, no Tune status table, a bounded length;
* the Optuna storage: the objective is named after the ranking metric and every Optuna
  trial carries its Tune trial id and results folder.

The fast tests hold the MLflow outcome rules on a real MLflow store, and the wait for
Ctrl-C on the real signal.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from analysis.report import main as report_main
from federated.cli import exit_codes
from study.dashboard import keep_dashboard_up
from study.sweep import SweepStopError as Stop
from study.tracking import (
    FAILED,
    FINISHED,
    KILLED,
    RUNNING,
    SWEEP_ROLE_TAG,
    mlflow_sweep_status,
    start_mlflow_sweep,
    tracked_sweep,
)
from tests.listening_sockets import listening_sockets
from tests.test_sweep_ray import rounds
from tests.test_tracking import LIVE_VIEW_LINES_PER_TRIAL, ROW_KEYS, read_wandb_records

SWEEP = [
    "--vary", "mu=loguniform:0.01:10", "--set", "algorithm=moon", "--search", "optuna",
    "--num-samples", "2", "--budget", "smoke", "--dataset", "synthetic", "--set", "rounds=8",
    "--max-concurrent", "1", "--track", "mlflow", "--track", "wandb", "--dashboard",
    "--name", "watched",
]  # fmt: skip
# The unwatched sweep beside the resumed one: one trial, one round.
OTHER = [
    "--vary", "mu=0", "--set", "algorithm=moon", "--budget", "smoke", "--dataset", "synthetic",
    "--set", "rounds=1", "--max-concurrent", "1", "--quiet", "--name", "other",
]  # fmt: skip
# the dashboard's, Ray's dashboard agent's and Ray's client server's defaults
FIXED_PORTS = {8265, 52365, 10001}

# Ray's state API, run in a process of its own: the client must be told that the
# cluster wants its token (~/.ray/auth_token), which Ray reads when it starts.
LIST_ACTORS = """
import json, sys
from ray.util.state import list_actors
actors = list_actors(address=sys.argv[1], detail=True, limit=1000, raise_on_missing_output=False)
print(json.dumps([[a.class_name, a.repr_name, a.state] for a in actors]))
"""


def trial_actors(url: str) -> list[tuple[str, str]]:
    """(repr, state) of every trial actor of the cluster the dashboard at ``url`` serves."""
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    proc = subprocess.run(
        [sys.executable, "-c", LIST_ACTORS, url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    actors = json.loads(proc.stdout.strip().splitlines()[-1])
    return [(repr_name, state) for cls, repr_name, state in actors if "Trainable" in cls]


def wait_for(
    predicate, driver: subprocess.Popen, log: Path, timeout: float, what: str, every: float = 1.0
):
    """``predicate()``'s first true value, polled every ``every`` seconds while the
    sweep's driver runs."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        if driver.poll() is not None:
            ended = f"the sweep ended ({driver.returncode})"
            raise AssertionError(f"{ended}: {log.read_text()[-3000:]}")
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def dashboard_url(log: Path) -> str | None:
    for line in log.read_text().splitlines():
        if line.startswith("Ray dashboard: http"):
            return line.split()[2]
    return None


def jobs(url: str) -> list[dict]:
    """The dashboard's Jobs API, authenticated as the web page is (Ray's token)."""
    token = (Path.home() / ".ray" / "auth_token").read_text().strip()
    request = urllib.request.Request(
        f"{url}/api/jobs/", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def warnings_and_errors(text: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if "ERROR" in line or "Failed to bind" in line or "WARN" in line.upper()
    ]


def trial_dirs(sweep_dir: Path) -> list[Path]:
    return sorted(p for p in sweep_dir.iterdir() if (p / "params.json").is_file())


def mlflow_runs(sweep_dir: Path):
    """(the sweep's run, its trials' runs), read with MLflow's client."""
    from mlflow.tracking import MlflowClient

    info = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())["tracking"]["mlflow"]
    client = MlflowClient(info["uri"])
    parent = client.get_run(info["parent_run_id"])
    query = f"tags.`mlflow.parentRunId` = '{info['parent_run_id']}'"
    children = client.search_runs([parent.info.experiment_id], query, max_results=100)
    return parent, children


def tracked_values(sweep_dir: Path, trial: Path, key: str) -> dict[str, dict[int, set[float]]]:
    """What MLflow's client, TensorBoard's event files and W&B's offline runs hold of row
    column ``key`` for ``trial``: per tracker, each logged step's set of values (a round
    logged again after ``--resume``, between its checkpoint and the interruption, holds
    the same value: the rows are an uninterrupted run's)."""
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util.tensor_util import make_ndarray

    info = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())["tracking"]["mlflow"]
    trial_id = json.loads((trial / "result.json").read_text().splitlines()[0])["trial_id"]
    _, children = mlflow_runs(sweep_dir)
    (run,) = [r for r in children if r.data.tags.get("trial_id") == trial_id]
    mlflow: dict[int, set[float]] = {}
    for metric in MlflowClient(info["uri"]).get_metric_history(run.info.run_id, key):
        mlflow.setdefault(metric.step, set()).add(metric.value)
    board: dict[int, set[float]] = {}
    for events in sorted(trial.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(events)).Load():
            for value in event.summary.value:
                if value.tag == f"ray/tune/{key}":
                    # the loader hands a scalar over as a one-element tensor
                    board.setdefault(event.step, set()).add(make_ndarray(value.tensor).item())
    # W&B: the offline runs in the trial's folder (a trial continued after --resume logs
    # into a run of the same id, in a folder of its own)
    wandb: dict[int, set[float]] = {}
    for run_file in sorted(trial.glob("wandb/offline-run-*/run-*.wandb")):
        for record in read_wandb_records(run_file):
            if record.WhichOneof("record_type") == "history":
                items = {
                    i.key or "/".join(i.nested_key): json.loads(i.value_json)
                    for i in record.history.item
                }
                if key in items:
                    wandb.setdefault(items["_step"], set()).add(items[key])
    return {"mlflow": mlflow, "tensorboard": board, "wandb": wandb}


@pytest.mark.slow
def test_every_dashboard_says_which_trial_is_which_through_ctrl_c_and_resume(tmp_path, monkeypatch):
    import optuna

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")  # the sweep's processes inherit it

    sweep_dir = tmp_path / "watched"
    base = [sys.executable, "-m", "study.sweep", *SWEEP, "--storage-path", str(tmp_path)]

    # 1. the sweep runs: the running trial's actor is named by its point and seed
    first_log = tmp_path / "first.log"
    driver = start(base, first_log)
    try:
        url = wait_for(lambda: dashboard_url(first_log), driver, first_log, 180, "its URL")
        assert url.startswith("http://127.0.0.1:")  # loopback only
        assert "TensorBoard" in first_log.read_text()  # where rounds and accuracy are

        def running_trial():
            # the files first: asking Ray's state API is a Python process of its own
            # (about a CPU-second), so it is asked only once a trial has started
            if not list(sweep_dir.glob("*/result.json")):
                return None
            return [r for r, state in trial_actors(url) if state == "ALIVE" and " seed=" in r]

        # a round, which the trial's W&B run must then hold (of 8: a window of 7 to stop in)
        def reported():
            return any(f.read_text().strip() for f in sweep_dir.glob("*/result.json"))

        (alive,) = wait_for(running_trial, driver, first_log, 300, "a running trial")
        wait_for(reported, driver, first_log, 300, "a reported round", every=0.1)
        driver.send_signal(signal.SIGINT)  # Ctrl-C while a trial runs
        assert driver.wait(timeout=180) == exit_codes.INTERRUPTED
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert alive.startswith("mu=") and " seed=0 [" in alive
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    assert manifest["status"] == "interrupted"
    parent, children = mlflow_runs(sweep_dir)
    assert parent.info.status == KILLED
    assert children and all(run.info.status in (FINISHED, KILLED) for run in children)
    assert "stays up" not in first_log.read_text()  # interrupted: no waiting

    # 2. --resume (the command the sweep printed) to the end; the dashboard stays up
    resume = next(
        line.removeprefix("continue it with: ")
        for line in first_log.read_text().splitlines()
        if line.startswith("continue it with: ")
    )
    resume_cmd = [sys.executable, *shlex.split(resume)[1:], "--dashboard"]
    second_log = tmp_path / "second.log"
    other_log = tmp_path / "other.log"
    other_cmd = [sys.executable, "-m", "study.sweep", *OTHER, "--storage-path", str(tmp_path)]
    driver = start(resume_cmd, second_log)
    other = None
    try:
        url = wait_for(lambda: dashboard_url(second_log), driver, second_log, 300, "its URL")
        # a second user's sweep beside the watched one, with a local Ray of its own
        other = start(other_cmd, other_log)
        # while the unwatched sweep's trial reports, every Ray process of it is up
        wait_for(
            lambda: list((tmp_path / "other").glob("*/result.json")),
            other,
            other_log,
            300,
            "the unwatched sweep's first result",
        )
        ports = {port for _, _, port in listening_sockets(other.pid)}
        # a fixed port would be the first sweep's, and fail the second's bind quietly
        first_ports = {port for _, _, port in listening_sockets(driver.pid)} - {8265}
        assert other.wait(timeout=600) == exit_codes.OK, other_log.read_text()[-3000:]
        wait_for(lambda: "stays up" in second_log.read_text(), driver, second_log, 600, "the end")
        listed = jobs(url)
        actors = trial_actors(url)
        driver.send_signal(signal.SIGINT)  # the user is done looking
        assert driver.wait(timeout=120) == exit_codes.OK
    finally:
        for process in (driver, other):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    text = second_log.read_text()
    assert f"the Ray dashboard stays up at {url} until Ctrl-C" in text

    # side by side: no fixed port, nothing failed to bind, the unwatched sweep quiet
    assert not ports & FIXED_PORTS, sorted(ports)
    assert not first_ports & FIXED_PORTS, sorted(first_ports)
    assert not [line for line in text.splitlines() if "Failed to bind" in line], text[-3000:]
    assert not warnings_and_errors(other_log.read_text()), other_log.read_text()[-3000:]
    other_manifest = json.loads((tmp_path / "other" / "fedsweep_sweep.json").read_text())
    assert other_manifest["status"] == "finished"
    # the sweep's driver job (Ray's own jobs aside) ended when the sweep did
    drivers = [job for job in listed if job["type"] == "DRIVER"]
    assert drivers and all(job["status"] == "SUCCEEDED" for job in drivers), listed

    # the live view: a summary line per update, no Tune status table, a bounded length
    lines = text.splitlines()
    summaries = [line for line in lines if line.startswith("watched ") and "2 trials:" in line]
    assert summaries and "2 done, 0 running, 0 pending, 0 errored" in summaries[-1], text
    for log in (first_log, second_log):
        shown = log.read_text().splitlines()
        assert not any("Trial status" in line or "│" in line for line in shown), log.name
        assert len(shown) <= LIVE_VIEW_LINES_PER_TRIAL * 2 + 20, (log.name, len(shown))
    written = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    assert written["status"] == "finished"
    wandb_run = {"project": "fedsweep", "group": "watched", "mode": "offline"}
    assert written["tracking"]["wandb"] == wandb_run

    trials = trial_dirs(sweep_dir)
    assert len(trials) == 2
    params = {t.name: json.loads((t / "params.json").read_text()) for t in trials}
    trial_ids = {
        t.name: json.loads((t / "result.json").read_text().splitlines()[0])["trial_id"]
        for t in trials
    }
    labels = {name: f"{p['point']} seed={p['seed']}" for name, p in params.items()}

    # Ray: the trials that ran in this session (both: the interrupted one continued)
    reprs = {r for r, _ in actors}
    for name in params:
        assert f"{labels[name]} [{trial_ids[name]}]" in reprs, (name, reprs)
    assert all(state == "DEAD" for _, state in actors)  # ended, and still listed

    # MLflow: the sweep's run FINISHED, one run per trial named by point and seed,
    # tagged with the study, sweep, budget and seed, its varied value a parameter
    info = written["tracking"]["mlflow"]
    assert info["uri"] == f"sqlite:///{sweep_dir / 'mlflow.db'}"
    parent, children = mlflow_runs(sweep_dir)
    assert parent.info.status == FINISHED and parent.data.tags[SWEEP_ROLE_TAG] == "sweep"
    assert sorted(run.info.run_name for run in children) == sorted(labels.values())
    assert all(run.info.status == FINISHED for run in children)
    by_trial_id = {run.data.tags["trial_id"]: run for run in children}
    for name, config in params.items():
        run = by_trial_id[trial_ids[name]]
        tags = run.data.tags
        assert (tags["study"], tags["sweep"], tags["budget"]) == (
            written["study"],
            "watched",
            "smoke",
        )
        assert tags["seed"] == str(config["seed"])
        assert run.data.params["mu"] == str(config["mu"])

    # the trackers hold every round of every trial, each value the row's, through the
    # resume (the rows themselves equal an uninterrupted run's: tests/test_fault_drill.py)
    for trial in trials:
        rows = {}
        for line in (trial / "result.json").read_text().splitlines():
            row = json.loads(line)
            rows[row["training_iteration"]] = row["test_acc"]
        assert sorted(rows) == list(range(1, 9))
        for key in ROW_KEYS:  # every number of the rows, each round once (or re-logged)
            want = {step: {float(row[key])} for step, row in rounds(trial).items()}
            assert tracked_values(sweep_dir, trial, key)["mlflow"] == want, key
        logged = tracked_values(sweep_dir, trial, "test_acc")
        assert logged["mlflow"] == {step: {value} for step, value in rows.items()}, trial.name
        assert logged["wandb"] == logged["mlflow"], trial.name
        # each attempt's run is the trial's, in the sweep's group, and closed (an exit
        # record): the one Ctrl-C cut reached the sweep folder after it was closed, not
        # as the header Tune had copied while it was open
        runs = []
        for run_file in trial.glob("wandb/offline-run-*/run-*.wandb"):
            records: dict[str, list] = {}
            for r in read_wandb_records(run_file):
                records.setdefault(r.WhichOneof("record_type"), []).append(r)
            assert {"run", "exit"} <= set(records), (run_file, sorted(records))
            runs += [r.run for r in records["run"]]
        assert runs, trial.name
        for run in runs:
            assert run.run_group == "watched" and {"sweep:watched", "budget:smoke"} <= set(run.tags)
            assert f"seed:{params[trial.name]['seed']}" in run.tags
        # TensorBoard's scalars are 32-bit floats
        want = {step: {float(np.float32(value))} for step, value in rows.items()}
        assert logged["tensorboard"] == want, trial.name

    # the report into the sweep's MLflow run
    out = tmp_path / "report"
    assert report_main([str(sweep_dir), "--out", str(out), "--no-pdf", "--track", "mlflow"]) == 0
    from mlflow.tracking import MlflowClient

    artifacts = MlflowClient(info["uri"]).list_artifacts(info["parent_run_id"], "report")
    assert "report/report.md" in {a.path for a in artifacts}

    # Optuna: the objective's name is the ranking metric; trials lead to their folders
    study = optuna.load_study(study_name="watched", storage=f"sqlite:///{sweep_dir}/optuna.db")
    (metric,) = study.metric_names
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 2
    for trial in done:
        folder = Path(trial.user_attrs["results_folder"])
        assert folder.parent == sweep_dir.resolve() and folder.name in params
        assert trial.user_attrs["tune_trial_id"] == trial_ids[folder.name]
        assert params[folder.name]["mu"] == pytest.approx(trial.params["mu"], rel=1e-12)
        rows = [json.loads(line) for line in (folder / "result.json").read_text().splitlines()]
        assert trial.value == pytest.approx(max(rows, key=lambda r: r["round"])[metric])


@pytest.mark.parametrize(
    ("status", "trials", "error", "expected"),
    [
        ("finished", {"a": {"status": "TERMINATED"}}, None, FINISHED),
        ("finished", {"a": {"status": "ERROR"}}, Stop(exit_codes.ALL_TRIALS_FAILED), FAILED),
        ("interrupted", {}, Stop(exit_codes.INTERRUPTED), KILLED),
        ("interrupted", {}, Stop(exit_codes.TERMINATED), KILLED),
        ("failed", {}, RuntimeError("driver"), FAILED),
        ("running", {}, Stop(exit_codes.INTERRUPTED), KILLED),  # Ctrl-C before Tune's loop
        ("running", {}, KeyboardInterrupt(), KILLED),
        ("running", {}, ValueError("restore failed"), FAILED),
    ],
)
def test_the_sweeps_outcome_in_mlflows_words(status, trials, error, expected):
    assert mlflow_sweep_status({"status": status, "trials": trials}, error) == expected


@pytest.mark.slow  # MLflow's SQLite set-up: ~20 s on a loaded 2-core machine
def test_a_resumed_sweep_run_says_running_then_ends_with_the_outcome(tmp_path):
    """On a real MLflow store: a sweep run KILLED by an interruption is RUNNING again while
    the resumed sweep runs, and ends FAILED when a trial errored; a trial's run still open
    then is KILLED."""
    from mlflow.tracking import MlflowClient

    sweep_dir = tmp_path / "s"
    sweep_dir.mkdir()
    info = start_mlflow_sweep(sweep_dir, None, {"study": "st", "sweep": "s", "budget": "smoke"})
    manifest = {"status": "interrupted", "tracking": {"mlflow": info}, "trials": {}}
    (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(manifest))
    client = MlflowClient(info["uri"])
    parent = info["parent_run_id"]
    experiment = client.get_run(parent).info.experiment_id
    open_trial = client.create_run(experiment, tags={"mlflow.parentRunId": parent})
    client.set_terminated(parent, status=KILLED)

    with pytest.raises(Stop), tracked_sweep(sweep_dir):
        assert client.get_run(parent).info.status == RUNNING
        manifest.update(status="finished", trials={"t": {"status": "ERROR"}})
        (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(manifest))
        raise Stop(exit_codes.ALL_TRIALS_FAILED)
    assert client.get_run(parent).info.status == FAILED
    assert client.get_run(open_trial.info.run_id).info.status == KILLED


def test_the_dashboard_waits_for_ctrl_c_and_says_so(capsys):
    before = signal.getsignal(signal.SIGINT)
    sent = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    sent.start()
    keep_dashboard_up("http://127.0.0.1:8265")
    waited = time.monotonic() - started
    sent.join()
    assert 0.9 <= waited < 10
    line = (
        "the Ray dashboard stays up at http://127.0.0.1:8265 until Ctrl-C (the sweep's Ray "
        "job has ended: SUCCEEDED on its Jobs page)\n"
    )
    assert capsys.readouterr().out == line
    assert signal.getsignal(signal.SIGINT) is before  # the sweep's handlers are back
