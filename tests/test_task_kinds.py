"""A task kind is one package (docs/adding-a-task.md): the generic layers find each
kind's parts through the registry, a new kind's line is all they need, and loaded data
sit in the one memory cache."""

from __future__ import annotations

import pytest
import torch

from federated.data import memory_cache
from federated.data.folder_kinds import FolderReader, folder_reader, folder_readers
from federated.data.kind_parts import kind_parts
from federated.registry import TASK_PATHS, kind_specs, load_method
from federated.tasks.base import Task


class ToyKind(Task):
    """A fifth kind with a folder layout of its own (a ``toy.txt`` marks it)."""

    name = "toy"
    targets = "toy"
    folder_reader = "tests.test_task_kinds:TOY_READER"

    def per_sample_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return (outputs[:, 0] - targets.float()) ** 2

    def accumulator(self, n_parties: int | None = None):
        raise AssertionError("the toy kind is never evaluated here")


def _refuse_load(*args, **kwargs):
    raise AssertionError("the toy kind's folder is never loaded here")


TOY_READER = FolderReader(
    name="toy",
    recognises=lambda root: (root / "toy.txt").is_file(),
    load=_refuse_load,
    identity=lambda root: {"path": str(root), "task": "toy"},
)


def test_every_kind_declares_its_report_spec_beside_its_task():
    """The torch-free ``spec.py`` the help texts read is the task's own declaration."""
    specs = kind_specs()
    assert list(specs) == list(TASK_PATHS)
    for name, spec in specs.items():
        assert load_method("task", name).contract is spec
        assert spec.name == name


def test_the_class_folders_are_asked_last_and_each_reader_once():
    names = [r.name for r in folder_readers()]
    assert names == ["image", "detection", "segmentation", "multi-label", "image"]
    assert [r.last for r in folder_readers()] == [False, False, False, False, True]
    assert [c.task for c in kind_parts("hub_column")] == ["classification", "score", "multilabel"]


def test_a_fifth_kind_is_found_by_its_registry_line_alone(monkeypatch, tmp_path):
    assert folder_reader(tmp_path).name == "image"  # class folders: any other folder
    monkeypatch.setitem(TASK_PATHS, "toy", "tests.test_task_kinds:ToyKind")
    (tmp_path / "toy.txt").write_text("a toy folder\n")
    assert folder_reader(tmp_path) is TOY_READER
    assert folder_readers()[-1].last  # still asked after every kind's own reader


def test_a_hub_column_no_kind_reads_is_refused_naming_what_each_kind_reads():
    datasets = pytest.importorskip("datasets")
    from federated.data.hub_dataset import HubDataError, _targets

    splits = {"train": datasets.Dataset.from_dict({"label": [[1.0], [2.0]]})}
    with pytest.raises(HubDataError) as refused:
        _targets("hf:stand-in", splits, "label")
    assert str(refused.value).endswith(
        "(allowed: class labels, integers or text for classes, floats for scores, lists of "
        "class labels, integers or text, or 0/1 lists of a fixed length, for label sets)"
    )


def test_the_memory_cache_holds_the_most_recently_used_loads(monkeypatch):
    monkeypatch.setattr(memory_cache, "_held", type(memory_cache._held)())
    monkeypatch.setattr(memory_cache, "ENTRIES", 2)
    memory_cache.hold("a", 1)
    memory_cache.hold("b", 2)
    assert memory_cache.held("a") == 1  # a is now the most recently used
    memory_cache.hold("c", 3)  # drops b, the least recently used
    assert (memory_cache.held("a"), memory_cache.held("b"), memory_cache.held("c")) == (1, None, 3)
