"""Experiment trackers and the live view, on real smoke sweeps (real Ray, real training).

* ``--track mlflow``: one MLflow run per trial, children of the sweep's run, whose metric
  histories equal the trial's per-round rows (read back with MLflow's client); the report
  lands in the sweep's run with ``analysis.report --track mlflow``.
* ``--track wandb``: one offline W&B run per trial with the same metrics, read back from
  the run files (:func:`read_wandb_records`), is checked through an interruption and a
  resume in tests/test_dashboards.py, on the sweep that tracks to every tracker at once.
* The live view of a 10-trial sweep written to a file stays within its line bound.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.report import main as report_main
from study.sweep import main as sweep_main
from study.tracking import SWEEP_ROLE_TAG

# Per-round row keys compared with the trackers' histories (numbers in every row).
ROW_KEYS = ("test_acc", "test_loss", "train_loss", "samples_this_round", "cum_bytes")
# The live view prints at most the summary plus the running trials per state change (a
# trial starting or ending: two per trial, two trials running at once on this machine),
# plus one block per 30 s: 8 lines per trial and 20 for the 30-second ticks bound it.
LIVE_VIEW_LINES_PER_TRIAL = 8
# The trackers record whatever the rows hold: the least data that trains (40% of the smoke
# budget's training set, a quarter of its test set) keeps the trials quick.
SMALL = ("--set", "data_fraction=0.02", "--set", "test_fraction=0.05")


def sweep(storage: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "study.sweep", *args, "--storage-path", str(storage)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def trial_rows(trial_dir: Path) -> dict[int, dict]:
    rows = {}
    for line in (trial_dir / "result.json").read_text().splitlines():
        row = json.loads(line)
        rows[row["round"]] = row
    return rows


def trial_dirs(sweep_dir: Path) -> list[Path]:
    return sorted(p for p in sweep_dir.iterdir() if (p / "params.json").is_file())


@pytest.mark.slow
def test_mlflow_runs_equal_the_trials_rows_and_the_live_view_stays_short(tmp_path):
    proc = sweep(
        tmp_path, "moon_mu", "--budget", "smoke", "--seeds", "2", "--track", "mlflow",
        "--name", "tracked", "--set", "mu=0.1,1.0", *SMALL,  # 2 points x 2 seeds
    )  # fmt: skip
    sweep_dir = tmp_path / "tracked"
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    info = manifest["tracking"]["mlflow"]
    assert info["uri"] == f"sqlite:///{sweep_dir / 'mlflow.db'}"

    # the live view: a summary line per update, no Tune status table
    lines = proc.stdout.splitlines()
    summaries = [line for line in lines if line.startswith("moon_mu ") and "4 trials:" in line]
    assert summaries and "4 done, 0 running, 0 pending, 0 errored" in summaries[-1]
    assert not any("Trial status" in line or "│" in line for line in lines)
    assert len(lines) <= LIVE_VIEW_LINES_PER_TRIAL * 4 + 20, len(lines)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(info["uri"])
    experiment = client.get_experiment_by_name(info["experiment"])
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == info["parent_run_id"]]
    (parent,) = [r for r in runs if r.data.tags.get(SWEEP_ROLE_TAG) == "sweep"]
    assert parent.info.run_id == info["parent_run_id"]
    trials = trial_dirs(sweep_dir)
    assert len(trials) == 4 and len(children) == 4
    by_trial = {r.data.tags["trial_id"]: r for r in children}
    for trial_dir in trials:
        rows = trial_rows(trial_dir)
        params = json.loads((trial_dir / "params.json").read_text())
        run = by_trial[trial_dir.name[:11]]
        tags = run.data.tags
        assert (tags["study"], tags["sweep"], tags["budget"]) == ("moon_mu", "tracked", "smoke")
        assert tags["seed"] == str(params["seed"])
        assert run.data.params["mu"] == str(params["mu"])
        for key in ROW_KEYS:
            history = client.get_metric_history(run.info.run_id, key)
            assert {m.step: m.value for m in history} == pytest.approx(
                {r: float(row[key]) for r, row in rows.items()}
            ), (trial_dir.name, key)

    # the report into the sweep's run
    out = tmp_path / "report"
    assert report_main([str(sweep_dir), "--out", str(out), "--no-pdf", "--track", "mlflow"]) == 0
    artifacts = {a.path for a in client.list_artifacts(info["parent_run_id"], "report")}
    assert "report/report.md" in artifacts


def read_wandb_records(path: Path) -> list:
    """The records of an offline W&B run file (LevelDB log format: 32 KiB blocks of
    chunks with a 7-byte header — CRC, length, type — after a 7-byte file header)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    block, header = 32768, 7
    pos, records, pending = 7, [], b""
    while pos + header <= len(data):
        left = block - pos % block
        if left < header:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + header])
        if length == 0 and kind == 0:  # zero padding to the block's end
            pos += left
            continue
        chunk = data[pos + header : pos + header + length]
        pos += header + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):  # a whole record, or its last chunk
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


