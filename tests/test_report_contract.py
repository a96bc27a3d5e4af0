"""The results contract (report issue, must-have 1 and 5): a task's declaration and its
columns recorded in the manifest and read by the report, a plug-in task's folder
reported with none of its code imported, a folder written before the contract still
reported; and the report defects the contract removes, each by the issue's number, on
hand-made detection folders (tests/report_contract_fakes.py)."""

from __future__ import annotations

import csv
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.figures.plots import IMAGES_PER_PARTY, partition_counts
from analysis.reading.loading import load_results
from analysis.report import write_report
from analysis.stats.trial_statistic import FINAL
from analysis.tables.study_tables import TableOptions
from federated.contract.columns import OWN_TEST, TEST, declared_columns
from federated.contract.task_spec import TaskSpec, spec_of_manifest
from federated.tasks.detection.spec import SPEC as DETECTION_TASK
from federated.tasks.written_before import WRITTEN_BEFORE_THE_CONTRACT
from search_spaces import BUDGETS
from search_spaces.adhoc import adhoc_study
from study.plan import SweepPlan
from tests.report_contract_fakes import (
    BOXES,
    CAMERAS,
    IMAGES,
    camera_partition,
    write_detection_sweep,
)
from tests.test_detection_study import map_communication_table

ROOT = Path(__file__).resolve().parent.parent
FINALS = {"fedavg": 0.30, "fedprox": 0.32, "moon": 0.35}


def rising(config) -> list[float]:
    """mAP@0.5 rising to the method's final value, seed s adding s/100."""
    final = FINALS[config["algorithm"]] + config["seed"] / 100
    return [final * r / 4 for r in range(1, 5)]


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


# --------------------------------------------------------------------- the contract
def test_every_task_declares_itself_and_the_declaration_survives_json():
    from federated.registry import load_method

    for name in ("classification", "score", "detection", "segmentation"):
        spec = load_method("task", name).task_spec()
        assert TaskSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
        assert spec.metrics == tuple(load_method("task", name).metrics)
    counted = {n: load_method("task", n).task_spec().counted for n in ("detection", "segmentation")}
    assert counted == {"detection": "boxes", "segmentation": "pixels"}
    # a plug-in's declaration is its metrics, under the name its rows carry
    toy = load_method("task", "tests.test_toy_task:OrdinalTask").task_spec(
        "tests.test_toy_task:OrdinalTask"
    )
    assert toy.name == "tests.test_toy_task:OrdinalTask" and toy.counted == "images"
    assert [m.stem for m in toy.metrics] == ["within1", "rank_mae"]


def test_a_percentage_metric_speaks_its_own_name_in_differences_and_axes():
    """A segmentation report once said its mIoU differences were "accuracy points" and
    drew "accuracy (%)" on its axes: a percentage's words are its own metric's."""
    from analysis.folder_task import sweep_task
    from analysis.primary_metric import metric_of
    from federated.registry import load_method

    # what a segmentation sweep's manifest declares to the report
    segmentation = load_method("task", "segmentation").task_spec().to_dict()
    declared = {
        task: sweep_task({"task_spec": spec})
        for task, spec in (
            ("classification", load_method("task", "classification").task_spec().to_dict()),
            ("segmentation", segmentation),
        )
    }
    words = {
        (task, stem): (
            metric_of(declared[task], stem).diff_words,
            metric_of(declared[task], stem).axis_label,
        )
        for task, stem in (("classification", "acc"), ("segmentation", "miou"))
    }
    assert words == {
        ("classification", "acc"): ("accuracy points", "accuracy (%)"),
        ("segmentation", "miou"): ("mIoU points", "mIoU (%)"),
    }


def test_a_damaged_declaration_is_refused_in_one_line():
    with pytest.raises(ValueError) as err:
        TaskSpec.from_dict({"name": "x", "metrics": []})
    assert str(err.value) == "task_spec names no metric (allowed: one or more)"


def test_an_old_manifest_is_read_by_what_it_carries():
    old = {"task": "detection"}  # before task_spec: the name's meaning then
    assert spec_of_manifest(old, WRITTEN_BEFORE_THE_CONTRACT) is DETECTION_TASK
    plugin = {"task": "pkg.mod:Task", "metric_specs": [m.to_dict() for m in DETECTION_TASK.metrics]}
    spec = spec_of_manifest(plugin, WRITTEN_BEFORE_THE_CONTRACT)
    assert spec.name == "pkg.mod:Task" and spec.metrics == DETECTION_TASK.metrics
    assert spec.reading_note == "" and spec.counted == ""
    assert spec_of_manifest({}, WRITTEN_BEFORE_THE_CONTRACT) is None


def test_each_column_says_its_metric_split_model_and_cadence():
    columns = {row["column"]: row for row in declared_columns(DETECTION_TASK)}
    assert columns["test_map50"]["split"] == TEST
    assert columns["test_map50"]["metric"] == "mAP@0.5"
    assert columns["test_loss"]["higher_is_better"] is False
    assert columns["party_test_map50_worst10"]["split"] == OWN_TEST
    assert "finetune_epochs" in columns["party_test_map50_worst10"]["model"]
    assert "party_scores_every" in columns["val_map"]["cadence"]
    assert "party_loss/<party>" not in columns  # the loss is never recorded per party


