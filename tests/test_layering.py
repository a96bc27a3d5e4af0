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
#: of ``federated`` and a task's model family and folder reader (paths a task declares),
#: the trackers a sweep loads only when asked, and the sweep's check that a plug-in's
#: module imports before Ray starts
IMPORTS_BY_PATH = {
    "federated/registry.py",
    "federated/__init__.py",
    "federated/models/__init__.py",
    "federated/models/import_path.py",
    "federated/data/folder_kinds.py",
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
    """The registry names methods in their own packages only, and a task's declared model
    family and folder reader live in the models layer and in the data layer or the task's
    own package (a kind that is one package, federated/tasks/multilabel/): a name resolved
    through the registry never reaches into another layer's internals."""
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
        "federated.models": [load_method("task", t).model_family for t in TASK_PATHS],
        ("federated.data.", "federated.tasks."): [
            r for t in TASK_PATHS if (r := load_method("task", t).folder_reader) is not None
        ],
    }
    for prefix, paths in layers.items():
        assert paths, prefix
        for path in paths:
            assert module(path).startswith(prefix), (prefix, path)
