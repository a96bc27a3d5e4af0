"""Files fedsweep writes: atomic, with the user's umask, no temporary file left behind,
and a temporary file that vanished while Ray synced it is not shown as a failure."""

from __future__ import annotations

import os
import stat

import pytest

from federated.runtime.atomic_file import atomic_open, user_file_mode
from study.sweep_folder import write_json_atomic


def test_atomic_files_get_the_users_umask_and_leave_no_temp_file(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_open(tmp_path / "a.txt") as fh:
            fh.write("x")
        written = tmp_path / "a.txt"
        write_json_atomic(tmp_path / "b.json", {"a": 1})
        for path in (written, tmp_path / "b.json"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o644 == user_file_mode()
        (tmp_path / "folder.txt").mkdir()
        with pytest.raises(OSError), atomic_open(tmp_path / "folder.txt") as fh:
            fh.write("x")  # the rename onto a folder fails
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.json", "folder.txt"]


def test_a_sync_of_an_atomic_temp_file_that_vanished_is_not_shown_as_a_failure():
    """A trial's atomic write leaves ``.NAME….tmp`` for a moment; Ray's syncer may try to
    copy it after the rename.  That warning (a traceback) is dropped; others stay."""
    import logging

    from study.tune.ray_session import _NoVanishedTempFileSync

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("ray.train._internal.syncer", 30, "", 0, message, None, None)

    vanished = (
        "Last sync command failed with the following error:\nFileNotFoundError: [Errno 2] "
        "Failed to open local file '/tmp/ray/a/trial/.parties.csv1fbxeozc.tmp'. Detail: "
        "[errno 2] No such file or directory"
    )
    other = "Last sync command failed with the following error:\nPermissionError: denied"
    assert not _NoVanishedTempFileSync().filter(record(vanished))
    assert _NoVanishedTempFileSync().filter(record(other))


def test_rays_token_auth_notice_is_dropped_and_its_disabled_warning_kept():
    """Ray's "Token authentication is enabled" notice opened every sweep's output; the
    driver drops it (the safe default needs no action) and keeps the warning that
    authentication is disabled."""
    import logging

    import study.tune.ray_session  # noqa: F401  (installs the filter)

    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")

    def shown(message: str) -> bool:
        record = logger.makeRecord(logger.name, logging.WARNING, __file__, 1, message, (), None)
        return logger.filter(record)

    assert not shown("Token authentication is enabled for this Ray cluster. Set ...")
    assert not shown("Generated new authentication token and saved to /home/u/.ray/auth_token")
    assert shown("Token authentication is disabled for this Ray cluster. Anyone with ...")
