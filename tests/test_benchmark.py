"""The round-time benchmark (issue 6): its reduced mode produces its tables, its plain
loop trains the same parties on the same data as fedsweep, and its side-by-side reading
of a sweep's result files is right.  Timings are never asserted beyond being positive:
the targets are checked by the benchmark on a quiet machine, not by tests."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import round_time
from benchmarks.cases import Case
from benchmarks.isolation import measure
from benchmarks.round_time_measure import base_case, fedsweep_columns
from benchmarks.round_time_options import build_parser, resolve_options
from benchmarks.round_time_render import MAIN_COLUMNS, SCALING_COLUMNS, TARGET_COLUMNS
from benchmarks.scaling import linear_fit, parse_parties, scaling_cases
from benchmarks.side_by_side import (
    SweepSetting,
    levels_for,
    measure_side_by_side,
    sweep_throughput,
    trial_origin,
)
from benchmarks.straightforward import StraightforwardRun
from benchmarks.targets import check_targets
from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun

ROOT = Path(__file__).resolve().parents[1]
STATUSES = {"met", "missed", "n/a", "not measured"}


def run_benchmark(out: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "benchmarks.round_time", "--quick", "--out", str(out), *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def positive(row: dict, *keys: str) -> None:
    for key in keys:
        value = float(row[key])
        assert math.isfinite(value) and value > 0, (key, row[key])


def finite(row: dict, *keys: str) -> None:
    for key in keys:
        assert math.isfinite(float(row[key])), (key, row[key])


# the round-time benchmark starts no Ray: its runs go beside the Ray sweeps, not among them
ROUND_TIME_RUNS = pytest.mark.xdist_group("round_time_quick")


@pytest.fixture(scope="module")
def default_quick_run(tmp_path_factory) -> tuple[Path, str]:
    """``python -m benchmarks.round_time --quick`` (README, CI), run once for the tests
    that read it (its folder, its printed tables): both are in ROUND_TIME_RUNS, so on
    one pytest-xdist worker."""
    out = tmp_path_factory.mktemp("round_time_quick")
    return out, run_benchmark(out).stdout


@pytest.mark.slow
@ROUND_TIME_RUNS
def test_the_default_quick_run_covers_every_dataset_and_method(default_quick_run):
    """A row per dataset and method, the scaling grid, and a target per row."""
    out, _ = default_quick_run
    main = read_csv(out / "round_time.csv")
    pairs = {(r["dataset"], r["algorithm"]) for r in main}
    assert pairs == {(d, a) for d in ("synthetic", "fmnist") for a in ("fedavg", "fedprox", "moon")}
    scaling = read_csv(out / "scaling.csv")
    assert len(scaling) == 2 * 4  # fedavg, moon x (N = 4, 8, 16:0.25 at E = 1; E = 2)
    # 5x, 3x, 85%, 1.8x, 10%, packed MOON 1.5x, packed FedAvg 1.4x, side by side
    assert len(read_csv(out / "targets.csv")) == 2 + 2 + 6 + 2 + 6 + 2 + 2 + 1


@pytest.mark.slow
@ROUND_TIME_RUNS
def test_a_quick_run_measures_the_users_round_and_render_reprints_it(
    default_quick_run, tmp_path, synthetic, capsys
):
    """The tables carry every column they print; packed-over-sequential ratios are numbers;
    the row times the round a user's run trains (the same samples); MOON's FLOPs and party
    state are MOON's; ``--render`` of the saved run prints the same tables and targets."""
    out_dir, out = default_quick_run
    main = read_csv(out_dir / "round_time.csv")
    assert {c.key for c in MAIN_COLUMNS} <= set(main[0])
    for row in main:
        finite(row, "packed_speedup", "packed_train_speedup", "packed_mib_per_party")
        positive(row, "round_s", "samples_per_s", "sf_samples_per_s", "bare_samples_per_s")
        assert float(row["packed_speedup"]) > 0 and float(row["packed_train_speedup"]) > 0
    by_pair = {(r["dataset"], r["algorithm"]): r for r in main}
    fedavg, moon = by_pair["synthetic", "fedavg"], by_pair["synthetic", "moon"]
    # the setting the heading names (simple-cnn, 10 parties, Dir(0.5), batch 64, E = 1), as
    # a user writes it; all parties train every round, so every round trains these samples
    users = RunConfig(
        algorithm="fedavg", dataset="synthetic", model="simple-cnn", n_parties=10, beta=0.5,
        batch_size=64, local_epochs=1, rounds=1, data_fraction=0.02, test_fraction=0.02,
        device="cpu", threads=1,
    )  # fmt: skip
    round_row = FederatedRun(users, synthetic).run_round()
    assert int(fedavg["samples_round"]) == round_row["samples_this_round"]
    assert float(fedavg["vs_fedavg"]) == 1.0
    # MOON's arithmetic: 3 forwards' worth plus two frozen projections (5/3 of FedAvg's)
    assert float(moon["train_mflop"]) / float(fedavg["train_mflop"]) == pytest.approx(5 / 3, 0.01)
    assert float(moon["state_kib_per_party"]) > 0 and float(fedavg["state_kib_per_party"]) == 0

    scaling = read_csv(out_dir / "scaling.csv")
    grid = [("4", "1"), ("8", "1"), ("16", "1"), ("4", "2")]
    for algorithm in ("fedavg", "moon"):
        rows = [r for r in scaling if r["algorithm"] == algorithm]
        assert [(r["parties"], r["local_epochs"]) for r in rows] == grid
    assert {c.key for c in SCALING_COLUMNS} <= set(scaling[0])
    for row in scaling:
        finite(row, "packed_speedup")
    targets = read_csv(out_dir / "targets.csv")
    assert {c.key for c in TARGET_COLUMNS} <= set(targets[0])
    assert {r["status"] for r in targets} <= STATUSES
    side = next(r for r in targets if "side by side" in r["target"])
    assert side["status"] == "not measured"  # --quick skips the sweeps unless asked

    # --render reprints a saved run without measuring: the same tables and targets
    saved = out_dir / "round_time.json"
    assert round_time.main(["--render", str(saved), "--out", str(tmp_path / "again")]) == 0
    again = capsys.readouterr().out
    assert again.split("wrote")[0] == out.split("wrote")[0]
    assert read_csv(tmp_path / "again" / "targets.csv") == targets