def test_the_report_writes_what_each_rounds_column_holds(tmp_path):
    write_detection_sweep(tmp_path / "runs", rising)
    out = tmp_path / "report"
    write_report(
        load_results(tmp_path / "runs"), out, TableOptions(statistic=FINAL), formats=("png",)
    )
    declared = {r["column"]: r for r in read_csv(out / "data" / "columns.csv")}
    assert set(declared) == {"test_map50", "test_map", "test_loss"}
    assert declared["test_map50"]["split"] == TEST and declared["test_map"]["metric"] == (
        "mAP@[.5:.95]"
    )
    assert "[data/columns.csv](data/columns.csv)" in (out / "report.md").read_text()


PLUGIN_REPORT = """
import sys
from pathlib import Path
from analysis.reading.loading import load_results
from analysis.report import write_report
results = load_results(sys.argv[1])
write_report(results, Path(sys.argv[2]), formats=("png",))
assert "tests.test_toy_task" not in sys.modules, "the report imported the task"
print("task not imported")
"""


def test_a_plugin_tasks_folder_is_reported_without_importing_its_code(tmp_path):
    """Must-have 5: the toy task's declaration read from the manifest; the report's
    process never imports ``tests.test_toy_task``."""
    from federated.registry import load_method
    from tests.analysis_fakes import manifest, plan_configs, write_trial

    task = "tests.test_toy_task:OrdinalTask"
    spec = load_method("task", task).task_spec(task)
    configs = [
        {**c, "task": task, "primary_metric": "within1", "rounds": 2}
        for c in plan_configs("comparison", seeds=2)
        if c["algorithm"] in ("fedavg", "moon") and c["dataset"] == "fmnist"
    ][:4]
    folder = tmp_path / "runs" / "ordinal"
    folder.mkdir(parents=True)
    info = manifest(
        "ordinal",
        "comparison",
        task=task,
        task_spec=spec.to_dict(),
        columns=declared_columns(spec),
        n_trials=len(configs),
    )
    (folder / "fedsweep_sweep.json").write_text(json.dumps(info))
    for i, config in enumerate(configs):
        rows = []
        for r in (1, 2):
            within = 0.5 + 0.1 * r + (0.05 if config["algorithm"] == "moon" else 0.0)
            rows.append(
                {
                    "round": r,
                    "test_within1": within,
                    "test_loss": 0.3,
                    "test_rank_mae": 2.0 - within,
                    "diverged": False,
                    "config": config,
                    "round_seconds": 1.0,
                    "training_iteration": r,
                    "trial_id": "x",
                }
            )
        write_trial(folder, i, config, [], rows=rows)
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-c", PLUGIN_REPORT, str(folder), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "PYTHONPATH": str(ROOT),
            "OMP_NUM_THREADS": "1",
            "MPLBACKEND": "Agg",
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
        },
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "task not imported" in done.stdout
    text = (out / "report.md").read_text()
    assert "within-one accuracy" in text
    trials = read_csv(out / "data" / "trials.csv")
    moon = [float(t["final_within1"]) for t in trials if t["algorithm"] == "moon"]
    assert moon == pytest.approx([0.75] * len(moon)) and moon


# ------------------------------------------------------------------ defect 2 (issue 52)
def test_defect_2_trials_and_rounds_csv_carry_the_primary_metrics_own_columns(tmp_path):
    """A detection study's data/trials.csv has final_map50, final_map50_std and
    best_map50 of each trial's rows, and no all-NaN accuracy columns; rounds.csv has
    test_map50 and no test_acc."""
    write_detection_sweep(tmp_path / "runs", rising)
    out = tmp_path / "report"
    write_report(
        load_results(tmp_path / "runs"), out, TableOptions(statistic=FINAL), formats=("png",)
    )
    trials = read_csv(out / "data" / "trials.csv")
    assert len(trials) == 9
    for column in ("final_acc", "final_acc_std", "best_acc", "best_round", "best_acc_round"):
        assert column not in trials[0], column
    for t in trials:
        final = FINALS[t["algorithm"]] + int(t["seed"]) / 100
        assert float(t["final_map50"]) == pytest.approx(final)
        assert float(t["best_map50"]) == pytest.approx(final)
        assert t["best_map50_round"] == "4"
    rounds = read_csv(out / "data" / "rounds.csv")
    assert "test_acc" not in rounds[0] and len(rounds) == 36
    last = sorted(float(r["test_map50"]) for r in rounds if r["round"] == "4")
    assert last == pytest.approx(sorted(FINALS[m] + s / 100 for m in FINALS for s in range(3)))


def test_defect_2_a_folder_written_before_the_contract_reads_the_same(tmp_path):
    write_detection_sweep(tmp_path / "runs", rising, contract=False)
    results = load_results(tmp_path / "runs")
    fedavg = results.trials[results.trials["algorithm"] == "fedavg"]
    assert sorted(fedavg["final_map50"]) == pytest.approx([0.30, 0.31, 0.32])
    assert "final_acc" not in results.trials  # named from the declared stem, map50


# ------------------------------------------------------------------ defect 1 (issue 52)
def test_defect_1_a_detection_partition_counts_boxes_of_each_class():
    """Detection.party_class_counts: each party's boxes of each class, not its images
    as one class (partitions.json's ``class_counts``, Fig. 5)."""
    from types import SimpleNamespace

    from federated.tasks.detection.targets import BoxTargets
    from federated.tasks.detection.task import Detection

    # 4 images: classes [0, 1], [1], [2, 2, 1], [] ; parties {0, 2} and {1, 3}
    labels = torch.tensor([0, 1, 1, 2, 2, 1])
    offsets = torch.tensor([0, 2, 3, 6, 6])
    boxes = torch.tensor([[0.0, 0.0, 4.0, 4.0]] * 6)
    spec = SimpleNamespace(target_names=("coin", "digit", "glyph"), n_classes=3)
    data = SimpleNamespace(train_y=BoxTargets(boxes, labels, offsets), spec=spec)
    counts = Detection.party_class_counts(data, [np.array([0, 2]), np.array([1, 3])])
    assert counts.tolist() == [[1, 2, 2], [0, 1, 0]]


