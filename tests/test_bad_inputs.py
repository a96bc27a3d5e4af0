"""A catalogue of bad inputs to every entry point, each refused the same way.

For every case: a non-zero exit status (or, from Python, an exception), exactly one line
on stderr that starts with ``error:`` and names the field, flag or path, no traceback,
and nothing written (the working folder is the same before and after).  The command
lines run in-process through their ``main`` functions, which is what their
``python -m`` entry points call (``sys.exit(main())``); a few run as real subprocesses
to hold that equivalence.  None of these cases starts Ray or loads a dataset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import report
from federated import run
from federated.cli.input_checks import (
    InputError,
    check_output_file,
    check_output_folder,
    check_plain_name,
    check_trial_resources,
)
from federated.config.run_config import ConfigError, RunConfig
from study import sweep

# (id, argv, words the error line must hold)
RUN_CASES = [
    ("beta-0", ["--beta", "0"], "beta"),
    ("rounds-0", ["--rounds", "0"], "rounds"),
    ("rounds-text", ["--rounds", "ten"], "rounds"),
    ("rounds-missing", ["--rounds"], "--rounds"),
    ("rounds-float", ["--rounds", "2.5"], "rounds"),
    ("n-parties-0", ["--n-parties", "0"], "n_parties"),
    ("n-parties-huge", ["--n-parties", "100000"], "n_parties"),
    ("fraction-0", ["--sample-fraction", "0"], "sample_fraction"),
    ("fraction-2", ["--sample-fraction", "2"], "sample_fraction"),
    ("data-fraction-nan", ["--data-fraction", "nan"], "data_fraction"),
    ("test-fraction-neg", ["--test-fraction", "-0.5"], "test_fraction"),
    ("lr-0", ["--lr", "0"], "lr"),
    ("lr-inf", ["--lr", "inf"], "lr"),
    ("momentum-1", ["--momentum", "1"], "momentum"),
    ("weight-decay-neg", ["--weight-decay", "-1"], "weight_decay"),
    ("mu-neg", ["--mu", "-1"], "mu"),
    ("tau-0", ["--tau", "0"], "tau"),
    ("tau-below-min", ["--tau-schedule", "annealed", "--tau", "0.0001"], "tau"),
    ("tau-schedule", ["--tau-schedule", "cosine"], "tau_schedule"),
    ("tau-scope", ["--tau-scope", "epoch"], "tau_scope"),
    ("algorithm", ["--algorithm", "fedsgd"], "algorithm"),
    ("dataset", ["--dataset", "imagenet"], "dataset"),
    ("model", ["--model", "vgg"], "model"),
    ("partition", ["--partition", "pathological"], "partition"),
    ("labels-per-party", ["--partition", "labels", "--labels-per-party", "11"], "labels_per"),
    ("server-optimizer", ["--server-optimizer", "adam"], "server_optimizer"),
    ("server-momentum", ["--server-momentum", "1.5"], "server_momentum"),
    ("server-lr", ["--server-lr", "0"], "server_lr"),
    ("projection-head", ["--projection-head", "maybe"], "projection_head"),
    ("out-dim", ["--out-dim", "0"], "out_dim"),
    ("prev-models", ["--prev-models", "0"], "prev_models"),
    ("seed-neg", ["--seed", "-1"], "seed"),
    ("device", ["--device", "gpu"], "device"),
    ("threads-0", ["--threads", "0"], "threads"),
    ("batch-size-0", ["--batch-size", "0"], "batch_size"),
    ("local-epochs-0", ["--local-epochs", "0"], "local_epochs"),
    ("execution", ["--execution", "turbo"], "execution"),
    ("checkpoint-every", ["--checkpoint-every", "-1"], "checkpoint_every"),
    ("unknown-flag", ["--rounds-per-epoch", "3"], "--rounds-per-epoch"),
    ("out-under-file", ["--out", "a_file/rows.csv"], "--out"),
    ("out-is-folder", ["--out", "a_folder"], "--out"),
    ("out-trailing-slash", ["--out", "new_folder/"], "--out"),
    # absurd sizes, a rows file of no known format, a fraction that draws no one
    ("rounds-huge", ["--rounds", str(10**12)], "rounds=1000000000000 (allowed: an integer <="),
    ("threads-huge", ["--threads", str(10**9)], "threads=1000000000 (allowed: an integer <="),
    ("batch-size-huge", ["--batch-size", str(10**9)], "batch_size=1000000000"),
    ("eval-batch-size-huge", ["--eval-batch-size", str(10**9)], "eval_batch_size=1000000000"),
    ("out-suffix", ["--out", "rows.txt"], "must end in .csv or .jsonl (not '.txt')"),
    ("out-no-suffix", ["--out", "rows"], "must end in .csv or .jsonl (it has no suffix)"),
    ("fraction-draws-none", ["--sample-fraction", "0.01"], "sample_fraction=0.01"),
    (
        "dirichlet-too-little-data",
        ["--data-fraction", "0.001", "--n-parties", "10"],
        "data_fraction",
    ),
    # validation settings that would do nothing, or not what was written
    ("server-split-no-validation", ["--val-split", "server"], "val_split='server'"),
    ("eval-fraction-no-validation", ["--eval-fraction", "0.5"], "eval_fraction=0.5"),
    (
        "eval-fraction-server-split",
        ["--val-fraction", "0.1", "--val-split", "server", "--eval-fraction", "0.5"],
        "1 with val_split=server",
    ),
    (
        "eval-fraction-draws-none",
        ["--val-fraction", "0.1", "--eval-fraction", "0.01"],
        "eval_fraction=0.01",
    ),
    # values outside any meaningful range
    ("lr-tiny", ["--lr", "1e-300"], "lr=1e-300 (allowed: a learning rate >= 1e-08"),
    (
        "noise-std-5",
        ["--feature-skew", "noise", "--feature-skew-level", "5"],
        "feature_skew_level=5.0 (allowed: a noise std in [0, 1]",
    ),
    # start files: named, with what is wrong, before training
    ("init-empty", ["--init", "empty.pt"], "empty.pt is refused: it is empty"),
    ("init-text", ["--init", "text.pt"], "text.pt is refused: not a torch.save file"),
    ("init-nan", ["--init", "nan.pt"], "holds NaN or infinite values"),
    # an image whose header declares 20000x20000 pixels is refused before it is decoded
    ("image-huge", ["--dataset", "folder:huge_images"], "20000x20000 pixels"),
]

SWEEP_CASES = [
    ("no-study", [], "study"),
    ("unknown-study", ["moon_nu"], "study"),
    ("budget", ["moon_mu", "--budget", "huge"], "--budget"),
    ("search", ["moon_mu", "--search", "random"], "--search"),
    ("scheduler", ["moon_mu", "--scheduler", "pbt"], "--scheduler"),
    ("cpus-0", ["moon_mu", "--cpus-per-trial", "0"], "--cpus-per-trial"),
    ("cpus-text", ["moon_mu", "--cpus-per-trial", "two"], "--cpus-per-trial"),
    ("cpus-nan", ["moon_mu", "--cpus-per-trial", "nan"], "--cpus-per-trial"),
    ("gpus-neg", ["moon_mu", "--gpus-per-trial", "-1"], ">= 0"),
    ("gpus-1.5", ["moon_mu", "--gpus-per-trial", "1.5"], "--gpus-per-trial"),
    ("max-failures-neg", ["moon_mu", "--max-failures", "-1"], "--max-failures"),
    ("num-samples-0", ["moon_mu", "--search", "optuna", "--num-samples", "0"], "--num-samples"),
    ("max-concurrent-0", ["moon_mu", "--max-concurrent", "0"], "--max-concurrent"),
    ("metric-test", ["moon_mu", "--metric", "test_acc"], "--metric"),
    ("asha-no-validation", ["moon_mu", "--scheduler", "asha", "--set", "val_fraction=0"], "val_"),
    ("name-dotdot", ["moon_mu", "--name", "../.."], "--name"),
    ("name-absolute", ["moon_mu", "--name", "/tmp/elsewhere"], "--name"),
    ("name-slash", ["moon_mu", "--name", "a/b"], "--name"),
    ("name-hidden", ["moon_mu", "--name", ".hidden"], "--name"),
    ("name-empty", ["moon_mu", "--name", ""], "--name"),
    ("set-no-equals", ["moon_mu", "--set", "rounds"], "--set"),
    ("set-unknown-field", ["moon_mu", "--set", "roundz=3"], "roundz"),
    ("set-bad-value", ["moon_mu", "--set", "rounds=zero"], "rounds"),
    ("set-bad-range", ["moon_mu", "--set", "beta=-1"], "beta"),
    ("dataset", ["moon_mu", "--dataset", "imagenet"], "dataset"),
    ("seeds-text", ["moon_mu", "--seeds", "a,b"], "seeds"),
    ("storage-under-file", ["moon_mu", "--storage-path", "a_file/results"], "--storage-path"),
    ("storage-is-file", ["moon_mu", "--storage-path", "a_file"], "--storage-path"),
    ("address-dead", ["moon_mu", "--address", "127.0.0.1:1"], "--address"),
    ("address-garbage", ["moon_mu", "--address", "nohost"], "--address"),
    ("resume-missing", ["moon_mu", "--resume", "--name", "never-ran"], "--resume"),
    ("exists", ["moon_mu", "--name", "a_folder", "--storage-path", "."], "exists"),
    # a budget against a user's written value, sizes, run-time checks, trackers
    ("budget-conflict", ["mine.toml", "--budget", "laptop", "--dry-run"], "fixed.rounds = 8"),
    (
        "grid-too-large",
        [
            "--vary",
            "mu=" + ",".join(f"{i / 100:g}" for i in range(1, 101)),
            "--vary",
            "beta=" + ",".join(f"{i / 10:g}" for i in range(1, 102)),
            "--dry-run",
        ],
        "30,300 trials",
    ),
    ("cpus-beyond-machine", ["moon_mu", "--cpus-per-trial", "4096"], "--cpus-per-trial=4096"),
    ("party-under-a-batch", ["parties", "--budget", "smoke"], "batch_size=64"),
    (
        "resume-no-manifest",
        ["moon_mu", "--resume", "--name", "a_folder", "--storage-path", "."],
        "has no fedsweep_sweep.json",
    ),
    (
        "resume-damaged-manifest",
        ["moon_mu", "--resume", "--name", "bad_sweep", "--storage-path", "."],
        "unreadable",
    ),
    (
        "track-uri-dead",
        ["moon_mu", "--track", "mlflow", "--track-uri", "http://127.0.0.1:1"],
        "--track",
    ),
    ("track-uri-folder", ["moon_mu", "--track", "mlflow", "--track-uri", "mlruns"], "--track"),
    # selection flags that would be ignored, fail at the end, or plan absurd work
    ("metric-ranks-nothing", ["moon_mu", "--metric", "val_loss"], "ranks no trials"),
    (
        "metric-not-recorded-dry-run",
        ["moon_mu", "--metric", "val_srcc", "--rerun-best", "2", "--dry-run"],
        "record no val_srcc",
    ),
    ("rerun-best-0", ["moon_mu", "--rerun-best", "0"], "--rerun-best=0 (allowed"),
    ("rerun-best-huge", ["moon_mu", "--rerun-best", "1000000"], "--rerun-best=1000000"),
    ("rerun-best-one-point", ["--vary", "mu=0.1", "--rerun-best", "2"], "has one point"),
    ("server-split-dry-run", ["moon_mu", "--set", "val_split=server", "--dry-run"], "val_split"),
]

REPORT_CASES = [
    ("missing-path", ["nowhere"], "nowhere"),
    ("no-sweep", ["a_folder"], "a_folder"),
    ("corrupt-manifest", ["bad_sweep"], "fedsweep_sweep.json"),
    # a manifest that is not UTF-8, or of the wrong types, is refused whole
    ("manifest-not-utf8", ["utf8_sweep"], "fedsweep_sweep.json: not UTF-8 text"),
    ("manifest-trials-list", ["typed_sweep"], "field trials=[1, 2] is not a JSON object"),
    ("manifest-entry-type", ["entry_sweep"], "trials['t'].last_round='5' is not a whole"),
    ("metric", ["good_sweep", "--metric", "median"], "--metric"),
    ("target", ["good_sweep", "--target", "all"], "--target"),
    ("out-under-file", ["good_sweep", "--out", "a_file/report"], "--out"),
    ("out-is-file", ["good_sweep", "--out", "a_file"], "--out"),
    ("no-args", [], "RESULTS_DIR"),
]

API_CASES = [
    ("api-beta", lambda: RunConfig(beta=-1).resolved(), "beta"),
    ("api-rounds-type", lambda: RunConfig(rounds="5").resolved(), "rounds"),
    ("api-unknown-field", lambda: RunConfig.from_dict({"round": 3}).resolved(), "round"),
    ("api-replace", lambda: RunConfig().replace(lr=0).resolved(), "lr"),
    ("api-algorithm", lambda: RunConfig(algorithm="FedAvg").resolved(), "algorithm"),
    ("api-bool", lambda: RunConfig(projection_head="yes").resolved(), "projection_head"),
    ("api-fraction", lambda: RunConfig(data_fraction=0).resolved(), "data_fraction"),
    ("api-name", lambda: check_plain_name("..", "--name"), "--name"),
    ("api-out", lambda: check_output_file(__file__ + "/rows.csv", "--out"), "--out"),
    ("api-folder", lambda: check_output_folder("/proc/self/status/x", "--out"), "--out"),
    ("api-resources", lambda: check_trial_resources(1, 2.5, 1), "--gpus-per-trial"),
    ("api-rounds-huge", lambda: RunConfig(rounds=10**12).resolved(), "<= 100,000"),
    ("api-threads-huge", lambda: RunConfig(threads=10**9).resolved(), "<= 1,024"),
    ("api-batch-huge", lambda: RunConfig(batch_size=10**9).resolved(), "<= 65,536"),
    (
        "api-no-party-drawn",
        lambda: RunConfig(n_parties=10, sample_fraction=0.04).resolved(),
        "> 0.05",
    ),
]

CLIS = {"run": run.main, "sweep": sweep.main, "report": report.main}


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working folder holding a file, a folder, a sweep and a sweep with a bad manifest."""
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "bad_sweep").mkdir()
    (tmp_path / "bad_sweep" / "fedsweep_sweep.json").write_text("{not json")
    (tmp_path / "mine.toml").write_text(
        'name = "mine"\n[fixed]\nalgorithm = "moon"\nrounds = 8\n'
        '[[axes]]\nname = "mu"\nvalues = [0.1, 1.0]\n'
    )
    for name, text in (
        ("utf8_sweep", b'{"study": "moon_mu", "name": "\xff\xfe"}'),
        ("typed_sweep", b'{"study": "moon_mu", "trials": [1, 2]}'),
        ("entry_sweep", b'{"study": "moon_mu", "trials": {"t": {"last_round": "5"}}}'),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "fedsweep_sweep.json").write_bytes(text)
    _bad_start_files(tmp_path)
    _huge_image_folder(tmp_path / "huge_images")
    good = tmp_path / "good_sweep"
    good.mkdir()
    (good / "fedsweep_sweep.json").write_text(
        json.dumps({"study": "moon_mu", "status": "finished", "trials": {}})
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("FEDSWEEP_RESULTS", str(tmp_path / "results"))
    return tmp_path


def _bad_start_files(folder: Path) -> None:
    """Start files (``--init``) that are empty, text, and finite-shaped but NaN."""
    import torch

    (folder / "empty.pt").write_bytes(b"")
    (folder / "text.pt").write_text("these are not weights\n")
    torch.save({"conv1.weight": torch.full((2, 2), float("nan"))}, folder / "nan.pt")


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` grey pixels and whose pixel
    data is a stub: only a decoder would find out, and it must never be reached."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


def _huge_image_folder(root: Path) -> None:
    """An image folder of two classes of small images, one of which declares 20000x20000."""
    from PIL import Image

    for split in ("train", "test"):
        for label in ("a", "b"):
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(12):
                Image.new("L", (8, 8), color=i * 10).save(folder / f"{i}.png")
    (root / "train" / "a" / "huge.png").write_bytes(_png_header(20000, 20000))


def snapshot(folder: Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime for p in folder.rglob("*")}


def assert_one_error_line(stderr: str, words: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    assert words in lines[0], stderr
    assert "Traceback" not in stderr


def call(cli: str, argv: list[str]) -> int:
    try:
        return CLIS[cli](argv)
    except SystemExit as stop:  # argparse's own errors
        return int(stop.code or 0)


CASES = (
    [pytest.param("run", a, w, id=f"run-{i}") for i, a, w in RUN_CASES]
    + [pytest.param("sweep", a, w, id=f"sweep-{i}") for i, a, w in SWEEP_CASES]
    + [pytest.param("report", a, w, id=f"report-{i}") for i, a, w in REPORT_CASES]
)


def test_the_catalogue_is_large_enough():
    assert len(CASES) + len(API_CASES) >= 60


@pytest.mark.parametrize(("cli", "argv", "words"), CASES)
def test_bad_command_line_input_is_one_line_and_writes_nothing(cli, argv, words, workdir, capsys):
    before = snapshot(workdir)
    status = call(cli, argv)
    captured = capsys.readouterr()
    assert status != 0
    assert_one_error_line(captured.err, words)
    assert snapshot(workdir) == before, "nothing is written"


@pytest.mark.skipif(cuda_available(), reason="needs a machine without CUDA")
def test_cuda_on_a_machine_without_it_is_refused_before_ray(workdir, capsys):
    """The trial's own device check, run by the driver: no Ray, no data, nothing written."""
    before = snapshot(workdir)
    assert call("sweep", ["moon_mu", "--set", "device=cuda"]) == 2
    assert_one_error_line(capsys.readouterr().err, "device='cuda'")
    assert snapshot(workdir) == before


def test_an_impossible_dirichlet_draw_is_refused_before_ray(workdir, capsys):
    """The trial's own partition draw, run by the driver (it loads Fashion-MNIST)."""
    from federated.data import DatasetUnavailable, load_dataset

    try:
        load_dataset("fmnist", None)
    except DatasetUnavailable:
        pytest.skip("Fashion-MNIST is not available offline here")
    before = snapshot(workdir)
    argv = ["moon_mu", "--budget", "smoke", "--set", "n_parties=40", "--set", "beta=0.001"]
    assert call("sweep", argv) == 2
    assert_one_error_line(capsys.readouterr().err, "Dirichlet partition")
    assert snapshot(workdir) == before


def test_a_score_folder_with_a_dirichlet_partition_names_the_conflict(
    workdir, capsys, tmp_path_factory
):
    """The sweep names what the run names (a score task has no classes to skew by),
    not a party-count limit that only a budget's smaller data fraction reaches."""
    from tests.test_iqa_builder import load_builder

    if not Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").is_file():
        pytest.skip("needs Debian's dataset-fashion-mnist")
    tree = tmp_path_factory.mktemp("iqa") / "task"
    assert load_builder().main([str(tree), "--train-sources", "10", "--test-sources", "4"]) == 0
    before = snapshot(workdir)
    argv = [
        "--vary", "lr=0.01,0.1", "--set", f"dataset=folder:{tree}", "--set", "partition=dirichlet",
        "--set", "n_parties=100", "--budget", "smoke", "--dry-run",
    ]  # fmt: skip
    assert call("sweep", argv) == 2
    assert_one_error_line(capsys.readouterr().err, "has no classes to skew by")
    assert snapshot(workdir) == before


@pytest.mark.parametrize(("make", "words"), [pytest.param(m, w, id=i) for i, m, w in API_CASES])
def test_bad_python_input_raises_one_line_naming_the_field(make, words):
    with pytest.raises((ConfigError, InputError)) as caught:
        make()
    message = str(caught.value)
    assert "\n" not in message
    assert words in message


@pytest.mark.parametrize(
    ("module", "argv", "words"),
    [
        ("federated.run", ["--beta", "0"], "beta"),
        ("study.sweep", ["moon_mu", "--name", "../.."], "--name"),
        ("analysis.report", ["nowhere"], "nowhere"),
        ("study.sweep", ["moon_mu", "--cpus-per-trial", "x"], "--cpus-per-trial"),
    ],
)
def test_the_real_command_lines_refuse_the_same_way(module, argv, words, workdir):
    before = snapshot(workdir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-m", module, *argv], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 2
    assert_one_error_line(proc.stderr, words)
    assert snapshot(workdir) == before
