"""The scores-file reader (federated/tasks/score/scores_file.py): typed arrays, and every bad
input one line naming the file, the line and the column (or the image)."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from federated.data.folder_layout import FolderDataError
from federated.tasks.score.scores_file import (
    SCORES_FILE,
    ScoresFileError,
    has_scores_file,
    read_scores,
)

# A real 1 x 1 grey PNG: the reader only lists and stats files, but the files are images.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="
)


def make_folder(root: Path, images: list[str], csv_text: str | bytes) -> Path:
    """``root`` with ``images`` (paths relative to it) and ``scores.csv`` holding ``csv_text``."""
    for rel in images:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(PNG)
    data = csv_text.encode() if isinstance(csv_text, str) else csv_text
    (root / SCORES_FILE).write_bytes(data)
    return root


def pool_folder(root: Path, extra_rows: str = "", header: str = "path,score,sharpness") -> Path:
    """train/ pool of 4 images and test/ of 2; rows start on line 2."""
    images = [f"train/img{i}.png" for i in range(4)] + ["test/t0.png", "test/t1.png"]
    rows = [
        "train/img2.png,0.25,3",
        "train/img0.png,1,1.5",
        "test/t1.png,0.5,2",
        "train/img1.png,0.75,-1e-3",
        "train/img3.png,0,4",
        "test/t0.png,.5,0",
    ]
    return make_folder(root, images, "\n".join([header, *rows]) + "\n" + extra_rows)


def party_folder(root: Path, per_party: int = 10) -> Path:
    """train/<party>/ for parties 'b' and 'a' (per_party images each), no test/."""
    images, rows = [], ["score,path"]
    for party in ("b", "a"):
        for i in range(per_party):
            images.append(f"train/{party}/{i:02d}.png")
            rows.append(f"{i / per_party},train/{party}/{i:02d}.png")
    return make_folder(root, images, "\n".join(rows) + "\n")


def refused(root: Path) -> str:
    """The one-line message reading ``root`` raises."""
    with pytest.raises(ScoresFileError) as caught:
        read_scores(root)
    message = str(caught.value)
    assert "\n" not in message, message
    assert isinstance(caught.value, FolderDataError)  # the CLIs' one-line data errors
    return message


def test_a_pool_folder_reads_as_typed_arrays_in_path_order(tmp_path):
    scores = read_scores(pool_folder(tmp_path))
    assert has_scores_file(tmp_path)
    assert scores.attribute_names == ("sharpness",)
    assert scores.party_names == ()
    assert scores.train.paths.tolist() == [f"train/img{i}.png" for i in range(4)]
    assert scores.train.scores.dtype == np.float32
    assert scores.train.scores.tolist() == [1.0, 0.75, 0.25, 0.0]
    assert scores.train.attributes.dtype == np.float32
    assert scores.train.attributes.shape == (4, 1)
    np.testing.assert_allclose(scores.train.attributes[:, 0], [1.5, -1e-3, 3, 4], rtol=1e-6)
    assert scores.train.party.tolist() == [-1] * 4
    assert scores.train.lines.tolist() == [3, 5, 2, 6]
    assert scores.has_test
    assert scores.test.paths.tolist() == ["test/t0.png", "test/t1.png"]
    assert scores.test.scores.tolist() == [0.5, 0.5]


def test_party_folders_are_parties_sorted_by_name_with_no_attributes(tmp_path):
    scores = read_scores(party_folder(tmp_path))
    assert scores.party_names == ("a", "b")
    assert scores.train.party.tolist() == [0] * 10 + [1] * 10
    assert scores.train.paths[0] == "train/a/00.png"
    assert scores.train.attributes.shape == (20, 0)
    assert not scores.has_test and len(scores.test) == 0
    assert scores.test.scores.dtype == np.float32


def test_a_party_below_the_minimum_is_named(tmp_path):
    message = refused(party_folder(tmp_path, per_party=9))
    assert f"{tmp_path / 'train' / 'a'}: party with 9 images" in message


@pytest.mark.parametrize(
    ("row", "column", "what"),
    [
        ("train/img9.png,0.5,1", "path", "train/img9.png does not exist"),
        ("train/img0.png,0.5,1", "path", "listed again (first on line 3"),
        ("train/extra.png,good,1", "score", "'good' is not a number"),
        ("train/extra.png,NaN,1", "score", "'NaN' is not a number"),
        ("train/extra.png,inf,1", "score", "'inf' is not a number"),
        ("train/extra.png,-Infinity,1", "score", "is not a number"),
        ("train/extra.png,1e400,1", "score", "beyond float32's range"),
        ("train/extra.png,1e39,1", "score", "beyond float32's range"),
        ("train/extra.png,,1", "score", "empty"),
        ("train/extra.png,1_0,1", "score", "'1_0' is not a number"),
        ("train/extra.png,0.5,nan", "sharpness", "'nan' is not a number"),
        ("../img0.png,0.5,1", "path", "no '..'"),
        ("/abs/img0.png,0.5,1", "path", "allowed: train/<image>"),
        ("images/img0.png,0.5,1", "path", "allowed: train/<image>"),
        ("train/a/b/img0.png,0.5,1", "path", "allowed: train/<image>"),
        ("test/a/img0.png,0.5,1", "path", "allowed: train/<image>"),
        ("train/.hidden.png,0.5,1", "path", "hidden"),
        ("train\\img0.png,0.5,1", "path", "no '\\'"),
        ('"train/a\nb.png",0.5,1', "path", "'train/a\\nb.png' holds a control character"),
    ],
)
def test_a_bad_row_is_named_by_file_line_and_column(tmp_path, row, column, what):
    pool_folder(tmp_path, extra_rows=row + "\n")
    (tmp_path / "train" / "extra.png").write_bytes(PNG)  # listed by the value cases' rows
    message = refused(tmp_path)
    assert message.startswith(f"{tmp_path / SCORES_FILE}: line 8, column {column!r}: "), message
    assert what in message


def test_a_duplicate_is_found_whatever_rows_lie_between(tmp_path):
    message = refused(pool_folder(tmp_path, extra_rows="\ntrain/img2.png,0.25,3\n"))
    assert "line 9, column 'path': train/img2.png is listed again (first on line 2" in message


def test_a_row_with_too_few_fields_is_named_by_line(tmp_path):
    message = refused(pool_folder(tmp_path, extra_rows="train/img0.png,0.5\n"))
    assert message.startswith(f"{tmp_path / SCORES_FILE}: line 8: 2 fields under a header of 3")


@pytest.mark.parametrize(
    ("header", "what"),
    [
        ("path,quality,sharpness", "line 1: no 'score' column (columns: path, quality, sharpness"),
        ("image,score,sharpness", "line 1: no 'path' column"),
        ("path,score,score", "line 1, column 'score': named twice"),
        ("path,score,", "line 1: column #3 has no name"),
        ('path,score,"two\nlines"', "line 1: column #3 is named 'two\\nlines', with a control"),
    ],
)
def test_a_bad_header_is_named(tmp_path, header, what):
    message = refused(pool_folder(tmp_path, header=header))
    assert message.startswith(f"{tmp_path / SCORES_FILE}: "), message
    assert what in message


def test_non_utf8_bytes_are_named_by_line_and_column(tmp_path):
    text = b"path,score,sharpness\ntrain/img0.png,1,1\ntrain/img\xff1.png,0,1\n"
    make_folder(tmp_path, ["train/img0.png", "train/img1.png"], text)
    message = refused(tmp_path)
    assert message.startswith(f"{tmp_path / SCORES_FILE}: line 3, column 'path': byte 0xff")
    assert "UTF-8" in message


def test_a_utf8_byte_order_mark_and_blank_lines_are_accepted(tmp_path):
    text = "\ufeffpath,score\n\ntrain/a.png,1\n\ntrain/b.png,0\n"
    make_folder(tmp_path, ["train/a.png", "train/b.png"], text.encode("utf-8"))
    scores = read_scores(tmp_path)
    assert scores.train.scores.tolist() == [1.0, 0.0]
    assert scores.train.lines.tolist() == [3, 5]


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("", "empty"),
        ("path,score\n", "a header and no rows"),
        ("path,score\ntest/t.png,0.5\n", "no train/ rows"),
    ],
)
def test_an_empty_file_or_one_without_training_rows_is_named(tmp_path, text, what):
    make_folder(tmp_path, ["test/t.png"], text)
    assert what in refused(tmp_path)


def test_constant_scores_are_refused(tmp_path):
    make_folder(
        tmp_path, ["train/a.png", "train/b.png"], "path,score\ntrain/a.png,1\ntrain/b.png,1"
    )
    assert "line 2, column 'score': every training row's score is 1" in refused(tmp_path)


def test_pool_rows_beside_party_rows_are_refused_naming_both_lines(tmp_path):
    make_folder(
        tmp_path,
        ["train/p/a.png", "train/b.png"],
        "path,score\ntrain/p/a.png,1\ntrain/b.png,0\n",
    )
    message = refused(tmp_path)
    assert "line 3, column 'path': train/b.png beside line 2's train/p/a.png" in message


def test_no_scores_file_and_no_folder_are_one_line(tmp_path):
    assert not has_scores_file(tmp_path)
    assert f"{tmp_path / SCORES_FILE}: no scores file" in refused(tmp_path)
    assert "no such folder" in refused(tmp_path / "absent")


# The rule for a folder with class folders and a scores file: the scores file makes it a
# score task; class folders (and images the file does not list) are a conflict, named.


def test_class_folders_inside_party_folders_conflict_with_the_scores_file(tmp_path):
    party_folder(tmp_path)
    (tmp_path / "train" / "a" / "3-dress").mkdir()
    (tmp_path / "train" / "a" / "3-dress" / "x.png").write_bytes(PNG)
    message = refused(tmp_path)
    assert message.startswith(f"{tmp_path / 'train' / 'a' / '3-dress'}: a folder where ")
    assert "class folders in conflict with the scores file" in message


def test_a_class_tree_with_a_scores_file_for_some_of_its_images_is_refused(tmp_path):
    # a classification pool (train/<class>/<image>) with a scores file: the folders
    # would be read as parties, so an image the file does not list is named
    images = [f"train/{cls}/{i}.png" for cls in ("0-tshirt", "1-trouser") for i in range(10)]
    rows = [f"{path},{i % 2}" for i, path in enumerate(images[:-1])]
    make_folder(tmp_path, images, "path,score\n" + "\n".join(rows) + "\n")
    message = refused(tmp_path)
    assert message.startswith(f"{tmp_path / 'train' / '1-trouser' / '9.png'}: an image with no row")
    assert "class folders go without a scores file" in message


def test_class_folders_beside_a_pool_scores_file_conflict(tmp_path):
    pool_folder(tmp_path)
    (tmp_path / "train" / "0-tshirt").mkdir()
    message = refused(tmp_path)
    assert message.startswith(f"{tmp_path / 'train' / '0-tshirt'}: a folder where ")


def test_a_class_folder_under_test_conflicts(tmp_path):
    pool_folder(tmp_path)
    (tmp_path / "test" / "0-tshirt").mkdir()
    assert "class folders in conflict" in refused(tmp_path)


def test_an_image_beside_party_folders_is_named(tmp_path):
    party_folder(tmp_path)
    (tmp_path / "train" / "loose.png").write_bytes(PNG)
    message = refused(tmp_path)
    assert message.startswith(f"{tmp_path / 'train' / 'loose.png'}: a file beside the party")


def test_hidden_files_in_the_tree_are_ignored(tmp_path):
    pool_folder(tmp_path)
    (tmp_path / "train" / ".DS_Store").write_bytes(b"x")
    assert len(read_scores(tmp_path).train) == 4


def test_a_row_naming_a_folder_is_refused(tmp_path):
    pool_folder(tmp_path, extra_rows="train/sub,0.5,1\n")
    (tmp_path / "train" / "sub").mkdir()
    assert "line 8, column 'path': train/sub is not a file" in refused(tmp_path)
