"""A multi-label folder's two text files: the label names and ``labels.csv``.

``classes.json`` (a JSON list of names, label i the i-th) or ``classes.txt`` (one name a
line); ``labels.csv`` (a header ``stem,labels[,<field>,...]``, one row per image of the
split: its stem, its labels' names joined by ``;`` (empty: an image with no label), and
its value of each field, e.g. the site it came from).  Parsed (``json``, ``csv``), never
executed; every problem one :class:`MultiLabelDataError` line naming the file, the line
and what is allowed.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from federated.data.folder_layout import FolderDataError

CLASSES_JSON, CLASSES_TXT, LABELS_FILE = "classes.json", "classes.txt", "labels.csv"
#: between an image's labels in ``labels.csv``
SEPARATOR = ";"
#: the most labels a folder names (a head of this many logits)
MAX_LABELS = 1000
# the largest classes or labels file read (bytes): a listing, never gigabytes of it
MAX_LIST_BYTES = 64 * 2**20
HEADER = ("stem", "labels")


class MultiLabelDataError(FolderDataError):
    """A multi-label folder cannot be used; the message is one line naming the file."""


def read_text(path: Path) -> str:
    """``path``'s UTF-8 text (a BOM dropped); at most :data:`MAX_LIST_BYTES`."""
    try:
        if path.stat().st_size > MAX_LIST_BYTES:
            raise MultiLabelDataError(
                f"{path}: over {MAX_LIST_BYTES // 2**20} MiB (allowed: a listing, at most that)"
            )
        raw = path.read_bytes()
    except OSError as err:
        raise MultiLabelDataError(f"{path}: cannot be read ({err.strerror or err})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise MultiLabelDataError(
            f"{path}: line {line}: byte 0x{raw[err.start]:02x} is not UTF-8 (allowed: UTF-8 text)"
        ) from None


def _names_of(path: Path, text: str) -> list[str]:
    """The names a classes file lists (JSON: a list of strings; text: one a line)."""
    if path.name == CLASSES_TXT:
        names = text.splitlines()
        while names and not names[-1].strip():  # a last line's newline is no label
            names.pop()
        return names
    try:
        names = json.loads(text)
    except json.JSONDecodeError as err:
        raise MultiLabelDataError(
            f"{path}: line {err.lineno}, column {err.colno}: {err.msg} (allowed: JSON)"
        ) from None
    except (RecursionError, ValueError):
        raise MultiLabelDataError(f"{path}: not usable JSON (allowed: JSON)") from None
    odd = (
        f"a JSON {type(names).__name__}"
        if not isinstance(names, list)
        else next(
            (f"entry {k} is {n!r}" for k, n in enumerate(names) if not isinstance(n, str)), None
        )
    )
    if odd is not None:
        raise MultiLabelDataError(
            f"{path}: {odd} (allowed: a JSON list of label names, e.g. "
            '["coat", "bag"]: label i is the i-th)'
        )
    return names


def read_label_names(root: Path) -> tuple[tuple[str, ...], bytes]:
    """The label names (label i the i-th) and the bytes they were read from."""
    as_json, as_text = root / CLASSES_JSON, root / CLASSES_TXT
    if as_json.is_file() and as_text.is_file():
        raise MultiLabelDataError(
            f"{root}: both {CLASSES_JSON} and {CLASSES_TXT} (allowed: one of the two)"
        )
    where = as_json if as_json.is_file() or not as_text.is_file() else as_text
    if not where.is_file():
        raise MultiLabelDataError(
            f"{as_json}: no such file (add it: a JSON list of label names, label i the i-th; "
            f"or {CLASSES_TXT}, one name a line)"
        )
    text = read_text(where)
    names = [n.strip() for n in _names_of(where, text)]
    for index, name in enumerate(names):
        if not name or SEPARATOR in name or "/" in name:
            raise MultiLabelDataError(
                f"{where}: label {index} is {name!r} (allowed: a non-empty name without "
                f"'{SEPARATOR}' or '/')"
            )
        if name in names[:index]:
            raise MultiLabelDataError(
                f"{where}: label name {name!r} twice (labels {names.index(name)} and {index}; "
                "allowed: distinct names)"
            )
    if not 1 <= len(names) <= MAX_LABELS:
        raise MultiLabelDataError(f"{where}: {len(names)} labels (allowed: 1 to {MAX_LABELS})")
    return tuple(names), text.encode()