def test_defect_1_the_heat_map_draws_boxes_per_class_and_images_per_party():
    counts, unit, rows = partition_counts(camera_partition())
    assert counts.tolist() == BOXES and unit == "boxes" and rows == ["coin", "digit", "glyph"]
    # a folder written before: every camera's images as one count, never as "coin"
    counts, unit, rows = partition_counts(camera_partition(counted=False))
    assert counts.tolist() == [[n] for n in IMAGES]
    assert unit == IMAGES_PER_PARTY == "images per party" and rows == [IMAGES_PER_PARTY]


def test_defect_1_the_report_draws_the_cameras_partition(tmp_path):
    from analysis.figures import plots

    figure = plots.partition_heatmap(camera_partition())
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        f"{c}\n{n} img" for c, n in zip(CAMERAS, IMAGES)
    ]
    assert figure.axes[1].get_ylabel() == "boxes"
    write_detection_sweep(tmp_path / "runs", rising, partitions=[camera_partition()])
    out = tmp_path / "report"
    write_report(
        load_results(tmp_path / "runs"), out, TableOptions(statistic=FINAL), formats=("png",)
    )
    assert "a detection's boxes of each class" in (out / "report.md").read_text()


# ------------------------------------------------------------------ defect 3 (issue 52)
def test_defect_3_the_search_historys_best_so_far_is_the_selections_best():
    """Validation and test disagree: trial 1 is best on validation (what Optuna and the
    selection rank by), trial 2 on test.  The history's best so far is trial 1's, shown
    by its test value; before, it ranked by test and named trial 2 the best."""
    import pandas as pd

    from analysis.primary_metric import ACCURACY
    from analysis.stats.search import search_history
    from analysis.stats.selection import point_choice, trial_outcomes

    trials = pd.DataFrame(
        {
            "sweep": "s",
            "sweep_started": "",
            "order": [0, 1, 2],
            "trial": ["t0", "t1", "t2"],
            "point": ["lr=0.01", "lr=0.1", "lr=0.3"],
            "seed": 0,
            "status": "completed",
            "lr": [0.01, 0.1, 0.3],
            "final_acc": [0.58, 0.70, 0.40],
            "val": [0.65, 0.60, 0.66],
            "last_round": 4,
            "rounds": 4,
        }
    )
    history = search_history(trials, ["lr"], "final_acc", ACCURACY, ranked="val")
    assert history["best_so_far_ranked"].tolist() == [0.65, 0.65, 0.66]
    assert history["best_so_far"].tolist() == [0.58, 0.58, 0.40]  # by test: 0.58, 0.70, 0.70
    rounds = pd.DataFrame(
        {
            "sweep": "s",
            "trial": ["t0", "t1", "t2"],
            "round": 4,
            "val_acc": trials["val"],
            "test_acc": trials["final_acc"],
        }
    )
    choice = point_choice(trial_outcomes(rounds, trials, "val_acc"), "val_acc")
    assert choice["point"] == "lr=0.3" and choice["test"] == history["best_so_far"].iloc[-1]


# ------------------------------------------------------------------ defect 4 (issue 52)
def test_defect_4_rounds_to_target_names_the_seeds_that_reached_it():
    """FedProx reaches FedAvg's final mAP@0.5 at round 2 in seeds 0 and 1 and never in
    seed 2: its cells say so ("2 in 2/3 seeds", "2.0× in 2/3 seeds"), and the caption's
    <1× means no seed reached it (before: "not reached in 1/3 seeds" beside <1×, which
    the caption defined as not reached in every seed)."""

    curves = {
        ("fedavg", 0): [0.1, 0.2, 0.3, 0.4],
        ("fedavg", 1): [0.1, 0.2, 0.3, 0.4],
        ("fedavg", 2): [0.1, 0.2, 0.3, 0.4],
        ("fedprox", 0): [0.1, 0.45, 0.45, 0.45],
        ("fedprox", 1): [0.1, 0.41, 0.42, 0.43],
        ("fedprox", 2): [0.1, 0.2, 0.3, 0.35],
        ("moon", 0): [0.1, 0.1, 0.1, 0.1],
        ("moon", 1): [0.1, 0.1, 0.1, 0.1],
        ("moon", 2): [0.1, 0.1, 0.1, 0.1],
    }
    trials, rows = [], []
    for order, ((algorithm, seed), curve) in enumerate(curves.items()):
        trial = f"t-{algorithm}-{seed}"
        trials.append(
            {
                "sweep": "s",
                "trial": trial,
                "status": "completed",
                "seed": seed,
                "order": order,
                "algorithm": algorithm,
                "dataset": "folder:x",
                "last_round": 4,
                "sweep_started": "",
            }
        )
        rows += [
            {"sweep": "s", "trial": trial, "round": r, "test_map50": v}
            for r, v in enumerate(curve, 1)
        ]
    table = map_communication_table(rows, trials)
    shown = {name: list(row) for name, row in table.display.iterrows()}
    assert shown["FedProx"] == ["2 in 2/3 seeds; not reached in 1", "2.0× in 2/3 seeds"]
    assert shown["MOON"] == ["not reached", "<1×"]
    assert shown["FedAvg"] == ["4", "1.0×"]
    assert any("<1× = not reached within the rounds run in any seed" in n for n in table.notes)


