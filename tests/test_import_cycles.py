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


def runtime_imports(path: Path, modules: set[str], type_only: bool = False) -> set[str]:
    """The project's modules ``path`` imports outside ``if TYPE_CHECKING:`` blocks (and
    inside them too with ``type_only``), with the packages on the way (but not the
    importer's own packages)."""
    tree = ast.parse(path.read_text())
    hidden = (
        set()
        if type_only
        else {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for node in ast.walk(block)
        }
    )
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


def import_graph(type_only: bool = False) -> dict[str, set[str]]:
    modules = all_modules()
    names = set(modules)
    graph = {}
    for name, path in modules.items():
        # a package's own __init__ importing its submodules is how packages re-export;
        # a submodule importing its package back is the cycle that matters
        graph[name] = {m for m in runtime_imports(path, names, type_only) if m != name}
    return graph


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Inside ``federated/``, lowest layer first (docs/architecture.md): a module imports only
# modules of its own layer or lower ones (type-only imports included), and within a layer
# no circle.  Each entry is a module or a package (all of it).
FEDERATED_LAYERS: tuple[tuple[str, ...], ...] = (
    # foundations: no method, no config, no torch model
    (
        "federated.params",
        "federated.registry",
        "federated.runtime",
        "federated.cli",
        "federated.contract",
        "federated.sgd_rule",
        "federated.privacy_accountant",
    ),
    # data, models and tasks
    ("federated.data", "federated.models", "federated.tasks"),
    # the run's configuration
    ("federated.config",),
    # the heterogeneity a study sweeps: partitions, feature skew, stragglers
    ("federated.heterogeneity",),
    # the methods: server rules, then party rules
    ("federated.server",),
    ("federated.algorithms",),
    # how a party trains
    ("federated.execution",),
    # measuring models
    ("federated.evaluation",),
    # one run
    ("federated.engine",),
    # the entry points
    (
        "federated",
        "federated.trainable",
        "federated.run",
        "federated.export_tree",
    ),
)


def layer_of(module: str) -> int:
    """Index in :data:`FEDERATED_LAYERS` of the longest entry ``module`` falls under."""
    best, found = -1, None
    for index, layer in enumerate(FEDERATED_LAYERS):
        for entry in layer:
            inside = module == entry or module.startswith(entry + ".")
            if inside and len(entry) > best:
                best, found = len(entry), index
    if found is None:
        raise AssertionError(f"{module} is in no layer of FEDERATED_LAYERS: place it")
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"importer -> imported"`` for every import of a module of a higher layer."""
    return sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.startswith("federated")
        for target in targets
        if target.startswith("federated") and layer_of(target) > layer_of(name)
    )


def test_inside_federated_no_module_imports_a_higher_layer():
    assert upward_imports(import_graph(type_only=True)) == []


def test_no_import_cycle_even_counting_type_only_imports():
    assert cycles(import_graph(type_only=True)) == []


def test_the_layer_check_finds_an_upward_import():
    graph = {"federated.algorithms.base": {"federated.execution.frozen_models"}}
    assert upward_imports(graph) == [
        "federated.algorithms.base -> federated.execution.frozen_models"
    ]
