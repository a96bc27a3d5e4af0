"""Finding and loading datasets into memory as uint8 tensors.

Where data is looked for, in order:

1. the data root: ``RunConfig.data_root`` / ``--data-root``, else ``$FEDSWEEP_DATA``,
   else ``~/.cache/fedsweep/data``;
2. for ``fmnist``, Debian's ``dataset-fashion-mnist`` (/usr/share/datasets/fashion-mnist);
3. a download by torchvision (CIFAR, MNIST, Fashion-MNIST) or of the Tiny-ImageNet zip,
   unless ``FEDSWEEP_OFFLINE=1``.

When none works, :class:`DatasetUnavailableError` says in one line where it looked and how to
get the data.  Images are returned as uint8 NCHW tensors and labels as int64, so a run
keeps the whole set on its device and augments batches there.  A built-in set, once
loaded, is held in this process's memory (:mod:`federated.data.memory_cache`, as the
folder and ``hf:`` loaders hold theirs), keyed by the files it was read from: a trial's
worker, a sweep's driver or a run built from a config asking again takes the tensors
already decoded, and changed files are read again.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.data.catalog import DatasetSpec, dataset_spec
from federated.data.folder_dataset import load_folder
from federated.data.hub_dataset import HubColumns, is_hub_dataset, load_hub
from federated.data.idx import read_idx
from federated.data.image_data import (
    DatasetUnavailableError,
    ImageData,
    atomic_torch_save,
    default_data_root,
    resolve_data_root,
)
from federated.data.memory_cache import held, hold
from federated.data.synthetic import synthetic_images

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"


def downloads_allowed() -> bool:
    return os.environ.get("FEDSWEEP_OFFLINE", "").lower() not in ("1", "true", "yes")


def load_run_data(config: Any) -> ImageData:
    """The data set a run's config names (a :class:`~federated.config.run_config.RunConfig`:
    its ``dataset``, ``data_root``, ``image_size``, ``holdout_fraction`` and the columns of
    :class:`~federated.data.hub_dataset.HubColumns`, ``partition_by`` among them): the one
    way from a config to its data (a run, a trial, a sweep's driver)."""
    return load_dataset(
        config.dataset,
        config.data_root,
        image_size=config.image_size,
        holdout_fraction=config.holdout_fraction,
        columns=HubColumns.of(config),
    )


def load_dataset(
    name: str,
    data_root: str | os.PathLike | None = None,
    *,
    image_size: str | None = None,
    holdout_fraction: float | None = None,
    columns: HubColumns | None = None,
) -> ImageData:
    """Load dataset ``name`` (see :mod:`federated.data.catalog`) from disk or download it.

    ``folder:PATH`` names an image folder (:mod:`federated.data.folder_dataset`; a
    detection folder reads ``columns.partition_by`` as the image field of its natural
    parties) and ``hf:SOURCE`` a Hugging Face data set (:mod:`federated.data.hub_dataset`,
    which reads all of ``columns``); only these use ``image_size`` and
    ``holdout_fraction``.  Every loader keeps what it loaded in this process's memory
    (:mod:`federated.data.memory_cache`): asking again for unchanged files is free."""
    if name.startswith("folder:"):
        partition_by = columns.partition_by if columns else None  # a folder kind's party field
        return load_folder(
            name, image_size, holdout_fraction, data_root, partition_by=partition_by
        ).data
    if is_hub_dataset(name):
        return load_hub(name, image_size, holdout_fraction, data_root, columns or HubColumns())
    spec = dataset_spec(name)  # an unknown name: refused before anything is looked for
    root = resolve_data_root(data_root)
    source = BUILT_IN_SOURCES[name]
    stamp = _files_stamp(source.files(spec, root))
    if stamp is None:  # nothing on disk yet (a download): nothing to key it by
        return _load_built_in(spec, source, root)
    # keyed by the files read (their paths, sizes and times), so changed files are read again
    key = ("built-in", name, stamp)
    return held(key) or hold(key, _load_built_in(spec, source, root))


def _load_built_in(spec: DatasetSpec, source: BuiltInSource, root: Path) -> ImageData:
    """Built-in data set ``spec`` read (or generated, or downloaded) under ``root``."""
    name = spec.name
    try:
        train_x, train_y, test_x, test_y = source.load(spec, root)
    except DatasetUnavailableError:
        raise
    except (OSError, ValueError, EOFError, RuntimeError, KeyError) as err:
        # truncated or corrupt files (IDX, gzip, torchvision's archives): one line, no trace
        raise DatasetUnavailableError(
            f"dataset {name!r} under {root} could not be read ({_short(err)}): its files "
            "are damaged; remove them and let fedsweep fetch them again"
        ) from None
    expected = (spec.train_size, *spec.shape), (spec.test_size, *spec.shape)
    if (tuple(train_x.shape), tuple(test_x.shape)) != expected:
        raise DatasetUnavailableError(
            f"dataset {name!r} under {root} has shapes {tuple(train_x.shape)} / "
            f"{tuple(test_x.shape)}, expected {expected[0]} / {expected[1]}: remove the folder "
            "and let fedsweep fetch it again"
        )
    return ImageData(spec, train_x.contiguous(), train_y.long(), test_x.contiguous(), test_y.long())


def _files_stamp(files: list[Path] | None) -> tuple | None:
    """What changes when ``files`` change: each one's path, size and modification time."""
    if files is None:
        return None
    try:
        stats = [(str(p), p.stat()) for p in files]
    except OSError:
        return None
    return tuple((path, st.st_size, st.st_mtime_ns) for path, st in stats)


# ---------------------------------------------------------------------- per dataset
def _no_files(spec: DatasetSpec, root: Path) -> list[Path]:
    """The generated set reads no file."""
    return []


def _load_synthetic(spec: DatasetSpec, root: Path):
    x, y = synthetic_images(spec.train_size + spec.test_size, spec.n_classes, spec.shape)
    n = spec.train_size
    return x[:n], y[:n], x[n:], y[n:]


_MNIST_FILES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}


