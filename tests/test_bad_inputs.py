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
from federated.config.checks import ExecutionAliasWarning
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
    (
        "partition-by-empty",
        ["--partition", "natural", "--partition-by", ""],
        "partition_by='' (allowed: a value; none (or leaving it out) unsets it)",
    ),
    ("threads-empty", ["--threads", ""], "threads=''"),
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
    # passed the checks, then overflowed float32 in the pull's gradient
    ("ditto-lambda-huge", ["--algorithm", "ditto", "--ditto-lambda", "1e308"], "ditto_lambda"),
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
    # image sizes out of range: refused before the folder is read (8 to 4096 a side)
    *(
        (
            f"image-size-{size}",
            ["--dataset", "folder:huge_images", "--image-size", size],
            f"image_size='{size}' (allowed: 8 to 4096 pixels a side (N or HxW",
        )
        for size in ("100000", "0x0", "65536", "1", "7x9")
    ),
    # hf: sources that would read the working folder, scan the disk, or cannot expand
    ("hf-empty", ["--dataset", "hf:"], "dataset 'hf:': no source after hf: (allowed: hf:OWNER"),
    ("hf-root", ["--dataset", "hf:/"], "/ is the file system's root, and reading it would scan"),
    (
        "hf-no-such-user",
        ["--dataset", "hf:~fedsweep-no-such-user/x"],
        "~fedsweep-no-such-user is no user's home folder (allowed: hf:OWNER/NAME",
    ),
]

