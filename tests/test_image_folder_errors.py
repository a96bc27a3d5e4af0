"""Bad image folders and bad model import paths: refused in one line naming the path or
field, before any training, with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from federated import run as run_cli
from federated.config.data_checks import with_data_checked
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


def symlink_loop_root(fmnist, root):
    root.parent.mkdir(parents=True, exist_ok=True)
    root.symlink_to(root)  # images -> images
    return root, []


def name_too_long(fmnist, root):
    root.mkdir(parents=True)  # the long name is the last part: the OS refuses the name itself
    return root / ("n" * 300), []


def symlink_loop_class(fmnist, root):
    grey_tree(fmnist, root)
    (root / "train" / "loop").symlink_to(root / "train" / "loop")
    return root, []


def symlink_loop_image(fmnist, root):
    grey_tree(fmnist, root)
    link = root / "train" / FMNIST_CLASSES[0] / "loop.png"
    link.symlink_to(link)
    return root, []


# one rule for too few images in every layout; the real culprit named
def dotdot_link(fmnist, root):
    grey_tree(fmnist, root)
    (root / "train" / FMNIST_CLASSES[0] / "up").symlink_to("..")
    return root, []


def folder_beside_images(fmnist, root):
    grey_tree(fmnist, root)
    write_image(root / "train" / FMNIST_CLASSES[1] / "extra" / "x.png", fmnist.train_x[0])
    return root, []


def one_class(fmnist, root):
    grey_tree(fmnist, root, classes=1, per_class=30)
    return root, []


def party_of_empty_classes(fmnist, root):
    grey_tree(fmnist, root, parties=2)
    for c in range(2):
        (root / "train" / "p2" / FMNIST_CLASSES[c]).mkdir(parents=True)
    return root, ["--partition", "natural"]


def party_emptied_by_holdout(fmnist, root):
    grey_tree(fmnist, root, parties=2, per_class=6)  # 12 images per party: enough ...
    for f in (root / "test").rglob("*.png"):
        f.unlink()
    for d in sorted((root / "test").iterdir()):
        d.rmdir()
    (root / "test").rmdir()
    return root, ["--partition", "natural", "--holdout-fraction", "0.5"]  # ... until held out


def pooled_parties_under_10(fmnist, root):
    grey_tree(fmnist, root)  # 24 images: 3 parties of 8, fewer than a natural party may hold
    return root, ["--partition", "iid", "--n-parties", "3"]


def parties_emptied_by_holdout(fmnist, root):
    grey_tree(fmnist, root, per_class=20)  # 40 training images: 2 parties of >= 10 ...
    for f in (root / "test").rglob("*.png"):
        f.unlink()
    for d in sorted((root / "test").iterdir()):
        d.rmdir()
    (root / "test").rmdir()
    # ... until the hold-out takes all but one: the hold-out is what to change
    return root, ["--partition", "iid", "--n-parties", "2", "--holdout-fraction", "0.999"]


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
    # issue 20: OS errors on the folder's paths are one line naming the path
    "symlink loop (the folder)": (symlink_loop_root, "images: a symbolic-link loop"),
    "name too long": (name_too_long, "nnnn: File name too long"),
    "symlink loop (a class)": (symlink_loop_class, "train/loop: a symbolic-link loop"),
    "symlink loop (an image)": (symlink_loop_image, "loop.png: a symbolic-link loop"),
    "'..' link in a class folder": (dotdot_link, "/up: a link to"),
    "folder beside images": (folder_beside_images, "/extra: a folder beside the images of"),
    "one class": (one_class, "train: one class (0-tshirt) (allowed: at least 2 class folders"),
    "party of empty class folders": (party_of_empty_classes, "p2/0-tshirt: class folder with no"),
    "party under 10 after hold-out": (
        party_emptied_by_holdout,
        "p0: party with 6 images left after holdout_fraction=0.5 (allowed: at least 10)",
    ),
    "pooled parties under 10": (pooled_parties_under_10, "n_parties=3 (allowed: at most 2 for"),
    "hold-out leaves parties under 10": (
        parties_emptied_by_holdout,
        "holdout_fraction=0.999 (allowed: at most 0.5 here: it leaves ",
    ),
    "import fails": (model("tests.no_such_module:f"), "import of 'tests.no_such_module' failed"),
    "not callable": (model("tests.model_factories:NOT_CALLABLE"), "no callable 'NOT_CALLABLE'"),
    "not a module": (model("tests.model_factories:not_a_module"), "not a torch.nn.Module"),
    "output does not fit": (model("tests.model_factories:feature_maps"), "is (2, 4, 28, 28)"),
    "unknown torchvision": (model("torchvision:resnet19"), "not a torchvision classification"),
}


MODEL_CASES = {k for k, (make, _) in CASES.items() if make.__name__ == "case"}
FIELDS = {
    "n_parties conflicts": "n_parties",
    "natural without parties": "partition",
    "pooled parties under 10": "n_parties",
    "hold-out leaves parties under 10": "holdout_fraction",
}


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


# ----------------------------------------------------------------------- sizes and memory
def folder_argv(root: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--dataset",
        f"folder:{root}",
        "--rounds",
        "1",
        "--local-epochs",
        "1",
        "--data-root",
        str(tmp_path / "data-root"),
        "--out",
        str(tmp_path / "rows.csv"),
        *extra,
    ]


def test_a_tie_of_sizes_goes_to_the_smallest_never_the_largest():
    from federated.data.folder_decode import choose_size

    assert choose_size([(300, 200), (28, 28), (300, 200), (28, 28), (64, 64)]) == (28, 28)
    assert choose_size([(300, 200), (300, 200), (28, 28)]) == (300, 200)  # a majority wins


def test_a_mixed_size_tie_decodes_at_the_smaller_size(fmnist, tmp_path):
    from federated.data.folder_dataset import load_folder

    root = tmp_path / "images"
    grey_tree(fmnist, root, per_class=12)
    # as many 56x56 images as 28x28 ones: the tie goes to 28x28, so no image is upscaled
    big = torch.nn.functional.interpolate(fmnist.train_x[:1].float(), size=(56, 56))
    for c in range(2):
        for f in sorted((root / "train" / FMNIST_CLASSES[c]).iterdir())[:6]:
            write_image(f, big[0].to(torch.uint8))
    for c in range(2):
        for f in sorted((root / "test" / FMNIST_CLASSES[c]).iterdir())[:2]:
            write_image(f, big[0].to(torch.uint8))
    data = load_folder(f"folder:{root}", data_root=tmp_path / "data-root").data
    assert (data.spec.height, data.spec.width) == (28, 28)


def test_decoding_that_would_not_fit_is_refused_before_decoding(
    fmnist, tmp_path, capsys, monkeypatch
):
    from federated.data import folder_dataset, folder_decode

    root = tmp_path / "images"
    grey_tree(fmnist, root)
    monkeypatch.setattr(folder_decode, "available_memory", lambda: 10_000)
    decoded = []
    monkeypatch.setattr(folder_dataset, "decode_files", lambda files: decoded.append(files))
    assert run_cli.main(folder_argv(root, tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: invalid config: dataset="), err
    assert "32 images at 28x28 (1 channel(s)) need about 74 KiB" in err, err
    assert "this machine has 10 KiB available" in err and "--image-size" in err, err
    assert not decoded and not (tmp_path / "rows.csv").exists()


def test_training_that_would_not_fit_is_refused_naming_the_size(
    fmnist, tmp_path, capsys, monkeypatch
):
    from federated.models import memory_estimate

    root = tmp_path / "images"
    grey_tree(fmnist, root)
    monkeypatch.setattr(memory_estimate, "available_memory", lambda: 2**30)
    argv = folder_argv(
        root, tmp_path, "--image-size", "300x200", "--device", "cpu", "--n-parties", "2"
    )
    assert run_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("error: invalid config: image_size='300x200'"), err
    assert "resnet50 at 300x200 needs about" in err and "1.0 GiB available" in err, err
    assert not (tmp_path / "rows.csv").exists()


def test_the_memory_estimate_passes_the_runs_that_fit(fmnist, tmp_path):
    """The default 28x28 folder with simple-cnn: megabytes, never refused."""
    from federated.config.run_config import RunConfig
    from federated.models.memory_estimate import per_sample_bytes

    root = tmp_path / "images"
    grey_tree(fmnist, root)
    config = with_data_checked(
        RunConfig(
            dataset=f"folder:{root}", data_root=str(tmp_path / "d"), device="cpu", n_parties=2
        )
    )
    activations, params = per_sample_bytes(config.model, config.spec)
    assert 0 < activations < 2**20 and 0 < params < 2**22


def test_a_damaged_cache_entry_is_decoded_again(fmnist, tmp_path):
    """A cache file with the right key but foreign contents: decoded again, one load."""
    from federated.data.folder_dataset import load_folder

    root = tmp_path / "images"
    grey_tree(fmnist, root)
    first = load_folder(f"folder:{root}", data_root=tmp_path / "d", use_memory=False)
    payload = torch.load(first.cache_file, weights_only=True)
    torch.save({"key": payload["key"], "train_x": "garbage"}, first.cache_file)
    again = load_folder(f"folder:{root}", data_root=tmp_path / "d", use_memory=False)
    assert again.source == "decoded"
    assert torch.equal(again.data.train_x, first.data.train_x)


def test_a_cache_folder_that_cannot_be_written_is_one_line(fmnist, tmp_path, capsys):
    root = tmp_path / "images"
    grey_tree(fmnist, root)
    (tmp_path / "data-root").mkdir()
    (tmp_path / "data-root" / "folder-cache").write_text("a file where the folder goes")
    assert run_cli.main(folder_argv(root, tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "folder-cache: the decoded-image cache cannot be written" in err, err
    assert not (tmp_path / "rows.csv").exists()
