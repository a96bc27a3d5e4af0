"""Which trials may be pooled into one table: study groups.

Trials of the same study (from one sweep or several) form a group.  Pooling trials
that differ in anything but the seed would average different experiments, so a group
is split wherever two trials of the same grid point and dataset differ in another
config field (typically two sweeps of the same study at different budgets): each part
becomes its own group, named by the fields that tell them apart (its ``condition``).
Execution fields, which never change results on a device, do not split.

A method evaluated with local fine-tuning (``finetune_epochs`` > 0: FedAvg+FT) is a
method of its own, compared like any other: where the study does not vary
``finetune_epochs`` itself, its trials' ``algorithm`` reads ``fedavg+ft1``
(:func:`analysis.naming.method_name`: "FedAvg+FT (1 epoch)"), so they join the group
as a row beside FedAvg instead of splitting it.

Optuna sweeps are grouped apart from grid sweeps: their trials are samples of a search,
not repeats of grid points.  ``--rerun-best`` sweeps (the best Optuna point over seeds)
join their study's grid group.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.naming import format_value
from analysis.reading.loading import Results, Sweep
from analysis.reading.study_spec import report_spec

# federated.engine.run_state.EXECUTION_FIELDS (the execution_only config fields; not imported:
# it would import torch), plus
# the labels that name a trial rather than define it.
NOT_CONDITIONS = frozenset(
    {
        "device",
        "threads",
        "eval_batch_size",
        "checkpoint_every",
        "fail_at_round",
        "party_scores_every",
        "personal_test_every",
        # a fine-tuned trial is a method of its own (its algorithm names it), never a
        # condition that splits the study
        "finetune_epochs",
        "representations_at",
        "data_root",
        "party_state_dir",  # where spilled party states wait: a place, not a condition
        "seed",
        "point",
        "study",
    }
)


@dataclass
class StudyGroup:
    """Trials of one study that belong in the same tables.

    Attributes:
        study: the study's name (``moon_mu``), or ``""`` for runs of no known study.
        search: ``grid`` (grid and rerun-best sweeps) or ``optuna``.
        axes: the study's varied dimensions (the manifests' ``axes``).
        paper: the paper table or figure the study reproduces (the manifest's ``paper``).
        trials, rounds: the group's rows of :class:`~analysis.reading.loading.Results`.
        sweeps: the sweeps its trials come from.
        condition: what sets this group apart from others of the same study, e.g.
            ``{"budget": "laptop", "rounds": 10}``; empty when nothing does.
        report: the study file's ``[report]`` (table shape, figure layout, what it
            reproduces) as the manifest carries it; empty for the generic report.
    """

    study: str
    search: str
    axes: list[str]
    paper: str
    trials: pd.DataFrame
    rounds: pd.DataFrame
    sweeps: list[Sweep]
    condition: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def datasets(self) -> list[str]:
        return list(dict.fromkeys(self.trials["dataset"].tolist()))

    @property
    def suffix(self) -> str:
        """A file-name suffix telling split groups apart (``""`` when not split)."""
        parts = [self.search] if self.search == "optuna" else []
        parts += [f"{k}-{format_value(v)}" for k, v in self.condition.items()]
        slug = re.sub(r"[^A-Za-z0-9.=_-]+", "_", "_".join(parts))[:60]
        return f"_{slug}" if slug else ""

    @property
    def condition_text(self) -> str:
        return ", ".join(f"{k}={format_value(v)}" for k, v in self.condition.items())


def _constant(values: pd.Series) -> bool:
    return values.astype(str).nunique(dropna=False) <= 1


def conditions(trials: pd.DataFrame, axes: list[str], config_columns: list[str]) -> list[str]:
    """Config columns that differ between trials of the same grid point and dataset."""
    cell = [c for c in [*axes, "dataset"] if c in trials]
    candidates = [c for c in config_columns if c not in NOT_CONDITIONS and c not in cell]
    found = []
    for _, group in trials.groupby(cell, dropna=False, sort=False) if cell else [((), trials)]:
        for column in candidates:
            if column not in found and not _constant(group[column]):
                found.append(column)
    return [c for c in config_columns if c in found]


def _naming_columns(trials: pd.DataFrame, split: list[str]) -> list[str]:
    """The fewest of ``split`` that still tell the parts apart: ``budget`` alone when it
    does (a budget implies its rounds, epochs and data), else all of them."""
    if not split:
        return []
    parts = trials.groupby(split, dropna=False).ngroups
    for column in ("budget", "dataset", "rounds"):
        if column in split and trials.groupby([column], dropna=False).ngroups == parts:
            return [column]
    return split


#: the config field whose positive values make a method's fine-tuned variant
FINE_TUNING = "finetune_epochs"


def fine_tuned_method(algorithm: Any, epochs: Any) -> Any:
    """``algorithm`` of a trial fine-tuned for ``epochs`` epochs at evaluation
    (``fedavg+ft1``); the algorithm itself where it is not fine-tuned."""
    try:
        count = float(epochs)
    except (TypeError, ValueError):
        return algorithm
    if not count > 0:  # NaN, 0: evaluated as trained
        return algorithm
    return f"{algorithm}+ft{count:g}"


def _fine_tuned_as_methods(results: Results) -> Results:
    """``results`` with each fine-tuned trial's ``algorithm`` naming its variant
    (:func:`fine_tuned_method`), in the trials and in the rounds, for the studies that
    vary the method (their trials run several algorithms) but have no ``finetune_epochs``
    axis of its own."""
    trials = results.trials
    if FINE_TUNING not in trials or "algorithm" not in trials:
        return results
    # a sweep varies the method where its study has the field as an axis (a second sweep
    # of it may run FedAvg alone) or its trials run several algorithms, whatever the axis
    # is called (a joint axis "method" holding FedAvg and FedAvg+FT among its labels)
    methods_per_sweep = trials.groupby("sweep")["algorithm"].nunique()
    varying = {
        s.name
        for s in results.sweeps
        if ("algorithm" in s.manifest.get("axes", []) or methods_per_sweep.get(s.name, 0) > 1)
        and FINE_TUNING not in s.manifest.get("axes", [])
    }

    def renamed(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty or FINE_TUNING not in frame or "algorithm" not in frame:
            return frame
        methods = [
            fine_tuned_method(a, e) if s in varying else a
            for s, a, e in zip(frame["sweep"], frame["algorithm"], frame[FINE_TUNING])
        ]
        return frame.assign(algorithm=methods)

    return dataclasses.replace(results, trials=renamed(trials), rounds=renamed(results.rounds))


def study_groups(results: Results) -> list[StudyGroup]:
    """The study groups of everything loaded, in the order the sweeps were given."""
    results = _fine_tuned_as_methods(results)
    by_name = {s.name: s for s in results.sweeps}
    trials = results.trials
    if trials.empty:
        return []
    search_of = {s.name: ("optuna" if s.search == "optuna" else "grid") for s in results.sweeps}
    kinds = trials["sweep"].map(search_of)
    # the trial's own label; the manifest's for trials of sweeps that wrote none
    manifest_study = trials["sweep"].map({s.name: s.study for s in results.sweeps})
    studies = trials["study"] if "study" in trials else pd.Series(None, index=trials.index)
    studies = studies.fillna(manifest_study).fillna("")
    groups: list[StudyGroup] = []
    for (study, search), part in trials.groupby([studies, kinds], sort=False):
        sweeps = [by_name[n] for n in dict.fromkeys(part["sweep"])]
        axes = list(dict.fromkeys(a for s in sweeps for a in s.manifest.get("axes", [])))
        axes = [a for a in axes if a in part]
        paper = next((str(s.manifest["paper"]) for s in sweeps if s.manifest.get("paper")), "")
        split = conditions(part, axes, results.config_columns) if search == "grid" else []
        pieces = part.groupby(split, dropna=False, sort=False) if split else [((), part)]
        named_by = _naming_columns(part, split)
        report = report_spec((s.manifest for s in sweeps), str(study)) if study else {}
        for _, piece in pieces:
            keys = set(zip(piece["sweep"], piece["trial"]))
            in_piece = [
                (s, t) in keys for s, t in zip(results.rounds["sweep"], results.rounds["trial"])
            ]
            groups.append(
                StudyGroup(
                    study=str(study),
                    search=str(search),
                    axes=axes,
                    paper=paper,
                    trials=piece,
                    rounds=results.rounds[in_piece],
                    sweeps=[by_name[n] for n in dict.fromkeys(piece["sweep"])],
                    condition={c: piece[c].iloc[0] for c in named_by},
                    report=report,
                )
            )
    return groups
