"""Shared fixtures: datasets loaded once per session, small seeded configs."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch

from federated.config.run_config import RunConfig
from federated.data import ImageData, load_dataset
from tests.short_runs import short_run

# real sweeps that several test modules read, made once per session
pytest_plugins = ["tests.conftest_analysis"]


def _starts_ray(path: Path) -> bool:
    """Whether a test module runs sweeps (a local Ray cluster per test)."""
    text = path.read_text()
    return any(mark in text for mark in ("study.sweep", "import ray", "from ray", "sweep("))


#: the two xdist groups of the slow tests that start real Ray clusters (see below)
SHARED_SWEEP_GROUP = "ray"
OTHER_RAY_GROUP = "ray-2"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist (``--dist loadgroup``, scripts/test.sh) the slow tests that
    start real Ray clusters form two groups, each run one test after another on one
    worker: the modules that read the session's shared sweeps (tests/conftest_analysis.py;
    a session fixture lives in one worker, so they must share it) and the other Ray
    modules.  The two groups start together, one per worker, so at most two local Ray
    clusters share the two cores at a time (as two users' sweeps side by side do); with
    one group the other worker sat idle for minutes once the rest was done.  The other
    slow tests (real-image training) spread over the workers like the fast ones; a test
    that names its own group (a slow test without Ray in such a module) keeps it."""
    from tests.conftest_analysis import SHARED_SWEEPS

    starts_ray: dict[Path, bool] = {}
    reads_shared: dict[Path, bool] = {}
    for item in items:
        path = Path(str(item.fspath))
        shares = bool(SHARED_SWEEPS & set(getattr(item, "fixturenames", ())))
        reads_shared[path] = reads_shared.get(path, False) or shares
    for item in items:
        if item.get_closest_marker("slow") is None or item.get_closest_marker("xdist_group"):
            continue
        path = Path(str(item.fspath))
        if path not in starts_ray:
            starts_ray[path] = _starts_ray(path)
        if reads_shared[path]:  # its sweeps may be started by a test of another module
            item.add_marker(pytest.mark.xdist_group(SHARED_SWEEP_GROUP))
        elif starts_ray[path]:
            item.add_marker(pytest.mark.xdist_group(OTHER_RAY_GROUP))


def _group_names(item: pytest.Item) -> str:
    marks = item.iter_markers("xdist_group")
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
    return "_".join(sorted(names))


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_group_suffix(config, items) -> None:
    """What pytest-xdist's loadgroup does on a worker, done where it no longer takes.

    xdist's scheduler groups tests by an ``@group`` suffix its worker hook writes into
    ``item._nodeid``; pytest 9.2 keeps node ids structured (``item._id``), so that write
    is lost and every test is scheduled alone: two Ray sweeps ran at once on the two
    workers (pytest-xdist issue #1386).  Where the suffix is missing it is written here,
    into whichever field this pytest keeps."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers only
        return
    for item in items:
        group = _group_names(item)
        if not group or item.nodeid.endswith(f"@{group}"):
            continue
        nodeid = f"{item.nodeid}@{group}"
        if hasattr(item, "_id"):  # pytest >= 9.2: a structured NodeId
            item._id = type(item._id).parse(nodeid)
        else:
            item._nodeid = nodeid


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything collection made (the imported libraries' and test modules' objects, about
    600,000, alive to the end) goes to Python's permanent generation, which its full
    collections do not walk (``gc.freeze``); a full collection then comes after 40 of
    the middle generation's instead of 10 (docs/results/test-suite.md)."""
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 40)


@pytest.fixture(scope="session")
def fmnist() -> ImageData:
    """Real Fashion-MNIST (Debian's dataset-fashion-mnist, installed by scripts/bootstrap.sh)."""
    return load_dataset("fmnist")


@pytest.fixture(scope="session")
def synthetic() -> ImageData:
    return load_dataset("synthetic")


# Real Fashion-MNIST FedAvg: 10 parties, Dir(0.5), E = 1, seed 0, the whole training set,
# scored on 2,000 test images (a 95% interval of about +-2 points: the thresholds of the
# tests that read it are 13 or more points from every measured value).
FMNIST_FEDAVG = dict(
    algorithm="fedavg", dataset="fmnist", local_epochs=1, n_parties=10, beta=0.5, seed=0,
    threads=1, test_fraction=0.2,
)  # fmt: skip
# The tests that read it run on one pytest-xdist worker, so it is trained once.
FMNIST_FEDAVG_GROUP = pytest.mark.xdist_group("fmnist_fedavg")


@pytest.fixture(scope="session")
def fmnist_fedavg_rows(fmnist) -> list[dict]:
    """The rows of :data:`FMNIST_FEDAVG`'s 4 rounds: the real-image check reads all four,
    SOLO's comparison the first three (a run's first rounds do not depend on how many
    follow: the rows of ``rounds=3`` equal these rows' first three)."""
    from federated.engine.round_loop import run_rounds

    return list(run_rounds(RunConfig(rounds=4, **FMNIST_FEDAVG), fmnist))


@pytest.fixture(autouse=True)
def _single_thread():
    """Tests run with one torch thread: deterministic and kind to a 2-core machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def batchnorm_model_for(algorithm: str) -> dict[str, str]:
    """``model=simple-cnn-bn`` for a method that keeps BatchNorm local and refuses a model
    without it (FedBN: its only BatchNorm rule is ``local``), else nothing: the per-method
    tests run such a method on the BatchNorm variant of the same CNN."""
    from federated.registry import load_method

    only_local = load_method("algorithm", algorithm).own_state.batchnorm_rules == ("local",)
    return {"model": "simple-cnn-bn"} if only_local else {}


#: tiny()'s values, which tests/test_plugins.py also writes as command-line flags: 2% of the
#: generated training set (1,000 images, each of the 4 parties a few batches of 64 a round,
#: so shuffles, partial batches and method state all take part) and 5% of its test set (500)
TINY_VALUES = short_run("synthetic", parties=4, rounds=2, fractions=(0.02, 0.05), out_dim=32)
# Twice tiny()'s data, for a run that must learn within a few rounds (on tiny()'s own,
# FedAvg at lr 0.05 is still near chance after 5 rounds)
LEARNING_DATA = dict(data_fraction=0.04, test_fraction=0.1)


def tiny(**overrides) -> RunConfig:
    """A few-second run on generated CIFAR-shaped data, on the CPU unless ``device`` is given
    (exact comparisons hold per device; a GPU machine must not move them to CUDA)."""
    values = TINY_VALUES | overrides
    # flat names (mu=...) through the one table; resolved, so a bad value raises here
    return RunConfig.from_dict(values).resolved()