# ------------------------------------------------------------------ defect 9 (issue 52)
def write_personalised(root: Path, name: str, methods: tuple[str, ...], finetune: int) -> None:
    """A personalisation sweep (β = 0.5, 3 seeds, 2 rounds) of ``methods``, evaluated
    with ``finetune`` fine-tuning epochs; FedAvg+FT's own splits score 5 points above
    FedAvg's."""
    from tests.analysis_fakes import manifest, plan_configs, write_trial
    from tests.test_personalised_party_report import BLOCK, rows_of

    configs = [
        {**c, "rounds": 2, "finetune_epochs": finetune}
        for c in plan_configs("personalisation", seeds=3)
        if c["algorithm"] in methods and c["beta"] == 0.5
    ]
    folder = root / name
    folder.mkdir(parents=True)
    info = manifest(name, "personalisation", n_trials=len(configs))
    (folder / "fedsweep_sweep.json").write_text(json.dumps(info))
    for i, config in enumerate(configs):
        block = BLOCK[config["algorithm"]][config["seed"]]
        if finetune:
            block = tuple(v + 0.05 for v in block)
        rows = rows_of(config, block, config["algorithm"] == "fedper")
        # what ran: FedPer's parties one after another whatever execution asked
        path = "sequential" if config["algorithm"] == "fedper" else "packed"
        rows = [{**row, "execution_path": path, "eval_seconds": 0.1} for row in rows]
        write_trial(folder, i, config, [], rows=rows)


def test_defect_9_fedavg_with_fine_tuning_is_compared_with_fedavg_like_any_method(tmp_path):
    """A second sweep of the study with finetune_epochs=1 used to make a section of its
    own (one row "FedAvg", no Δ); it is now a row of the study's tables, "FedAvg+FT
    (1 epoch)", with its Δ to FedAvg."""
    from analysis.reading.grouping import study_groups

    write_personalised(tmp_path / "runs", "pers", ("fedavg", "fedper"), 0)
    write_personalised(tmp_path / "runs", "pers-ft", ("fedavg",), 1)
    results = load_results(tmp_path / "runs")
    (group,) = study_groups(results)
    assert sorted(set(group.trials["algorithm"])) == ["fedavg", "fedavg+ft1", "fedper"]
    out = tmp_path / "report"
    write_report(results, out, formats=("png",))
    per_party = read_csv(out / "tables" / "per_party_personalisation.csv")
    tuned = [r for r in per_party if r["algorithm"] == "fedavg+ft1"]
    mean = next(r for r in tuned if r["party_metric"] == "mean over parties")
    assert float(mean["mean_pct"]) == pytest.approx(67.0)
    assert float(mean["delta_pct"]) == pytest.approx(5.0)
    text = (out / "report.md").read_text()
    assert "| FedAvg+FT (1 epoch) | 67.0 ± 2.0 · Δ +5.0" in text
    assert text.count("## personalisation") == 1


# ----------------------------------------------------------------- defect 13 (issue 52)
def test_defect_13_time_per_round_says_what_evaluation_held_and_what_ran(tmp_path):
    """Table 11 said "evaluation = the global model on the test set" for a fine-tuned
    run and showed the asked execution; it now names the fine-tuning and the own test
    splits in its evaluation words and each row's path as its rounds recorded it."""
    write_personalised(tmp_path / "runs", "pers", ("fedavg", "fedper"), 0)
    write_personalised(tmp_path / "runs", "pers-ft", ("fedavg",), 1)
    results = load_results(tmp_path / "runs")
    by_method = dict(zip(results.trials["algorithm"], results.trials["execution_path"]))
    assert by_method == {"fedavg": "packed", "fedper": "sequential"}
    out = tmp_path / "report"
    write_report(results, out, formats=("png",))
    timing = read_csv(out / "tables" / "table11_time_per_round_personalisation.csv")
    assert {r["algorithm"]: r["execution_path"] for r in timing} == {
        "fedavg": "packed",
        "fedper": "sequential",
        "fedavg+ft1": "packed",
    }
    text = (out / "tables" / "table11_time_per_round_personalisation.md").read_text()
    fedper = next(line for line in text.splitlines() if line.startswith("| FedPer |"))
    assert fedper.endswith("| sequential |")
    assert "each party's own model on the test set (FedPer)" in text
    assert "fine-tuning a copy of each party's model on its own training data before " in text
    assert "most of the evaluation time (FedAvg+FT (1 epoch))" in text
    assert "scoring each party's own test split (FedAvg, FedPer, FedAvg+FT (1 epoch))" in text


# ----------------------------------------------------------------- defect 15 (issue 52)
def test_defect_15_methods_on_the_x_axis_are_not_joined_and_their_labels_turn():
    import pandas as pd

    from analysis.figures import plots
    from analysis.figures.figure_layout import Layout

    methods = ["fedavg", "fedper", "fedrep", "lg-fedavg", "ditto", "apfl"]
    trials = pd.DataFrame(
        [
            {
                "status": "completed",
                "algorithm": m,
                "seed": s,
                "dataset": "fmnist",
                "final_acc": 0.5 + 0.01 * i + 0.001 * s,
                "order": i,
                "sweep_started": "",
            }
            for i, m in enumerate(methods)
            for s in range(3)
        ]
    )
    figure = plots.sensitivity_plot(trials, Layout(("algorithm",), x="algorithm"))
    ax = figure.axes[0]
    for line in ax.get_lines():
        xs = np.asarray(line.get_xdata(), dtype=float)
        xs = xs[np.isfinite(xs)]
        # error bars and their caps stay within one method's slot; a join spans methods
        assert np.ptp(xs) < 0.5 or line.get_linestyle() in ("None", "none", "")
    labels = ax.get_xticklabels()
    assert [t.get_text() for t in labels] == [
        "FedAvg",
        "FedPer",
        "FedRep",
        "LG-FedAvg",
        "Ditto",
        "APFL",
    ]
    assert all(t.get_rotation() == 30 for t in labels)