@pytest.mark.slow
def test_process_isolation_gives_each_measurement_its_own_process():
    """``--isolation process`` reaches the measurements, and one runs in a process of its
    own: its peak holds the dataset it loaded on top of the run itself (one measurement:
    every other runs through the same ``measure``)."""
    args = ["--quick", "--isolation", "process", "--algorithms", "moon"]
    options = resolve_options(build_parser().parse_args([*args, "--datasets", "synthetic"]))
    assert options.isolation == "process"
    case = base_case(options, "moon", "synthetic")
    row = fedsweep_columns(
        measure("fedsweep", case.to_dict(), threads=options.threads, isolation=options.isolation)
    )
    positive(row, "round_s", "samples_per_s", "peak_mem_mib", "run_mem_mib")
    assert row["peak_mem_mib"] > row["run_mem_mib"]


def test_plain_loop_trains_the_same_parties_as_fedsweep(fmnist):
    case = Case(
        "fedavg", "fmnist", n_parties=10, rounds=1, warmup_rounds=0, data_fraction=0.05,
        test_fraction=0.02,
    )  # fmt: skip
    plain = StraightforwardRun(case)
    fed = FederatedRun(case.run_config(), fmnist)
    # same partition, batch 64 with the last partial batch dropped: same samples per round
    assert [len(s) for s in plain.party_sets] == fed.party_sizes
    assert plain.round()["samples_round"] == fed.run_round()["samples_this_round"]


