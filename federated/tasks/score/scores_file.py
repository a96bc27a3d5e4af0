"""Reading the scores file of a score-task image folder: one score per image, checked.

A folder whose images carry scores instead of classes (image quality, aesthetics) holds
a scores file beside ``train/`` and, optionally, ``test/``::

    PATH/scores.csv                    path,score[,attribute,...]  (UTF-8, one header line)
    PATH/train/<image>                 one pool of training images
    PATH/train/<party>/<image>         one folder per party (``--partition natural``)
    PATH/test/<image>                  the test set (optional)

``path`` is the image's path relative to PATH (``/``-separated), ``score`` a finite
number, and every other column a named, finite numeric attribute (AADB's "color
harmony", an IQA task's per-distortion levels).  Columns may come in any order.

**The rule for a folder with a scores file** (it settles what would otherwise be two
readings of one tree): the scores file makes the folder a score task, and the file
and the tree must say the same thing.  So ``train/<name>/`` folders are *parties*,
never classes; a folder one level deeper (``train/<party>/<class>/``, the class
layout of federated/data/folder_layout.py) or any folder under ``test/`` is class
folders in conflict with the scores file, refused; every image under ``train/`` and
``test/`` needs a row (an image without one would be silently dropped or silently
classified, so it is named instead), and every row an existing image.  A folder
without a scores file is read as classes, as before.

Every problem is one :class:`ScoresFileError` line naming the file, the line and the
column (or the image path, for the tree), before anything is decoded: rows naming
missing images, paths outside ``train/``/``test/``, non-numeric, NaN or infinite
values, duplicate rows, a header without ``path`` or ``score``, control characters in
a path or a column name, bytes that are not UTF-8, a pool image beside party folders, a party under
:data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` images, scores that are all
equal (nothing to regress, no rank to correlate).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from federated.data.folder_layout import FolderDataError, FolderLayout, ImageFile, check_party_size

SCORES_FILE = "scores.csv"
PATH_COLUMN = "path"
SCORE_COLUMN = "score"
HEADER_RULE = f"a header naming {PATH_COLUMN!r} and {SCORE_COLUMN!r}, then attribute columns"
PATH_RULE = "train/<image>, train/<party>/<image> or test/<image>, relative to the folder"
# A plain decimal number: what spreadsheets write; no '1_000', no 'nan', no 'inf'.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
# Control characters (a quoted field may hold a line break) would split a one-line message.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ScoresFileError(FolderDataError):
    """A scores file or its folder cannot be used; the message is one line."""


@dataclass(frozen=True)
class ScoredImages:
    """One split's images, ordered by (party, file path).

    ``paths`` relative to the folder (str array); ``scores`` float32 (N,);
    ``attributes`` float32 (N, A), columns as :attr:`ScoresFile.attribute_names`;
    ``party`` int64 (N,), an index into :attr:`ScoresFile.party_names`, -1 in a pool
    and in the test split; ``lines`` int64 (N,), each row's line in the scores file.
    """

    paths: np.ndarray
    scores: np.ndarray
    attributes: np.ndarray
    party: np.ndarray
    lines: np.ndarray

    def __len__(self) -> int:
        return len(self.paths)


@dataclass(frozen=True)
class ScoresFile:
    """A checked scores file and its folder (see the module docstring)."""

    root: Path
    file: Path
    attribute_names: tuple[str, ...]
    party_names: tuple[str, ...]  # empty for the pool layout train/<image>
    train: ScoredImages
    test: ScoredImages  # empty (0 rows) when the folder has no test/ images

    @property
    def has_test(self) -> bool:
        return len(self.test) > 0


def has_scores_file(root: str | os.PathLike) -> bool:
    """Whether folder ``root`` holds a scores file (and so is a score task).  A path the
    OS cannot even look at (a name too long ...) is not one: the folder scan then names
    its problem in one line."""
    try:
        return (Path(root) / SCORES_FILE).exists()
    except OSError:
        return False


@dataclass(frozen=True)
class _Row:
    line: int
    path: str
    split: str  # "train" or "test"
    party_name: str | None  # None: train pool or test
    score: float
    attributes: tuple[float, ...]


def read_scores(root: str | os.PathLike) -> ScoresFile:
    """Read and check ``root/scores.csv`` against the images under ``root``.

    Only lists and stats files (nothing is decoded).  Raises :class:`ScoresFileError`
    (one line naming the file, line and column, or the image) on any problem the
    module docstring lists; OS errors on the folder are named the same way."""
    root = Path(root)
    file = root / SCORES_FILE
    try:
        if not root.is_dir():
            raise ScoresFileError(f"{root}: no such folder")
        if not file.is_file():
            raise ScoresFileError(
                f"{file}: no scores file (a score task's folder holds {SCORES_FILE}: {HEADER_RULE})"
            )
        text = _decode(file, file.read_bytes())
        header, rows = _parse(file, text)
        _check_images(root, file, header, rows)
        _check_tree(root, file, rows)
    except OSError as err:
        where = err.filename if err.filename is not None else root
        raise ScoresFileError(f"{where}: {err.strerror or type(err).__name__}") from None
    return _tables(root, file, header, rows)


def _where(file: Path, line: int, column: str | None = None) -> str:
    return f"{file}: line {line}" + ("" if column is None else f", column {column!r}")


def _decode(file: Path, raw: bytes) -> str:
    """UTF-8 text (a leading byte-order mark dropped); a bad byte is named by line and
    by the column it falls in, read from the header."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line_start = raw.rfind(b"\n", 0, err.start) + 1
        line = raw.count(b"\n", 0, err.start) + 1
        before = raw[line_start : err.start].decode("utf-8-sig", errors="replace")
        field = len(next(csv.reader([before]), [""])) - 1
        first_line = raw.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace")
        names = next(csv.reader([first_line]), [])
        column = names[field].strip() if line > 1 and field < len(names) else f"#{field + 1}"
        raise ScoresFileError(
            f"{_where(file, line, column)}: byte 0x{raw[err.start]:02x} is not UTF-8 "
            "(allowed: a UTF-8 text file; save the CSV as UTF-8)"
        ) from None


