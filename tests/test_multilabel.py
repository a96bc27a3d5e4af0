"""Multi-label classification, the fifth task kind (federated/tasks/multilabel/): its
metrics against a case worked by hand and against scikit-learn, its folder reader and
every bad input as one line, the builder from real Fashion-MNIST pixels, runs through
``federated.run`` and the personalised methods and DP, and (slow) a real Ray sweep with
its report."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from sklearn.metrics import average_precision_score, f1_score

from federated.config.data_checks import with_data_checked
from federated.config.run_config import RunConfig
from federated.data.catalog import DatasetSpec
from federated.data.folder_dataset import folder_identity, load_folder
from federated.data.folder_kinds import folder_reader
from federated.data.folder_layout import FolderDataError
from federated.engine.round_loop import run_rounds
from federated.params import ConfigError, NoParams
from federated.tasks.multilabel.reader import READER
from federated.tasks.multilabel.scores import f1_scores, label_average_precision
from federated.tasks.multilabel.task import MultiLabel
from tests.example_scripts import assert_refused_in_one_line, built_tree, load_example
from tests.short_runs import site_run

LABELS = ("a", "b", "c", "d")
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "build_multilabel_task.py"
FMNIST = Path("/usr/share/datasets/fashion-mnist")
needs_fmnist = pytest.mark.skipif(
    not (FMNIST / "train-images-idx3-ubyte.gz").is_file(),
    reason="needs Debian's dataset-fashion-mnist",
)


def _task(labels: tuple[str, ...] = LABELS) -> MultiLabel:
    spec = DatasetSpec(
        "toy", len(labels), 3, 8, 8, 4, 4, "simple-cnn", (0.5,) * 3, (0.25,) * 3,
        class_names=labels, task="multilabel",
    )  # fmt: skip
    return MultiLabel(NoParams(), spec)


# ---------------------------------------------------------------- the metrics
# Four images, labels a, b, c, d.  Truth: {a}, {b}, {a, b}, {}.  Logits per label:
#   a:  2.0 -1.0  0.5  1.0   ranked: img0 (+), img3 (-), img2 (+), img1 (-)
#       AP = (1/1 + 2/3) / 2 = 5/6; at logit >= 0: TP 2, FP 1, FN 0 -> F1 4/5
#   b: -2.0  0.5 -0.5  1.5   ranked: img3 (-), img1 (+), img2 (+), img0 (-)
#       AP = (1/2 + 2/3) / 2 = 7/12; TP 1, FP 1, FN 1 -> F1 1/2
#   c: -1.0 -1.0 -1.0  0.2   no positive: no AP (left out); TP 0, FP 1 -> F1 0
#   d: -1.0 -1.0 -1.0 -1.0   no positive, no prediction: no AP, no F1 (left out)
# mAP = (5/6 + 7/12) / 2 = 17/24; micro F1 = 2*3 / (2*3 + 3 + 1) = 3/5;
# macro F1 = (4/5 + 1/2 + 0) / 3 = 13/30.
# Parties {img0, img1} and {img2, img3}: party 0 ranks and predicts both of its labels
# perfectly (mAP 1, F1 1 and 1); party 1: a and b each AP 1/2 (mAP 1/2); TP 1, FP 3, FN 1
# -> micro F1 2/6 = 1/3; a 2/3, b 0, c 0 -> macro F1 2/9.
TRUTH = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.float32)
LOGITS = torch.tensor(
    [
        [2.0, -2.0, -1.0, -1.0],
        [-1.0, 0.5, -1.0, -1.0],
        [0.5, -0.5, -1.0, -1.0],
        [1.0, 1.5, 0.2, -1.0],
    ]
)


def _softplus_mean(z: list[float], y: list[float]) -> float:
    # binary cross-entropy on a logit: log(1 + e^-z) for a positive, log(1 + e^z) else
    return sum(math.log1p(math.exp(-zi if yi else zi)) for zi, yi in zip(z, y)) / len(z)


def test_map_and_f1_equal_a_case_worked_by_hand():
    accumulator = _task().accumulator()
    accumulator.update(LOGITS[:3], TRUTH[:3], None)  # two batches sum as one
    accumulator.update(LOGITS[3:], TRUTH[3:], None)
    values = accumulator.compute().values
    assert values["map"] == pytest.approx(17 / 24)
    assert values["f1_micro"] == pytest.approx(3 / 5)
    assert values["f1_macro"] == pytest.approx(13 / 30)
    assert values["ap/a"] == pytest.approx(5 / 6) and values["ap/b"] == pytest.approx(7 / 12)
    assert math.isnan(values["ap/c"]) and math.isnan(values["ap/d"])
    losses = [_softplus_mean(z.tolist(), y.tolist()) for z, y in zip(LOGITS, TRUTH)]
    assert values["loss"] == pytest.approx(sum(losses) / 4)
    assert list(values)[:4] == ["map", "loss", "f1_micro", "f1_macro"]


def test_per_party_values_are_each_partys_own_images_and_pooled_all_of_them():
    accumulator = _task().accumulator(n_parties=3)
    accumulator.update(LOGITS, TRUTH, torch.tensor([0, 0, 1, 1]))
    scores = accumulator.compute()
    assert scores.parties == 2
    np.testing.assert_allclose(scores.party_values["map"], [1.0, 0.5, np.nan])
    np.testing.assert_allclose(scores.party_values["f1_micro"], [1.0, 1 / 3, np.nan])
    np.testing.assert_allclose(scores.party_values["f1_macro"], [1.0, 2 / 9, np.nan])
    assert scores.values["map"] == pytest.approx(17 / 24)
    assert scores.values["f1_macro"] == pytest.approx(13 / 30)
    assert "ap/a" not in scores.values  # per-label AP: pooled evaluations only


def test_the_metrics_agree_with_scikit_learn_on_random_labels_with_ties():
    rng = np.random.default_rng(3)
    truth = (rng.random((60, 5)) < 0.3).astype(int)
    truth[:, 4] = 0  # a label without a positive: left out, where scikit-learn scores 0
    logits = np.round(rng.normal(size=(60, 5)), 1)  # ties among the scores
    ap = label_average_precision(logits, truth)
    for k in range(4):
        assert ap[k] == pytest.approx(average_precision_score(truth[:, k], logits[:, k]))
    assert math.isnan(ap[4])
    predicted = (logits >= 0).astype(int)
    tp = (predicted & truth).sum(0)
    fp = (predicted & (1 - truth)).sum(0)
    fn = ((1 - predicted) & truth).sum(0)
    ours = f1_scores(tp, fp, fn)
    assert ours["f1_micro"] == pytest.approx(f1_score(truth, predicted, average="micro"))
    expected = f1_score(truth, predicted, average="macro", zero_division=np.nan)
    assert ours["f1_macro"] == pytest.approx(expected)


def test_a_diverged_model_scores_nan_and_the_run_is_marked_diverged():
    task = _task()
    accumulator = task.accumulator()
    logits = LOGITS.clone()
    logits[1, 0] = float("nan")
    accumulator.update(logits, TRUTH, None)
    scores = accumulator.compute()
    assert math.isnan(scores.values["ap/a"]) and scores.values["ap/b"] == pytest.approx(7 / 12)
    assert math.isnan(scores.values["loss"]) and task.diverged(scores)
    one = label_average_precision(np.array([[0.9], [0.1]]), np.array([[1], [0]]))
    assert one.tolist() == [1.0]  # a single label: scikit-learn's scalar fills its place


def test_the_loss_is_binary_cross_entropy_on_the_logits_and_a_batch_its_mean():
    task = _task()
    per_image = task.per_sample_loss(LOGITS, TRUTH)
    expected = [_softplus_mean(z.tolist(), y.tolist()) for z, y in zip(LOGITS, TRUTH)]
    np.testing.assert_allclose(per_image.numpy(), expected, rtol=1e-6)
    assert float(task.loss(LOGITS, TRUTH)) == pytest.approx(float(per_image.mean()), rel=1e-6)


def test_a_partition_counts_each_partys_images_of_each_label():
    class Data:
        train_y = TRUTH

    counts = MultiLabel.party_class_counts(Data, [np.array([0, 2]), np.array([1, 3])])
    assert counts.tolist() == [[2, 1, 0, 0], [0, 1, 0, 0]]
    assert MultiLabel.task_spec().counted == "images with the label"


# ---------------------------------------------------------------- the folder
def write_folder(root: Path, train: int = 24, test: int = 6, sites: int = 2) -> Path:
    """A multi-label folder of ``train`` + ``test`` 16 x 16 images: image i carries
    label a when i is even, b when i is a multiple of 3, none of them otherwise;
    training image i's site is i mod ``sites``."""
    rng = np.random.default_rng(0)
    for split, count, first in (("", train, 0), ("test", test, train)):
        folder = root / split
        (folder / "images").mkdir(parents=True)
        rows = ["stem,labels,site"]
        for i in range(first, first + count):
            pixels = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
            Image.fromarray(pixels, "RGB").save(folder / "images" / f"im{i:03d}.png")
            labels = ";".join(n for n, on in (("a", i % 2 == 0), ("b", i % 3 == 0)) if on)
            rows.append(f"im{i:03d},{labels},{i % sites}")
        (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    (root / "classes.json").write_text(json.dumps(["a", "b", "c"]))
    return root


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_folder(tmp_path / "ml")


def test_a_multilabel_folder_is_read_by_its_own_reader_with_multi_hot_targets(folder, tmp_path):
    assert folder_reader(folder) is READER
    load = load_folder(f"folder:{folder}", None, None, tmp_path / "root", partition_by="site")
    data = load.data
    assert data.spec.task == "multilabel" and data.spec.class_names == ("a", "b", "c")
    assert data.train_x.shape == (24, 3, 16, 16) and data.test_x.shape == (6, 3, 16, 16)
    assert data.train_y.dtype == torch.float32 and data.train_y.shape == (24, 3)
    assert data.train_y[0].tolist() == [1, 1, 0] and data.train_y[1].tolist() == [0, 0, 0]
    assert data.test_y[0].tolist() == [1, 1, 0]  # test image 24: even, a multiple of 3
    assert data.spec.party_names == ("0", "1") and data.train_parties.tolist()[:3] == [0, 1, 0]
    assert load.source == "decoded"
    again = load_folder(f"folder:{folder}", None, None, tmp_path / "root", partition_by="site")
    assert again.source == "memory" and again.data is data
    cold = load_folder(f"folder:{folder}", None, None, tmp_path / "root", use_memory=False)
    assert cold.source == "disk cache" and torch.equal(cold.data.train_y, data.train_y)
    identity = folder_identity(f"folder:{folder}")
    assert identity["task"] == "multilabel" and identity["party_fields"] == {"site": 2}


def test_without_a_test_folder_a_holdout_is_drawn(tmp_path):
    root = write_folder(tmp_path / "ml")
    for path in (root / "test" / "images").iterdir():
        path.unlink()
    (root / "test" / "images").rmdir()
    (root / "test" / "labels.csv").unlink()
    (root / "test").rmdir()
    data = load_folder(f"folder:{root}", None, 0.25, tmp_path / "root").data
    assert len(data.train_x) == 18 and len(data.test_x) == 6


def _rewrite(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new, 1))


