"""examples/build_iqa_task.py: real Fashion-MNIST images degraded at known levels, a
score-task folder the scores-file reader accepts, levels that really degrade more, and
bad inputs refused in one line with nothing written."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from federated.tasks.score.scores_file import read_scores
from tests.example_scripts import load_example

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "build_iqa_task.py"
FMNIST = Path("/usr/share/datasets/fashion-mnist")
pytestmark = pytest.mark.skipif(
    not (FMNIST / "train-images-idx3-ubyte.gz").is_file(),
    reason="needs Debian's dataset-fashion-mnist",
)


def load_builder():
    return load_example(EXAMPLE)


builder = load_builder()
SMALL = ["--train-sources", "8", "--test-sources", "4"]


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("iqa") / "task"
    assert builder.main([str(out), *SMALL]) == 0
    return out


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        assert image.mode == "L" and image.size == (28, 28)
        return np.asarray(image, dtype=np.float64)


def test_the_built_tree_reads_back_as_parties_by_distortion(task):
    scores = read_scores(task)
    assert scores.party_names == ("blur", "jpeg", "noise")
    assert scores.attribute_names == ("blur", "noise", "jpeg")
    assert len(scores.train) == 8 * 3 * 5 and len(scores.test) == 4 * 3 * 5
    assert np.bincount(scores.train.party).tolist() == [40, 40, 40]
    for split in (scores.train, scores.test):
        assert split.scores.min() == 0.0 and split.scores.max() == pytest.approx(0.8)
        assert set(np.round(split.scores.astype(float), 6).tolist()) == {0.0, 0.2, 0.4, 0.6, 0.8}
        # the image's own distortion column is its level fraction, 1 - score; others 0
        own = np.array([scores.attribute_names.index(p.split("-")[1]) for p in split.paths])
        rows = np.arange(len(split))
        np.testing.assert_allclose(split.attributes[rows, own], 1 - split.scores, atol=1e-6)
        assert np.count_nonzero(split.attributes) == len(split)
    built = json.loads((task / "build.json").read_text())
    assert built["per_level"]["5"]["jpeg_quality"] == 2
    assert built["train_sources"] == 8


def test_more_distortion_means_a_lower_score_and_more_pixel_change(task):
    scores = read_scores(task)
    train_images, _ = builder.read_fashion_mnist(FMNIST, "train")
    test_images, _ = builder.read_fashion_mnist(FMNIST, "test")
    change: dict[tuple[str, int], list[float]] = {}
    for split, sources in ((scores.train, train_images), (scores.test, test_images)):
        for path, score in zip(split.paths, split.scores, strict=True):
            source, distortion, level = Path(path).stem.split("-")
            level = int(level[1:])
            assert score == pytest.approx(1 - level / 5)
            diff = np.abs(pixels(task / path) - sources[int(source)]).mean()
            change.setdefault((distortion, level), []).append(diff)
    for distortion in builder.DISTORTIONS:
        means = [np.mean(change[(distortion, level)]) for level in range(1, 6)]
        assert all(b > a for a, b in itertools.pairwise(means)), (distortion, means)
        assert means[0] > 0.5, (distortion, means)  # level 1 is visibly degraded


def test_every_distortion_grows_with_level_on_a_hundred_real_images():
    images, _ = builder.read_fashion_mnist(FMNIST, "test")
    for distortion in builder.DISTORTIONS:
        means = [
            np.mean(
                [
                    np.abs(
                        builder.degrade(image, distortion, level, 5, (0, 1, i, level)).astype(float)
                        - image
                    ).mean()
                    for i, image in enumerate(images[:100])
                ]
            )
            for level in range(0, 6)
        ]
        assert all(b > a + 0.5 for a, b in itertools.pairwise(means)), (
            distortion,
            means,
        )


def test_the_same_seed_builds_the_same_files_and_another_seed_other_sources(tmp_path, task):
    again = tmp_path / "again"
    assert builder.main([str(again), *SMALL]) == 0
    assert (again / "scores.csv").read_bytes() == (task / "scores.csv").read_bytes()
    for path in read_scores(task).train.paths[::17]:
        assert (again / path).read_bytes() == (task / path).read_bytes()
    other = tmp_path / "other"
    assert builder.main([str(other), *SMALL, "--seed", "1"]) == 0
    assert (other / "scores.csv").read_text() != (task / "scores.csv").read_text()


def test_class_parties_and_a_pool(tmp_path):
    by_class = tmp_path / "by-class"
    argv = ["--train-sources", "40", "--test-sources", "1", "--parties", "class", "--levels", "4"]
    assert builder.main([str(by_class), *argv]) == 0
    scores = read_scores(by_class)
    assert scores.party_names == builder.FMNIST_CLASSES
    assert len(scores.test) == 3 * 4 and set(scores.test.party.tolist()) == {-1}
    assert set(np.round(scores.train.scores.astype(float), 6).tolist()) == {0.0, 0.25, 0.5, 0.75}
    pool = tmp_path / "pool"
    assert (
        builder.main(
            [str(pool), "--train-sources", "2", "--test-sources", "1", "--parties", "pool"]
        )
        == 0
    )
    scores = read_scores(pool)
    assert scores.party_names == () and len(scores.train) == 30


def one_error_line(capsys, argv: list[str]) -> str:
    """Run the builder with ``argv``: exit status 2 and one ``error:`` line on stderr."""
    try:
        status = builder.main(argv)
    except SystemExit as exit_:  # argparse's errors (OneLineParser)
        status = exit_.code
    captured = capsys.readouterr()
    assert status == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["--levels", "0"], "--levels: 0 (allowed: 1 to 20)"),
        (["--test-sources", "0"], "--test-sources: 0 (allowed: 1 to 10000)"),
        (["--train-sources", "many"], "'many' is not an integer"),
        (["--train-sources", "60001"], "(allowed: 1 to 60000)"),
        (["--parties", "camera"], "invalid choice: 'camera'"),
        (["--data", "/nonexistent/fmnist"], "--data /nonexistent/fmnist: no train-images"),
        (["--train-sources", "5", "--parties", "class"], "would hold 0 images"),
        (["--train-sources", "1"], "party blur would hold 5 images (allowed: at least 10"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, what):
    message = one_error_line(capsys, [str(tmp_path / "out"), *argv])
    assert what in message, message
    assert leftovers(tmp_path) == []


def test_an_existing_out_is_refused(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    assert "already exists" in one_error_line(capsys, [str(tmp_path / "out")])
    assert "does not exist" in one_error_line(capsys, [str(tmp_path / "no" / "out")])


def test_a_failure_while_writing_leaves_no_folder_and_no_temporary(tmp_path, capsys, monkeypatch):
    written = []

    def full_disk(image, distortion, level, levels, key):
        if len(written) == 7:
            raise OSError(28, "No space left on device")
        written.append(key)
        return image

    monkeypatch.setattr(builder, "degrade", full_disk)
    message = one_error_line(capsys, [str(tmp_path / "out"), *SMALL])
    assert "No space left on device" in message
    assert leftovers(tmp_path) == []


def test_help_describes_the_task(capsys):
    with pytest.raises(SystemExit) as exit_:
        builder.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "--parties {distortion,class,pool}" in text and "scores.csv" in text


def test_todays_classification_reader_refuses_the_tree_rather_than_misreading_it(task):
    # until runs read scores files, the distortion folders must not pass for classes
    from federated.data.folder_layout import FolderDataError, scan_folder

    with pytest.raises(FolderDataError, match="a file where class folders are expected"):
        scan_folder(task)
