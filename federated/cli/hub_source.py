"""Where an ``hf:`` data set comes from, and whether a Hub name can be had at all.  Torch-free.

``hf:NAME[:CONFIG]`` is a Hub data set; ``hf:PATH`` (starting with ``/``, ``.`` or ``~``, or
existing) a local copy.  :func:`check_hub_reachable` refuses a Hub name that can be neither
downloaded nor read from the Hugging Face cache, in one line naming the data set and the
folders it looked in.  ``python -m federated.run`` calls :func:`early_hub_refusal` before it
imports torch, so that refusal takes a fraction of a second, not the seconds (tens, on a
loaded machine) that torch and torchvision take to import; the data loader
(:mod:`federated.data.hub_dataset`) calls the same check, for the Python API and sweeps.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

HUB_PREFIX = "hf:"
DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_SECONDS = 3.0  # a reachability probe, so a machine without network fails in seconds
NAME_PATTERN = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


class HubSourceError(ValueError):
    """An ``hf:`` source cannot be had; the message is one line naming it."""


def is_hub_dataset(name: object) -> bool:
    return isinstance(name, str) and name.startswith(HUB_PREFIX)


SOURCE_RULE = (
    "hf:OWNER/NAME[:CONFIG], or hf:PATH of a local save_to_disk folder, parquet file(s) or "
    "imagefolder tree"
)


def local_path(name: str) -> Path | None:
    """The local source of ``hf:PATH`` (absolute), or None for a Hub ``NAME[:CONFIG]``.

    Refused (:class:`HubSourceError`, one line): an empty source (``hf:`` would read the
    current folder), a ``~user`` of no such user, and a file system's root (``hf:/``:
    every file under it would be listed and hashed, minutes of scanning the disk)."""
    given = name[len(HUB_PREFIX) :]
    if not given.strip():
        raise HubSourceError(
            f"dataset {name!r}: no source after {HUB_PREFIX} (allowed: {SOURCE_RULE})"
        )
    try:
        exists = Path(given).exists()
    except (OSError, ValueError):  # a name the OS cannot look up (too long, a NUL): no path
        exists = False
    if not (given.startswith(("/", ".", "~")) or exists):
        return None
    try:
        path = Path(given).expanduser().resolve()
    except RuntimeError:  # ~user: no such user (no home folder to expand)
        user = given.split("/", 1)[0]
        raise HubSourceError(
            f"dataset {name!r}: {user} is no user's home folder (allowed: {SOURCE_RULE})"
        ) from None
    if path == Path(path.anchor):
        raise HubSourceError(
            f"dataset {name!r}: {path} is the file system's root, and reading it would scan "
            f"the whole disk (allowed: {SOURCE_RULE}, e.g. hf:./my-data)"
        )
    return path


def hub_name(name: str) -> tuple[str, str | None]:
    """``hf:OWNER/NAME[:CONFIG]`` -> (``OWNER/NAME``, ``CONFIG`` or None); one line if not."""
    repo, _, config = name[len(HUB_PREFIX) :].partition(":")
    if not NAME_PATTERN.fullmatch(repo) or (config and not re.fullmatch(r"[\w.-]+", config)):
        raise HubSourceError(f"dataset {name!r}: not a Hub name (allowed: {SOURCE_RULE})")
    return repo, config or None


def truthy(variable: str) -> bool:
    """Whether environment ``variable`` is set to a yes (``1``, ``true``, ``yes``, ``on``)."""
    return os.environ.get(variable, "").strip().lower() in ("1", "true", "yes", "on")


def _hf_home() -> Path:
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")).expanduser()


def cache_places(repo: str) -> list[Path]:
    """Where the Hugging Face libraries keep a downloaded copy of ``repo``: the Hub's file
    cache and ``datasets``' prepared-Arrow cache."""
    hub = Path(os.environ.get("HF_HUB_CACHE", _hf_home() / "hub")).expanduser()
    prepared = Path(os.environ.get("HF_DATASETS_CACHE", _hf_home() / "datasets")).expanduser()
    return [hub / ("datasets--" + repo.replace("/", "--")), prepared / repo.replace("/", "___")]


def hub_endpoint() -> tuple[str, int]:
    """The host and port of the Hub (``HF_ENDPOINT``, default https://huggingface.co);
    a malformed ``HF_ENDPOINT`` (``http://[::1``, a port out of range, no host) is one
    :class:`HubSourceError` line naming the variable, not urllib's traceback."""
    text = os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT)
    rule = f"an http or https URL with a host, e.g. {DEFAULT_ENDPOINT}"
    try:
        url = urlparse(text)
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError as err:  # Invalid IPv6 URL, Port out of range 0-65535, ...
        raise HubSourceError(f"HF_ENDPOINT={text!r}: {err} (allowed: {rule})") from None
    if url.scheme not in ("http", "https") or not url.hostname:
        raise HubSourceError(f"HF_ENDPOINT={text!r} (allowed: {rule})")
    return url.hostname, port


def _hub_reachable() -> bool:
    host, port = hub_endpoint()
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            return True
    except OSError:
        return False


def check_hub_reachable(name: str) -> None:
    """Refuse a Hub name that can be neither downloaded nor read from the cache (at most
    :data:`PROBE_SECONDS` of probing); with a cached copy and no network, ``datasets`` is
    told it is offline (``HF_HUB_OFFLINE=1``; it would otherwise retry the Hub)."""
    repo, _ = hub_name(name)
    places = cache_places(repo)
    cached = any(p.is_dir() for p in places)
    if truthy("HF_HUB_OFFLINE") or truthy("HF_DATASETS_OFFLINE"):
        why = "HF_HUB_OFFLINE is set"
    elif _hub_reachable():
        return
    else:
        why = f"the Hub cannot be reached (no answer in {PROBE_SECONDS:g} s)"
        if cached:
            os.environ["HF_HUB_OFFLINE"] = "1"
    if not cached:
        raise HubSourceError(
            f"dataset {name!r}: {why} and no cached copy (looked in "
            f"{', '.join(map(str, places))}); run once with network access, or pass a local "
            "copy as hf:PATH"
        )


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The last value of ``flag`` on ``argv`` (``--flag V`` or ``--flag=V``), as argparse
    takes it."""
    value = None
    for i, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
        elif arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
    return value


def early_hub_refusal(argv: Sequence[str]) -> str | None:
    """The one ``error:`` line refusing ``--dataset hf:NAME`` on ``argv`` when that Hub data
    set can be had neither from the network nor from the cache, else None.  The line is the
    one the config check gives later (``invalid config: dataset=...``), only sooner: before
    torch is imported.  A local ``hf:PATH``, another dataset or ``--help``: None (the usual
    checks follow)."""
    from federated.params import ConfigError  # torch-free

    dataset = _flag_value(argv, "--dataset")
    if any(a in ("-h", "--help") for a in argv) or not is_hub_dataset(dataset):
        return None
    try:
        if local_path(dataset) is not None:
            return None
        check_hub_reachable(dataset)
    except HubSourceError as err:
        return f"error: {ConfigError('dataset', dataset, f'a usable data set; {err}')}"
    return None
