"""The Optuna study of an Optuna sweep, kept in SQLite inside the sweep's folder.

Ray Tune's ``OptunaSearch`` (Ray 2.60) takes an Optuna ``storage`` and a ``study_name``
and creates its study with ``load_if_exists=True``; given an RDB storage, every trial
it proposes and every result it is told lands in ``<sweep>/optuna.db`` as it happens:

    optuna-dashboard sqlite:///results/<sweep>/optuna.db     # while the sweep runs

``--resume`` restores Tune's pickled searcher, which holds the same storage (its URL),
so the search continues the same Optuna study: the trials already told stay in it and
TPE keeps learning from them.  The URL is absolute: resume a moved sweep folder
before moving it, or not at all.
"""

from __future__ import annotations

from pathlib import Path

OPTUNA_DB = "optuna.db"


def storage_url(sweep_dir: Path) -> str:
    """``sqlite:///<absolute sweep folder>/optuna.db``."""
    return f"sqlite:///{(Path(sweep_dir).resolve() / OPTUNA_DB).as_posix()}"


def open_storage(sweep_dir: Path):
    """An Optuna RDB storage on the sweep's SQLite file (created with its folder)."""
    import optuna

    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    return optuna.storages.RDBStorage(storage_url(sweep_dir))