@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox", "moon"])
def test_plain_loop_computes_fedsweeps_math(fmnist, algorithm):
    """Two parties smaller than one batch (each trains on one batch of all it holds, in any
    order) and no augmentation on Fashion-MNIST: nothing random differs, so three rounds
    must give fedsweep's global model.  MOON's and FedProx's terms (mu = 5) move the
    weights by 4e-4 or more in this setting, far above the tolerance (float summation
    order within a shuffled batch differs by ~1e-6).  The weights are compared, so each
    round's accuracy is taken on 2% of the test set (the whole of it was 6 s a case)."""
    case = Case(
        algorithm, "fmnist", n_parties=2, local_epochs=5, rounds=3, warmup_rounds=0,
        data_fraction=100 / 60_000, test_fraction=0.02, mu=5.0,
    )  # fmt: skip
    plain = StraightforwardRun(case, steady_state=False)  # MOON: no negative in round 1
    fed = FederatedRun(case.run_config(), fmnist)
    assert max(fed.party_sizes) < 64
    # the plain loop runs stock torch pooling, fedsweep its own kernel: same math
    kinds = {type(m).__name__ for m in plain.global_net.modules()}
    assert "MaxPool2d" in kinds and "MaxPool2x2" not in kinds
    assert "MaxPool2x2" in {type(m).__name__ for m in fed.global_model.modules()}
    for _ in range(case.rounds):
        plain.round()
        fed.run_round()
    mine, theirs = plain.global_net.state_dict(), fed.global_model.state_dict()
    for key, value in theirs.items():
        torch.testing.assert_close(mine[key], value, atol=1e-5, rtol=0)


def test_plain_moon_and_fedprox_rounds_run(synthetic):
    for algorithm in ("moon", "fedprox"):
        case = Case(
            algorithm, "synthetic", n_parties=4, rounds=1, data_fraction=0.02, test_fraction=0.02
        )
        row = StraightforwardRun(case).round()
        assert row["samples_round"] > 0 and row["train_s"] > 0 and row["eval_s"] > 0


def test_scaling_cases_vary_one_axis_at_a_time():
    base = Case("fedavg", "synthetic")
    cases = scaling_cases(base, ["moon"], parse_parties("10,50,100:0.2"), [1, 2, 5])
    points = [(c.n_parties, c.sample_fraction, c.local_epochs) for c in cases]
    assert points == [(10, 1.0, 1), (50, 1.0, 1), (100, 0.2, 1), (10, 1.0, 2), (10, 1.0, 5)]
    assert {c.algorithm for c in cases} == {"moon"}


def test_linear_fit_recovers_a_line():
    rows = [{"x": x, "y": 0.5 + 2e-4 * x} for x in (1000, 5000, 20000)]
    fit = linear_fit(rows, "x", "y")
    assert fit["a"] == pytest.approx(0.5) and fit["b"] == pytest.approx(2e-4)
    assert fit["r2"] == pytest.approx(1.0)


def test_trial_origin_narrows_whole_second_timestamps():
    origin = 1000.37
    totals = [1.9, 2.55, 3.2, 4.05]
    rows = [{"timestamp": int(origin + t), "time_total_s": t} for t in totals]
    assert abs(trial_origin(rows) - origin) < 0.2


def write_trial(folder: Path, origin: float, rounds: list[tuple[float, float, int]]) -> None:
    """A trial folder as Tune writes it: rows of (time_total_s, round_seconds, samples)."""
    folder.mkdir(parents=True)
    (folder / "params.json").write_text("{}")
    lines = []
    for i, (total, seconds, samples) in enumerate(rounds, 1):
        row = {
            "round": i,
            "timestamp": int(origin + total),
            "time_total_s": total,
            "round_seconds": seconds,
            "train_seconds": 0.9 * seconds,
            "samples_this_round": samples,
        }
        lines.append(json.dumps(row))
    (folder / "result.json").write_text("\n".join(lines) + "\n")