@dataclass(frozen=True)
class LabelRows:
    """A split's ``labels.csv`` in the order of its images: each image's label indices
    and its value of each field ("" where the row leaves it empty)."""

    label_sets: tuple[tuple[int, ...], ...]
    fields: dict[str, tuple[str, ...]]


def _header(path: Path, rows: list[list[str]]) -> list[str]:
    header = [name.strip() for name in rows[0]] if rows else []
    if tuple(header[:2]) != HEADER:
        raise MultiLabelDataError(
            f"{path}: line 1: the header must begin with 'stem,labels' (allowed: "
            "stem,labels[,<field>,...] then one row per image)"
        )
    for index, name in enumerate(header[2:]):
        if not name or name in header[: index + 2]:
            raise MultiLabelDataError(
                f"{path}: line 1: field {index + 1} {name!r} (allowed: distinct non-empty "
                "names besides 'stem' and 'labels')"
            )
    return header


def _label_set(path: Path, line: int, text: str, index_of: dict[str, int]) -> tuple[int, ...]:
    names = [n.strip() for n in text.split(SEPARATOR)] if text.strip() else []
    for k, name in enumerate(names):
        if name not in index_of:
            known = ", ".join(list(index_of)[:10]) + (" ..." if len(index_of) > 10 else "")
            raise MultiLabelDataError(
                f"{path}: line {line}: label {name!r} is not in the classes file (allowed: "
                f"names from it, joined by '{SEPARATOR}': {known})"
            )
        if name in names[:k]:
            raise MultiLabelDataError(
                f"{path}: line {line}: label {name!r} twice (allowed: each label once)"
            )
    return tuple(sorted(index_of[n] for n in names))


def read_labels_file(
    path: Path, text: str, stems: tuple[str, ...], labels: tuple[str, ...]
) -> LabelRows:
    """``text``, read from ``path`` (a split's ``labels.csv``), for the images ``stems``
    of a folder whose label names are ``labels``: one row per image, no row for another."""
    rows = list(csv.reader(io.StringIO(text)))
    header = _header(path, rows)
    index_of = {name: i for i, name in enumerate(labels)}
    known = set(stems)
    found: dict[str, tuple[tuple[int, ...], list[str]]] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue  # a blank line
        if len(row) != len(header):
            raise MultiLabelDataError(
                f"{path}: line {line}: {len(row)} values (allowed: {len(header)}, one per "
                f"header column: {','.join(header)})"
            )
        stem = row[0].strip()
        if stem not in known:
            raise MultiLabelDataError(
                f"{path}: line {line}: stem {stem!r} is no image of {path.parent / 'images'} "
                "(allowed: one row per image, its stem)"
            )
        if stem in found:
            raise MultiLabelDataError(
                f"{path}: line {line}: stem {stem!r} twice (allowed: one row per image)"
            )
        found[stem] = (_label_set(path, line, row[1], index_of), [c.strip() for c in row[2:]])
    missing = next((s for s in stems if s not in found), None)
    if missing is not None:
        raise MultiLabelDataError(
            f"{path}: no row for image {missing!r} (allowed: one row per image of "
            f"{path.parent / 'images'}; an image with no label has an empty labels cell)"
        )
    return LabelRows(
        tuple(found[s][0] for s in stems),
        {name: tuple(found[s][1][k] for s in stems) for k, name in enumerate(header[2:])},
    )
