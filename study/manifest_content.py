"""What a new sweep's manifest says: the plan, the data it read, how it runs, the
machine.  The manifest file itself (its name, reading and updating it) is
:mod:`study.sweep_folder`'s.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from federated.config.run_config import RunConfig
from federated.contract.columns import declared_columns
from federated.data.folder_dataset import folder_identity
from federated.data.folder_layout import is_folder_dataset
from federated.data.hub_dataset import hub_identity, is_hub_dataset
from federated.models.pretrained_start import start_hashes
from search_spaces.study_file import study_to_dict
from study.driver_liveness import driver_record
from study.machine import machine_description
from study.plan import SweepPlan, run_config_fields
from study.resources import Execution
from study.selection import task_declaration
from study.sweep_folder import MANIFEST_FORMAT
from study.tune.optuna_storage import OPTUNA_DB


def manifest_for(plan: SweepPlan, name: str, execution: Execution, **extra: Any) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "name": name,
        "study": plan.study.name,
        "paper": plan.study.paper,
        "budget": plan.budget.name,
        "dataset": plan.dataset,
        # the trials' dataset (a study may fix its own), as every trial resolves it
        **dataset_identity(_trial_dataset(plan), plan),
        # which weights the trials start from (init): {init: {file, sha256}}
        "starts": start_hashes(t.config for t in plan.trials()),
        "search": plan.search,
        # the metric that ranks trials (study/selection.py): validation, never test
        "metric": plan.ranking_metric,
        # the trials' task, its declaration (metrics, directions, the report's words,
        # what its partitions count) and the columns its trials write, as data: the
        # report reads them here, never by importing the task's code (metric_specs: the
        # metrics alone, for readers older than task_spec)
        "task": plan.task,
        "task_spec": task_declaration(plan.task).to_dict(),
        "metric_specs": [m.to_dict() for m in task_declaration(plan.task).metrics],
        "columns": declared_columns(task_declaration(plan.task)),
        "seeds": plan.seeds,
        # what happens to BatchNorm statistics, per algorithm (federated/algorithms/
        # batchnorm_rule.py): averaged or local, as every trial's row records it
        "batchnorm": batchnorm_rules(plan),
        # the trials' arithmetic (fp32, bf16-mixed): it changes results, so it is said
        "precision": sorted({str(t.config["precision"]) for t in plan.trials()}),
        # floats' significant digits in the trials' point labels (full values: params.json)
        "label_digits": plan.label_digits,
        "axes": [a.name for a in plan.study.axes],
        "label_columns": plan.study.label_columns,
        # the whole study (its [report] too): resume and the report need no catalogue
        "definition": study_to_dict(plan.study),
        "overrides": plan.overrides,
        # whose values the budget may scale (the paper's, in a built-in study) and what
        # it changed: {field: [{"from": written or default, "to": the budget's}, ...]}
        "paper_settings": plan.study.paper_settings,
        "budget_changes": {
            name: [{"from": a, "to": b} for a, b in pairs]
            for name, pairs in plan.budget_changes().items()
        },
        "n_trials": plan.n_trials,
        "num_samples": plan.num_samples if plan.search == "optuna" else None,
        "optuna_storage": OPTUNA_DB if plan.search == "optuna" else None,
        "scheduler": execution.scheduler,
        "resources": {"cpu": execution.resources.cpus, "gpu": execution.resources.gpus},
        "max_concurrent": execution.max_concurrent,
        "command": " ".join([os.path.basename(sys.executable), "-m", "study.sweep", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "finished": None,
        "status": "running",
        "driver": driver_record(),
        # the report's time-per-round table names it (timings mean nothing without it)
        "machine": machine_description(),
        "trials": {},
        **extra,
    }


def batchnorm_rules(plan: SweepPlan) -> dict[str, list[str]]:
    """``{algorithm: [batchnorm rules its planned trials use]}``."""
    rules: dict[str, list[str]] = {}
    for trial in plan.trials():
        used = rules.setdefault(str(trial.config["algorithm"]), [])
        if trial.config["batchnorm"] not in used:
            used.append(trial.config["batchnorm"])
    return rules


def _trial_dataset(plan: SweepPlan) -> str:
    """The trials' dataset (a study may fix its own): a planned trial's, or for a plan
    with no grid (a rerun of a range-only search) the example point's."""
    trials = plan.trials()
    if trials:
        return trials[0].config["dataset"]
    return plan.resolve(plan.study.example_point(), plan.seeds[0])["dataset"]


def dataset_identity(dataset: str, plan: SweepPlan | None = None) -> dict[str, Any]:
    """Image folders: ``{"dataset_identity": {path, fingerprint, ...}}`` for the manifest
    (which files the sweep read); ``hf:`` data sets the same from the plan's first trial
    (its columns and image settings); nothing for the built-in datasets."""
    if is_hub_dataset(dataset) and plan is not None:
        first = RunConfig.from_dict(run_config_fields(plan.first_config()))
        return {"dataset_identity": hub_identity(first)}
    if not is_folder_dataset(dataset):
        return {}
    return {"dataset_identity": folder_identity(dataset)}