def test_sweep_throughput_spans_first_round_start_to_last_round_end(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    manifest = {"resources": {"cpu": 1.0, "gpu": 0.0}, "max_concurrent": None}
    (sweep / "fedsweep_sweep.json").write_text(json.dumps(manifest))
    # two trials side by side, rounds of 2 s: a from t = 100.95 to 105.05, b from 101.45 to
    # 105.55 (whole-second timestamps; the fractions of time_total_s pin the origins)
    write_trial(sweep / "a", 100.0, [(2.95, 2.0, 1000), (5.05, 2.0, 1000)])
    write_trial(sweep / "b", 101.0, [(2.45, 2.0, 1000), (4.55, 2.0, 1000)])
    result = sweep_throughput(sweep, launched=90.0, wall_s=20.0)
    assert result["trials"] == 2 and result["samples"] == 4000
    assert result["span_s"] == pytest.approx(4.6, abs=0.05)
    assert result["samples_per_s"] == pytest.approx(4000 / 4.6, rel=0.02)
    assert result["concurrency"] == pytest.approx(8 / 4.6, rel=0.02)
    assert result["startup_s"] == pytest.approx(10.95, abs=0.05)
    assert result["wall_samples_per_s"] == pytest.approx(200.0)


def test_targets_read_the_table():
    main = [
        {
            "dataset": "synthetic",
            "algorithm": "fedavg",
            "local_epochs": 1,
            "train_speedup": 3.5,
            "bare_fraction": 0.9,
            "vs_fedavg": 1.0,
            "eval_fraction": 0.05,
        },
        {
            "dataset": "synthetic",
            "algorithm": "moon",
            "local_epochs": 1,
            "train_speedup": 4.0,
            "bare_fraction": 0.8,
            "vs_fedavg": 1.7,
            "eval_fraction": 0.12,
        },
    ]
    side = [
        {"level": "max 1 at once", "max_concurrent": 1, "speedup": 1.0},
        {"level": "default resources", "max_concurrent": None, "speedup": 1.7},
    ]
    rows = check_targets(main, side)
    by_text = {(r["target"], r["scope"]): r["status"] for r in rows}
    assert (
        by_text[("training samples/s >= 5x the straightforward loop (MOON)", "synthetic moon")]
        == "missed"
    )
    assert (
        by_text[("training samples/s >= 3x the straightforward loop (FedAvg)", "synthetic fedavg")]
        == "met"
    )
    assert by_text[("samples/s >= 85% of the bare model step", "synthetic moon")] == "missed"
    assert by_text[("MOON round <= 1.8x FedAvg's", "synthetic moon")] == "met"
    assert by_text[("evaluation <= 10% of a round at E = 1", "synthetic moon")] == "missed"
    side_rows = [r for r in rows if "side by side" in r["target"]]
    assert [(r["scope"], r["status"]) for r in side_rows] == [("default resources", "met")]


def test_gpu_levels_pack_trials_with_fractional_gpus():
    levels = levels_for("1,2,4,8", gpu=True)
    assert [lv.args() for lv in levels][-1] == [
        "--max-concurrent",
        "8",
        "--gpus-per-trial",
        "0.125",
    ]
    one_then_default = levels_for("1,default", gpu=False)
    assert [lv.args() for lv in one_then_default] == [["--max-concurrent", "1"], []]


@pytest.mark.slow
def test_side_by_side_runs_real_sweeps(tmp_path):
    """One level, the default resources (two trials at a time here): the level that
    reads concurrency from the rows; a ``--max-concurrent`` level's arguments are
    checked above (``levels_for``) and every other sweep test passes them to Tune."""
    setting = SweepSetting(rounds=1, data_fraction=0.02, seeds=1)
    rows = measure_side_by_side(setting, levels_for("default", gpu=False), tmp_path)
    assert [r["level"] for r in rows] == ["default resources"]
    assert rows[0]["max_concurrent"] is None
    for row in rows:
        assert row["trials"] == 3 and row["samples_per_s"] > 0 and row["wall_s"] > row["span_s"]
        # busy trial-seconds fit two slots over the span, give or take the one-second
        # resolution of the rows' timestamps the span is rebuilt from (reused actors
        # start the third trial within the same second as the first two end)
        busy = row["concurrency"] * row["span_s"]
        assert 0 < busy <= 2 * (row["span_s"] + 1.0) and row["concurrency"] > 0
