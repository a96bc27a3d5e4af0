"""A sweep before it runs: which trials (grid) or which space (Optuna), fully resolved.

Everything is validated here, before Ray starts: a bad ``--set`` value, an unknown
study or an impossible party count fails with one line and nothing runs.

Grid mode hands Tune a ``point`` axis (``tune.grid_search`` over readable point labels
such as ``mu=5.0``) and a ``seed`` axis; every field that differs between points is a
``tune.sample_from`` lookup of the point, so each trial's ``params.json`` holds its
complete, resolved RunConfig.  Optuna mode samples the study's ranges through a
define-by-run function that returns the same complete config.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from federated.config.run_config import RunConfig, config_values
from federated.contract.columns import summary_column_names
from federated.data.folder_layout import absolute_folder_name, dataset_slug
from federated.tasks.written_before import UNTASKED_ROWS
from search_spaces import (
    Budget,
    Study,
    check_overrides,
    point_label,
    seed_list,
    with_axis_values,
)
from search_spaces.resolve import trial_config_and_changes
from search_spaces.study import LABEL_DIGITS, distinct_label, distinct_labels
from study.selection import LEGACY_METRIC, primary_stem, selection_metric, task_declaration

OPTUNA_SEED = 0
# Resolving a trial validates a whole RunConfig (milliseconds each): a grid larger than
# this would take minutes to plan and hours to run, so it is refused at once, by count.
MAX_GRID_TRIALS = 10_000


class PlanTooLargeError(ValueError):
    """A grid with more trials than :data:`MAX_GRID_TRIALS` (one line)."""


@dataclass(frozen=True)
class TrialSpec:
    """One grid trial: its point, seed and complete config (RunConfig fields + labels)."""

    point: dict[str, Any]
    seed: int
    config: dict[str, Any]
    # the trial's resolved RunConfig (``config`` holds its flat values): resolved once, here
    run_config: RunConfig | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        """The point's label, as the plan made it distinct (:meth:`SweepPlan._resolved`)."""
        return str(self.config["point"])


_ABSENT = object()  # a key one grid point's config has and another's lacks


class PointLookup:
    """``tune.sample_from`` callable: a field's value for the trial's grid point."""

    def __init__(self, table: Mapping[str, Mapping[str, Any]], key: str) -> None:
        self.table = dict(table)
        self.key = key

    def __call__(self, config: Mapping[str, Any]) -> Any:
        # None where the point's methods have no such parameter (FedDyn's alpha for FedAvg)
        return self.table[config["point"]].get(self.key)


# The Optuna trial's user attribute holding its point's label (optuna-dashboard shows it).
POINT_ATTR = "point"


class DefineByRun:
    """Optuna define-by-run space: suggests the study's axes, returns the full config."""

    def __init__(self, plan: SweepPlan) -> None:
        self.plan = plan

    def __call__(self, trial: Any) -> dict[str, Any]:
        study = self.plan.study
        point = {axis.name: axis.search_range.suggest(trial, axis.name) for axis in study.axes}
        # the label is kept apart from the earlier trials' (kept in the Optuna study, so
        # a resumed search goes on from them): two points TPE drew close together would
        # round to one label, and trials are grouped by label
        earlier = [
            (t.params, t.user_attrs[POINT_ATTR])
            for t in trial.study.get_trials(deepcopy=False)
            if t.number < trial.number and POINT_ATTR in t.user_attrs
        ]
        label = distinct_label(point, earlier, getattr(self.plan, "label_digits", None))
        trial.set_user_attr(POINT_ATTR, label)
        config = self.plan.resolve(point, self.plan.seeds[0], label=label)
        # Optuna adds the suggested values itself; return the rest as constants
        return {k: v for k, v in config.items() if k not in point}