def _find_idx_set(folder: Path) -> dict[str, Path] | None:
    found = {}
    for key, stem in _MNIST_FILES.items():
        for candidate in (folder / stem, folder / f"{stem}.gz"):
            if candidate.is_file():
                found[key] = candidate
                break
        else:
            return None
    return found


def _mnist_folders(spec: DatasetSpec, root: Path) -> list[Path]:
    """Where an MNIST-like set's IDX files are looked for, in order."""
    tv_name = "FashionMNIST" if spec.name == "fmnist" else "MNIST"
    folders = [
        root / tv_name / "raw",
        root / ("fashion-mnist" if spec.name == "fmnist" else "mnist"),
    ]
    if spec.name == "fmnist":
        folders.append(DEBIAN_FASHION_MNIST)
    return folders


def _mnist_files(spec: DatasetSpec, root: Path) -> list[Path] | None:
    """The IDX files an MNIST-like set is read from, or None (not there: a download)."""
    for folder in _mnist_folders(spec, root):
        files = _find_idx_set(folder)
        if files:
            return list(files.values())
    return None


def _load_mnist_like(spec: DatasetSpec, root: Path):
    tv_name = "FashionMNIST" if spec.name == "fmnist" else "MNIST"
    folders = _mnist_folders(spec, root)
    for folder in folders:
        files = _find_idx_set(folder)
        if files:
            return _from_idx(files)
    download_error = "downloads disabled (FEDSWEEP_OFFLINE)"
    if downloads_allowed():
        try:
            import torchvision.datasets as tvd

            getattr(tvd, tv_name)(str(root), train=True, download=True)
            getattr(tvd, tv_name)(str(root), train=False, download=True)
            files = _find_idx_set(root / tv_name / "raw")
            if files:
                return _from_idx(files)
        except Exception as err:  # torchvision raises several kinds when offline
            download_error = f"download failed ({_short(err)})"
    how = (
        "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or "
        if spec.name == "fmnist"
        else ""
    )
    raise DatasetUnavailableError(
        f"dataset {spec.name!r} not found: looked in {', '.join(map(str, folders))}; "
        f"{download_error}. To get it: {how}run once with internet access "
        f"(torchvision downloads it to {root / tv_name}), or copy the four IDX files "
        f"there and pass --data-root / set FEDSWEEP_DATA"
    )


def _from_idx(files: dict[str, Path]):
    train_x = read_idx(files["train_x"]).unsqueeze(1)
    test_x = read_idx(files["test_x"]).unsqueeze(1)
    return train_x, read_idx(files["train_y"]), test_x, read_idx(files["test_y"])


def _cifar_class(name: str):
    import torchvision.datasets as tvd

    return tvd.CIFAR10 if name == "cifar10" else tvd.CIFAR100


def _cifar_files(spec: DatasetSpec, root: Path) -> list[Path] | None:
    """The files of torchvision's extracted CIFAR folder, or None (not there: a download)."""
    folder = root / _cifar_class(spec.name).base_folder
    files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    return files or None


def _load_cifar(spec: DatasetSpec, root: Path):
    cls = _cifar_class(spec.name)
    folder = root / cls.base_folder
    download_error = "downloads disabled (FEDSWEEP_OFFLINE)"
    try:
        train, test = cls(str(root), train=True), cls(str(root), train=False)
    except RuntimeError:  # "Dataset not found or corrupted"
        if not downloads_allowed():
            train = None
        else:
            try:
                train = cls(str(root), train=True, download=True)
                test = cls(str(root), train=False, download=True)
            except Exception as err:
                train, download_error = None, f"download failed ({_short(err)})"
        if train is None:
            raise DatasetUnavailableError(
                f"dataset {spec.name!r} not found: looked in {folder}; {download_error}. "
                f"To get it: run once with internet access (torchvision downloads it there), "
                f"or put the extracted '{cls.base_folder}' folder under a data root and pass "
                "--data-root / set FEDSWEEP_DATA"
            ) from None

    def as_tensors(ds):
        x = torch.from_numpy(np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2)))
        return x, torch.as_tensor(ds.targets, dtype=torch.int64)

    return (*as_tensors(train), *as_tensors(test))


