"""Image-folder datasets, natural partitions and models by import path, on real images
(Fashion-MNIST exported as PNG files)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as TF
from torchvision.io import decode_image, encode_jpeg

from federated.config.data_checks import with_data_checked
from federated.config.run_config import ConfigError, RunConfig
from federated.data import ImageData
from federated.data.folder_dataset import load_folder
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.export_tree import FMNIST_CLASSES, write_image
from federated.export_tree import export_parties as export_fmnist_parties
from federated.heterogeneity.partition import partition_for_run
from federated.models import FedConModel
from tests.model_factories import FEATURES
from tests.short_runs import folder_run


@pytest.fixture(scope="module")
def party_tree(fmnist, tmp_path_factory) -> tuple[Path, list[np.ndarray]]:
    """3,000 Fashion-MNIST training images, Dir(0.5) over 5 party folders, + 1,000 test."""
    root = tmp_path_factory.mktemp("fmnist-parties")
    return root, export_fmnist_parties(fmnist, root, n_parties=5, data_fraction=0.05)


@pytest.fixture
def cache(tmp_path) -> str:
    return str(tmp_path / "data-root")


def folder_config(root: Path, data_root: str, **overrides) -> RunConfig:
    return with_data_checked(RunConfig(**folder_run(root, data_root, **overrides)))


def test_natural_partition_equals_the_same_index_partition(fmnist, party_tree, cache):
    root, parts = party_tree
    config = folder_config(root, cache)
    assert config.n_parties == 5 and config.dataset == f"folder:{root}"
    folder_rows = list(run_rounds(config))

    # The same images and the same index partition, built from Fashion-MNIST in memory:
    # party by party, class by class, ascending index (the files' names).
    labels = fmnist.train_y.numpy()
    order = np.concatenate([np.sort(p[labels[p] == c]) for p in parts for c in range(10)])
    party_of = np.concatenate([np.full(len(p), k) for k, p in enumerate(parts)])
    test_labels = fmnist.test_y[:1000].numpy()
    test_order = np.concatenate([np.flatnonzero(test_labels == c) for c in range(10)])
    memory = ImageData(
        config.spec,
        fmnist.train_x[order],
        fmnist.train_y[order],
        fmnist.test_x[test_order],
        fmnist.test_y[test_order],
        torch.from_numpy(party_of),
    )
    memory_rows = list(run_rounds(config, memory))

    assert [r["test_acc"] for r in folder_rows] == [r["test_acc"] for r in memory_rows]
    assert [r["train_loss"] for r in folder_rows] == [r["train_loss"] for r in memory_rows]
    # the data set's own statistics, from the training images
    expected_mean = fmnist.train_x[order].double().mean().item() / 255
    assert config.spec.mean[0] == pytest.approx(expected_mean, rel=1e-9)
    assert config.spec.class_names == FMNIST_CLASSES
    assert config.spec.party_names == tuple(f"party{k}" for k in range(5))


def test_class_counts_per_party_equal_the_tree(party_tree, cache):
    root, _ = party_tree
    run = FederatedRun(folder_config(root, cache))
    on_disk = np.array(
        [
            [
                len(os.listdir(root / "train" / f"party{k}" / c))
                if (root / "train" / f"party{k}" / c).is_dir()
                else 0
                for c in FMNIST_CLASSES
            ]
            for k in range(5)
        ]
    )
    assert (run.class_counts == on_disk).all()
    assert run.party_sizes == on_disk.sum(axis=1).tolist()


def test_natural_partition_data_and_sample_fractions(party_tree, cache):
    root, _ = party_tree
    config = folder_config(root, cache, data_fraction=0.5, sample_fraction=0.4, rounds=1)
    full = folder_config(root, cache)
    data = load_folder(config.dataset, data_root=cache).data
    parties = data.train_parties.numpy()
    halves = partition_for_run(data.train_y.numpy(), config, parties)
    wholes = partition_for_run(data.train_y.numpy(), full, parties)
    assert [len(h) for h in halves] == [round(len(w) / 2) for w in wholes]
    assert all(set(h) <= set(w) for h, w in zip(halves, wholes))
    row = next(run_rounds(config))
    assert row["parties_this_round"] == 2  # round(5 x 0.4)


def test_cache_hit_identical_and_touch_invalidates(party_tree, cache):
    root, _ = party_tree
    name = f"folder:{root}"
    first = load_folder(name, data_root=cache, use_memory=False)
    second = load_folder(name, data_root=cache, use_memory=False)
    assert (first.source, second.source) == ("decoded", "disk cache")
    for key in ("train_x", "train_y", "test_x", "test_y", "train_parties"):
        assert torch.equal(getattr(first.data, key), getattr(second.data, key))
    assert first.data.spec == second.data.spec
    print(f"\nfolder load, 4,000 PNGs: first {first.seconds:.3f} s, cached {second.seconds:.3f} s")

    image = next((root / "train" / "party0").rglob("*.png"))
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    try:
        third = load_folder(name, data_root=cache, use_memory=False)
        assert third.source == "decoded" and third.fingerprint != first.fingerprint
        assert not first.cache_file.exists() and third.cache_file.exists()  # stale one gone
        assert torch.equal(third.data.train_x, first.data.train_x)
    finally:
        os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def rgb_tree(fmnist: ImageData, root: Path, per_class: int = 16, classes: int = 4) -> None:
    """Real Fashion-MNIST images as RGB 32x32 PNGs (padded, tinted per class), no test/."""
    for c in range(classes):
        picks = torch.nonzero(fmnist.train_y == c).flatten()[:per_class]
        for i in picks.tolist():
            grey = torch.nn.functional.pad(fmnist.train_x[i], (2, 2, 2, 2))
            tint = torch.tensor([255, 160 + 30 * c, 255 - 50 * c], dtype=torch.int32)
            rgb = (grey.int() * tint.view(3, 1, 1) // 255).to(torch.uint8)
            write_image(root / "train" / FMNIST_CLASSES[c] / f"{i:05d}.png", rgb)


def test_rgb_folder_trains_with_torchvision_resnet18(fmnist, tmp_path, cache):
    rgb_tree(fmnist, tmp_path / "rgb")
    values = folder_run(tmp_path / "rgb", cache, holdout_fraction=0.25, partition="iid", rounds=1)
    config = RunConfig(**values, model="torchvision:resnet18", n_parties=2, batch_size=8)
    spec = config.spec
    assert spec.shape == (3, 32, 32) and len(spec.mean) == 3 and spec.n_classes == 4
    assert (spec.train_size, spec.test_size) == (48, 16)  # 25% of each class held out
    assert spec.default_model == "simple-cnn"
    run = FederatedRun(config)
    assert run.global_model.encoder.conv1.stride == (1, 1)  # CIFAR stem for 32x32
    row = run.run_round()
    assert np.isfinite(row["test_loss"]) and 0 <= row["test_acc"] <= 1
    assert row["samples_this_round"] == 48


@pytest.mark.parametrize("head", [True, False])
def test_factory_model_trains_with_moon(party_tree, cache, head):
    root, _ = party_tree
    config = folder_config(
        root,
        cache,
        algorithm="moon",
        model="tests.model_factories:small_encoder",
        projection_head=head,
        rounds=2,
        data_fraction=0.3,
    )
    run = FederatedRun(config)
    model = run.global_model
    assert isinstance(model, FedConModel) and isinstance(model.encoder, torch.nn.Sequential)
    if head:
        assert model.head[0].in_features == FEATURES and model.head[2].out_features == 32
    else:
        assert isinstance(model.head, torch.nn.Identity)
    assert model.classifier.in_features == (32 if head else FEATURES)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rows = [run.run_round() for _ in range(2)]
    assert np.isnan(rows[0]["con_loss"])  # no previous model in a party's first round
    assert np.isfinite(rows[1]["con_loss"]) and rows[1]["con_loss"] > 0
    after = model.state_dict()
    assert not torch.equal(before["encoder.0.weight"], after["encoder.0.weight"])
    assert not torch.equal(before["classifier.weight"], after["classifier.weight"])


def test_the_documented_factory_example_runs(party_tree, cache, tmp_path, monkeypatch):
    doc = (Path(__file__).parent.parent / "docs" / "own-data-and-models.md").read_text()
    (example,) = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    (tmp_path / "my_models.py").write_text(example)
    monkeypatch.syspath_prepend(str(tmp_path))
    root, _ = party_tree
    config = folder_config(
        root, cache, algorithm="moon", model="my_models:tiny_cnn", rounds=1, data_fraction=0.2
    )
    run = FederatedRun(config)
    assert run.global_model.head[0].in_features == 32
    assert np.isfinite(run.run_round()["test_loss"])


def test_torchvision_model_for_another_input_size_is_refused(party_tree, cache):
    root, _ = party_tree
    with pytest.raises(ConfigError, match=r"model='torchvision:vit_b_16'.*dummy batch"):
        folder_config(root, cache, model="torchvision:vit_b_16")


def test_sizes_are_unified_and_jpeg_decodes(fmnist, tmp_path, cache):
    """Most images 28x28 PNG; two JPEGs of 20x24 are resized to the most common size,
    or everything to --image-size."""
    root = tmp_path / "mixed"
    for c in range(2):
        for i in torch.nonzero(fmnist.train_y == c).flatten()[:12].tolist():
            write_image(root / "train" / FMNIST_CLASSES[c] / f"{i:05d}.png", fmnist.train_x[i])
    small = TF.resize(fmnist.train_x[:2], [20, 24], antialias=True)
    for k in range(2):
        path = root / "train" / FMNIST_CLASSES[k] / f"small{k}.jpg"
        path.write_bytes(encode_jpeg(small[k], quality=95).numpy().tobytes())
    load = load_folder(f"folder:{root}", holdout_fraction=0.25, data_root=cache)
    data = load.data
    assert data.spec.shape == (1, 28, 28) and data.train_x.shape[0] + data.test_x.shape[0] == 26
    jpeg = decode_image(str(root / "train" / FMNIST_CLASSES[0] / "small0.jpg"))
    resized = TF.resize(jpeg, [28, 28], antialias=True)
    everything = torch.cat([data.train_x, data.test_x])
    assert any(torch.equal(resized, x) for x in everything)  # the JPEG, resized, is in the set
    sixteen = load_folder(f"folder:{root}", "16", holdout_fraction=0.25, data_root=cache).data
    assert sixteen.spec.shape == (1, 16, 16) and sixteen.spec.default_model == "simple-cnn"
    assert sixteen.spec.mean != data.spec.mean  # statistics of the resized images


def test_cli_rows_file_and_sweep_plan_name_a_folder_safely(
    party_tree, cache, tmp_path, monkeypatch
):
    from federated import run as run_cli
    from search_spaces import BUDGETS, STUDIES
    from study.plan import SweepPlan

    root, _ = party_tree
    monkeypatch.chdir(root.parent)
    relative = f"folder:{root.name}"
    argv = [
        "--dataset",
        relative,
        "--partition",
        "natural",
        "--rounds",
        "1",
        "--local-epochs",
        "1",
        "--data-fraction",
        "0.1",
        "--data-root",
        cache,
        "--quiet",
    ]
    assert run_cli.main(argv) == 0
    (rows,) = [
        p for p in (root.parent / "results" / "runs").glob("*.csv") if ".parties." not in p.name
    ]
    assert rows.name.startswith(f"fedavg-folder-{root.name}-seed0-")

    plan = SweepPlan.build(
        STUDIES["temperature"],
        BUDGETS["smoke"],
        overrides={"dataset": relative, "data_root": cache},
    )
    assert plan.dataset == f"folder:{root}" and "dataset" not in plan.overrides
    assert all(t.config["dataset"] == f"folder:{root}" for t in plan.trials())
    assert plan.default_name("T") == f"temperature-folder-{root.name}-smoke-T"
