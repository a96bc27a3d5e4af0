"""Issue 68's statistics read from the files a report writes on real runs (points 2 and 3).

Point 2: a real Optuna search of the segmentation builder's folder (mIoU, a pooled metric:
no mean over the parties' values) and its rerun; the evaluation-noise table's k = N row is
the full evaluation itself (no changed choice, no regret), and its figure gives regret and
the changed choices an axis each.  Point 3: the per-party note on the own test splits of
that real mIoU study carries no per-image arithmetic, while a real classification run's
carries it (one image = a share of its value, the binomial count of images)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.reading.loading import load_results
from analysis.report import write_report
from federated.engine.round_loop import FederatedRun
from federated.engine.run_files import RunFiles
from tests.analysis_fakes import manifest
from tests.conftest import tiny
from tests.conftest_analysis import SweepRun
from tests.example_scripts import built_tree

REPO = Path(__file__).resolve().parent.parent
SEGMENTATION_BUILDER = REPO / "examples" / "build_segmentation_task.py"
SITES = 3
# three Optuna trials of two rounds on 48 training images (16 a site), one rerun seed
SEARCH_ARGS = (
    *("--vary", "lr=loguniform:0.02:0.2", "--search", "optuna", "--num-samples", "3"),
    *("--rerun-best", "1", "--set", "partition=natural", "--set", "partition_by=site"),
    *("--set", "rounds=2", "--set", "local_epochs=1", "--set", "batch_size=8"),
    *("--set", "party_test_fraction=0.2", "--set", "data_fraction=1.0"),
    *("--set", "test_fraction=1.0", "--max-concurrent", "1", "--name", "segsearch"),
)


@pytest.fixture(scope="module")
def segmentation_report(tmp_path_factory) -> Path:
    """The report folder of the real search and its rerun (both sweeps' folders read)."""
    tree = built_tree(
        tmp_path_factory,
        SEGMENTATION_BUILDER,
        ["--train-images", "48", "--test-images", "12", "--sites", str(SITES)],
        "segsearch-tree",
    )
    storage = tmp_path_factory.mktemp("segsearch")
    search = SweepRun.run(storage, "--dataset", f"folder:{tree}", *SEARCH_ARGS).sweep_dir
    out = tmp_path_factory.mktemp("segsearch-report")
    write_report(load_results([search, storage / f"{search.name}-best"]), out, formats=("png",))
    return out


@pytest.mark.slow
def test_the_noise_tables_k_equal_n_row_is_the_full_evaluation_on_a_real_miou_search(
    segmentation_report,
):
    """Issue 68, point 2, from the written files: the CSV's last row is k = N (the
    parties that evaluated), with no changed choice and no regret; the markdown row says
    the same; the figure drawn from the CSV puts regret (mIoU points) and the changed
    choices (%) on axes of their own, with whole-party k ticks."""
    from analysis.folder_task import sweep_task
    from analysis.primary_metric import metric_of
    from analysis.sections.selection import _noise_figure
    from federated.registry import load_method

    noise = pd.read_csv(segmentation_report / "tables" / "selection_segsearch_noise.csv")
    assert list(noise["k"]) == list(range(1, SITES + 1))
    full = noise.iloc[-1]
    assert (full["k"], full["changed"], full["regret"]) == (SITES, 0.0, 0.0)
    text = (segmentation_report / "report.md").read_text()
    assert f"| {SITES} | 0 | 0.00 |" in text
    assert f"the reference, k = {SITES}, is the size-weighted mean over all {SITES}" in text
    assert (
        "expected regret in mIoU points (left), share of draws whose choice changed, % (right)"
        in text
    )
    assert (segmentation_report / "figures" / "fig_selection_segsearch_noise.png").is_file()
    task = sweep_task({"task_spec": load_method("task", "segmentation").task_spec().to_dict()})
    left, right = _noise_figure(noise, metric_of(task, "miou"), "t").axes
    assert left.get_ylabel() == "expected regret (mIoU points)"
    assert right.get_ylabel() == "choice changed (%)"
    assert list(left.get_xticks()) == list(range(1, SITES + 1))


@pytest.mark.slow
def test_a_real_miou_studys_per_party_note_has_no_per_image_arithmetic(segmentation_report):
    """Issue 68, point 3: mIoU is scored from each split's pooled confusion matrix, not
    one right-or-wrong per image: the note gives the split sizes and says so, nothing more."""
    note = _own_split_note(segmentation_report / "tables" / "per_party_segsearch.md")
    assert note.startswith("*⚠ Own test splits too small to resolve much: each party's own")
    assert "(mIoU is no share of images each right or wrong" in note
    assert "one image =" not in note and "binomial" not in note


def test_a_real_classification_runs_per_party_note_gives_the_per_image_arithmetic(tmp_path):
    """Issue 68, point 3, the other side: a real run's accuracy on its parties' own test
    splits (its own parties.csv, written as a trial writes it) gets what one image is
    worth and the binomial count of images a difference needs."""
    sweep = tmp_path / "runs" / "cls"
    trial = sweep / "t0_seed0"
    trial.mkdir(parents=True)
    config = tiny(party_test_fraction=0.05, party_scores_every=1)  # 23-26 images a party
    run, files, rows = FederatedRun(config), RunFiles.in_folder(trial), []
    params = config.to_dict() | {"point": "algorithm=fedavg"}
    while not run.finished:
        rows.append(run.run_round() | {"config": params, "training_iteration": run.round})
        files.record(run)
    (trial / "params.json").write_text(json.dumps(params))
    (trial / "result.json").write_text("".join(json.dumps(r, default=float) + "\n" for r in rows))
    info = manifest("cls", "cls", n_trials=1, seeds=[0], axes=["algorithm"], dataset="synthetic")
    (sweep / "fedsweep_sweep.json").write_text(json.dumps(info))
    write_report(load_results(tmp_path / "runs"), tmp_path / "report", formats=("png",))
    note = _own_split_note(tmp_path / "report" / "tables" / "per_party_cls.md")
    samples = pd.read_csv(trial / "parties.csv")["party_test_samples"]
    smallest, largest = int(samples.min()), int(samples.max())
    worth = f"{100 / largest:.1f}–{100 / smallest:.1f} points of its value"
    assert f"holds {smallest}–{largest} images (one image = {worth})" in note
    assert "binomial worst case p = 1/2" in note


def _own_split_note(table: Path) -> str:
    """The ``⚠ Own test splits`` line of a written per-party table."""
    lines = table.read_text().splitlines()
    return next(line for line in lines if "Own test splits too small" in line)


def test_the_report_studies_builder_names_four_small_sweeps_the_sweep_accepts():
    """examples/build_report_studies.py's commands (docs/results/report-contract.md):
    the four data sets' sweeps, each one trial at a time and quiet, each parsed and
    checked as ``python -m study.sweep`` would before any work."""
    from study.sweep_args import build_parser, check_args, parse_overrides
    from tests.example_scripts import load_example

    builder = load_example(REPO / "examples" / "build_report_studies.py")
    commands = builder.study_commands(Path("data"))
    assert sorted(commands) == ["det", "dp", "pers", "seg"]
    for name, argv in commands.items():
        args = build_parser().parse_args(argv)
        check_args(args)
        parse_overrides(args.overrides)
        assert (args.name, args.max_concurrent, args.quiet) == (name, 1, True)
    assert commands["seg"][commands["seg"].index("--dataset") + 1] == "folder:data/seg"
    assert commands["dp"][0] == "privacy"