SWEEP_CASES = [
    ("no-study", [], "study"),
    ("unknown-study", ["moon_nu"], "study"),
    ("budget", ["moon_mu", "--budget", "huge"], "--budget"),
    ("search", ["moon_mu", "--search", "random"], "--search"),
    ("scheduler", ["moon_mu", "--scheduler", "pbt"], "--scheduler"),
    ("cpus-0", ["moon_mu", "--cpus-per-trial", "0"], "--cpus-per-trial"),
    ("set-empty", ["moon_mu", "--set", "partition_by="], "--set partition_by=: partition_by=''"),
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
    # (a party smaller than a batch is no bad input: a sweep trains it as a run does,
    # with a warning; tests/test_preflight_batches.py)
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
    # --set AXIS=v1,v2 where there is no plain axis to take the list, or a bad item
    (
        "set-list-on-a-field-not-varied",
        ["comparison", "--set", "mu=0.1,5", "--dry-run"],
        "mu='0.1,5' (allowed: a number: one value, since comparison does not vary mu (a comma "
        "list replaces the values of a plain axis: algorithm; to vary mu, use --vary or a "
        "study file))",
    ),
    ("set-list-bad-item", ["moon_mu", "--set", "mu=0.1,x", "--dry-run"], "mu='x' (allowed: a num"),
    ("set-list-empty", ["moon_mu", "--set", "mu=,", "--dry-run"], "one or more values of axis mu"),
    (
        "set-joint-axis-field",
        ["parties", "--set", "n_parties=10", "--dry-run"],
        "n_parties=10 (allowed: not settable with --set: parties varies it (its joint axis "
        "'setting' sets it with each label))",
    ),
    # the flag that gave the bad value is named, never the first --vary axis
    (
        "set-beside-vary-n-parties",
        ["--vary", "lr=0.01,0.02", "--set", "n_parties=10000", "--dry-run"],
        "error: --set n_parties=10000: n_parties = 10000 (allowed: at most 6000",
    ),
    (
        "set-beside-vary-party-memory",
        ["--vary", "lr=0.01,0.02", "--set", "party_memory_mib=0", "--dry-run"],
        "error: --set party_memory_mib=0: party_memory_mib = 0 (allowed: an integer >= 1)",
    ),
    (
        "set-repeated",
        ["moon_mu", "--set", "rounds=1", "--set", "rounds=2", "--dry-run"],
        "error: --set rounds given twice ('rounds=1' and 'rounds=2'); give each field once",
    ),
    (
        "resume-without-name-or-study",
        ["--resume", "--storage-path", "."],
        "error: --resume needs --name NAME",
    ),
    # a manifest holding an integer beyond Python's 4,300-digit int-str limit
    (
        "resume-huge-integer-manifest",
        ["moon_mu", "--resume", "--name", "long_int_sweep", "--storage-path", "."],
        "fedsweep_sweep.json is unreadable (line 1: an integer of more than 4,300 digits "
        "(allowed: JSON numbers of at most 4,300 digits))",
    ),
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
    (
        "manifest-huge-integer",
        ["long_int_sweep"],
        "fedsweep_sweep.json: not JSON (an integer of over 4,300 digits)",
    ),
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
        ("long_int_sweep", b'{"study": "moon_mu", "n_trials": ' + b"7" * 5000 + b"}"),
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


def test_an_impossible_dirichlet_floor_is_refused_before_ray(workdir, capsys):
    """A Dirichlet partition meets its floor wherever it can (a draw the old rule found,
    else one constructed: federated/heterogeneity/partition.py), so what is refused is
    a floor no partition can meet, in one line before Ray, with nothing written."""
    before = snapshot(workdir)
    # 400 parties of >= 10 samples need 4,000 of smoke's 3,000
    argv = ["moon_mu", "--budget", "smoke", "--set", "n_parties=400", "--set", "beta=0.001"]
    assert call("sweep", argv) == 2
    assert_one_error_line(
        capsys.readouterr().err,
        "data_fraction=0.05 (allowed: at least 0.0667 for n_parties=400 of >= 10 fmnist "
        "samples each (partition=dirichlet), or fewer parties)",
    )
    assert snapshot(workdir) == before


def test_a_score_folder_with_a_dirichlet_partition_names_the_conflict(
    workdir, capsys, tmp_path_factory
):
    """The sweep names what the run names (a score task has no class per image to skew by),
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
    assert_one_error_line(
        capsys.readouterr().err, "needs a class label per image, which a score task does not have"
    )
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
        # the torch-free early refusal of federated.run's own entry point
        ("federated.run", ["--dataset", "hf:/"], "file system's root"),
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


# -------------------------------------------------- --set AXIS=v1,v2 on any axis type
@pytest.mark.parametrize(
    ("study_name", "item", "axis", "values"),
    [
        pytest.param("moon_mu", "mu=0.1,5", "mu", (0.1, 5.0), id="numbers"),
        pytest.param("heterogeneity", "beta=0.1,0.5", "beta", (0.1, 0.5), id="numbers-2-axes"),
        pytest.param(
            "comparison", "algorithm=fedavg,feddyn", "algorithm", ("fedavg", "feddyn"), id="words"
        ),
        pytest.param(
            "projection_head",
            "projection_head=false,true",
            "projection_head",
            (False, True),
            id="booleans",
        ),
        pytest.param("comparison", "algorithm=fedavg", "algorithm", ("fedavg",), id="one-word"),
        pytest.param("moon_mu", "mu=5", "mu", (5.0,), id="one-number"),
    ],
)
def test_set_axis_values_replace_or_fix_a_plain_axis_of_any_type(
    study_name, item, axis, values, workdir, capsys
):
    """``--set AXIS=v1,v2`` replaces the axis's values, typed item by item (README,
    docs/sweeps-and-studies.md); ``--set AXIS=v`` fixes the axis to that one value, as
    ``AXIS=v,`` always did.  A dry run: nothing is written."""
    from study.sweep_args import build_parser

    argv = [study_name, "--set", item, "--budget", "smoke", "--dry-run"]
    before = snapshot(workdir)
    plan = sweep.plan_sweep(build_parser().parse_args(argv))
    assert plan.study.axis(axis).values == values
    assert {t.config[axis] for t in plan.trials()} == set(values)
    assert call("sweep", argv) == 0
    assert f"({plan.study.grid_size} grid points x 1 seeds)" in capsys.readouterr().out
    assert snapshot(workdir) == before


# ---------------------------------------------------------------- 16-bit PNG images
def _png16(path: Path, value: int, size: tuple[int, int] = (8, 8)) -> None:
    """A real 16-bit grey-scale PNG (Pillow mode 'I;16') of one value."""
    import numpy as np
    from PIL import Image

    image = Image.fromarray(np.full(size, value, dtype=np.uint16))
    assert image.mode == "I;16"
    image.save(path)


# 16-bit values whose low byte (what a wrap modulo 256 keeps) is 17 for all but 65535
VALUES_16 = [k * 4096 + 17 for k in range(16)] + [65535]


def _scaled(value: int) -> int:
    return round(value * 255 / 65535)


def test_16_bit_pngs_in_a_class_folder_are_scaled_not_wrapped(tmp_path):
    from federated.data.folder_dataset import load_folder

    root = tmp_path / "sixteen"
    for split, count in (("train", 12), ("test", 3)):
        for label in ("a", "b"):
            (root / split / label).mkdir(parents=True)
            for i in range(count):
                value = VALUES_16[(i + (label == "b") * 5) % len(VALUES_16)]
                _png16(root / split / label / f"{i}.png", value)
    data = load_folder(f"folder:{root}", None, None, tmp_path / "cache").data
    assert data.train_x.dtype == torch_uint8()
    seen = {int(v) for v in data.train_x.unique()} | {int(v) for v in data.test_x.unique()}
    expected = {_scaled(v) for v in VALUES_16}
    assert seen <= expected and {0, 16, 255} <= seen, seen  # 17 -> 0, 65535 -> 255
    for image in data.train_x:  # each image one value, as written
        assert len(image.unique()) == 1


def test_16_bit_pngs_in_a_detection_folder_are_scaled_not_wrapped(tmp_path):
    from federated.data.folder_dataset import load_folder
    from tests.test_detection_data import coco_tree

    root = coco_tree(tmp_path / "coco", with_test=True)
    files = sorted((root / "images" / "sub").glob("*.png"), key=lambda p: int(p.stem))
    for i, file in enumerate(files):
        _png16(file, VALUES_16[i % len(VALUES_16)], size=(40, 50))
    data = load_folder(f"folder:{root}", None, None, tmp_path / "cache").data
    got = [int(image.unique()[0]) for image in data.train_x]
    assert got == [_scaled(VALUES_16[i % len(VALUES_16)]) for i in range(len(got))]


def torch_uint8():
    import torch

    return torch.uint8


# ------------------------------------------------- one image listed twice, two spellings
def _write_coco(root: Path, edit) -> Path:
    """tests.test_detection_data's COCO tree (train and test files), its training file
    edited by ``edit(data)``, or rewritten as the text ``edit`` returns."""
    from tests.test_detection_data import coco_tree

    coco_tree(root, with_test=True)
    file = root / "annotations" / "train.json"
    data = json.loads(file.read_text())
    text = edit(data)
    file.write_text(text if isinstance(text, str) else json.dumps(data))
    return root


def assert_run_refuses(root: Path, words: str, capsys, *extra: str) -> None:
    """``federated.run`` on folder ``root``: one error line holding ``words``, nothing
    written (no cache, no rows, the folder as it was)."""
    before = snapshot(root.parent)
    status = call("run", ["--dataset", f"folder:{root}", "--data-root", "cache", *extra])
    assert status == 2
    assert_one_error_line(capsys.readouterr().err, words)
    assert snapshot(root.parent) == before


def _rename_image(data: dict) -> None:
    data["images"][3]["file_name"] = "sub/./2.png"


def test_one_coco_image_under_two_spellings_is_refused(workdir, capsys):
    root = _write_coco(workdir / "coco", _rename_image)
    assert_run_refuses(
        root,
        "train.json: images[3] (id 3): sub/2.png (file_name='sub/./2.png') is listed twice, "
        "first at ",
        capsys,
    )


@pytest.mark.parametrize("spelling", ["train/./2.png", "train//2.png", "./train/2.png"])
def test_one_scored_image_under_two_spellings_is_refused(spelling, tmp_path):
    from PIL import Image

    from federated.tasks.score.scores_file import ScoresFileError, read_scores

    (tmp_path / "train").mkdir()
    lines = ["path,score"]
    for i in range(12):
        Image.new("L", (8, 8), color=i * 10).save(tmp_path / "train" / f"{i}.png")
        lines.append(f"train/{i}.png,{i}")
    (tmp_path / "scores.csv").write_text("\n".join([*lines, f"{spelling},5"]) + "\n")
    with pytest.raises(ScoresFileError) as caught:
        read_scores(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'scores.csv'}: line 14, column 'path': train/2.png (written "
        f"{spelling!r}) is listed again (first on line 4; allowed: one row per image)"
    )


# ---------------------------------------------- integers beyond the int-str limit, floats
LONG_INT = "7" * 5000


def _long_camera(data: dict) -> str:
    data["images"][5]["camera"] = 0
    return json.dumps(data).replace('"camera": 0', f'"camera": {LONG_INT}', 1)


def test_an_annotation_integer_beyond_the_int_str_limit_is_one_line(workdir, capsys):
    """A party field (camera) of 5,000 digits: json.loads's plain ValueError, named."""
    root = _write_coco(workdir / "coco", _long_camera)
    assert_run_refuses(
        root,
        "train.json: line 1: an integer of more than 4,300 digits (allowed: JSON numbers of at "
        "most 4,300 digits)",
        capsys,
    )