def _tinyimagenet_cache(root: Path) -> Path:
    """The decoded set's uint8 tensors, written after the first decode of the JPEGs."""
    return root / "tiny-imagenet-200" / "fedsweep-uint8.pt"


def _tinyimagenet_files(spec: DatasetSpec, root: Path) -> list[Path] | None:
    """The decoded cache, or None before the first decode (nothing to key it by yet)."""
    cache = _tinyimagenet_cache(root)
    return [cache] if cache.is_file() else None


def _load_tinyimagenet(spec: DatasetSpec, root: Path):
    folder = root / "tiny-imagenet-200"
    cache = _tinyimagenet_cache(root)
    if cache.is_file():
        try:
            blob = torch.load(cache, weights_only=True)
            return blob["train_x"], blob["train_y"], blob["test_x"], blob["test_y"]
        except (pickle.UnpicklingError, OSError, ValueError, EOFError, RuntimeError) as err:
            # the safe load refuses it, or it is cut short: one line, not torch's 24
            raise DatasetUnavailableError(
                f"dataset 'tinyimagenet': its cache {cache} cannot be loaded safely "
                f"({_short(err)}); remove it and it is decoded again from {folder}"
            ) from None
    if not (folder / "wnids.txt").is_file():
        download_error = "downloads disabled (FEDSWEEP_OFFLINE)"
        if downloads_allowed():
            try:
                from torchvision.datasets.utils import download_and_extract_archive

                download_and_extract_archive(TINY_IMAGENET_URL, str(root))
                download_error = ""
            except Exception as err:
                download_error = f"download failed ({_short(err)})"
        if download_error:
            raise DatasetUnavailableError(
                f"dataset 'tinyimagenet' not found: looked in {folder}; {download_error}. "
                f"To get it: download {TINY_IMAGENET_URL}, unzip it under a data root (giving "
                "tiny-imagenet-200/ with train/, val/, wnids.txt) and pass --data-root / set "
                "FEDSWEEP_DATA"
            )
    arrays = _decode_tinyimagenet(folder)
    atomic_torch_save(arrays, cache)
    return arrays["train_x"], arrays["train_y"], arrays["test_x"], arrays["test_y"]


def _decode_tinyimagenet(folder: Path) -> dict[str, torch.Tensor]:
    """Decode the JPEG folder once; val images are regrouped by val_annotations.txt."""
    from PIL import Image

    wnids = (folder / "wnids.txt").read_text().split()
    label_of = {w: i for i, w in enumerate(wnids)}
    train_items = [
        (path, label_of[w])
        for w in wnids
        for path in sorted((folder / "train" / w / "images").glob("*.JPEG"))
    ]
    val_items = []
    for line in (folder / "val" / "val_annotations.txt").read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            val_items.append((folder / "val" / "images" / parts[0], label_of[parts[1]]))

    def decode(items):
        x = torch.empty(len(items), 3, 64, 64, dtype=torch.uint8)
        for i, (path, _) in enumerate(items):
            with Image.open(path) as img:
                x[i] = torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1)
        return x, torch.tensor([label for _, label in items], dtype=torch.int64)

    train_x, train_y = decode(train_items)
    test_x, test_y = decode(val_items)
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


@dataclass(frozen=True)
class BuiltInSource:
    """How a built-in data set is read: ``load`` (spec, data root) -> train and test
    tensors, and ``files`` (spec, data root) -> the files that load reads now, or None
    where it would download them first."""

    load: Callable[[DatasetSpec, Path], tuple[torch.Tensor, ...]]
    files: Callable[[DatasetSpec, Path], list[Path] | None]


BUILT_IN_SOURCES: dict[str, BuiltInSource] = {
    "cifar10": BuiltInSource(_load_cifar, _cifar_files),
    "cifar100": BuiltInSource(_load_cifar, _cifar_files),
    "tinyimagenet": BuiltInSource(_load_tinyimagenet, _tinyimagenet_files),
    "fmnist": BuiltInSource(_load_mnist_like, _mnist_files),
    "mnist": BuiltInSource(_load_mnist_like, _mnist_files),
    "synthetic": BuiltInSource(_load_synthetic, _no_files),
}


def _short(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    return f"{type(err).__name__}: {text}"[:160]


__all__ = [
    "DatasetUnavailableError",
    "ImageData",
    "default_data_root",
    "load_dataset",
    "load_run_data",
    "resolve_data_root",
]
