"""``--resume``: which sweep folder to continue, and whether it can be continued.

:func:`sweep_to_resume` names the folder (``--name``, else the latest folder of the same
study, dataset, budget and search), refuses one whose driver is still alive, one that
someone else could have written (:mod:`study.resume_trust`, checked before anything of
the folder is read as code), one whose Tune state this user's fedsweep did not record
(:mod:`study.resume_digests`) and one without a readable manifest or Tune state; it
returns the folder and the plan its manifest records.  Every refusal is one line (a
:class:`~study.sweep_args.UsageError`).  This module does not import Ray.
"""

from __future__ import annotations

import json
from pathlib import Path

from federated.config.run_config import ConfigError
from search_spaces.study_file import StudyFileError
from study.driver_liveness import driver_gone
from study.plan import PlanTooLargeError, SweepPlan
from study.resume_digests import check_resume_digests
from study.resume_trust import check_resume_trust
from study.sweep_args import UsageError
from study.sweep_folder import MANIFEST, read_manifest


def sweep_to_resume(
    storage: Path, plan: SweepPlan | None, name: str | None
) -> tuple[Path, SweepPlan]:
    """The folder ``--resume`` continues and the plan its manifest records (the trials'
    run-time checks are run on that plan, not on today's command line)."""
    sweep_dir = find_sweep(storage, plan, name)
    if runner_manifest_running(sweep_dir):
        raise UsageError(
            f"--resume: {sweep_dir} is still running (its driver is alive); stop it first"
        )
    # before anything of the folder is read as code (Tune's pickles): who could write
    # it, then whether this user's fedsweep recorded what Tune would unpickle
    check_resume_trust(sweep_dir)
    plan = resumable_plan(sweep_dir)
    check_resume_digests(sweep_dir)
    return sweep_dir, plan


def find_sweep(storage: Path, plan: SweepPlan | None, name: str | None) -> Path:
    """``storage/name``, or without a name the newest folder named like ``plan``'s sweeps."""
    if name:
        path = storage / name
        if not path.is_dir():
            raise UsageError(f"--resume: no sweep {name!r} under {storage}")
        return path
    if plan is None:
        raise UsageError("--resume needs --name NAME or the study, to find its latest sweep")
    prefix = plan.default_name("")
    candidates = sorted(
        (p for p in storage.glob(prefix + "*") if p.is_dir()), key=lambda p: p.stat().st_mtime
    )
    if not candidates:
        raise UsageError(f"--resume: no sweep named {prefix}* under {storage}; pass --name")
    return candidates[-1]


def resumable_plan(sweep_dir: Path) -> SweepPlan:
    """The plan a sweep folder's manifest records, or one line saying why it cannot be
    resumed (no manifest, a damaged one, no Tune state)."""
    try:
        manifest = read_manifest(sweep_dir)
    except FileNotFoundError:
        raise UsageError(
            f"--resume: {sweep_dir} has no {MANIFEST}: not a fedsweep sweep, or one that "
            "never started; start it again without --resume"
        ) from None
    except (OSError, ValueError) as err:
        raise UsageError(f"--resume: {sweep_dir / MANIFEST} is unreadable ({err})") from None
    if not (sweep_dir / "tuner.pkl").is_file():
        raise UsageError(
            f"--resume: {sweep_dir} has no Ray Tune state (tuner.pkl): the sweep never got "
            "to its first trial; start it again under another --name"
        )
    try:
        return SweepPlan.from_manifest(manifest)
    except (ConfigError, StudyFileError, PlanTooLargeError) as err:
        raise UsageError(f"--resume: {sweep_dir / MANIFEST}: {err}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise UsageError(
            f"--resume: {sweep_dir / MANIFEST} is damaged ({type(err).__name__}: {err})"
        ) from None


def runner_manifest_running(sweep_dir: Path) -> bool:
    """True when the sweep's manifest says running and its driver process is alive."""
    try:
        manifest = json.loads((sweep_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(manifest, dict)
        and manifest.get("status") == "running"
        and isinstance(manifest.get("driver"), dict)
        and not driver_gone(manifest)
    )
