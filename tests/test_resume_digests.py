"""``--resume`` unpickles only Tune state this user's fedsweep recorded: every file Tune
would unpickle is verified against a keyed digest (HMAC-SHA256, the key in the user's
home) before Tune reads it; a crafted ``tuner.pkl`` is refused in one line naming it and
never runs (study/resume_digests.py)."""

from __future__ import annotations

import json
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from study import resume_digests
from study.resume_digests import (
    DIGESTS,
    ResumeDigestError,
    check_resume_digests,
    key_path,
    record_digests,
    resume_key,
)

MARK = "unpickled.txt"


class _Payload:
    """A pickle that writes a file when loaded: what a crafted tuner.pkl could do."""

    def __init__(self, mark: str) -> None:
        self.mark = mark

    def __reduce__(self):
        return (Path.write_text, (Path(self.mark), "ran"))


@pytest.fixture
def config_home(tmp_path, monkeypatch) -> Path:
    """The key lives here, not in the real home."""
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


def tune_folder(root: Path) -> Path:
    sweep_dir = root / "sweep"
    sweep_dir.mkdir()
    (sweep_dir / "tuner.pkl").write_bytes(pickle.dumps({"state": 1}))
    (sweep_dir / "experiment_state-2025-01-01_00-00-00.json").write_text('{"trial_data": []}')
    return sweep_dir


def test_the_key_is_made_once_private_under_xdg_config_home(config_home):
    key = resume_key(create=True)
    path = key_path()
    assert path == config_home / "fedsweep" / "resume.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert resume_key(create=True) == key and len(key) == 32


def test_a_key_others_can_read_is_refused(config_home):
    resume_key(create=True)
    os.chmod(key_path(), 0o644)
    with pytest.raises(ResumeDigestError, match="readable or writable by others"):
        resume_key(create=False)


def test_recorded_state_verifies_and_any_change_is_named(config_home, tmp_path):
    sweep_dir = tune_folder(tmp_path)
    record_digests(sweep_dir)
    assert (sweep_dir / DIGESTS).is_file()
    check_resume_digests(sweep_dir)
    # a searcher state nobody recorded, then a changed experiment state
    extra = sweep_dir / "searcher-state-2025.pkl"
    extra.write_bytes(pickle.dumps(_Payload(str(tmp_path / MARK))))
    with pytest.raises(ResumeDigestError, match=r"searcher-state-2025\.pkl: no digest of it"):
        check_resume_digests(sweep_dir)
    extra.unlink()
    state = sweep_dir / "experiment_state-2025-01-01_00-00-00.json"
    state.write_text('{"trial_data": [1]}')
    with pytest.raises(ResumeDigestError, match="does not match") as caught:
        check_resume_digests(sweep_dir)
    assert str(state) in str(caught.value) and "\n" not in str(caught.value)


def test_another_users_key_verifies_nothing(config_home, tmp_path, monkeypatch):
    sweep_dir = tune_folder(tmp_path)
    record_digests(sweep_dir)  # the colleague's fedsweep, with their key
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "mine"))
    with pytest.raises(ResumeDigestError, match="no resume key"):
        check_resume_digests(sweep_dir)
    resume_key(create=True)
    with pytest.raises(ResumeDigestError, match=r"tuner\.pkl: its digest does not match"):
        check_resume_digests(sweep_dir)


def test_the_recorder_keeps_a_bounded_history(config_home, tmp_path):
    sweep_dir = tune_folder(tmp_path)
    state = sweep_dir / "experiment_state-2025-01-01_00-00-00.json"
    for i in range(resume_digests.KEEP + 5):
        state.write_text(json.dumps({"trial_data": [i]}))
        record_digests(sweep_dir)
    kept = json.loads((sweep_dir / DIGESTS).read_text())["files"][state.name]
    assert len(kept) == resume_digests.KEEP
    check_resume_digests(sweep_dir)  # the newest is among them


# ------------------------------------------------------------------ a real sweep (Ray)
@pytest.mark.slow
def test_a_crafted_tuner_pkl_is_refused_and_never_runs(moon_mu_smoke_sweep, tmp_path):
    """A real sweep's folder (the session's ``moon_mu --budget smoke``, copied: the
    refusal must not touch the shared one) with its ``tuner.pkl`` replaced by a pickle
    that would write a file: ``--resume`` refuses it in one line before anything runs."""
    import shutil

    sweep_dir = tmp_path / "results" / moon_mu_smoke_sweep.name
    shutil.copytree(moon_mu_smoke_sweep, sweep_dir, symlinks=True)
    recorded = json.loads((sweep_dir / DIGESTS).read_text())["files"]
    assert "tuner.pkl" in recorded and any(n.startswith("experiment_state-") for n in recorded)

    original = (sweep_dir / "tuner.pkl").read_bytes()
    (sweep_dir / "tuner.pkl").write_bytes(pickle.dumps(_Payload(str(tmp_path / MARK))))
    manifest = (sweep_dir / "fedsweep_sweep.json").read_text()
    cmd = [sys.executable, "-m", "study.sweep", "moon_mu", "--budget", "smoke", "--resume"]
    cmd += ["--name", sweep_dir.name, "--storage-path", str(sweep_dir.parent), "--quiet"]
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith(f"error: --resume: {sweep_dir / 'tuner.pkl'}: its digest")
    assert not (tmp_path / MARK).exists(), "the crafted pickle ran"
    assert (sweep_dir / "fedsweep_sweep.json").read_text() == manifest, "nothing was run"
    # the refusal changed no recorded digest: the true file still matches its record
    # (a resume with digests that match runs in every resume test, e.g. the fault drills)
    (sweep_dir / "tuner.pkl").write_bytes(original)
    assert json.loads((sweep_dir / DIGESTS).read_text())["files"] == recorded
    check_resume_digests(sweep_dir)