def _one_line(root: Path, tmp_path: Path, **load) -> str:
    with pytest.raises(FolderDataError) as caught:
        load_folder(f"folder:{root}", load.pop("size", None), None, tmp_path / "r", **load)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda r: _rewrite(r / "labels.csv", "im000,", "nobody,"),
         "line 2: stem 'nobody' is no image"),
        (lambda r: _rewrite(r / "labels.csv", "im001,,1\n", ""), "no row for image 'im001'"),
        (lambda r: _rewrite(r / "labels.csv", "im000,a;b,", "im000,a;zebra,"),
         "line 2: label 'zebra' is not in the classes file"),
        (lambda r: _rewrite(r / "labels.csv", "im000,a;b,", "im000,a;a,"), "label 'a' twice"),
        (lambda r: _rewrite(r / "labels.csv", "stem,labels", "name,labels"),
         "the header must begin with 'stem,labels'"),
        (lambda r: _rewrite(r / "labels.csv", "im001,,1", "im001,,1,9"),
         "line 3: 4 values (allowed: 3"),
        (lambda r: (r / "classes.json").write_text('["a", "b",'), "classes.json: line 1"),
        (lambda r: (r / "classes.json").write_text('["a", "a"]'), "label name 'a' twice"),
        (lambda r: (r / "classes.json").write_text('{"a": 1}'), "a JSON dict"),
        (lambda r: (r / "classes.json").unlink(), "classes.json: no such file"),
        (lambda r: (r / "classes.txt").write_text("a\nb\n"), "both classes.json and classes.txt"),
        (lambda r: (r / "images" / "notes.txt").write_text("x"), "notes.txt: not an image file"),
        (lambda r: (r / "images" / "im002.png").write_bytes(b"not a png"),
         "im002.png: not a readable image"),
        (lambda r: (r / "test" / "labels.csv").unlink(), "test/labels.csv: no such file"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_file(folder, tmp_path, damage, expected):
    damage(folder)
    assert expected in _one_line(folder, tmp_path)


def test_the_test_split_and_the_party_field_are_checked_in_one_line(folder, tmp_path):
    with pytest.raises(FolderDataError, match="a test folder exists and holdout_fraction"):
        load_folder(f"folder:{folder}", None, 0.2, tmp_path / "r")
    assert "no field 'camera' for partition_by (fields: site)" in _one_line(
        folder, tmp_path, partition_by="camera"
    )
    _rewrite(folder / "labels.csv", "im003,b,1", "im003,b,")
    assert "im003.png: no site in labels.csv" in _one_line(folder, tmp_path, partition_by="site")


def test_the_config_refuses_label_skew_in_one_line_and_takes_the_rest(folder, tmp_path):
    base = dict(dataset=f"folder:{folder}", data_root=str(tmp_path / "root"), rounds=1)
    natural = with_data_checked(RunConfig(**base, partition="natural", partition_by="site"))
    assert natural.task == "multilabel" and natural.primary_metric == "map"
    assert natural.n_parties == 2 and natural.model == "simple-cnn"
    with pytest.raises(ConfigError) as caught:
        with_data_checked(RunConfig(**base, partition="dirichlet", n_parties=2))
    assert str(caught.value) == (
        "invalid config: partition='dirichlet' (allowed: natural, iid or quantity (its natural "
        "parties are a field of labels.csv: partition=natural with partition_by=FIELD, e.g. a "
        "site): a dirichlet partition needs a class label per image, which a multilabel task "
        "does not have)"
    )
    with pytest.raises(ConfigError, match="primary_metric='acc'"):
        with_data_checked(RunConfig(**base, partition="iid", n_parties=2, primary_metric="acc"))


# ---------------------------------------------------------------- hf: label lists
def save_folder_to_disk(root: Path, path: Path) -> Path:
    """Folder ``root`` (:func:`write_folder`) as a ``save_to_disk`` data set, a split for
    each of its splits: the same PNG bytes, its label sets three ways (``labels``: class
    label ids; ``names``: text; ``hot``: multi-hot rows of 0/1) and its ``site``."""
    from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value
    from datasets import Image as HubImage

    names = json.loads((root / "classes.json").read_text())
    features = Features(
        {
            "image": HubImage(),
            "labels": List(ClassLabel(names=names)),
            "names": List(Value("string")),
            "hot": List(Value("int8"), length=len(names)),
            "site": Value("string"),
        }
    )
    splits = {}
    for split, folder in (("train", root), ("test", root / "test")):
        rows = pd.read_csv(folder / "labels.csv", dtype=str, keep_default_na=False)
        sets = [[names.index(n) for n in cell.split(";") if n] for cell in rows["labels"]]
        columns = {
            "image": [{"bytes": (folder / "images" / f"{stem}.png").read_bytes(), "path": None}
                      for stem in rows["stem"]],
            "labels": sets,
            "names": [[names[i] for i in labels] for labels in sets],
            "hot": [[int(i in labels) for i in range(len(names))] for labels in sets],
            "site": rows["site"].tolist(),
        }  # fmt: skip
        splits[split] = Dataset.from_dict(columns, features=features)
    DatasetDict(splits).save_to_disk(str(path))
    return path


@pytest.fixture
def hub_folder(folder, tmp_path, monkeypatch) -> Path:
    import datasets

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing cached in the home
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets")
    return save_folder_to_disk(folder, tmp_path / "hub")


@pytest.mark.parametrize(
    "column, names",
    [(None, ("a", "b", "c")), ("names", ("a", "b")), ("hot", ("0", "1", "2"))],
    ids=["class-label-ids", "text", "multi-hot"],
)
def test_an_hf_label_list_column_is_the_folders_multi_hot_targets(
    folder, hub_folder, tmp_path, monkeypatch, column, names
):
    from federated.data import hub_dataset, memory_cache
    from federated.data.hub_dataset import HubColumns, load_hub

    columns = HubColumns(None, column, "site")
    data = load_hub(f"hf:{hub_folder}", None, None, tmp_path / "r", columns)
    mine = load_folder(f"folder:{folder}", None, None, tmp_path / "f", partition_by="site").data
    assert data.spec.task == "multilabel" and data.spec.class_names == names
    width = len(names)  # label c is on no image: text names only the labels found
    assert torch.equal(data.train_y, mine.train_y[:, :width])
    assert torch.equal(data.test_y, mine.test_y[:, :width])
    assert torch.equal(data.train_x, mine.train_x) and torch.equal(data.test_x, mine.test_x)
    assert torch.equal(data.train_parties, mine.train_parties)
    memory_cache.forget()  # again from the disk cache: the same targets, of this kind
    monkeypatch.setattr(hub_dataset, "_decode", lambda *a: pytest.fail("decoded again"))
    again = load_hub(f"hf:{hub_folder}", None, None, tmp_path / "r", columns)
    assert again.spec == data.spec and torch.equal(again.train_y, data.train_y)


@pytest.mark.parametrize(
    "feature, rows, words",
    [
        ("hot", [[1, 0, 2]], "split 'train' row 0 holds 2 at place 2 (allowed: 0 or 1, a "
         "multi-hot row of 3 labels)"),
        ("ids", [[0], [1, 1]], "split 'train' row 1 names label 1 twice (allowed: each label "
         "once a row)"),
        ("ids", [[0, None]], "split 'train' row 0 holds an empty label (allowed: labels "
         "only; an image with no label is an empty list)"),
        ("ids", [[], []], "0 labels (allowed: 1 to 1000)"),
    ],
    ids=["not-0-or-1", "twice", "empty", "no-label"],
)  # fmt: skip
def test_a_bad_hf_label_list_is_refused_in_one_line_naming_its_row(feature, rows, words):
    import datasets

    from federated.data.hub_dataset import HubDataError, _targets

    types = {
        "hot": datasets.List(datasets.Value("int8"), length=3),
        "ids": datasets.List(datasets.Value("int64")),
    }
    features = datasets.Features({"labels": types[feature]})
    splits = {"train": datasets.Dataset.from_dict({"labels": rows}, features=features)}
    with pytest.raises(HubDataError) as refused:
        _targets("hf:stand-in", splits, "labels")
    assert str(refused.value) == f"dataset 'hf:stand-in': column 'labels': {words}"


def test_a_run_on_an_hf_label_list_is_a_multilabel_run(hub_folder, tmp_path):
    base = dict(dataset=f"hf:{hub_folder}", data_root=str(tmp_path / "root"), rounds=1)
    config = with_data_checked(RunConfig(**base, partition="natural", partition_by="site"))
    assert config.task == "multilabel" and config.primary_metric == "map"
    assert config.n_parties == 2
    with warnings_ignored():
        (row,) = run_rounds(config)
    assert 0.0 <= row["test_map"] <= 1.0 and math.isfinite(row["train_loss"])
    assert [k for k in row if k.startswith("test_ap/")] == ["test_ap/a", "test_ap/b", "test_ap/c"]


# ---------------------------------------------------------------- the builder
def load_builder():
    return load_example(EXAMPLE)


SMALL = ["--train-images", "48", "--test-images", "16", "--sites", "3"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return built_tree(tmp_path_factory, EXAMPLE, SMALL, "multilabel")


@needs_fmnist
def test_the_built_tree_holds_each_images_items_as_its_labels_and_sites_as_parties(tree, tmp_path):
    data = load_folder(f"folder:{tree}", None, None, tmp_path, partition_by="site").data
    assert data.spec.class_names == ("t-shirt", "trouser", "sneaker", "bag")
    assert data.train_x.shape == (48, 3, 32, 32) and data.test_x.shape == (16, 3, 32, 32)
    per_image = data.train_y.sum(dim=1)
    assert int(per_image.min()) >= 1 and int(per_image.max()) <= 3  # 1 to --objects items
    assert int(per_image.max()) >= 2  # some images carry several labels
    build = json.loads((tree / "build.json").read_text())
    counts = np.bincount(data.train_parties.numpy()).tolist()
    assert [s["train_images"] for s in build["site_list"]] == counts
    again = tmp_path / "again"
    assert load_builder().main([str(again), *SMALL]) == 0
    for name in ("images/00007.png", "labels.csv", "test/labels.csv"):
        assert (again / name).read_bytes() == (tree / name).read_bytes()


@needs_fmnist
@pytest.mark.parametrize(
    "argv, what, by_parser",
    [
        (["--train-images", "20", "--sites", "2"], "--train-images 20 (allowed: at least 24", 0),
        (["--objects", "5"], "argument --objects: 5 (allowed: 1 to 4)", 1),
    ],
)
def test_bad_builder_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, what, by_parser):
    assert_refused_in_one_line(load_builder(), argv, what, by_parser, tmp_path, capsys)


# ---------------------------------------------------------------- the runs
def _config(tree: Path, data_root: Path, **overrides) -> RunConfig:
    return RunConfig(**site_run(tree, data_root, rounds=1) | overrides)


@needs_fmnist
def test_a_run_through_the_run_command_records_map_f1_and_per_label_ap(tree, tmp_path):
    from federated.run import main as run_main

    out = tmp_path / "rows.csv"
    code = run_main(
        [
            *("--dataset", f"folder:{tree}", "--data-root", str(tmp_path / "root")),
            *("--partition", "natural", "--partition-by", "site", "--rounds", "2"),
            *("--local-epochs", "1", "--batch-size", "8", "--lr", "0.05", "--threads", "1"),
            *("--val-fraction", "0.2", "--party-test-fraction", "0.2", "--out", str(out)),
        ]
    )
    assert code == 0
    rows = pd.read_csv(out)
    assert list(rows["round"]) == [1, 2] and (rows["task"] == "multilabel").all()
    assert (rows["primary_metric"] == "map").all()
    for column in ("test_map", "test_f1_micro", "test_f1_macro", "val_map", "party_map_mean"):
        assert rows[column].between(0, 1).all(), column
    assert rows["test_loss"].notna().all() and rows["train_loss"].notna().all()
    assert all(f"test_ap/{label}" in rows for label in ("t-shirt", "trouser", "sneaker", "bag"))
    assert not [c for c in rows if c.startswith(("test_acc", "party_acc"))]


@needs_fmnist
@pytest.mark.parametrize(
    "overrides",
    [
        {"algorithm": "fedbn", "model": "simple-cnn-bn"},
        {"algorithm": "fedper"},
        {"algorithm": "ditto"},
        {"algorithm": "moon"},
        {"dp_noise_multiplier": 0.5, "dp_clip_norm": 1.0},
        {"partition": "iid", "partition_by": None, "n_parties": 3, "execution": "sequential"},
    ],
    ids=lambda o: "-".join(map(str, o.values())),
)
def test_personalised_methods_dp_and_the_paths_run_a_round(tree, tmp_path, overrides):
    with warnings_ignored():
        (row,) = run_rounds(_config(tree, tmp_path, **overrides))
    assert not row["diverged"] and math.isfinite(row["train_loss"])
    assert 0.0 <= row["test_map"] <= 1.0 and 0.0 <= row["party_map_mean"] <= 1.0
    if "dp_noise_multiplier" in overrides:
        assert row["dp_epsilon"] > 0


@contextlib.contextmanager
def warnings_ignored():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the inert-setting and packing notices
        yield


@pytest.mark.slow
@pytest.mark.xdist_group("ray-2")
@needs_fmnist
def test_a_real_sweep_of_a_multilabel_folder_and_its_report(tree, tmp_path):
    from analysis.report import main as report
    from tests.test_sweep_ray import manifest, rounds, sweep, sweep_dirs, trial_dirs

    sweep(
        tmp_path,
        *("--vary", "algorithm=fedavg,fedprox", "--dataset", f"folder:{tree}"),
        *("--set", "partition=natural", "--set", "partition_by=site", "--set", "rounds=2"),
        *("--set", "local_epochs=1", "--set", "batch_size=8", "--set", "val_fraction=0.2"),
        *("--set", "party_test_fraction=0.2", "--set", f"data_root={tmp_path / 'root'}"),
        *("--seeds", "1", "--cpus-per-trial", "1", "--name", "multilabel"),
        *("--max-concurrent", "1"),  # one trial process, reused: less CPU
    )
    (sweep_dir,) = sweep_dirs(tmp_path)
    written = manifest(sweep_dir)
    assert written["status"] == "finished" and written["task"] == "multilabel"
    assert [s["stem"] for s in written["metric_specs"]] == ["map", "f1_micro", "f1_macro"]
    for trial in trial_dirs(sweep_dir):
        assert 0 <= rounds(trial)[2]["test_map"] <= 1
    out = tmp_path / "report"
    assert report([str(sweep_dir), "--out", str(out), "--no-pdf"]) == 0
    text = (out / "report.md").read_text()
    assert "test mAP over labels (%)" in text and "Per-party mAP (%)" in text
    figures = {
        p.name.split("_")[0] + "_" + p.name.split("_")[-1] for p in (out / "figures").iterdir()
    }
    assert {"fig5_seed0.png", "fig_curves.png", "fig_party.png"} <= figures, figures
