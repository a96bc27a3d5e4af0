"""What ``--resume`` unpickles is what this user's fedsweep saw Ray Tune write.

Resuming hands Ray Tune its own state from the sweep folder, and Tune reads it with
pickle: ``tuner.pkl`` (``pickle.loads``), ``experiment_state-*.json``,
``search_gen_state-*.json`` and ``basic-variant-state-*.json`` (JSON with cloudpickled
fields, which Tune expands), the searcher's ``searcher-state-*.pkl`` and the callbacks'
``callback-states-*.pkl``.  Whoever wrote those files chooses code that runs as the user
who resumes.  The ownership rule (:mod:`study.resume_trust`) keeps other users out of a
folder; this module closes the rest: a folder copied from someone else, or a pickle
swapped in by anything that could write as the user without being fedsweep.

fedsweep keeps a secret key in the user's home (:func:`key_path`:
``$XDG_CONFIG_HOME/fedsweep/resume.key``, else ``~/.config/fedsweep/resume.key``; 32
random bytes, created mode 0600 on first use) and, while a sweep runs and when it
stops, records the HMAC-SHA256 of every such file (its name and its bytes) in
``<sweep>/fedsweep_resume_digests.json`` (:data:`DIGESTS`).  ``--resume`` verifies every
such file against that record before Tune reads anything, and refuses in one line
naming the first file that does not verify.  Without the key nobody can write a digest
that verifies, so a colleague's folder, one from another machine or one from before
fedsweep recorded digests cannot be resumed; it can still be read with
``python -m analysis.report``, which never unpickles.

Tune writes its experiment state every second into a staging folder and copies it into
the sweep folder in the background; the recorder hashes the staging copy right after
each save (:mod:`study.tune.resume_digest_callback`), before the copy lands, and keeps
the last :data:`KEEP` digests per file name, so a driver killed outright (``kill -9``)
leaves a folder whose files still verify.  This module does not import Ray.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import os
import secrets
import stat
import sys
from pathlib import Path

from federated.cli.input_checks import InputError
from study.sweep_folder import write_json_atomic

DIGESTS = "fedsweep_resume_digests.json"
DIGESTS_FORMAT = 1
# The files of a sweep folder Tune unpickles on restore (Ray 2.60); any other top-level
# *.pkl is held to the same rule, in case a searcher keeps its own.
TUNE_STATE_PATTERNS = (
    "tuner.pkl",
    "experiment_state-*.json",
    "search_gen_state-*.json",
    "basic-variant-state-*.json",
    "searcher-state-*.pkl",
    "callback-states-*.pkl",
    "*.pkl",
)
# Digests kept per file name: Tune's copy into the sweep folder lags its save by a
# sync or two, so a folder killed mid-copy may hold any of the last few versions.
KEEP = 16
KEY_BYTES = 32
_DOMAIN = b"fedsweep resume digest v1\0"


class ResumeDigestError(InputError):
    """A sweep folder whose Tune state this user's fedsweep did not record (one line)."""


def key_path() -> Path:
    """Where the key lives: ``$XDG_CONFIG_HOME/fedsweep/resume.key`` (an absolute
    XDG_CONFIG_HOME only, as the XDG spec says), else ``~/.config/fedsweep/resume.key``."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "fedsweep" / "resume.key"


def _read_key(path: Path) -> bytes:
    """The key at ``path``, refused unless it is a regular file of this user that no one
    else can read or write (a key others can read lets them forge digests)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise ResumeDigestError(
                f"{path}: not a regular file of yours (allowed: fedsweep's resume key, "
                "mode 0600; remove it and a new one is made)"
            )
        if info.st_mode & 0o077:
            raise ResumeDigestError(
                f"{path}: readable or writable by others (mode "
                f"{stat.S_IMODE(info.st_mode):o}; allowed: 600: chmod 600 {path}, or remove "
                "it and a new one is made, which un-trusts every folder recorded with it)"
            )
        text = os.read(fd, 4 * KEY_BYTES).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise ResumeDigestError(
            f"{path}: not a fedsweep resume key (allowed: {2 * KEY_BYTES} hex digits; "
            "remove it and a new one is made)"
        )
    return key


def resume_key(create: bool) -> bytes:
    """This user's key; with ``create``, made on first use (a folder 0700, the file 0600,
    linked into place so that two drivers starting at once share one key)."""
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        if not create:
            raise ResumeDigestError(
                f"{path}: no resume key: this user's fedsweep never recorded a sweep to "
                "resume (allowed: a folder a sweep of yours wrote on this machine)"
            ) from None
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (secrets.token_hex(KEY_BYTES) + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, path)  # fails if another driver got there first: use theirs
    except FileExistsError:
        pass
    finally:
        temporary.unlink()
    return _read_key(path)


def is_tune_state(name: str) -> bool:
    """Whether a top-level file ``name`` of a sweep folder is one Tune may unpickle
    (hidden files are Tune's temporaries, which it never reads back)."""
    return not name.startswith(".") and any(fnmatch.fnmatch(name, p) for p in TUNE_STATE_PATTERNS)


def tune_state_files(folder: Path) -> list[Path]:
    """The files of ``folder`` (not its trial folders) that Tune may unpickle."""
    try:
        entries = sorted(folder.iterdir())
    except FileNotFoundError:
        return []
    return [p for p in entries if is_tune_state(p.name) and p.is_file()]