@dataclass
class SweepPlan:
    study: Study
    budget: Budget
    dataset: str
    search: str  # "grid" or "optuna"
    seeds: list[int]
    overrides: dict[str, Any] = field(default_factory=dict)
    num_samples: int = 0  # Optuna trials
    # --metric (study/selection.py); None: the trials' val_<primary metric> (val_acc,
    # or a score task's val_srcc ...); test_acc only in old sweeps
    metric: str | None = None
    # significant digits of floats in point labels (search_spaces.study.label_value);
    # None: as written (a sweep from before the rounding, so it resumes with its labels)
    label_digits: int | None = LABEL_DIGITS

    @classmethod
    def build(
        cls,
        study: Study,
        budget: Budget,
        *,
        dataset: str | None = None,
        search: str = "grid",
        seeds: str | list[int] | None = None,
        overrides: Mapping[str, Any] | None = None,
        num_samples: int | None = None,
        metric: str | None = None,
        label_digits: int | None = LABEL_DIGITS,
    ) -> SweepPlan:
        """``seeds``: the ``--seeds`` text, or the list a manifest recorded.
        ``overrides`` may change a plain axis's values (``algorithm+=fednova``, see
        :func:`search_spaces.with_axis_values`); the manifest records them as given."""
        overrides = dict(overrides or {})
        study, field_overrides = with_axis_values(study, overrides)
        check_overrides(study, field_overrides)
        # --set dataset=folder:PATH (a study file's too) is the sweep's dataset; a folder's
        # path is made absolute here, in the driver, for every trial on every node
        dataset = absolute_folder_name(overrides.pop("dataset", None) or dataset or study.dataset)
        seed_values = list(seeds) if isinstance(seeds, list) else seed_list(study, budget, seeds)
        if search == "optuna":
            seed_values = seed_values[:1]  # the search runs on one seed; --rerun-best repeats
        elif study.grid_size * len(seed_values) > MAX_GRID_TRIALS:
            raise PlanTooLargeError(
                f"the grid has {study.grid_size * len(seed_values):,} trials "
                f"({study.grid_size:,} points x {len(seed_values)} seeds; allowed: at most "
                f"{MAX_GRID_TRIALS:,}): use fewer values, fewer seeds or --search optuna"
            )
        plan = cls(
            study=study,
            budget=budget,
            dataset=dataset,
            search=search,
            seeds=seed_values,
            overrides=overrides,
            num_samples=num_samples or max(8, study.grid_size),
            metric=metric,
            label_digits=label_digits,
        )
        plan.trials()  # validates every trial config now, before anything starts
        return plan

    # ------------------------------------------------------------------ resolution
    def resolve(
        self, point: Mapping[str, Any], seed: int, label: str | None = None
    ) -> dict[str, Any]:
        """A trial's config: RunConfig fields, then the study's labels (``label``: the
        point's, when made distinct from other points')."""
        return self._resolve(point, seed, label)[0]

    def _resolve(
        self, point: Mapping[str, Any], seed: int, label: str | None = None
    ) -> tuple[dict[str, Any], dict[str, tuple[Any, Any]], RunConfig]:
        """A trial's config, what the budget changed in it, and its resolved RunConfig."""
        run_config, changes = trial_config_and_changes(
            self.study,
            point,
            budget=self.budget,
            dataset=self.dataset,
            seed=seed,
            # the field part: axis items (algorithm+=...) already shaped self.study
            overrides=with_axis_values(self.study, self.overrides)[1],
            # the data specs this plan has had: its trials on one data set load it once
            known_specs=self.__dict__.setdefault("_specs", {}),
        )
        labels = {name: point[name] for name in self.study.label_columns}
        config = {
            **run_config.to_dict(),
            **labels,
            "point": label or point_label(point, self.label_digits),
            "study": self.study.name,
            "budget": self.budget.name,
        }
        return config, changes, run_config

    def trials(self) -> list[TrialSpec]:
        """Grid mode: every (point, seed); Optuna mode: the paper grid's first point, as
        an example of the configs the search resolves."""
        return self._resolved()[0]

    def budget_changes(self) -> dict[str, list[tuple[Any, Any]]]:
        """What the budget changed, over the planned trials: ``{field: [(from, to), ...]}``
        (several pairs where points differ, e.g. the ``parties`` study's rounds)."""
        return self._resolved()[1]

    def _resolved(self) -> tuple[list[TrialSpec], dict[str, list[tuple[Any, Any]]]]:
        # Cached per (overrides, seeds): the driver asks for the trials several times, and
        # it may add overrides (threads) after building the plan.
        key = repr((sorted(self.overrides.items(), key=str), self.seeds, self.search))
        cached = self.__dict__.get("_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        points = self.study.grid() if self.search == "grid" else [self.study.example_point()]
        labels = distinct_labels(points, self.label_digits)  # grid points stay apart
        trials: list[TrialSpec] = []
        changes: dict[str, list[tuple[Any, Any]]] = {}
        for p, label in zip(points, labels):
            for s in self.seeds:
                config, changed, run_config = self._resolve(p, s, label)
                trials.append(TrialSpec(p, s, config, run_config))
                for name, pair in changed.items():
                    if pair not in changes.setdefault(name, []):
                        changes[name].append(pair)
        self.__dict__["_cache"] = (key, (trials, changes))
        return trials, changes

    @property
    def n_trials(self) -> int:
        return self.study.grid_size * len(self.seeds) if self.search == "grid" else self.num_samples

    @property
    def ranking_metric(self) -> str | None:
        """What ranks this sweep's trials (Optuna, ASHA, the best configuration, the
        summary): :attr:`metric` when its trials hold out validation data, else None
        (a plain grid of the paper's protocol ranks nothing; study/selection.py)."""
        chosen = self.chosen_metric
        if chosen == LEGACY_METRIC:  # a sweep from before the validation protocol
            return chosen
        return chosen if self.first_config().get("val_fraction") else None

    @property
    def chosen_metric(self) -> str:
        """The metric selection would use: ``--metric``, else the trials'
        ``val_<primary metric>``; refused in one line (:class:`SelectionError`) where the
        trials' task records no such metric."""
        if self.metric == LEGACY_METRIC:
            return self.metric
        first = self.first_config()
        return selection_metric(self.metric, self.task, primary_stem(first))

    @property
    def summary_columns(self) -> frozenset[str]:
        """The summary columns the trials' task declares (the results contract):
        what the trackers table as a trial's final metrics."""
        return summary_column_names(task_declaration(self.task))

    @property
    def task(self) -> str:
        """The trials' task (resolved from their data; a config recorded before tasks
        existed names none: its rows are a classification's)."""
        return self.first_config().get("task") or UNTASKED_ROWS.name

    def first_config(self) -> dict[str, Any]:
        trials = self.trials() or [self._resolve(self.study.example_point(), self.seeds[0])]
        return trials[0].config if isinstance(trials[0], TrialSpec) else trials[0][0]

    @property
    def max_rounds(self) -> int:
        return max(t.config["rounds"] for t in self.trials())

    # -------------------------------------------------------------------- for Tune
    def param_space(self) -> dict[str, Any]:
        """Grid mode's Tune param_space (see the module docstring)."""
        from ray import tune

        table = {t.label: t.config for t in self.trials() if t.seed == self.seeds[0]}
        first = next(iter(table.values()))
        varying = {k for cfg in table.values() for k in cfg if cfg[k] != first.get(k, _ABSENT)}
        varying -= {"seed"}
        space: dict[str, Any] = {k: v for k, v in first.items() if k not in varying}
        space["point"] = tune.grid_search(list(table))
        space["seed"] = tune.grid_search(self.seeds)
        for key in sorted(varying - {"point"}):
            space[key] = tune.sample_from(PointLookup(table, key))
        return space

    def optuna_space(self) -> DefineByRun:
        return DefineByRun(self)

    @property
    def varied_fields(self) -> list[str]:
        """What the sweep varies, as the trial configs name it: the study's axes (a
        plain axis is its field; a joint axis its label), every other config field that
        differs between the grid's points (what a joint axis sets), then ``seed``."""
        configs = [t.config for t in self.trials()]
        first = configs[0]
        axes = [a.name for a in self.study.axes]
        differing = sorted(
            {k for c in configs for k in c if c[k] != first.get(k, _ABSENT)}
            - {*axes, "point", "seed"}
        )
        return [*axes, *differing, "seed"]

    @property
    def parameter_columns(self) -> list[str]:
        """What the live progress table shows of each trial's config."""
        return [a.name for a in self.study.axes] + (["seed"] if len(self.seeds) > 1 else [])

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> SweepPlan:
        """The plan a sweep was started with (``--resume`` rebuilds it exactly), from the
        study definition the manifest keeps (older manifests: the built-in study)."""
        from search_spaces import BUDGETS, STUDIES
        from search_spaces.study_file import study_from_dict

        definition = manifest.get("definition")
        study = (
            study_from_dict(definition, f"{manifest.get('name', 'sweep')} manifest")
            if definition
            else STUDIES[manifest["study"]]
        )
        # whose values the budget may scale, as when it was planned (manifests before
        # the field existed were planned with every value scalable: the paper's rule)
        study = dataclasses.replace(
            study, paper_settings=bool(manifest.get("paper_settings", True))
        )
        return cls.build(
            study,
            BUDGETS[manifest["budget"]],
            dataset=manifest["dataset"],
            search=manifest["search"],
            seeds=list(manifest["seeds"]),
            overrides=manifest["overrides"],
            num_samples=manifest.get("num_samples"),
            # sweeps from before the validation protocol ranked by test accuracy
            metric=manifest.get("metric", "test_acc"),
            # sweeps from before rounded labels keep their labels (and resume with them)
            label_digits=manifest.get("label_digits"),
        )

    def default_name(self, stamp: str) -> str:
        parts = [self.study.name, dataset_slug(self.dataset), self.budget.name]
        if self.search == "optuna":
            parts.append("optuna")
        return "-".join(parts) + f"-{stamp}"


def trial_dirname(trial: Any) -> str:
    """Readable trial folder names: ``<id>_<point>_seed<k>`` (file-system safe)."""
    config = trial.config
    point = re.sub(r"[^A-Za-z0-9.=_-]+", "_", str(config.get("point", "")))[:60]
    return f"{trial.trial_id}_{point}_seed{config.get('seed', 0)}"


def run_config_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """The RunConfig part of a trial config (fields and method parameters; labels dropped)."""
    return config_values(config)
