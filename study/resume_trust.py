"""What ``--resume`` trusts: a sweep folder only you could have written.

Resuming loads Ray Tune's own state from the sweep folder (``tuner.pkl``, the searcher's
``*.pkl``, the trials in ``experiment_state-*.json``), and Tune reads those with pickle:
whoever wrote them chooses code that runs as the user who resumes.  fedsweep's own
checkpoints are safe (``torch.load(weights_only=True)``); Tune's state is not.  So, as
ssh does with its keys, the driver resumes only a folder whose every file and folder is
owned by the current user and writable by nobody else; anything else is refused in one
line before Ray starts, naming the path.  A group-writable entry passes only when the
group is the user's own private group (umask 002 on systems with user private groups),
since no one else can write through it.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

from federated.cli.input_checks import InputError


class UntrustedFolderError(InputError):
    """A sweep folder someone else could have written (one line)."""


def _private_group(gid: int, uid: int) -> bool:
    """True when no user but ``uid`` belongs to group ``gid`` (a user private group)."""
    try:
        group = grp.getgrgid(gid)
        me = pwd.getpwuid(uid).pw_name
    except KeyError:
        return False
    if set(group.gr_mem) - {me}:
        return False
    return all(p.pw_uid == uid for p in pwd.getpwall() if p.pw_gid == gid)


def _problem(path: Path, uid: int, private_groups: dict[int, bool]) -> str | None:
    """Why ``path`` may hold someone else's writing; None when only ``uid`` can write it."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        # a link points wherever its maker chose: Tune would read the target
        return "is a symbolic link"
    if info.st_uid != uid:
        try:
            owner = pwd.getpwuid(info.st_uid).pw_name
        except KeyError:
            owner = f"uid {info.st_uid}"
        return f"belongs to {owner}, not to you"
    if info.st_mode & stat.S_IWOTH:
        return f"is writable by every user (mode {stat.S_IMODE(info.st_mode):o})"
    if info.st_mode & stat.S_IWGRP:
        if info.st_gid not in private_groups:
            private_groups[info.st_gid] = _private_group(info.st_gid, uid)
        if not private_groups[info.st_gid]:
            return f"is writable by its group (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def check_resume_trust(sweep_dir: Path) -> None:
    """Refuse (one line) to resume ``sweep_dir`` unless only the current user can have
    written it: the folder, and every file and folder in it."""
    uid = os.getuid()
    private_groups: dict[int, bool] = {}
    try:
        entries = [sweep_dir, *sorted(sweep_dir.rglob("*"))]
        for path in entries:
            problem = _problem(path, uid, private_groups)
            if problem:
                raise UntrustedFolderError(
                    f"--resume: {path} {problem}; resuming would unpickle Ray Tune's state "
                    "from a folder someone else could have written, which can run their "
                    f"code (allowed: a sweep folder only you can write: chown it, or "
                    f"chmod -R go-w {sweep_dir})"
                )
    except OSError as err:
        raise UntrustedFolderError(
            f"--resume: {sweep_dir}: cannot check who wrote it ({err.strerror or err})"
        ) from None