def _parse(file: Path, text: str) -> tuple[list[str], list[_Row]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header or not any(name.strip() for name in header):
            raise ScoresFileError(f"{file}: empty (allowed: {HEADER_RULE}; one row per image)")
        names = _check_header(file, [name.strip() for name in header])
        rows: list[_Row] = []
        first_line: dict[str, int] = {}
        end = reader.line_num
        for record in reader:
            # a row is named by its first line (a quoted field may span lines)
            start, end = end + 1, reader.line_num
            if not record or all(not field.strip() for field in record):
                continue  # blank lines carry nothing
            rows.append(_row(file, start, names, record, first_line))
    except csv.Error as err:
        raise ScoresFileError(f"{_where(file, reader.line_num)}: {err} (allowed: CSV)") from None
    if not rows:
        raise ScoresFileError(f"{file}: a header and no rows (allowed: one row per image)")
    return names, rows


def _check_header(file: Path, names: list[str]) -> list[str]:
    for index, name in enumerate(names):
        if _CONTROL.search(name):
            raise ScoresFileError(
                f"{_where(file, 1)}: column #{index + 1} is named {name!r}, with a control "
                f"character (allowed: {HEADER_RULE}, printable names)"
            )
        if not name:
            raise ScoresFileError(
                f"{_where(file, 1)}: column #{index + 1} has no name (allowed: {HEADER_RULE})"
            )
        if name in names[:index]:
            raise ScoresFileError(
                f"{_where(file, 1, name)}: named twice (allowed: each column once)"
            )
    for needed in (PATH_COLUMN, SCORE_COLUMN):
        if needed not in names:
            raise ScoresFileError(
                f"{_where(file, 1)}: no {needed!r} column (columns: {', '.join(names)}; "
                f"allowed: {HEADER_RULE})"
            )
    return names


def _number(file: Path, line: int, column: str, text: str) -> float:
    value = text.strip()
    if not _NUMBER.fullmatch(value):
        what = "empty" if not value else f"{value!r} is not a number"
        raise ScoresFileError(
            f"{_where(file, line, column)}: {what} (allowed: a finite decimal number)"
        )
    number = float(value)
    if not math.isfinite(number) or abs(number) > _FLOAT32_MAX:
        # a number of thousands of digits is shown by its length, not spelled out
        shown = value if len(value) <= 40 else f"a number of {len(value):,} characters"
        raise ScoresFileError(
            f"{_where(file, line, column)}: {shown} is beyond float32's range "
            f"(allowed: a finite number of magnitude at most {_FLOAT32_MAX:.3g})"
        )
    return number


def _row(
    file: Path, line: int, names: list[str], record: list[str], first_line: dict[str, int]
) -> _Row:
    if len(record) != len(names):
        raise ScoresFileError(
            f"{_where(file, line)}: {len(record)} fields under a header of {len(names)} "
            f"(allowed: one field per column: {', '.join(names)})"
        )
    fields = dict(zip(names, record, strict=True))
    path, split, party_name = _check_path(file, line, fields[PATH_COLUMN].strip())
    if path in first_line:
        given = fields[PATH_COLUMN].strip()
        spelled = "" if given == path else f" (written {given!r})"
        raise ScoresFileError(
            f"{_where(file, line, PATH_COLUMN)}: {path}{spelled} is listed again (first on "
            f"line {first_line[path]}; allowed: one row per image)"
        )
    first_line[path] = line
    score = _number(file, line, SCORE_COLUMN, fields[SCORE_COLUMN])
    attributes = tuple(
        _number(file, line, name, fields[name])
        for name in names
        if name not in (PATH_COLUMN, SCORE_COLUMN)
    )
    return _Row(line, path, split, party_name, score, attributes)


def _check_path(file: Path, line: int, given: str) -> tuple[str, str, str | None]:
    """The row's path normalised, its split and its party folder (None outside one)."""
    where = _where(file, line, PATH_COLUMN)
    if not given:
        raise ScoresFileError(f"{where}: empty (allowed: {PATH_RULE})")
    if _CONTROL.search(given):
        raise ScoresFileError(
            f"{where}: {given!r} holds a control character (allowed: {PATH_RULE}, printable)"
        )
    # normalised: train/./2.png and train//2.png are train/2.png (PurePosixPath drops
    # '.' and empty parts), so one image written two ways is a duplicate row, named
    pure = PurePosixPath(given)
    parts = pure.parts
    if pure.is_absolute() or "\\" in given or ".." in given.split("/"):
        raise ScoresFileError(f"{where}: {given!r} (allowed: {PATH_RULE}, no '..', no '\\')")
    if any(p.startswith(".") for p in parts):
        raise ScoresFileError(
            f"{where}: {given!r} names a hidden file or folder (allowed: {PATH_RULE}; "
            "hidden names are ignored)"
        )
    if parts[0] == "train" and len(parts) in (2, 3):
        return pure.as_posix(), "train", parts[1] if len(parts) == 3 else None
    if parts[0] == "test" and len(parts) == 2:
        return pure.as_posix(), "test", None
    raise ScoresFileError(f"{where}: {given!r} (allowed: {PATH_RULE})")


def _check_images(root: Path, file: Path, header: list[str], rows: list[_Row]) -> None:
    """Every row's image exists as a file; the training rows are all pool or all parties;
    scores vary."""
    for row in rows:
        target = root / row.path
        try:
            mode = os.stat(target).st_mode
        except FileNotFoundError:
            raise ScoresFileError(
                f"{_where(file, row.line, PATH_COLUMN)}: {row.path} does not exist under {root}"
            ) from None
        if not stat.S_ISREG(mode):
            raise ScoresFileError(
                f"{_where(file, row.line, PATH_COLUMN)}: {row.path} is not a file "
                f"(allowed: an image file; {PATH_RULE})"
            )
    train = [row for row in rows if row.split == "train"]
    if not train:
        raise ScoresFileError(f"{file}: no train/ rows (allowed: at least one training image)")
    pool = [row for row in train if row.party_name is None]
    parties = [row for row in train if row.party_name is not None]
    if pool and parties:
        odd, other = (
            (pool[0], parties[0]) if pool[0].line > parties[0].line else (parties[0], pool[0])
        )
        raise ScoresFileError(
            f"{_where(file, odd.line, PATH_COLUMN)}: {odd.path} beside line {other.line}'s "
            f"{other.path} (allowed: all train/<image> or all train/<party>/<image>, not both)"
        )
    if len({row.score for row in train}) < 2:
        raise ScoresFileError(
            f"{_where(file, train[0].line, SCORE_COLUMN)}: every training row's score is "
            f"{train[0].score:g} (allowed: scores that vary; a constant has nothing to learn "
            "or rank)"
        )


def _check_tree(root: Path, file: Path, rows: list[_Row]) -> None:
    """Every image under train/ and test/ has a row; no class folders (module rule)."""
    listed = {row.path for row in rows}
    parties = any(row.party_name is not None for row in rows)
    rule = (
        f"a folder with {SCORES_FILE} is a score task: images at {PATH_RULE}, "
        "each with a row; class folders go without a scores file"
    )
    for split, depth in (("train", 2 if parties else 1), ("test", 1)):
        if not (root / split).exists():
            continue
        for path, kind in _walk(root / split, split, depth):
            if kind == "folder":
                raise ScoresFileError(
                    f"{root / path}: a folder where {file} lists images (class folders "
                    f"in conflict with the scores file; {rule})"
                )
            if kind == "loose":
                raise ScoresFileError(
                    f"{root / path}: a file beside the party folders that {file} lists "
                    f"(allowed: all train/<image> or all train/<party>/<image>, not both)"
                )
            if path not in listed:
                raise ScoresFileError(f"{root / path}: an image with no row in {file} ({rule})")


def _walk(top: Path, split: str, depth: int) -> list[tuple[str, str]]:
    """(path relative to the folder, kind) for every visible entry down to ``depth``
    levels under ``top``, sorted; kind: "image" (a file at the images' level),
    "folder" (a folder there) or "loose" (a file above it, where folders belong)."""
    found: list[tuple[str, str]] = []
    stack = [(top, PurePosixPath(split), 1)]
    while stack:
        folder, rel, level = stack.pop()
        with os.scandir(folder) as entries:
            visible = [e for e in entries if not e.name.startswith(".")]
        for entry in visible:
            is_dir = stat.S_ISDIR(os.stat(entry.path).st_mode)
            if is_dir and level < depth:
                stack.append((Path(entry.path), rel / entry.name, level + 1))
                continue
            kind = "folder" if is_dir else "image" if level == depth else "loose"
            found.append(((rel / entry.name).as_posix(), kind))
    return sorted(found)


def _tables(root: Path, file: Path, header: list[str], rows: list[_Row]) -> ScoresFile:
    attribute_names = tuple(n for n in header if n not in (PATH_COLUMN, SCORE_COLUMN))
    party_names = tuple(sorted({r.party_name for r in rows if r.party_name is not None}))
    party_of = {name: index for index, name in enumerate(party_names)}
    for name in party_names:
        try:  # the folder layout's one rule for a party's size
            check_party_size(root / "train" / name, sum(r.party_name == name for r in rows))
        except FolderDataError as err:
            raise ScoresFileError(str(err)) from None

    def split_arrays(split: str) -> ScoredImages:
        chosen = [r for r in rows if r.split == split]
        party = [party_of[r.party_name] if r.party_name is not None else -1 for r in chosen]
        order = sorted(range(len(chosen)), key=lambda i: (party[i], chosen[i].path))
        chosen = [chosen[i] for i in order]
        return ScoredImages(
            paths=np.array([r.path for r in chosen], dtype=str),
            scores=np.array([r.score for r in chosen], dtype=np.float32),
            attributes=np.array([r.attributes for r in chosen], dtype=np.float32).reshape(
                len(chosen), len(attribute_names)
            ),
            party=np.array([party[i] for i in order], dtype=np.int64),
            lines=np.array([r.line for r in chosen], dtype=np.int64),
        )

    return ScoresFile(
        root, file, attribute_names, party_names, split_arrays("train"), split_arrays("test")
    )


def score_layout(root: str | os.PathLike) -> FolderLayout:
    """A score task's folder as the folder reader's layout: every image a file with its
    targets (score, then the attributes, as ``target_names`` orders them), party folders
    as parties, no classes.  Raises :class:`ScoresFileError` as :func:`read_scores`."""
    scores = read_scores(root)
    root = scores.root.resolve()

    def files(split: ScoredImages) -> tuple[ImageFile, ...]:
        out = []
        for i, rel in enumerate(split.paths):
            path = root / str(rel)
            info = path.stat()
            target = (float(split.scores[i]), *map(float, split.attributes[i]))
            out.append(
                ImageFile(str(path), 0, int(split.party[i]), info.st_size, info.st_mtime_ns, target)
            )
        return tuple(out)

    return FolderLayout(
        root,
        (),
        scores.party_names,
        files(scores.train),
        files(scores.test),
        (SCORE_COLUMN, *scores.attribute_names),
    )
