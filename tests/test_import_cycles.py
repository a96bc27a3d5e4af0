"""No import cycles anywhere in the package: every module of ``federated``, ``study``,
``search_spaces``, ``analysis`` and ``benchmarks`` imports (at run time, function-level
imports included; ``if TYPE_CHECKING:`` blocks excluded) only modules that do not import
it back, directly or through others.  Importing ``a.b.c`` counts as importing the
packages ``a`` and ``a.b`` too (their ``__init__`` runs first), except those the
importer lives in (already being imported when it runs)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("federated", "study", "search_spaces", "analysis", "benchmarks")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {
        module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The project's modules ``path`` imports outside ``if TYPE_CHECKING:`` blocks,
    with the packages on the way (but not the importer's own packages)."""
    tree = ast.parse(path.read_text())
    hidden = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets.add(node.module)
            targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    own = module_name(path).split(".")
    enclosing = {".".join(own[:i]) for i in range(1, len(own))}
    if path.name == "__init__.py":
        enclosing.add(module_name(path))
    out = set()
    for target in targets:
        parts = target.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return (out - enclosing) & modules


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    names = set(modules)
    graph = {}
    for name, path in modules.items():
        # a package's own __init__ importing its submodules is how packages re-export;
        # a submodule importing its package back is the cycle that matters
        graph[name] = {m for m in runtime_imports(path, names) if m != name}
    return graph


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