def test_defect_15_a_long_figure_title_wraps_to_the_figures_width():
    from analysis.figures import plots

    entry = {**camera_partition(), "dataset": "folder:/data/" + "a-very-long-camera-folder" * 3}
    figure = plots.partition_heatmap(entry)
    title = figure._suptitle.get_text()
    width = int(figure.get_figwidth() * plots.TITLE_CHARS_PER_INCH)
    assert "\n" in title and max(len(line) for line in title.splitlines()) <= width


# ----------------------------------------------------------------- defect 16 (issue 52)
def test_defect_16_own_test_splits_too_small_are_warned_with_their_numbers(tmp_path):
    """Own test splits of 14-20 images: the per-party table says so, with what one image
    is worth and the images a 2-point difference would need (4802 in all over 10
    parties, 481 each: more than a 94-image party holds)."""
    write_personalised(tmp_path / "runs", "pers", ("fedavg", "fedper"), 0)
    for trial in sorted((tmp_path / "runs" / "pers").iterdir()):
        if not trial.is_dir():
            continue
        lines = ["round,party,party_acc,party_samples,party_test_samples"]
        lines += [f"2,{p},0.6,80,{14 + (6 * p) // 9}" for p in range(10)]
        (trial / "parties.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "runs"), out, formats=("png",))
    text = (out / "tables" / "per_party_personalisation.md").read_text()
    assert (
        "⚠ Own test splits too small to resolve much: each party's own test split holds "
        "14–20 images (one image = 5.0–7.1 points of its value); telling 2.0 points in the "
        "mean over 10 parties at 95% needs about 4802 own test images in all, 481 per party "
        "(more than the smallest party's 94 images: no party_test_fraction can" in text
    )
    # defect 7 (part): the worst decile of 10 parties is one party, said so
    assert (
        "worst 10% = mean of the ceil(N/10) lowest parties (here the 1 lowest of 10: "
        "one party)." in text
    )


# ----------------------------------------------------------------- defect 14 (issue 52)
def test_defect_14_the_personalised_study_shows_own_split_curves_and_the_trade_off(tmp_path):
    """The number personalised methods are judged by, per round, and the trade-off
    between it and the pooled test set, as a table and a figure."""
    write_personalised(tmp_path / "runs", "pers", ("fedavg", "fedper"), 0)
    write_personalised(tmp_path / "runs", "pers-ft", ("fedavg",), 1)
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "runs"), out, formats=("png",))
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {"fig_personalisation_own_split_curves.png", "fig_personalisation_trade_off.png"} <= (
        figures
    )
    table = {r["algorithm"]: r for r in read_csv(out / "tables" / "trade_off_personalisation.csv")}
    # the final round's pooled test accuracy is 0.52 in every trial; own splits as BLOCK
    assert float(table["fedavg"]["pooled_mean"]) == pytest.approx(52.0)
    assert float(table["fedper"]["own_mean"]) == pytest.approx(82.0)
    assert float(table["fedavg+ft1"]["own_mean"]) == pytest.approx(67.0)
    assert table["fedper"]["n"] == "3"
    text = (out / "report.md").read_text()
    assert "| FedPer | 52.0 ± 0.0 | 82.0 ± 2.0 | 3 |" in text


# ------------------------------------------------------- issue 54 item 4: ε in captions
def write_dp_sweep(
    root: Path, epsilon_per_round: dict[str, float], clipped: list[float] | None = None
) -> Path:
    """An ad hoc FedAvg/FedProx sweep of DP trials (δ = 1e-5), 4 rounds, 2 seeds, whose
    rows spend ``epsilon_per_round[method]`` per round (and record ``clipped[r - 1]``,
    plus 0.1 for seed 1, as round r's clipped fraction, where given)."""
    from search_spaces.study_file import study_to_dict
    from tests.analysis_fakes import result_row, write_sweep

    study = adhoc_study(["algorithm=fedavg,fedprox"], "dp")
    plan = SweepPlan.build(study, BUDGETS["smoke"], seeds="2")
    trials = []
    for trial in plan.trials():
        config = {**trial.config, "rounds": 4, "dp_delta": 1e-5, "dp_noise_multiplier": 1.0}
        per_round = epsilon_per_round[config["algorithm"]]
        rows = [
            result_row(
                config,
                r,
                0.4 + 0.05 * r + 0.01 * config["seed"],
                dp_epsilon=per_round * r,
                **(
                    {}
                    if clipped is None
                    else {"dp_clipped_fraction": clipped[r - 1] + 0.1 * (config["seed"] % 2)}
                ),
            )
            for r in range(1, 5)
        ]
        trials.append((config, rows))
    folder = write_sweep(
        root,
        "dp-fake",
        study.name,
        [(c, []) for c, _ in trials],
        seeds=plan.seeds,
        axes=["algorithm"],
        definition=study_to_dict(study),
    )
    for trial_dir, (_, rows) in zip(sorted(p for p in folder.iterdir() if p.is_dir()), trials):
        (trial_dir / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_a_dp_tables_caption_states_epsilon_and_delta(tmp_path):
    write_dp_sweep(tmp_path / "runs", {"fedavg": 0.5, "fedprox": 0.5})
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "runs"), out, formats=("png",))
    text = (out / "tables" / "dp_accuracy.md").read_text()
    assert text.splitlines()[0].endswith(
        "— client-level DP: ε = 2, δ = 1e-05, Rényi-DP accountant**"
    )
    assert (
        "Privacy: every cell's trials are client-level (ε, δ)-DP by their last round, "
        "ε = 2, δ = 1e-05 (dp-accounting's Rényi-DP accountant" in text
    )
    rows = read_csv(out / "tables" / "dp_accuracy.csv")
    assert {float(r["dp_epsilon"]) for r in rows} == {2.0}


