"""Experiment trackers: refused in one line when missing or unknown, never imported by an
untracked sweep, their callbacks loadable under an old module name; the helpers that read
them back.  The real sweep that tracks to MLflow, W&B and TensorBoard at once (each
tracker's history equal to the trials' rows through Ctrl-C and ``--resume``, the report
in the sweep's MLflow run, the live view's length) is tests/test_dashboards.py's drill."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.report import main as report_main
from study.sweep import main as sweep_main

# Per-round row keys compared with the trackers' histories (numbers in every row).
ROW_KEYS = ("test_acc", "test_loss", "train_loss", "samples_this_round", "cum_bytes")
# The live view prints at most the summary plus the running trials per state change (a
# trial starting or ending: two per trial, two trials running at once on this machine),
# plus one block per 30 s: 8 lines per trial and 20 for the 30-second ticks bound it.
LIVE_VIEW_LINES_PER_TRIAL = 8


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
