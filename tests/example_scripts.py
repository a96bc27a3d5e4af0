"""The scripts in examples/ loaded as modules, so that tests call their functions."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

#: Debian's dataset-fashion-mnist, the pixels the builders draw from
FMNIST = Path("/usr/share/datasets/fashion-mnist")


def load_example(script: Path) -> ModuleType:
    """``script`` run as a module named after its file; registered in ``sys.modules``, where
    its dataclasses look their module up."""
    spec = importlib.util.spec_from_file_location(script.stem, script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def assert_refused_in_one_line(
    builder: ModuleType, argv: list[str], what: str, by_parser: bool, folder: Path, capsys
) -> None:
    """A task builder's ``main`` refuses OUT = ``folder/out`` with ``argv``: exit status 2,
    one ``error:`` line on stderr holding ``what``, nothing written in the empty ``folder``."""
    out = folder / "out"
    # the flags' own checks exit from the parser (2); the builder's return 2
    with pytest.raises(SystemExit) if by_parser else contextlib.nullcontext():
        assert builder.main([str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error:") and what in err
    assert not out.exists() and list(folder.iterdir()) == []


def built_tree(tmp_path_factory, script: Path, argv: list[str], name: str) -> Path:
    """The tree the builder ``script`` writes with ``argv`` into a new temporary folder
    ``name``; the test is skipped where Debian's dataset-fashion-mnist is missing."""
    if not (FMNIST / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("needs Debian's dataset-fashion-mnist")
    out = tmp_path_factory.mktemp(name) / "task"
    assert load_example(script).main([str(out), *argv]) == 0
    return out