def test_a_dp_table_whose_epsilon_varies_gives_each_cell_its_own(tmp_path):
    write_dp_sweep(tmp_path / "runs", {"fedavg": 0.5, "fedprox": 0.75})
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "runs"), out, formats=("png",))
    text = (out / "tables" / "dp_accuracy.md").read_text()
    assert (
        "— client-level DP: ε per cell (2–3), δ = 1e-05, Rényi-DP accountant**"
        in text.splitlines()[0]
    )
    assert "ε differs between cells, from 2 to 3 by the last round" in text
    # each cell's own ε where it is read (issue 68, point 9), not only in the CSV
    assert "· ε 2 |" in text and "· ε 3 |" in text
    eps = {
        r["algorithm"]: float(r["dp_epsilon"]) for r in read_csv(out / "tables" / "dp_accuracy.csv")
    }
    assert eps == {"fedavg": 2.0, "fedprox": 3.0}


def test_the_dp_section_shows_the_clipped_fraction_and_accuracy_by_epsilon(tmp_path):
    """Rounds clip 0.5, 0.25, 0.25, 0 of the updates (seed 1: 0.1 more): mean over rounds
    and seeds 0.3, round 1 0.55, the last 0.05; the column's words in columns.csv; the
    accuracy-vs-ε figure drawn.  A sweep without the column says so instead."""
    write_dp_sweep(tmp_path / "runs", {"fedavg": 0.5, "fedprox": 0.5}, [0.5, 0.25, 0.25, 0.0])
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "runs"), out, formats=("png",))
    rows = {r["algorithm"]: r for r in read_csv(out / "tables" / "table_dp_clipped.csv")}
    for algorithm in ("fedavg", "fedprox"):
        row = rows[algorithm]
        assert float(row["mean"]) == pytest.approx(0.3)
        assert float(row["first"]) == pytest.approx(0.55)
        assert float(row["last"]) == pytest.approx(0.05)
        assert (int(row["rounds"]), int(row["seeds"])) == (4, 2)
    text = (out / "report.md").read_text()
    assert "| FedAvg | 0.30 | 0.55 | 0.05 |" in text
    assert "share of the round's updates whose L2 norm exceeded the round's C" in text
    assert (out / "figures" / "fig_dp_accuracy_vs_epsilon.png").exists()
    declared = {r["column"]: r for r in read_csv(out / "data" / "columns.csv")}
    assert declared["dp_clipped_fraction"]["unit"] == "fraction"
    assert declared["dp_epsilon"]["metric"] == "epsilon spent"

    write_dp_sweep(tmp_path / "older", {"fedavg": 0.5, "fedprox": 0.5})
    older = tmp_path / "older-report"
    write_report(load_results(tmp_path / "older"), older, formats=("png",))
    assert "(dp_clipped_fraction) is not in these rows" in (older / "report.md").read_text()
    assert not (older / "tables" / "table_dp_clipped.csv").exists()


# ------------------------------------------------------------------ defect 15 (issue 52)
def test_defect_15_six_cameras_image_counts_do_not_run_together():
    """The re-run's COCO folder (docs/results/report-contract.md): six cameras, each
    labelled "camN / K img"; the 0.45-inch columns ran "21 img28 img21 img" together."""
    from analysis.figures import plots

    entry = {
        **camera_partition(),
        "n_parties": 6,
        "party_names": [f"cam{i}" for i in range(6)],
        "party_images": [21, 38, 21, 20, 49, 61],
        "class_names": ["basket", "carton", "chair", "electrombile", "gastank", "sunshade"],
        "class_counts": [
            [25, 0, 0, 4, 0, 1],
            [2, 0, 9, 12, 9, 5],
            [15, 1, 0, 1, 10, 0],
            [2, 4, 5, 9, 2, 8],
            [3, 7, 20, 14, 0, 17],
            [9, 22, 15, 7, 21, 2],
        ],
    }
    figure = plots.partition_heatmap(entry)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in figure.axes[0].get_xticklabels()]
    assert len(boxes) == 6
    gaps = [right.x0 - left.x1 for left, right in itertools.pairwise(boxes)]
    assert min(gaps) > 0, gaps