@pytest.mark.parametrize("tracker", ["mlflow", "wandb"])
def test_a_tracker_that_is_not_installed_is_one_line_before_ray_starts(
    tmp_path, monkeypatch, capsys, tracker
):
    monkeypatch.setitem(sys.modules, tracker, None)  # importlib finds no such package
    code = sweep_main(["moon_mu", "--track", tracker, "--storage-path", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (
        f"error: --track {tracker}: the {tracker} package is not installed "
        f"(install the extra: pip install 'fedsweep[{tracker}]')"
    )
    assert list(tmp_path.iterdir()) == []
    assert report_main([str(tmp_path), "--track", tracker]) == 2
    assert "fedsweep[" in capsys.readouterr().err


def test_unknown_tracker_and_a_uri_without_mlflow_are_refused(tmp_path, capsys):
    assert sweep_main(["moon_mu", "--track", "neptune", "--storage-path", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == "error: --track='neptune' (allowed: mlflow, wandb)"
    assert sweep_main(["moon_mu", "--track-uri", "http://x", "--storage-path", str(tmp_path)]) == 2
    assert "needs --track mlflow" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# A fresh process: the Tune modules a sweep imports while Ray comes up, its callbacks
# without trackers, and Tune's usage tag of them as a sweep on its own Ray has it.
UNTRACKED_SWEEP_IMPORTS = """
import sys
from study.sweep import import_tune_modules
from study.tune import ray_session, tracking_callbacks
from study.tune.resume_digest_callback import ResumeDigestRecorder

import_tune_modules()
callbacks = [*tracking_callbacks.tracking_callbacks({}, {}, ["mu"]), ResumeDigestRecorder()]
ray_session.skip_callback_usage_tag()
from ray.air._internal import usage
assert usage.tag_callbacks(callbacks) is False
print(sorted({m.split(".")[0] for m in sys.modules} & {"mlflow", "wandb", "comet_ml", "aim"}))
"""


def test_an_untracked_sweep_imports_no_tracker():
    """MLflow's import alone is about 0.7 s of every sweep's start; only --track pays it."""
    done = subprocess.run(
        [sys.executable, "-c", UNTRACKED_SWEEP_IMPORTS],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_callbacks_pickled_under_their_old_module_still_load():
    """Sweep folders written while the trackers' callbacks lived in tracking_callbacks.py
    hold them as ``study.tune.tracking_callbacks.*`` in tuner.pkl; --resume finds them."""
    import pickle

    from study.tune import mlflow_runs, wandb_runs

    for name, module in [
        ("MLflowTrialRuns", mlflow_runs),
        ("WandbTrialRuns", wandb_runs),
        ("OwnServiceLoggingActor", wandb_runs),
    ]:
        # pickle's GLOBAL opcode: the class by module and name, as Tune's pickle holds it
        reference = f"cstudy.tune.tracking_callbacks\n{name}\n.".encode()
        assert pickle.loads(reference) is getattr(module, name)
