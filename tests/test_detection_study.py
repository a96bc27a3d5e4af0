"""The built-in ``street`` study: it plans on a Street-like tree the builder writes (a small
one here), keeps every camera's images at the laptop budget, and its pretrained start is
shipped and fits the default detector; a real detection sweep with ``--rerun-best`` and
the report's rounds-to-target and per-party mAP tables on it."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from statistics import mean

import pytest

from federated.config.data_checks import with_data_checked
from federated.models import build_model
from federated.models.pretrained_start import check_start, shipped_starts
from search_spaces import BUDGETS, STUDIES
from study.plan import SweepPlan
from tests.built_once import built_once

ROOT = Path(__file__).resolve().parent.parent


def build_small_tree(out: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "build_street_task.py"),
            str(out),
            # 64 pixels and 30 test images: the shipped start detects there (test mAP@0.5
            # about 0.3 after a round), so the sweep below reports numbers, not zeros
            "--size",
            "64",
            "--cameras",
            "10",
            "--unseen-cameras",
            "1",
            "--train-images",
            "120",
            "--test-images",
            "30",
        ],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def small_tree(tmp_path_factory) -> Path:
    """A small Street tree (the builder is seeded), built once for both pytest-xdist
    workers: its tests run on either."""
    return built_once(tmp_path_factory, "street-small-tree", build_small_tree)


def test_the_street_study_plans_the_papers_axes_at_the_laptop_budget(small_tree):
    study = STUDIES["street"]
    plan = SweepPlan.build(study, BUDGETS["laptop"], overrides={"dataset": f"folder:{small_tree}"})
    trials = plan.trials()
    assert plan.n_trials == 2 * 3 * 2 * 3  # parties x local work x start, 3 seeds
    configs = [t.config for t in trials]
    assert {c["partition_by"] for c in configs} == {"device1_id", "device2_id"}
    assert {(c["local_epochs"], c["batch_size"]) for c in configs} == {(1, 8), (5, 8), (1, 2)}
    assert {c["init"] for c in configs} == {None, "fedsweep:street-fcos-tiny"}
    for c in configs:  # a tenth of the rounds; every camera's images, the whole test set
        assert c["rounds"] == 10 and c["data_fraction"] == 1.0 and c["test_fraction"] == 1.0
        assert c["algorithm"] == "fedavg" and c["partition"] == "natural"


def test_the_street_study_file_reads_where_its_tree_is_built(small_tree, tmp_path, monkeypatch):
    """From a folder holding the tree the study names (trees/street-small, as the docs build
    it), the study file reads: its fixed partition = "natural" takes the partition_by the
    parties axis sets (it was refused there, and every command's import failed)."""
    (tmp_path / "trees").mkdir()
    (tmp_path / "trees" / "street-small").symlink_to(small_tree, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    study = STUDIES["street"]  # what a command reads
    assert study.dataset == "folder:trees/street-small" and study.fixed["partition"] == "natural"
    plan = SweepPlan.build(study, BUDGETS["laptop"])
    assert plan.n_trials == 36
    assert {t.config["partition_by"] for t in plan.trials()} == {"device1_id", "device2_id"}


def test_the_pretrained_start_is_shipped_and_fits_the_default_detector(small_tree):
    from federated.data import load_dataset

    assert "street-fcos-tiny" in shipped_starts()
    spec = load_dataset(f"folder:{small_tree}").spec
    assert spec.default_model == "fcos-tiny"
    check_start(build_model("fcos-tiny", spec), "fedsweep:street-fcos-tiny", "fcos-tiny")


def test_the_plans_partitions_read_each_trials_camera_field(small_tree):
    """Street-5 and Street-20 are two image fields of one folder: the plan's check draws
    each trial's parties from its own field (5 groups, 10 cameras here)."""
    from study.preflight import partitions, trial_configs

    plan = SweepPlan.build(
        STUDIES["street"], BUDGETS["smoke"], overrides={"dataset": f"folder:{small_tree}"}
    )
    rows = partitions(plan, trial_configs(plan))
    parties = {r["partition_by"]: len(r["party_names"]) for r in rows}
    assert parties == {"device1_id": 5, "device2_id": 10}


def test_a_reused_worker_loads_each_trials_party_field(small_tree, tmp_path):
    """A reused trial actor holds the data it loaded; a trial on the other camera field
    of the same folder loads its own party ids (a Street-20 trial once took the held
    Street-5 ids and failed: party 5 had no images)."""
    from federated.config.run_config import RunConfig
    from federated.data.loading import load_run_data

    def config(field: str) -> RunConfig:
        return with_data_checked(RunConfig(
            dataset=f"folder:{small_tree}", task="detection", model="fcos-tiny",
            partition="natural", partition_by=field, data_root=str(tmp_path), device="cpu",
        ))  # fmt: skip

    street5 = load_run_data(config("device1_id"))
    assert load_run_data(config("device1_id")) is street5  # the next trial alike: held
    street20 = load_run_data(config("device2_id"))
    assert int(street5.train_parties.max()) + 1 == 5
    assert int(street20.train_parties.max()) + 1 == 10


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_a_detection_sweep_reruns_its_best_and_reports_rounds_to_target_and_per_party_map(
    small_tree, tmp_path
):
    """A real grid sweep (Ray) of FedAvg and FedProx on the tree's Street-5 parties from
    the shipped start, 2 rounds, one seed, ``--rerun-best 1``; then the report: the
    rounds to reach FedAvg's final test mAP@0.5 and the per-party mAP@0.5 on each party's
    own test split, their numbers those of the trials' rows and parties.csv."""
    import pandas as pd

    from analysis.primary_metric import metric_of
    from analysis.report import main as report
    from analysis.sections.selection import _noise_figure
    from federated.tasks.detection.spec import SPEC as DETECTION_TASK
    from tests.test_sweep_ray import manifest, params, rounds, sweep, sweep_dirs, trial_dirs

    def parties_of(trial: Path) -> set[str]:
        return {r["party"] for r in _csv(trial / "parties.csv")}

    sweep(
        tmp_path / "runs",
        *("--vary", "algorithm=fedavg,fedprox", "--dataset", f"folder:{small_tree}"),
        *("--set", "partition=natural", "--set", "partition_by=device1_id"),
        *("--set", "rounds=2", "--set", "local_epochs=1", "--set", "batch_size=8"),
        *("--set", "lr=0.02", "--set", "init=fedsweep:street-fcos-tiny"),
        *("--set", "party_test_fraction=0.25", "--set", "threads=1"),
        *("--seeds", "1", "--rerun-best", "1"),
        *("--max-concurrent", "1"),  # one trial process, reused: less CPU
    )
    search_dir, best_dir = sweep_dirs(tmp_path / "runs")
    assert manifest(search_dir)["status"] == manifest(best_dir)["status"] == "finished"
    trials = {params(t)["algorithm"]: t for t in trial_dirs(search_dir)}
    assert sorted(trials) == ["fedavg", "fedprox"]
    selection = manifest(best_dir)["selection"]
    assert selection["metric"] == "val_map50" and selection["compared_trials"] == 2
    (rerun,) = trial_dirs(best_dir)
    assert params(rerun)["seed"] == 10_000
    assert f"algorithm={params(rerun)['algorithm']}" == selection["point"]
    finals = {}  # (algorithm, seed) -> the final round's test mAP@0.5
    for trial in [*trials.values(), rerun]:
        rows = rounds(trial)
        assert sorted(rows) == [1, 2]
        # the start detects: well above nothing learned, below perfect
        assert all(0.1 < r["test_map50"] < 0.9 for r in rows.values())
        finals[params(trial)["algorithm"], params(trial)["seed"]] = rows[2]["test_map50"]

    out = tmp_path / "report"
    assert report([str(search_dir), str(best_dir), "--out", str(out), "--no-pdf", "--quiet"]) == 0
    text = (out / "report.md").read_text()
    assert "rounds to reach FedAvg's final test mAP@0.5, and speed-up" in text
    assert "Per-party mAP@0.5 of the global model on each party's own test split" in text

    # rounds to target: each seed's target is that seed's FedAvg final mAP@0.5, which
    # FedAvg reaches at its last round; every method's rounds and speed-up are numbers
    communication = _csv(out / "tables" / "adhoc_communication.csv")
    assert {(r["algorithm"], r["seed"]) for r in communication} == {
        ("fedavg", "0"),
        ("fedprox", "0"),
        ("fedavg", "10000"),
    }
    for r in communication:
        assert float(r["target"]) == finals["fedavg", int(r["seed"])]
        assert r["baseline_learned"] == "True" and r["reached"] == "True"
        assert 1 <= float(r["rounds_needed"]) <= 2
        assert float(r["speedup"]) == pytest.approx(2 / float(r["rounds_needed"]))
        if r["algorithm"] == "fedavg":
            assert float(r["rounds_needed"]) == 2

    # per party: the final round's mean over the parties' own test splits, as parties.csv
    # holds them, then the mean over seeds
    def party_mean(trial: Path) -> float:
        rows = _csv(trial / "parties.csv")
        last = max(int(r["round"]) for r in rows)
        return mean(float(r["party_map50"]) for r in rows if int(r["round"]) == last)

    per_party = {
        (r["algorithm"], r["party_metric"]): r for r in _csv(out / "tables" / "per_party_adhoc.csv")
    }
    fedavg = per_party["fedavg", "mean over parties"]
    expected = mean([party_mean(trials["fedavg"]), party_mean(rerun)])
    assert float(fedavg["mean"]) == pytest.approx(expected, abs=1e-12)
    assert fedavg["n"] == "2" and 0.1 < float(fedavg["mean"]) < 0.9
    fedprox = per_party["fedprox", "mean over parties"]
    assert float(fedprox["mean"]) == pytest.approx(party_mean(trials["fedprox"]), abs=1e-12)

    # issue 68, point 2, on this real search and rerun (mAP@0.5, a pooled metric): the
    # evaluation-noise table's k = N row is the full evaluation itself, no changed choice
    # and no regret, and its figure gives regret and the changed choices an axis each
    (noise_file,) = (out / "tables").glob("selection_*_noise.csv")
    noise = pd.read_csv(noise_file)
    parties = len(parties_of(trials["fedavg"]))
    assert list(noise["k"])[-1] == parties
    assert tuple(noise.iloc[-1][["changed", "regret"]]) == (0.0, 0.0)
    assert f"| {parties} | 0 | 0.0000 |" in text
    assert f"the reference, k = {parties}, is the size-weighted mean over all {parties}" in text
    mean_ap = metric_of(DETECTION_TASK)
    left, right = _noise_figure(noise, mean_ap, "t").axes
    assert left.get_ylabel() == f"expected regret ({mean_ap.diff_words})"
    assert right.get_ylabel() == "choice changed (%)"


def map_communication_table(rows: list[dict], trials: list[dict]):
    """The communication table (rounds to the baseline's final mAP@0.5) of hand-made
    ``rows`` (per round) and ``trials`` of a detection study, by dataset."""
    import pandas as pd

    from analysis.primary_metric import metric_of
    from analysis.tables.table import communication_table
    from federated.tasks.detection.spec import SPEC as DETECTION_TASK

    return communication_table(
        pd.DataFrame(rows),
        pd.DataFrame(trials),
        columns=["dataset"],
        name="c",
        title="t",
        metric=metric_of(DETECTION_TASK),
    )


def test_rounds_to_a_target_of_nothing_learned_give_no_speed_up():
    """A baseline whose final mAP@0.5 is 0 (it found nothing: 2 rounds from scratch on a
    small tree do this) sets a target every round reaches; the table says so instead of a
    speed-up (FedProx "reaching" 0.000 at round 1 read 2.0x before)."""

    curves = {"fedavg": [0.0, 0.0], "fedprox": [0.0, 0.05], "moon": [0.02, 0.04]}
    trials, rows = [], []
    for order, (algorithm, curve) in enumerate(curves.items()):
        trial = f"t-{algorithm}"
        trials.append(
            {
                "sweep": "s",
                "trial": trial,
                "status": "completed",
                "seed": 0,
                "order": order,
                "algorithm": algorithm,
                "dataset": "folder:x",
                "last_round": 2,
                "sweep_started": "2026-11-26",
            }
        )
        rows += [
            {"sweep": "s", "trial": trial, "round": r, "test_map50": v}
            for r, v in enumerate(curve, 1)
        ]
    table = map_communication_table(rows, trials)
    assert set(table.display.iloc[:, 0]) == {"no target: FedAvg 0.000 (nothing learned)"}
    assert set(table.display.iloc[:, 1]) == {"none (baseline not learned)"}
    assert table.data["speedup"].isna().all() and not table.data["baseline_learned"].any()
    assert any("nothing learned" in n and "every round reaches" in n for n in table.notes)