def digest(key: bytes, name: str, content: bytes) -> str:
    """HMAC-SHA256 of a file's name and bytes (a digest never vouches for another name)."""
    return hmac.new(key, _DOMAIN + name.encode() + b"\0" + content, hashlib.sha256).hexdigest()


def read_digests(sweep_dir: Path) -> dict[str, list[str]]:
    """``{file name: [digest, ...]}`` recorded for ``sweep_dir``; empty when there is no
    record or it is not one (a damaged record vouches for nothing)."""
    try:
        record = json.loads((sweep_dir / DIGESTS).read_text())
    except (OSError, ValueError):
        return {}
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(files, dict):
        return {}
    return {
        name: [d for d in values if isinstance(d, str)]
        for name, values in files.items()
        if isinstance(name, str) and isinstance(values, list)
    }


class DigestRecorder:
    """Records the digests of a sweep's Tune state as it changes (:func:`record`); a
    file is hashed again only when its size or modification time changed."""

    def __init__(self) -> None:
        self._key: bytes | None = None
        self._seen: dict[tuple[str, int, int], tuple[str, str]] = {}
        self._warned = False

    def record(self, sweep_dir: Path, *sources: Path) -> None:
        """Add the digests of the Tune state files in ``sweep_dir`` and in ``sources``
        (Tune's staging folders, whose files become the sweep folder's) to
        ``sweep_dir``'s record.  A key or record that cannot be written is one warning
        (once): the sweep goes on, and ``--resume`` of it will say what is missing."""
        try:
            self._record(sweep_dir, sources)
        except (OSError, ResumeDigestError) as err:
            if not self._warned:
                self._warned = True
                reason = err.strerror if isinstance(err, OSError) and err.strerror else err
                print(
                    f"warning: cannot record the digests --resume checks ({reason}); this "
                    "sweep's folder will not be resumable",
                    file=sys.stderr,
                    flush=True,
                )

    def _record(self, sweep_dir: Path, sources: tuple[Path, ...]) -> None:
        if not sweep_dir.is_dir():
            return
        found: list[tuple[str, str]] = []
        for folder in (*sources, sweep_dir):
            for path in tune_state_files(folder):
                entry = self._digest_of(path)
                if entry:
                    found.append(entry)
        if not found:
            return
        files = read_digests(sweep_dir)
        changed = False
        for name, value in found:
            kept = files.setdefault(name, [])
            if value not in kept:
                kept.append(value)
                del kept[:-KEEP]
                changed = True
        if changed:
            write_json_atomic(sweep_dir / DIGESTS, {"format": DIGESTS_FORMAT, "files": files})

    def _digest_of(self, path: Path) -> tuple[str, str] | None:
        try:
            info = path.stat()
            cache_key = (str(path), info.st_size, info.st_mtime_ns)
            if cache_key not in self._seen:
                if self._key is None:
                    self._key = resume_key(create=True)
                self._seen[cache_key] = (path.name, digest(self._key, path.name, path.read_bytes()))
            return self._seen[cache_key]
        except FileNotFoundError:  # Tune replaced it between listing and reading
            return None


def check_key_writable() -> None:
    """Refuse, in one line before a new sweep starts, a config home where this user's
    resume key cannot be made: such a sweep could never be resumed (and would only say
    so when a resume fails)."""
    try:
        resume_key(create=True)
    except (OSError, ResumeDigestError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise InputError(
            f"the resume key {key_path()} cannot be made ({reason}), so this sweep could "
            "not be resumed (allowed: a writable $XDG_CONFIG_HOME, an absolute path, or "
            "~/.config)"
        ) from None


def record_digests(sweep_dir: Path) -> None:
    """Record the digests of ``sweep_dir``'s Tune state as it is now (after a fit ends,
    is interrupted or fails; after a Tuner is built)."""
    DigestRecorder().record(sweep_dir)


def check_resume_digests(sweep_dir: Path) -> None:
    """Refuse (one line naming the file) to resume ``sweep_dir`` unless every file of it
    that Tune would unpickle carries a digest this user's fedsweep recorded."""
    # tuner.pkl first: Tune reads it first, and it names the problem a user expects
    files = sorted(tune_state_files(sweep_dir), key=lambda p: (p.name != "tuner.pkl", p.name))
    if not files:
        return
    recorded = read_digests(sweep_dir)
    key = None
    for path in files:
        if key is None:
            try:
                key = resume_key(create=False)
            except ResumeDigestError as err:
                raise ResumeDigestError(f"--resume: {path}: cannot be verified; {err}") from None
            except OSError as err:
                raise ResumeDigestError(
                    f"--resume: {path}: cannot be verified; {key_path()}: {err.strerror or err}"
                ) from None
        try:
            value = digest(key, path.name, path.read_bytes())
        except OSError as err:
            raise ResumeDigestError(
                f"--resume: {path}: unreadable ({err.strerror or err})"
            ) from None
        if value not in recorded.get(path.name, []):
            why = (
                "no digest of it was recorded"
                if path.name not in recorded
                else "its digest does not match what your fedsweep recorded"
            )
            raise ResumeDigestError(
                f"--resume: {path}: {why}; Ray Tune would unpickle it, which runs whatever "
                "code its writer chose (allowed: Tune state your own sweep wrote, verified "
                f"against {DIGESTS} with your key; read a copied folder with "
                "python -m analysis.report, which never unpickles)"
            )
