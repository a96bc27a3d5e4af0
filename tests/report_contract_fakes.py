"""Hand-made sweep folders of tasks other than classification, in study.sweep's layout,
for the results-contract tests: a detection study (FedAvg, FedProx, MOON by camera, 3
seeds) whose per-round mAP@0.5 the test chooses, its manifest carrying the task's
declaration (``task_spec``) and declared columns as a real sweep writes them, or none
(a folder written before the contract)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from federated.contract.columns import declared_columns
from federated.tasks.detection.spec import SPEC as DETECTION_TASK
from search_spaces import BUDGETS
from search_spaces.adhoc import adhoc_study
from search_spaces.study_file import study_to_dict
from study.plan import SweepPlan
from tests.analysis_fakes import manifest, write_trial

METHODS = ("fedavg", "fedprox", "moon")
CLASSES = ["coin", "digit", "glyph"]
CAMERAS = ["cam0", "cam1", "cam2"]
# boxes of each class held by each camera; the images each camera holds
BOXES = [[0, 26, 20], [12, 3, 30], [9, 9, 9]]
IMAGES = [38, 44, 21]
NAN = math.nan


def detection_configs(rounds: int, seeds: int = 3) -> tuple[Any, list[dict[str, Any]]]:
    """An ad hoc ``algorithm`` study's plan and its trials' configs, as a detection
    folder's trials resolve them (task, primary metric, natural parties)."""
    study = adhoc_study([f"algorithm={','.join(METHODS)}"], "cams")
    plan = SweepPlan.build(study, BUDGETS["smoke"], seeds=str(seeds))
    configs = []
    for trial in plan.trials():
        config = dict(trial.config)
        config.update(
            task="detection",
            primary_metric="map50",
            dataset="folder:/data/cams",
            partition="natural",
            n_parties=len(CAMERAS),
            rounds=rounds,
            model="fcos-tiny",
        )
        configs.append(config)
    return study, configs


def detection_row(config: dict[str, Any], r: int, map50: float, **extra: Any) -> dict:
    """One round's row as the engine writes it for detection: no accuracy, a NaN loss
    (a detector computes its loss only in training), mAP@0.5 and mAP@[.5:.95]."""
    return {
        "round": r,
        "test_map50": map50,
        "test_loss": NAN,
        "test_map": map50 / 2,
        "train_loss": 1.0,
        "con_loss": NAN,
        "round_seconds": 0.5,
        "eval_seconds": 0.1,
        "train_seconds": 0.4,
        "bytes_up": 1000,
        "bytes_down": 1000,
        "cum_bytes": 2000 * r,
        "diverged": False,
        "execution_path": "sequential",
        "training_iteration": r,
        "trial_id": "x",
        "config": config,
        **extra,
    }


def write_detection_sweep(
    root: Path,
    curve: Callable[[dict[str, Any]], list[float]],
    *,
    rounds: int = 4,
    contract: bool = True,
    name: str = "cams-detection",
    partitions: list[dict[str, Any]] | None = None,
    **manifest_changes: Any,
) -> Path:
    """A finished detection sweep whose trial ``config`` records mAP@0.5 ``curve(config)``
    per round; ``contract``: its manifest carries the task's declaration and columns
    (False: a folder written before them, which names its task only)."""
    study, configs = detection_configs(rounds)
    folder = root / name
    folder.mkdir(parents=True)
    recorded = (
        {"task_spec": DETECTION_TASK.to_dict(), "columns": declared_columns(DETECTION_TASK)}
        if contract
        else {}
    )
    info = manifest(
        name,
        study.name,
        n_trials=len(configs),
        seeds=[0, 1, 2],
        axes=[a.name for a in study.axes],
        definition=study_to_dict(study),
        dataset="folder:/data/cams",
        task="detection",
        **recorded,
        **manifest_changes,
    )
    (folder / "fedsweep_sweep.json").write_text(json.dumps(info))
    if partitions is not None:
        (folder / "partitions.json").write_text(json.dumps(partitions))
    for i, config in enumerate(configs):
        rows = [detection_row(config, r, v) for r, v in enumerate(curve(config), 1)]
        write_trial(folder, i, config, [], rows=rows)
    return folder


def camera_partition(counted: bool = True) -> dict[str, Any]:
    """``partitions.json``'s entry of the cameras: boxes per class and images per party
    (``counted``), or as written before the contract (every image as the first class)."""
    entry: dict[str, Any] = {
        "dataset": "folder:/data/cams",
        "n_parties": len(CAMERAS),
        "partition": "natural",
        "beta": 0.5,
        "labels_per_party": 2,
        "data_fraction": 1.0,
        "seed": 0,
        "class_names": CLASSES,
        "party_names": CAMERAS,
    }
    if counted:
        entry.update(class_counts=BOXES, counted="boxes", party_images=IMAGES)
    else:
        entry.update(class_counts=[[n] for n in IMAGES])
    return entry
