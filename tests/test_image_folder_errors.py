"""Bad image folders and bad model import paths: refused in one line naming the path or
field, before any training, with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from federated import run as run_cli
from federated.export_tree import FMNIST_CLASSES, write_image
from study import sweep as sweep_cli


def grey_tree(fmnist, root: Path, *, parties: int = 0, per_class: int = 12, classes: int = 2):
    """Real Fashion-MNIST PNGs: train/<class>/ (or train/p<k>/<class>/) and test/<class>/."""
    for c in range(classes):
        picks = torch.nonzero(fmnist.train_y == c).flatten()[: per_class * max(parties, 1)]
        for n, i in enumerate(picks.tolist()):
            party = f"p{n % parties}" if parties else ""
            write_image(
                root / "train" / party / FMNIST_CLASSES[c] / f"{i:05d}.png", fmnist.train_x[i]
            )
        for i in torch.nonzero(fmnist.test_y == c).flatten()[:4].tolist():
            write_image(root / "test" / FMNIST_CLASSES[c] / f"{i:05d}.png", fmnist.test_x[i])


def missing(fmnist, root):
    return root / "nope", []


def no_classes(fmnist, root):
    (root / "train").mkdir(parents=True)
    return root, []


def empty_class(fmnist, root):
    grey_tree(fmnist, root)
    (root / "train" / "9-boot").mkdir()
    return root, []


def empty_party(fmnist, root):
    grey_tree(fmnist, root, parties=2)
    (root / "train" / "p9").mkdir()
    return root, ["--partition", "natural"]


def text_file(fmnist, root):
    grey_tree(fmnist, root)
    (root / "train" / FMNIST_CLASSES[1] / "notes.txt").write_text("not an image")
    return root, []


def truncated_png(fmnist, root):
    grey_tree(fmnist, root)
    first = sorted((root / "train" / FMNIST_CLASSES[0]).iterdir())[0]
    first.write_bytes(first.read_bytes()[:40])
    return root, []


def mixed_channels(fmnist, root):
    grey_tree(fmnist, root)
    write_image(
        root / "train" / FMNIST_CLASSES[0] / "zz-rgb.png", fmnist.train_x[0].expand(3, -1, -1)
    )
    return root, []


def small_party(fmnist, root):
    grey_tree(fmnist, root, parties=2)
    for c in range(2):  # party p1 keeps only 4 images of each class
        for extra in sorted((root / "train" / "p1" / FMNIST_CLASSES[c]).iterdir())[4:]:
            extra.unlink()
    return root, ["--partition", "natural"]


def unseen_test_class(fmnist, root):
    grey_tree(fmnist, root)
    write_image(root / "test" / "7-sneaker" / "x.png", fmnist.test_x[0])
    return root, []


def no_test(fmnist, root):
    grey_tree(fmnist, root)
    for f in (root / "test").rglob("*.png"):
        f.unlink()
    for d in sorted((root / "test").iterdir()):
        d.rmdir()
    (root / "test").rmdir()
    return root, []


def natural_conflict(fmnist, root):
    grey_tree(fmnist, root, parties=2)
    return root, ["--partition", "natural", "--n-parties", "3"]


def natural_without_parties(fmnist, root):
    grey_tree(fmnist, root)
    return root, ["--partition", "natural"]


def model(path):
    def case(fmnist, root):
        grey_tree(fmnist, root)
        return root, ["--model", path]

    return case


CASES = {
    "missing folder": (missing, "nope: no such folder"),
    "no classes": (no_classes, "train: no class folders"),
    "class without images": (empty_class, "9-boot: class folder with no images"),
    "party without images": (empty_party, "p9: party folder with no images"),
    "non-image file": (text_file, "notes.txt: not a readable image"),
    "truncated image": (truncated_png, ".png: not a readable image"),
    "mixed channels": (mixed_channels, "zz-rgb.png: 3 channel(s) where"),
    "party under 10 images": (small_party, "p1: party with 8 images (allowed: at least 10)"),
    "test class not in training": (unseen_test_class, "test class '7-sneaker'"),
    "no test folder": (no_test, "holdout_fraction"),
    "n_parties conflicts": (natural_conflict, "n_parties=3 (allowed: 2 (the folder's parties)"),
    "natural without parties": (natural_without_parties, "partition='natural'"),
    "import fails": (model("tests.no_such_module:f"), "import of 'tests.no_such_module' failed"),
    "not callable": (model("tests.model_factories:NOT_CALLABLE"), "no callable 'NOT_CALLABLE'"),
    "not a module": (model("tests.model_factories:not_a_module"), "not a torch.nn.Module"),
    "output does not fit": (model("tests.model_factories:feature_maps"), "is (2, 4, 28, 28)"),
    "unknown torchvision": (model("torchvision:resnet19"), "not a torchvision classification"),
}


MODEL_CASES = {k for k, (make, _) in CASES.items() if make.__name__ == "case"}
FIELDS = {"n_parties conflicts": "n_parties", "natural without parties": "partition"}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_in_one_line(fmnist, tmp_path, capsys, case):
    make, expected = CASES[case]
    root, extra = make(fmnist, tmp_path / "images")
    out = tmp_path / "rows.csv"
    data_root = tmp_path / "data-root"
    argv = [
        "--dataset",
        f"folder:{root}",
        "--rounds",
        "1",
        "--local-epochs",
        "1",
        "--data-root",
        str(data_root),
        "--out",
        str(out),
        *extra,
    ]
    assert run_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: invalid config: "), err
    assert expected in err, err
    field = err.removeprefix("error: invalid config: ").split("=")[0]
    assert field == ("model" if case in MODEL_CASES else FIELDS.get(case, "dataset")), err
    assert not out.exists()
    if field == "dataset":  # unusable images: not even a cache entry is written
        assert not (data_root / "folder-cache").exists()


def test_sweep_refuses_a_bad_folder_before_ray(fmnist, tmp_path, capsys):
    root, _ = text_file(fmnist, tmp_path / "images")
    storage = tmp_path / "results"
    argv = [
        "moon_mu",
        "--budget",
        "smoke",
        "--set",
        f"dataset=folder:{root}",
        "--set",
        f"data_root={tmp_path / 'data-root'}",
        "--storage-path",
        str(storage),
    ]
    assert sweep_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.txt: not a readable image" in err, err
    assert not storage.exists()