def test_a_score_beyond_the_int_str_limit_is_one_short_line(tmp_path):
    from PIL import Image

    from federated.tasks.score.scores_file import ScoresFileError, read_scores

    (tmp_path / "train").mkdir()
    lines = ["path,score"]
    for i in range(12):
        Image.new("L", (8, 8), color=i * 10).save(tmp_path / "train" / f"{i}.png")
        lines.append(f"train/{i}.png,{LONG_INT if i == 3 else i}")
    (tmp_path / "scores.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ScoresFileError) as caught:
        read_scores(tmp_path)
    assert "line 5, column 'score': a number of 5,000 characters is beyond float32's range" in (
        str(caught.value)
    )
    assert len(str(caught.value)) < 300


def test_a_result_row_beyond_the_int_str_limit_is_skipped_and_named(tmp_path):
    from analysis.reading.trial_files import read_result_rows

    rows = [
        json.dumps({"round": 1, "test_acc": 0.5}),
        '{"round": 2, "test_acc": ' + LONG_INT + "}",
        json.dumps({"round": 3, "test_acc": 0.7}),
    ]
    (tmp_path / "result.json").write_text("\n".join(rows) + "\n")
    skipped: list[str] = []
    got = read_result_rows(tmp_path / "result.json", skipped, complete=True)
    assert [row["round"] for row in got] == [1, 3]
    assert skipped == ["line 2 of result.json is not JSON"]


def test_the_json_reader_names_the_line_of_a_long_integer():
    from federated.contract.json_text import JsonTextError, parse_json

    with pytest.raises(JsonTextError, match=r"^line 3: an integer of more than 4,300 digits"):
        parse_json('{"a": 0.' + "1" * 5000 + ',\n"b": 1,\n"c": ' + LONG_INT + "}")
    assert parse_json('{"a": 1}') == {"a": 1}


@pytest.mark.parametrize(
    ("cameras", "words"),
    [
        pytest.param(
            "all-floats",
            "train.json: images[0] (id 0): image field 'camera' holds a float (1.5) (allowed for "
            "partition_by: a field of strings or integers, e.g. a camera's id; such fields "
            "here: none)",
            id="all-floats",
        ),
        pytest.param(
            "one-float",
            "train.json: images[5] (id 5): camera holds a float (1.5) (allowed: a string or an "
            "integer naming the image's party under partition_by=camera)",
            id="one-float",
        ),
    ],
)
def test_a_party_field_of_floats_is_named_as_holding_floats(cameras, words, workdir, capsys):
    def floats(data: dict) -> None:
        for image in data["images"]:
            image["camera"] = 1.5 if cameras == "all-floats" or image["id"] == 5 else 1

    root = _write_coco(workdir / "coco", floats)
    assert_run_refuses(root, words, capsys, "--partition", "natural", "--partition-by", "camera")


# --------------------------------------------------------------------- hf: data sets
@pytest.fixture
def hub_home(tmp_path, monkeypatch):
    """``datasets`` caches under the test's folder; no offline switch set."""
    import datasets

    from federated.data import memory_cache

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets")
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    datasets.disable_progress_bars()  # building the sources prints none on stderr
    memory_cache.forget()
    return tmp_path


def _cell(value: int = 0, *, header: bytes | None = None, sixteen: bool = False) -> dict:
    """An image cell: an 8x8 grey PNG of ``value`` (16-bit with ``sixteen``), or the bytes
    ``header``."""
    import io

    import numpy as np
    from PIL import Image

    if header is not None:
        return {"bytes": header, "path": None}
    buffer = io.BytesIO()
    pixels = np.full((8, 8), value, dtype=np.uint16 if sixteen else np.uint8)
    Image.fromarray(pixels).save(buffer, format="PNG")
    return {"bytes": buffer.getvalue(), "path": None}


def _hub_folder(path: Path, cells: list[dict], labels: list, kind: str, parquet: bool = False):
    """A local ``hf:`` source: a save_to_disk folder (or a parquet file) of images and a
    label column of ``kind`` (int64, string)."""
    from datasets import Dataset, Features, Image, Value

    data = Dataset.from_dict(
        {"image": cells, "label": labels},
        features=Features({"image": Image(), "label": Value(kind)}),
    )
    if parquet:
        path.mkdir(parents=True)
        data.to_parquet(str(path / "train.parquet"))
    else:
        data.save_to_disk(str(path))
    return path


def assert_hub_refuses(source: Path, words: str, hub_home: Path, capsys) -> None:
    before = snapshot(hub_home)
    argv = ["--dataset", f"hf:{source}", "--partition", "iid", "--n-parties", "2"]
    argv += ["--holdout-fraction", "0.2", "--data-root", str(hub_home / "root")]
    assert call("run", argv) == 2
    assert_one_error_line(capsys.readouterr().err, words)
    assert not (hub_home / "root").exists()
    assert {k for k in snapshot(hub_home) if not k.startswith("hf")} == {
        k for k in before if not k.startswith("hf")
    }


@pytest.mark.parametrize(
    ("kind", "labels", "words"),
    [
        pytest.param(
            "int64",
            [i % 2 if i != 3 else None for i in range(24)],
            "column 'label' (label_column) is empty in split 'train' row 3 (1 empty row in all; "
            "allowed: a value in every row: drop or fill those rows first)",
            id="int",
        ),
        pytest.param(
            "string",
            [f"c{i % 2}" if i not in (5, 9) else None for i in range(24)],
            "column 'label' (label_column) is empty in split 'train' row 5 (2 empty rows in all",
            id="text",
        ),
    ],
)
def test_an_empty_hub_label_is_named_before_decoding(kind, labels, words, hub_home, capsys):
    source = _hub_folder(hub_home / "labels", [_cell(i) for i in range(24)], labels, kind)
    assert_hub_refuses(source, words, hub_home, capsys)


@pytest.mark.parametrize("row", [0, 5])
def test_a_huge_hub_image_is_refused_from_its_header(row, hub_home, capsys, monkeypatch):
    """Row 0 is among the sampled headers; row 5 beyond them (SAMPLE_ROWS=2 here) is
    refused just before it would be decoded."""
    from federated.data import hub_dataset

    monkeypatch.setattr(hub_dataset, "SAMPLE_ROWS", 2)
    cells = [_cell(i) for i in range(24)]
    cells[row] = _cell(header=_png_header(20000, 20000))
    source = _hub_folder(hub_home / "huge", cells, [i % 2 for i in range(24)], "int64", True)
    assert_hub_refuses(
        source,
        f"split 'train' row {row}: 20000x20000 pixels (allowed: at most 67,108,864 pixels",
        hub_home,
        capsys,
    )


def test_16_bit_hub_images_are_scaled_not_wrapped(hub_home):
    from federated.data.hub_dataset import load_hub

    cells = [_cell(VALUES_16[i % len(VALUES_16)], sixteen=True) for i in range(24)]
    source = _hub_folder(hub_home / "sixteen", cells, [i % 2 for i in range(24)], "int64")
    data = load_hub(f"hf:{source}", None, None, hub_home / "root")
    got = [int(image.unique()[0]) for image in data.train_x]
    assert got == [_scaled(VALUES_16[i % len(VALUES_16)]) for i in range(24)]


@pytest.mark.parametrize(
    ("endpoint", "words"),
    [
        ("http://[::1", "HF_ENDPOINT='http://[::1': Invalid IPv6 URL (allowed: an http or https"),
        ("http://host:99999", "HF_ENDPOINT='http://host:99999': Port out of range 0-65535"),
        ("huggingface.co", "HF_ENDPOINT='huggingface.co' (allowed: an http or https URL with"),
    ],
    ids=["ipv6", "port", "no-scheme"],
)
def test_a_malformed_hf_endpoint_is_one_line(endpoint, words, workdir, capsys, monkeypatch):
    from federated.cli.hub_source import early_hub_refusal

    monkeypatch.setenv("HF_HOME", str(workdir / "hf"))
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    before = snapshot(workdir)
    argv = ["--dataset", "hf:someone/some-data"]
    assert words in (early_hub_refusal(argv) or "")  # python -m federated.run, before torch
    assert call("run", argv) == 2  # the config check: the Python API's and a sweep's
    assert_one_error_line(capsys.readouterr().err, words)
    assert snapshot(workdir) == before


# ------------------------------------------------------ a natural party under the floor
def _small_camera(data: dict) -> None:
    for image in data["images"][:3]:  # c0, c1, c0 before: 10 c0 and 11 c1 remain
        image["camera"] = "c9"


def test_a_camera_under_the_image_floor_is_named_when_it_is_left_out(workdir, capsys):
    """A camera of 3 training images (under the 10-image floor) trains no party: the
    loaded spec names it with its count, and a run says so in one warning line."""
    from federated.data.folder_dataset import load_folder

    root = _write_coco(workdir / "coco", _small_camera)
    spec = load_folder(f"folder:{root}", None, None, workdir / "cache", partition_by="camera")
    spec = spec.data.spec
    assert spec.party_names == ("c0", "c1")
    assert spec.left_out_parties == (("c9", 3),)
    argv = ["--dataset", f"folder:{root}", "--data-root", "cache", "--partition", "natural"]
    argv += ["--partition-by", "camera", "--rounds", "1", "--local-epochs", "1", "--quiet"]
    status = call("run", [*argv, "--out", "rows.jsonl"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert (
        "warning: partition_by=camera: 1 value(s) left out, under the 10-training-image "
        "floor of a party: 'c9' (3 images); their 3 training image(s) train no party"
    ) in err.splitlines()
    (row,) = [json.loads(line) for line in (workdir / "rows.jsonl").read_text().splitlines()]
    assert row["left_out_parties"] == 1  # the row records what ran


def test_a_dry_run_names_the_camera_left_out_under_the_floor_once(workdir, capsys):
    """Issue 68, point 6: ``--dry-run`` names the camera a run would leave out, with its
    image count and the floor, once for the plan's one data setting (four trials), in
    the run's own words (from the data spec the plan completed its trials with), and
    starts no sweep."""
    root = _write_coco(workdir / "coco", _small_camera)
    argv = ["--dataset", f"folder:{root}", "--set", "partition=natural", "--set"]
    argv += [f"data_root={workdir / 'cache'}", "--storage-path", str(workdir / "results")]
    argv += ["--set", "partition_by=camera", "--vary", "lr=0.01,0.02", "--seeds", "2"]
    status = call("sweep", [*argv, "--budget", "smoke", "--dry-run"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    line = (
        "warning: partition_by=camera: 1 value(s) left out, under the 10-training-image "
        "floor of a party: 'c9' (3 images); their 3 training image(s) train no party"
    )
    assert captured.err.splitlines().count(line) == 1, captured.err
    assert "4 trials" in captured.out
    assert not (workdir / "results").exists()


# ------------------------------------------------------------------ the Python API and stdout
def test_a_runconfig_keyword_that_names_no_field_is_one_line_naming_the_fields():
    with pytest.raises(ConfigError) as caught:
        RunConfig(foo=1)
    assert str(caught.value).startswith("invalid config: foo=1 (allowed: a RunConfig field: ")
    assert "rounds" in str(caught.value) and "\n" not in str(caught.value)


def test_a_former_execution_name_is_honoured_with_a_warning_in_the_api():
    with pytest.warns(ExecutionAliasWarning, match="former name of execution='sequential'"):
        config = RunConfig(execution="fast").resolved()
    assert config.execution == "sequential"


def test_a_plan_written_to_a_full_device_is_one_line():
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "study.sweep", "moon_mu", "--budget", "smoke", "--dry-run"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "error: study.sweep could not write its standard output (No space left on device); "
        "nothing else was affected"
    )
    assert "Traceback" not in proc.stderr


def test_a_plan_whose_reader_goes_away_ends_quietly():
    # a plan longer than the pipe's buffer, read one line of (``| head -1``)
    argv = ["--vary", "mu=" + ",".join(str(k) for k in range(1, 400)), "--dry-run"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "study.sweep", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().startswith("study adhoc")
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert "error" not in err and "Traceback" not in err


def test_party_values_of_thousands_of_digits_sort_as_integers():
    from federated.data.party_field import party_sort_key

    huge = "1" + "0" * 5000  # beyond Python's 4,300-digit int() limit
    values = ["cam-b", huge, "10", "-3", "2", "-20", "cam-a", "9" * 4999]
    assert sorted(values, key=party_sort_key) == [
        "-20", "-3", "2", "10", "9" * 4999, huge, "cam-a", "cam-b"
    ]  # fmt: skip


def test_a_config_home_where_the_resume_key_cannot_be_made_is_refused_before_ray(
    workdir, capsys, monkeypatch
):
    """A sweep --resume could never continue is refused, rather than found out when a
    resume fails."""
    monkeypatch.setenv("XDG_CONFIG_HOME", "/proc/nonexistent")
    before = snapshot(workdir)
    assert call("sweep", ["moon_mu", "--budget", "smoke"]) == 2
    assert_one_error_line(
        capsys.readouterr().err,
        "the resume key /proc/nonexistent/fedsweep/resume.key cannot be made (No such file",
    )
    assert snapshot(workdir) == before


def test_an_error_reason_is_whole_never_cut_mid_word():
    from federated.cli.error_reason import error_reason

    torch_like = RuntimeError(
        "Weights only load failed. This file can still be loaded, to do so you have two "
        "options, do those steps only if you trust the source of the checkpoint.\n(1) ..."
    )
    assert error_reason(torch_like) == "Weights only load failed."
    path = "/a/" + "very-long-folder-name/" * 20 + "coins_0048.png"
    assert error_reason(OSError(f"cannot identify image file {path!r}")).endswith("0048.png'")
    assert error_reason(EOFError()) == "EOFError"
    assert error_reason(ValueError(""), default="") == ""


# ----------------------------------------- the parties' state: memory budget and folder
def _physical_mib() -> int:
    from federated.runtime.machine_memory import physical_memory

    return physical_memory() // 2**20


@pytest.mark.parametrize("algorithm", ["ditto", "fedavg"])
@pytest.mark.parametrize("over", [1, 10**9])
def test_a_party_memory_budget_above_the_machines_memory_is_refused(algorithm, over):
    """A budget beyond the physical memory would switch the memory refusal off (issue
    67: ``--party-memory-mib 1000000000`` accepted a 1262.8 GiB run): refused, whatever
    the method, naming how the machine's memory was read."""
    from federated.config.data_checks import with_data_checked
    from tests.conftest import tiny

    mib = _physical_mib() + over
    with pytest.raises(ConfigError) as caught:
        with_data_checked(tiny(algorithm=algorithm, party_memory_mib=mib))
    assert str(caught.value) == (
        f"invalid config: party_memory_mib={mib} (allowed: at most {_physical_mib()}, this "
        "machine's physical memory in MiB (MemTotal of /proc/meminfo, else os.sysconf's pages))"
    )


@pytest.mark.parametrize(
    ("folder", "problem"),
    [
        ("/proc/fedsweep-states", "/proc is not writable"),
        (__file__ + "/states", f"{__file__} is a file, not a folder"),
        (__file__, f"{__file__} is not a folder"),
    ],
    ids=["unwritable", "under-a-file", "a-file"],
)
def test_a_party_state_dir_that_cannot_be_written_is_refused(folder, problem):
    from federated.config.data_checks import with_data_checked
    from tests.conftest import tiny

    with pytest.raises(ConfigError) as caught:  # FedAvg keeps nothing, but it was written
        with_data_checked(tiny(party_state_dir=folder))
    assert str(caught.value) == (
        f"invalid config: party_state_dir={folder!r} (allowed: a writable folder; {problem})"
    )


def test_an_unwritable_tmpdir_is_refused_for_a_run_that_may_spill_never_swapped(monkeypatch):
    """Python's tempfile falls back to /tmp when $TMPDIR cannot be written; a run whose
    parties keep state (and may spill it) is refused instead, one that keeps none runs."""
    from federated.config.data_checks import with_data_checked
    from tests.conftest import tiny

    monkeypatch.setenv("TMPDIR", "/proc/fedsweep-tmp")
    with pytest.raises(ConfigError) as caught:
        with_data_checked(tiny(algorithm="moon"))
    assert str(caught.value) == (
        "invalid config: party_state_dir=None (allowed: a writable folder; the default, the "
        "temporary folder /proc/fedsweep-tmp ($TMPDIR), cannot be used: /proc is not "
        "writable; pass --party-state-dir)"
    )
    assert with_data_checked(tiny(algorithm="fedavg")).party_state_dir is None
