"""Datasets: real Fashion-MNIST from Debian's package, clear errors when data is absent."""

from __future__ import annotations

import gzip
import os
import shutil
import struct

import numpy as np
import pytest
import torch
from PIL import Image

from federated.data import DatasetUnavailableError, load_dataset
from federated.data.idx import read_idx
from federated.data.loading import DEBIAN_FASHION_MNIST, _decode_tinyimagenet


def test_fashion_mnist_is_real_and_uint8(fmnist):
    assert fmnist.train_x.shape == (60_000, 1, 28, 28)
    assert fmnist.test_x.shape == (10_000, 1, 28, 28)
    assert fmnist.train_x.dtype == torch.uint8
    assert torch.bincount(fmnist.train_y).tolist() == [6000] * 10
    assert torch.bincount(fmnist.test_y).tolist() == [1000] * 10
    # the real set's mean pixel, 0.2860 on the 0..1 scale
    assert float(fmnist.train_x.float().mean() / 255) == pytest.approx(0.2860, abs=1e-3)


def test_fashion_mnist_is_found_in_debians_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDSWEEP_OFFLINE", "1")
    assert (DEBIAN_FASHION_MNIST / "train-images-idx3-ubyte.gz").is_file()
    data = load_dataset("fmnist", tmp_path)  # nothing under the data root
    assert data.train_x.shape[0] == 60_000


def test_a_built_in_data_set_is_held_until_its_files_change(tmp_path, monkeypatch):
    """A second load of the same files takes the tensors already decoded (a run built
    from a config after a sweep's driver loaded its data); a file with a new time is
    read again, to the same images."""
    monkeypatch.setenv("FEDSWEEP_OFFLINE", "1")
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    for gz in DEBIAN_FASHION_MNIST.glob("*-ubyte.gz"):
        shutil.copy(gz, folder)
    first = load_dataset("fmnist", tmp_path)
    assert load_dataset("fmnist", tmp_path) is first
    images = folder / "t10k-images-idx3-ubyte.gz"
    stat = images.stat()
    os.utime(images, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = load_dataset("fmnist", tmp_path)
    assert again is not first and torch.equal(again.test_x, first.test_x)
    assert load_dataset("synthetic", tmp_path) is load_dataset("synthetic", tmp_path / "x")


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("cifar10", "cifar-10-batches-py"),
        ("cifar100", "cifar-100-python"),
        ("tinyimagenet", "tiny-imagenet-200"),
        ("mnist", "MNIST"),
    ],
)
def test_missing_dataset_offline_says_where_it_looked_and_how_to_get_it(
    tmp_path, monkeypatch, name, folder
):
    monkeypatch.setenv("FEDSWEEP_OFFLINE", "1")
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset(name, tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert f"dataset {name!r} not found" in message
    assert str(tmp_path) in message and folder in message
    assert "--data-root" in message


def test_cifar10_download_failure_is_reported_not_raised(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDSWEEP_OFFLINE", raising=False)
    with pytest.raises(DatasetUnavailableError, match="download failed"):
        load_dataset("cifar10", tmp_path)


def test_read_idx_round_trip(tmp_path):
    data = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / "x-idx3-ubyte.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(bytes([0, 0, 0x08, 3]) + struct.pack(">III", 2, 3, 4) + data.tobytes())
    assert torch.equal(read_idx(path), torch.from_numpy(data))


def test_tinyimagenet_val_images_are_regrouped_by_the_annotations(tmp_path):
    root = tmp_path / "tiny-imagenet-200"
    wnids = ["n01", "n02"]
    (root).mkdir()
    (root / "wnids.txt").write_text("\n".join(wnids))
    for label, wnid in enumerate(wnids):
        images = root / "train" / wnid / "images"
        images.mkdir(parents=True)
        Image.fromarray(np.full((64, 64, 3), 10 + label, np.uint8)).save(
            images / f"{wnid}_0.JPEG", quality=100
        )
    val = root / "val" / "images"
    val.mkdir(parents=True)
    lines = []
    for i, wnid in enumerate(["n02", "n01", "n02"]):
        Image.fromarray(np.full((64, 64, 3), 100 + i, np.uint8)).save(
            val / f"val_{i}.JPEG", quality=100
        )
        lines.append(f"val_{i}.JPEG\t{wnid}\t0\t0\t63\t63")
    (root / "val" / "val_annotations.txt").write_text("\n".join(lines))
    arrays = _decode_tinyimagenet(root)
    assert arrays["train_y"].tolist() == [0, 1]
    assert arrays["test_y"].tolist() == [1, 0, 1]
    assert arrays["test_x"].shape == (3, 3, 64, 64) and arrays["test_x"].dtype == torch.uint8
    assert abs(int(arrays["test_x"][1, 0, 0, 0]) - 101) <= 2
