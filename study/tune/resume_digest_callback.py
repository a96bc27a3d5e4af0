"""The Tune callback that records the digests ``--resume`` verifies
(:mod:`study.resume_digests`) while a sweep runs.

Tune saves its experiment state (and the searcher's, and the callbacks') into the
driver's staging folder at the end of a controller step and then copies it into the
sweep folder in the background; ``on_step_end`` runs right after that save, so the
staging copy is hashed before its copy lands and a driver killed at any moment leaves
files that verify.  ``tuner.pkl``, written into the sweep folder when the Tuner is
built, is hashed from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune import Callback

from study.resume_digests import DigestRecorder


class ResumeDigestRecorder(Callback):
    """Records the sweep's Tune state digests after every step and at the end.

    Tune pickles its callbacks into ``tuner.pkl`` and restores them on ``--resume``, so a
    resumed sweep keeps recording; nothing of the recorder's cache (nor the key, which
    never leaves the user's home) is pickled."""

    def __init__(self) -> None:
        self._recorder = DigestRecorder()

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._recorder = DigestRecorder()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self._record(trials)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self._record(trials)

    def _record(self, trials: list) -> None:
        # every trial of a sweep shares its experiment's storage; a step before the
        # first trial exists has nothing saved yet
        storage = next((t.storage for t in trials if getattr(t, "storage", None)), None)
        if storage is None:
            return
        sweep_dir = Path(storage.experiment_fs_path)
        self._recorder.record(sweep_dir, Path(storage.experiment_driver_staging_path))
