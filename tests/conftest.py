"""Shared fixtures: datasets loaded once per session, small seeded configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from federated.config.run_config import RunConfig
from federated.data import ImageData, load_dataset


def _starts_ray(path: Path) -> bool:
    """Whether a test module runs sweeps (a local Ray cluster per test)."""
    text = path.read_text()
    return any(mark in text for mark in ("study.sweep", "import ray", "from ray", "sweep("))


def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist (``--dist loadgroup``, scripts/test.sh) the slow tests that
    start real Ray clusters form one group, run one after another on one worker: two
    clusters at once would fight over the machine's two cores (and time out).  The other
    slow tests (real-image training) spread over the workers like the fast ones."""
    seen: dict[Path, bool] = {}
    for item in items:
        if item.get_closest_marker("slow") is None:
            continue
        path = Path(str(item.fspath))
        if path not in seen:
            seen[path] = _starts_ray(path)
        if seen[path]:
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session")
def fmnist() -> ImageData:
    """Real Fashion-MNIST (Debian's dataset-fashion-mnist, installed by scripts/bootstrap.sh)."""
    return load_dataset("fmnist")


@pytest.fixture(scope="session")
def synthetic() -> ImageData:
    return load_dataset("synthetic")


@pytest.fixture(autouse=True)
def _single_thread():
    """Tests run with one torch thread: deterministic and kind to a 2-core machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def tiny(**overrides) -> RunConfig:
    """A few-second run on generated CIFAR-shaped data, on the CPU unless ``device`` is given
    (exact comparisons hold per device; a GPU machine must not move them to CUDA)."""
    values = dict(
        device="cpu",
        dataset="synthetic",
        rounds=2,
        local_epochs=1,
        n_parties=4,
        data_fraction=0.04,
        test_fraction=0.1,
        threads=1,
        out_dim=32,
    )
    values.update(overrides)
    # flat names (mu=...) through the one table; resolved, so a bad value raises here
    return RunConfig.from_dict(values).resolved()
