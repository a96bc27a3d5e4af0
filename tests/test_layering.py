"""The config finds methods through the registry; methods never import the config at run
time (only for type hints), so there is no import cycle between them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
METHOD_MODULES = sorted(
    [
        *ROOT.glob("federated/algorithms/*.py"),
        *ROOT.glob("federated/server/*.py"),
        ROOT / "federated" / "registry.py",
        ROOT / "federated" / "params.py",
    ]
)


def runtime_imports(path: Path) -> set[str]:
    """Modules imported outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text())
    hidden = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
        for node in ast.walk(block)
    }
    names = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("path", METHOD_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_method_modules_do_not_import_the_config(path):
    assert "federated.config.run_config" not in runtime_imports(path)


@pytest.mark.parametrize(
    "path", sorted(ROOT.glob("federated/config/*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_the_config_does_not_import_method_modules(path):
    """The config layer reaches a method only by name, through the registry."""
    imports = runtime_imports(path)
    assert not {m for m in imports if m.startswith(("federated.algorithms", "federated.server"))}


# -------------------------------------------- the registry is no way around the layers
PACKAGES = ("federated", "study", "analysis", "search_spaces", "benchmarks")
#: the modules that import by path, and why each may: the registry (methods, servers,
#: tasks by name), a user's model or method by ``package.module:Name``, the lazy exports
#: of ``federated`` and a kind's declared parts (model family, folder reader, Hub column),
#: the trackers a sweep loads only when asked, and the sweep's check that a plug-in's
#: module imports before Ray starts
IMPORTS_BY_PATH = {
    "federated/registry.py",
    "federated/__init__.py",
    "federated/models/import_path.py",
    "federated/data/kind_parts.py",
    "study/tune/tracking_callbacks.py",
    "study/sweep.py",
}


def imports_by_path(path: Path) -> bool:
    """Whether ``path`` calls ``importlib.import_module`` or ``__import__``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                return True
    return False


def test_only_the_declared_modules_import_by_path():
    """A module that imported a sibling layer by a string would hide an edge the import
    graph (and the tests above) cannot see."""
    found = {
        str(p.relative_to(ROOT))
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if imports_by_path(p)
    }
    assert found <= IMPORTS_BY_PATH, sorted(found - IMPORTS_BY_PATH)


def test_every_registered_path_stays_in_its_layer():
    """The registry names methods in their own packages only, and a kind's declared parts
    (model family, folder reader, Hub column) live in its own package (or, the shared
    encoder-and-head family, in the models layer): a name resolved through the registry
    never reaches into another layer's internals."""
    from federated.registry import (
        ALGORITHM_PATHS,
        SERVER_OPTIMIZER_PATHS,
        TASK_PATHS,
        TEMPERATURE_SCHEDULE_PATHS,
        load_method,
    )

    def module(path: str) -> str:
        return path.partition(":")[0]

    layers = {
        "federated.algorithms.": [*ALGORITHM_PATHS.values(), *TEMPERATURE_SCHEDULE_PATHS.values()],
        "federated.server.": list(SERVER_OPTIMIZER_PATHS.values()),
        "federated.tasks.": list(TASK_PATHS.values()),
    }
    for prefix, paths in layers.items():
        assert paths, prefix
        for path in paths:
            assert module(path).startswith(prefix), (prefix, path)
    for name, path in TASK_PATHS.items():
        kind = module(path).rsplit(".", 1)[0] + "."  # federated.tasks.<kind>.
        task = load_method("task", name)
        parts = [task.folder_reader, task.hub_column, task.model_family]
        for part in filter(None, parts):
            assert module(part).startswith((kind, "federated.models")), (name, part)


def test_a_kind_lives_in_its_own_package():
    """Outside ``federated/tasks/`` no module imports a kind's package: generic layers
    ask the registered kinds for their declared parts (docs/adding-a-task.md)."""
    kinds = {p.partition(":")[0].rsplit(".", 1)[0] for p in TASK_PATHS_VALUES()}
    outside = [
        (str(p.relative_to(ROOT)), m)
        for package in ("federated", "study", "search_spaces", "analysis", "benchmarks")
        for p in (ROOT / package).rglob("*.py")
        if not p.is_relative_to(ROOT / "federated" / "tasks")
        for m in runtime_imports(p)
        if any(m == k or m.startswith(k + ".") for k in kinds)
    ]
    assert outside == []


def TASK_PATHS_VALUES() -> list[str]:
    from federated.registry import TASK_PATHS

    return list(TASK_PATHS.values())


@pytest.mark.parametrize(
    "path", sorted(ROOT.glob("federated/engine/*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_the_engine_never_imports_ray(path):
    """The engine runs a run; Tune's trial folder reaches it as a value from the
    trainable (federated/trainable.py), at any import depth, even inside a function."""
    assert not {m for m in runtime_imports(path) if m == "ray" or m.startswith("ray.")}
