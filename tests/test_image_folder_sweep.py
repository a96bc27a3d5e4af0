"""A folder dataset with a natural partition through ``study.sweep`` on a real local Ray,
then ``analysis.report``: relative paths resolved in the driver, the dataset's identity in
the manifest, party and class names in partitions.json, "natural" in the report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from federated.config.run_config import RunConfig
from federated.data.folder_dataset import folder_identity
from federated.engine.round_loop import run_rounds
from federated.export_tree import FMNIST_CLASSES
from federated.export_tree import export_parties as export_fmnist_parties
from study.plan import run_config_fields

pytestmark = pytest.mark.slow


def test_natural_partition_sweep_and_report(fmnist, tmp_path):
    tree = tmp_path / "trees" / "fmnist-parties"
    export_fmnist_parties(fmnist, tree, n_parties=5, data_fraction=0.02, n_test=300)
    cmd = [
        sys.executable,
        "-m",
        "study.sweep",
        "temperature",
        "--budget",
        "smoke",
        "--set",
        "dataset=folder:trees/fmnist-parties",  # relative to the driver's cwd
        "--set",
        "partition=natural",
        "--set",
        "data_fraction=1",
        "--set",
        "test_fraction=1",
        "--set",
        f"data_root={tmp_path / 'data-root'}",
        "--storage-path",
        "results",
        "--name",
        "natural",
        "--quiet",
        "--max-concurrent",  # one trial process, reused: less CPU
        "1",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep_dir = tmp_path / "results" / "natural"

    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    assert manifest["dataset"] == f"folder:{tree}"
    identity = manifest["dataset_identity"]
    assert identity == folder_identity(f"folder:{tree}")
    assert identity["path"] == str(tree) and len(identity["fingerprint"]) == 64
    assert identity["parties"] == [f"party{k}" for k in range(5)]

    (partition,) = json.loads((sweep_dir / "partitions.json").read_text())
    assert partition["partition"] == "natural" and partition["n_parties"] == 5
    assert partition["party_names"] == identity["parties"]
    assert partition["class_names"] == list(FMNIST_CLASSES)
    assert sum(map(sum, partition["class_counts"])) == identity["train_images"] == 1200

    trials = sorted(p for p in sweep_dir.iterdir() if (p / "params.json").is_file())
    assert len(trials) == 3
    config = json.loads((trials[0] / "params.json").read_text())
    assert config["dataset"] == f"folder:{tree}" and config["n_parties"] == 5
    rows = [json.loads(line) for line in (trials[0] / "result.json").read_text().splitlines()]
    reference = run_rounds(RunConfig.from_dict(run_config_fields(config)))
    assert [r["test_acc"] for r in rows] == [r["test_acc"] for r in reference]

    from analysis.report import main as report  # the command's main: no second interpreter

    assert report([str(sweep_dir), "--out", str(tmp_path / "rep"), "--no-pdf"]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "natural (one folder per party) partition" in text
    assert "fmnist-parties (classification folder)" in text  # what the folder holds
    assert list((tmp_path / "rep" / "figures").glob("fig5_partition_folder_*natural*.png"))