def test_defect_9_fedavg_with_fine_tuning_on_a_joint_method_axis_is_a_method_of_its_own():
    """The re-run's study (docs/results/report-contract.md) names its methods on a joint
    axis ``method`` (FedAvg+FT = {algorithm fedavg, finetune_epochs 1}); the renaming
    looked for an axis called "algorithm", so FedAvg+FT's trials stayed "fedavg" and
    the per-party and trade-off tables pooled them with FedAvg's (6 seeds in one row)."""
    from types import SimpleNamespace

    import pandas as pd

    from analysis.reading.grouping import _fine_tuned_as_methods
    from analysis.reading.loading import Results

    trials = pd.DataFrame(
        {
            "sweep": ["pers"] * 4 + ["plain"] * 2,
            "algorithm": ["fedavg", "fedper", "fedavg", "fedper", "fedavg", "fedavg"],
            "finetune_epochs": [0, 0, 1, 1, 1, 1],
        }
    )
    sweeps = [
        SimpleNamespace(name="pers", manifest={"axes": ["method"]}),
        SimpleNamespace(name="plain", manifest={"axes": ["lr"]}),
    ]
    results = Results(rounds=trials.copy(), trials=trials, sweeps=sweeps, config_columns=[])
    renamed = _fine_tuned_as_methods(results)
    assert renamed.trials["algorithm"].tolist() == [
        "fedavg", "fedper", "fedavg+ft1", "fedper+ft1", "fedavg", "fedavg"
    ]  # fmt: skip
    assert renamed.rounds["algorithm"].tolist() == renamed.trials["algorithm"].tolist()


def test_a_joint_method_axis_is_not_a_column_of_the_per_party_tables():
    """With the methods on a joint axis ``method``, the per-party and fairness tables
    had rows by method and a column block per ``method`` label: a diagonal table, no Δ
    (the writer-block re-run). An axis matching the methods one to one is no column;
    one that sets something else (β per method) stays one."""
    import pandas as pd

    from analysis.sections.per_party import names_the_method

    trials = pd.DataFrame(
        {
            "algorithm": ["fedavg", "fedper", "fedavg+ft1"] * 2,
            "method": ["FedAvg", "FedPer", "FedAvg+FT"] * 2,
            "beta": [0.1] * 3 + [0.5] * 3,
        }
    )
    assert names_the_method(trials, "method")
    assert not names_the_method(trials, "beta")
    assert not names_the_method(trials.drop(columns="algorithm"), "method")


def test_defect_9_the_per_party_figure_shows_fedavg_with_fine_tuning_apart(tmp_path, monkeypatch):
    """The per-party box figure read each parties.csv's own ``algorithm``: FedAvg+FT's
    parties were drawn in FedAvg's box (the writer-block re-run: no FedAvg+FT box)."""
    from analysis.tables import party_tables

    drawn: list[list[str]] = []
    original = party_tables.party_distribution_figure

    def spy(parties, keys, **kwargs):
        drawn.append(sorted(set(parties["algorithm"])))
        return original(parties, keys, **kwargs)

    monkeypatch.setattr(party_tables, "party_distribution_figure", spy)
    write_personalised(tmp_path / "runs", "pers", ("fedavg", "fedper"), 0)
    write_personalised(tmp_path / "runs", "pers-ft", ("fedavg",), 1)
    for trial in (tmp_path / "runs").glob("*/*/"):
        if (trial / "result.json").is_file():  # each party's accuracy at rounds 1 and 2
            lines = ["round,party,party_acc,party_samples,party_test_samples"]
            lines += [f"{r},{p},0.5,40,10" for r in (1, 2) for p in range(10)]
            (trial / "parties.csv").write_text("\n".join(lines) + "\n")
    write_report(load_results(tmp_path / "runs"), tmp_path / "report", formats=("png",))
    assert drawn == [["fedavg", "fedavg+ft1", "fedper"]]


# ------------------------------------------------------------------- issue 68, point 3
def test_the_per_image_arithmetic_is_given_only_for_a_declared_per_image_outcome():
    """The same small own test splits: accuracy (one right-or-wrong per image) gets what
    one image is worth and the binomial count of images a difference needs; mIoU (a
    pixel metric of the pooled confusion matrix) gets neither, as its declaration says."""
    import pandas as pd

    from analysis.folder_task import sweep_task
    from analysis.primary_metric import metric_of
    from analysis.tables.party_tables import own_split_warning
    from federated.registry import load_method

    parties = pd.DataFrame(
        [
            {"sweep": "s", "trial": "t", "round": 2, "party": p, "party_samples": 80}
            | {"party_test_samples": 5 + 15 * (p == 9)}
            for p in range(10)
        ]
    )
    trials = pd.DataFrame({"sweep": ["s"], "trial": ["t"]})
    words = {}
    for task, stem in (("classification", "acc"), ("segmentation", "miou")):
        declared = sweep_task({"task_spec": load_method("task", task).task_spec().to_dict()})
        words[stem] = own_split_warning(parties, trials, pd.DataFrame(), metric_of(declared, stem))
    assert "(one image = 5.0–20.0 points of its value)" in words["acc"]
    assert "binomial worst case p = 1/2" in words["acc"]
    assert words["miou"] == (
        "⚠ Own test splits too small to resolve much: each party's own test split holds "
        "5–20 images (mIoU is no share of images each right or wrong: its error is not "
        "counted image by image here)."
    )


# ------------------------------------------------------------------- issue 68, point 6
def test_a_party_left_out_under_the_floor_is_named_under_fig_5(tmp_path):
    """partitions.json records the field's values left out under the training-image floor
    (as the run and the sweep name them); the report names them under the heat-map."""
    from analysis.reading.loading import Sweep
    from analysis.sections.partitions import partition_section

    entry = {**camera_partition(), "partition_by": "camera", "left_out_parties": [["cam-07", 8]]}
    sweep = Sweep(Path(tmp_path), {}, [entry], "s")
    lines = partition_section([sweep], tmp_path, set(), ("png",))
    caption = next(line for line in lines if line.startswith("*") and "left out" in line)
    assert (
        "left out of the parties by camera, under the floor of training images a party "
        "needs, in no party and not drawn: 'cam-07' (8 images)" in caption
    )


