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


def test_the_config_does_not_import_method_modules():
    imports = runtime_imports(ROOT / "federated" / "config" / "run_config.py")
    assert not {m for m in imports if m.startswith(("federated.algorithms", "federated.server"))}
