"""A corrupt dataset file is one line naming it, not a traceback."""

from __future__ import annotations

import gzip

import pytest

from federated.data import DatasetUnavailableError, load_dataset


def test_a_corrupt_dataset_file_is_one_line(tmp_path):
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        with gzip.open(folder / f"{name}.gz", "wb") as fh:
            fh.write(b"\x00\x00\x08\x03\x00\x00")  # a header cut short
    with pytest.raises(DatasetUnavailableError) as caught:
        load_dataset("fmnist", tmp_path)
    assert "\n" not in str(caught.value) and "damaged" in str(caught.value)
