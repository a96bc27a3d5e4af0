"""Issue 68's point 3 read from the files a report writes on real runs: the per-party
note on a real segmentation run's own test splits carries no per-image arithmetic, while
a real classification run's carries it (one image = a share of its value, the binomial
count of images).  Point 2 (the evaluation-noise table's k = N row, from a real search
and its rerun) is asserted on the real detection sweep of
``tests/test_detection_study.py``, whose mAP@0.5 is the pooled metric the point was
found on."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis.reading.loading import load_results
from analysis.report import write_report
from federated.engine.round_loop import FederatedRun
from federated.engine.run_files import RunFiles
from study.selection import task_declaration
from tests.analysis_fakes import manifest
from tests.conftest import tiny
from tests.example_scripts import built_tree

REPO = Path(__file__).resolve().parent.parent
SEGMENTATION_BUILDER = REPO / "examples" / "build_segmentation_task.py"


def _run_as_sweep(runs: Path, name: str, config, dataset: str) -> Path:
    """One real run of ``config`` (in this process, no Ray), its files written as a
    sweep's trial writes them (``params.json``, ``result.json``, ``parties.csv``) into
    sweep ``name`` under ``runs``; returns the trial folder."""
    trial = runs / name / "t0_seed0"
    trial.mkdir(parents=True)
    run, files, rows = FederatedRun(config), RunFiles.in_folder(trial), []
    params = config.to_dict() | {"point": f"algorithm={config.algorithm}"}
    while not run.finished:
        rows.append(run.run_round() | {"config": params, "training_iteration": run.round})
        files.record(run)
    (trial / "params.json").write_text(json.dumps(params))
    (trial / "result.json").write_text("".join(json.dumps(r, default=float) + "\n" for r in rows))
    info = manifest(name, name, n_trials=1, seeds=[0], axes=["algorithm"], dataset=dataset)
    info["task_spec"] = task_declaration(run.config.task).to_dict()  # as a sweep manifest
    (runs / name / "fedsweep_sweep.json").write_text(json.dumps(info))
    return trial


def test_a_real_miou_runs_per_party_note_has_no_per_image_arithmetic(tmp_path_factory):
    """Issue 68, point 3: mIoU is scored from each split's pooled confusion matrix, not
    one right-or-wrong per image: the note on a real segmentation run's own test splits
    gives the split sizes and says so, nothing more."""
    from federated.config.run_config import RunConfig
    from tests.short_runs import site_run

    tree = built_tree(
        tmp_path_factory,
        SEGMENTATION_BUILDER,
        ["--train-images", "48", "--test-images", "12", "--sites", "3"],
        "seg-note-tree",
    )
    work = tmp_path_factory.mktemp("seg-note")
    config = RunConfig(**site_run(tree, work / "data", rounds=1) | {"party_scores_every": 1})
    _run_as_sweep(work / "runs", "seg", config, f"folder:{tree}")
    write_report(load_results(work / "runs"), work / "report", formats=("png",))
    note = _own_split_note(work / "report" / "tables" / "per_party_seg.md")
    assert note.startswith("*⚠ Own test splits too small to resolve much: each party's own")
    assert "(mIoU is no share of images each right or wrong" in note
    assert "one image =" not in note and "binomial" not in note


def test_a_real_classification_runs_per_party_note_gives_the_per_image_arithmetic(tmp_path):
    """Issue 68, point 3, the other side: a real run's accuracy on its parties' own test
    splits (its own parties.csv, written as a trial writes it) gets what one image is
    worth and the binomial count of images a difference needs."""
    config = tiny(party_test_fraction=0.05, party_scores_every=1)  # 11-14 images a party
    trial = _run_as_sweep(tmp_path / "runs", "cls", config, "synthetic")
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
