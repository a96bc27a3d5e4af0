"""Hand-made results directories for the analysis tests, in study.sweep's layout.

They hold exactly what a real sweep writes for analysis (manifest, partitions.json,
per trial params.json, result.json and error.txt) with accuracies chosen by the test,
so every expected number is known.  Configs come from the real study definitions
(``SweepPlan``), so the tables see the same columns as after a real sweep.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from search_spaces import BUDGETS, STUDIES
from search_spaces.study_file import study_to_dict
from study.plan import SweepPlan


def plan_configs(study: str, seeds: int = 2, budget: str = "smoke") -> list[dict[str, Any]]:
    """Every grid trial's complete config (RunConfig fields + labels), in plan order."""
    plan = SweepPlan.build(STUDIES[study], BUDGETS[budget], seeds=str(seeds))
    return [t.config for t in plan.trials()]


def manifest(name: str, study: str, **changes: Any) -> dict[str, Any]:
    s = STUDIES.get(study)
    out = {
        "format": 1,
        "name": name,
        "study": study,
        "paper": s.paper if s else "",
        "budget": "smoke",
        "dataset": "fmnist",
        "search": "grid",
        "seeds": [0, 1],
        "axes": [a.name for a in s.axes] if s else [],
        "label_columns": s.label_columns if s else [],
        **({"definition": study_to_dict(s)} if s else {}),
        "overrides": {},
        "n_trials": 0,
        "scheduler": None,
        "status": "finished",
        "trials": {},
    }
    out.update(changes)
    return out


def trial_dirname(index: int, config: dict[str, Any], prefix: str = "abcde") -> str:
    point = re.sub(r"[^A-Za-z0-9.=_-]+", "_", str(config.get("point", "")))[:60]
    return f"{prefix}_{index:05d}_{point}_seed{config.get('seed', 0)}"


def result_row(config: dict[str, Any], round_number: int, acc: float, **extra: Any) -> dict:
    row = {
        "round": round_number,
        "test_acc": acc,
        "test_loss": 2.0 - acc,
        "train_loss": 2.0 - acc,
        "con_loss": float("nan"),
        "round_seconds": 0.5,
        "diverged": False,
        "training_iteration": round_number,
        "trial_id": "x",
        "config": config,
    }
    row.update(extra)
    return row


def write_trial(
    sweep_dir: Path,
    index: int,
    config: dict[str, Any],
    accuracies: Sequence[float],
    *,
    rows: Sequence[dict[str, Any]] | None = None,
    error: str | None = None,
    tail: str = "",
    party_std: Sequence[float] | None = None,
) -> Path:
    """One trial folder.  ``accuracies[i]`` is round i+1's test accuracy (a fraction);
    ``rows`` replaces the generated rows entirely (repeats, diverged rounds ...);
    ``tail`` is appended raw to result.json (a half-written line)."""
    trial_dir = sweep_dir / trial_dirname(index, config)
    trial_dir.mkdir(parents=True)
    (trial_dir / "params.json").write_text(json.dumps(config, indent=2))
    if rows is None:
        rows = []
        for r, acc in enumerate(accuracies, 1):
            extra = {"test_acc_std": party_std[r - 1]} if party_std is not None else {}
            rows.append(result_row(config, r, acc, **extra))
    text = "".join(json.dumps(row) + "\n" for row in rows) + tail
    (trial_dir / "result.json").write_text(text)
    if error:
        (trial_dir / "error.txt").write_text(f"Failure # 1\nTraceback ...\n{error}\n")
    return trial_dir


def write_sweep(
    root: Path,
    name: str,
    study: str,
    trials: Sequence[tuple[dict[str, Any], Sequence[float]]],
    *,
    partitions: list[dict[str, Any]] | None = None,
    **manifest_changes: Any,
) -> Path:
    """A sweep folder with ``(config, accuracies)`` trials, all plain completed runs."""
    sweep_dir = root / name
    sweep_dir.mkdir(parents=True)
    info = manifest(name, study, n_trials=len(trials), **manifest_changes)
    (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(info, indent=2))
    if partitions is not None:
        (sweep_dir / "partitions.json").write_text(json.dumps(partitions))
    for i, (config, accuracies) in enumerate(trials):
        write_trial(sweep_dir, i, config, accuracies)
    return sweep_dir


def curve(final: float, rounds: int) -> list[float]:
    """A rising curve from 0.1 that ends exactly at ``final`` after ``rounds`` rounds."""
    if rounds == 1:
        return [final]
    return [0.1 + (final - 0.1) * r / (rounds - 1) for r in range(rounds)]