# ------------------------------------------------------------------- issue 68, point 7
def test_every_worst_decile_note_says_how_many_parties_it_is():
    """The detection (any metric without a class mix) per-party note said "the
    ceil(N/10) parties" where the accuracy note said it is one party here: both say it."""
    import pandas as pd

    from analysis.primary_metric import metric_of
    from analysis.tables.party_tables import _score_note
    from federated.tasks.detection.spec import SPEC as DETECTION_TASK
    from federated.tasks.score.spec import SPEC as SCORE_TASK

    trials = pd.DataFrame({"n_parties": [5, 5]})
    assert _score_note(metric_of(DETECTION_TASK), trials).endswith(
        "mean of the ceil(N/10) parties with the lowest mAP@0.5 (here the 1 lowest of 5: "
        "one party)."
    )
    assert _score_note(metric_of(SCORE_TASK, "mae"), trials).endswith(
        "(here the 1 highest of 5: one party)."
    )


# ------------------------------------------------------------------ issue 68, point 11
def test_words_of_the_runs_line_the_per_party_axis_and_the_table_files():
    """The Runs line read "1 of train / 1 of test data"; a detection per-party figure's
    axis "test mAP@0.5" for own-split values; a segmentation study's main table file was
    <study>_accuracy.*: each says what it holds, for every task."""
    import pandas as pd

    from analysis.folder_task import sweep_task
    from analysis.primary_metric import ACCURACY, metric_of
    from analysis.sections.runs import _budget_words
    from analysis.tables.party_tables import party_distribution_figure
    from federated.registry import load_method
    from federated.tasks.detection.spec import SPEC as DETECTION_TASK

    trials = pd.DataFrame(
        {"rounds": [5], "local_epochs": [1], "n_parties": [4], "data_fraction": [1.0]}
        | {"test_fraction": [0.2]}
    )
    assert "100% of the training data and 20% of the test data" in _budget_words(trials)
    parties = pd.DataFrame(
        {"sweep": "s", "trial": "t", "status": "completed", "round": 2, "party": [0, 1]}
        | {"party_test_map50": [0.4, 0.6], "algorithm": "fedavg", "seed": 0, "order": 0}
        | {"sweep_started": "x"}
    )
    figure = party_distribution_figure(parties, ["algorithm"], metric=metric_of(DETECTION_TASK))
    assert figure.axes[0].get_ylabel() == "per-party mAP@0.5"
    # its seed legend outside the axes, off the parties' points (a segmentation report)
    ax = figure.axes[0]
    figure.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    # and inside the figure, as the y label is (a detection report cut both off)
    width = figure.get_figwidth() * figure.dpi
    assert ax.get_legend().get_window_extent().x1 <= width
    assert ax.yaxis.label.get_window_extent().x0 >= 0
    segmentation = sweep_task(
        {"task_spec": load_method("task", "segmentation").task_spec().to_dict()}
    )
    assert metric_of(segmentation).file_word == "miou" and ACCURACY.file_word == "accuracy"


def test_a_folder_reads_as_the_kind_of_data_its_task_declares():
    """Issue 68, point 11: a segmentation folder's data set read ``seg (image folder)``;
    a folder now reads as its own name and what it holds by the task its sweep declared,
    the same rule for every kind (a plug-in task by its class name), in the Runs line,
    the titles and Fig. 5's caption; "image folder" only where no task is known."""
    from analysis.figures.plots import partition_title
    from analysis.folder_task import sweep_task
    from analysis.naming import dataset_name
    from federated.registry import TASK_PATHS, load_method

    def declared(name: str) -> TaskSpec:
        return sweep_task({"task_spec": load_method("task", name).task_spec().to_dict()})

    segmentation = declared("segmentation")
    assert dataset_name("folder:/data/seg", segmentation) == "seg (segmentation folder)"
    assert dataset_name("folder:/data/coco/", declared("detection")) == "coco (detection folder)"
    for name in TASK_PATHS:  # every kind alike: its declared name, never "image"
        assert dataset_name("folder:/d/x", declared(name)) == f"x ({declared(name).name} folder)"
    plug_in = segmentation.named("sitepkg.tasks:SiteTask")  # a user's task by import path
    assert dataset_name("folder:/d/sites", plug_in) == "sites (SiteTask folder)"
    assert dataset_name("folder:/d/old") == "old (image folder)"  # no task recorded
    assert dataset_name("cifar10", segmentation) == "CIFAR-10"
    entry = {"dataset": "folder:/data/seg", "n_parties": 4, "partition": "natural", "seed": 0}
    assert partition_title(entry, segmentation).startswith("seg (segmentation folder): 4 parties")


def test_a_saved_folder_is_named_alike_in_the_runs_line_tables_and_figures():
    """The writer-block report's tables and Fig. 5 were headed
    "hf:/work/…/data/writers" (the trials' resolved path) while its Runs line read
    "hf:data/writers" (as typed): a saved Hugging Face folder reads by its name, and the
    Runs line reads the source the data was loaded from, as the trials record it."""
    from analysis.naming import dataset_name
    from analysis.sections.runs import _dataset

    assert dataset_name("hf:/work/data/writers") == "writers (Hugging Face folder)"
    assert dataset_name("hf:flwrlabs/femnist") == "hf:flwrlabs/femnist"  # a hub name
    assert dataset_name("folder:/data/seg/") == "seg (image folder)"
    typed = {"dataset": "hf:data/writers"}
    assert _dataset(typed | {"dataset_identity": {"source": "hf:/work/data/writers"}}, None) == (
        "writers (Hugging Face folder)"
    )
    assert _dataset(typed, None) == "hf:data/writers"  # a manifest written before the identity
