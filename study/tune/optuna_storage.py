"""The Optuna study of an Optuna sweep, kept in SQLite inside the sweep's folder.

Ray Tune's ``OptunaSearch`` (Ray 2.60) takes an Optuna ``storage`` and a ``study_name``
and creates its study with ``load_if_exists=True``; given an RDB storage, every trial
it proposes and every result it is told lands in ``<sweep>/optuna.db`` as it happens:

    optuna-dashboard sqlite:///results/<sweep>/optuna.db     # while the sweep runs

:class:`SweepOptunaSearch` is that searcher with two things a user of optuna-dashboard
needs: the study's objective is named after the metric that ranks the trials (Optuna's
``Study.set_metric_names``; it would be "Objective 0"), and every Optuna trial carries
its Tune trial id and results folder as user attributes (``tune_trial_id``,
``results_folder``), so a point in the dashboard leads to its trial's files.

``--resume`` restores Tune's pickled searcher, which holds the same storage (its URL),
so the search continues the same Optuna study: the trials already told stay in it and
TPE keeps learning from them.  The URL is absolute: resume a moved sweep folder
before moving it, or not at all.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
from ray.tune.search.optuna import OptunaSearch

from study.plan import trial_dirname

OPTUNA_DB = "optuna.db"
# The user attributes of every Optuna trial of a sweep.
TUNE_TRIAL_ID_ATTR = "tune_trial_id"
RESULTS_FOLDER_ATTR = "results_folder"


def storage_url(sweep_dir: Path) -> str:
    """``sqlite:///<absolute sweep folder>/optuna.db``."""
    return f"sqlite:///{(Path(sweep_dir).resolve() / OPTUNA_DB).as_posix()}"


def open_storage(sweep_dir: Path) -> optuna.storages.RDBStorage:
    """An Optuna RDB storage on the sweep's SQLite file (created with its folder)."""
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    return optuna.storages.RDBStorage(storage_url(sweep_dir))


class SweepOptunaSearch(OptunaSearch):
    """Tune's ``OptunaSearch`` on the sweep's own storage, its objective named after the
    ranking metric and its trials labelled with their Tune trial (module docstring).

    ``metric`` (a single name: the sweep ranks on one metric) and every other argument are
    ``OptunaSearch``'s; ``sweep_dir`` is the sweep's folder, where Tune puts each trial's
    folder (:func:`study.plan.trial_dirname`) and where the study is stored;
    ``planned_rounds``: the trials' rounds (a trial that ends before them was stopped by
    the scheduler and is told to Optuna as pruned)."""

    def __init__(self, *, sweep_dir: Path, planned_rounds: int, **kwargs: Any) -> None:
        self._sweep_dir = Path(sweep_dir).resolve()
        #: a trial's rounds when its last row carries no config (ASHA-stopped: PRUNED)
        self._planned_rounds = planned_rounds
        super().__init__(storage=open_storage(self._sweep_dir), **kwargs)

    def _setup_study(self, mode: str | list) -> None:
        # the one place OptunaSearch creates (or, resumed, loads) its study
        super()._setup_study(mode)
        if isinstance(self._metric, str) and self._ot_study.metric_names != [self._metric]:
            with warnings.catch_warnings():  # "experimental since 3.2": it is what we need
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                self._ot_study.set_metric_names([self._metric])

    def suggest(self, trial_id: str) -> dict | None:
        config = super().suggest(trial_id)
        if config is not None:
            folder = self._sweep_dir / trial_dirname(
                SimpleNamespace(trial_id=trial_id, config=config)
            )
            trial = self._ot_trials[trial_id]
            trial.set_user_attr(TUNE_TRIAL_ID_ATTR, trial_id)
            trial.set_user_attr(RESULTS_FOLDER_ATTR, str(folder))
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        # Optuna is told a value only for a trial that ran all its rounds.  A diverged
        # trial (NaN metric) is told FAIL: Optuna would refuse the NaN with a warning on
        # the terminal anyway.  A trial a scheduler stopped early (ASHA) is told PRUNED:
        # its early-rung value is not comparable with finished trials' (OptunaSearch
        # tells a trial without a value and without an error as PRUNED).
        if result and isinstance(self._metric, str):
            if _diverged(result, self._metric):
                result, error = _without(result, self._metric), True
            elif not error and _stopped_early(result, getattr(self, "_planned_rounds", None)):
                result = _without(result, self._metric)
        super().on_trial_complete(trial_id, result, error)


def _without(result: dict, key: str) -> dict:
    return {k: v for k, v in result.items() if k != key}


def _diverged(result: dict, metric: str) -> bool:
    """The trial's last row says it diverged, or its ranking metric is not finite."""
    value = result.get(metric)
    not_finite = isinstance(value, float) and not math.isfinite(value)
    return bool(result.get("diverged")) or not_finite


def _stopped_early(result: dict, planned_rounds: int | None) -> bool:
    """The trial's last row is before its planned last round (a scheduler stopped it);
    the planned rounds are the trial's config's, else the sweep's."""
    planned = result.get("config/rounds") or planned_rounds
    last = result.get("round")
    return bool(planned) and isinstance(last, int) and last < int(planned)
