"""The house (docs/architecture.md): a small package root, packages by concern, layers that
point down only, no import circle, no module over 500 lines, and the matrix selecting the
same tests as before the move (tests/matrix_selection.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests import matrix_selection

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("conformance", "oracles", "impls")
MAX_LINES = 500
MAX_ROOT_MODULES = 12

# what each layer may import (besides itself and the standard/third-party libraries):
# plugin and cli on top; run (the session) uses report; areas use harness, stats,
# processes, oracles and the shipped impls; oracles import nothing of ours
ALLOWED = {
    "conformance": set(),  # the package's __init__: version constants only
    "plugin": {"conformance", "harness", "run", "report"},
    "cli": {"conformance", "harness", "processes", "report", "run"},
    "run": {"harness", "processes", "report"},
    "report": {"conformance", "harness"},
    "areas": {"harness", "stats", "processes", "oracles", "impls"},
    "processes": {"harness"},
    "stats": {"harness", "oracles"},
    "harness": set(),
    "oracles": set(),
    "impls": {"oracles"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _resolve(target: str) -> str | None:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def imports_of(name: str) -> set[str]:
    """Every module of ours that ``name`` imports, at module level or inside a function."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            module = _resolve(target)
            if module and module != name:
                found.add(module)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def layer(name: str) -> str:
    parts = name.split(".")
    if parts[0] != "conformance" or len(parts) == 1 or parts[1] == "_version":
        return parts[0]  # _version.py: setuptools-scm's constants, part of the root
    return parts[1]


def test_no_import_circle():
    """Tarjan's strongly connected components over the import graph (lazy imports too)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not circles, circles


def test_layers_point_down():
    wrong = []
    for name, targets in GRAPH.items():
        mine = layer(name)
        for target in targets:
            other = layer(target)
            if other == mine:
                if mine == "areas" and name.split(".")[2] != target.split(".")[2]:
                    wrong.append(f"{name} -> {target} (one area imports another)")
                continue
            if other not in ALLOWED[mine]:
                wrong.append(f"{name} -> {target} ({mine} may import {sorted(ALLOWED[mine])})")
    assert not wrong, "\n".join(wrong)


def test_private_modules_stay_in_their_package():
    wrong = [f"{name} -> {target}" for name, targets in GRAPH.items() for target in targets
             if target.rpartition(".")[2].startswith("_") and not target.endswith("__main__")
             and target.rpartition(".")[0] != name.rpartition(".")[0]
             and not name.startswith(target.rpartition(".")[0])]
    assert not wrong, wrong


def test_small_root_and_small_modules():
    root = sorted(p.name for p in (ROOT / "conformance").glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    # the project's tests and fault catalogues too (tests/, tests/planted/)
    tests = [*(ROOT / "tests").glob("*.py"), *(ROOT / "tests" / "planted").glob("*.py")]
    long = {str(p.relative_to(ROOT)): n for p in [*MODULES.values(), *tests]
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_every_area_lives_in_areas():
    """A test module outside conformance/areas would escape the area scheduling and the
    matrix's documentation of where things are."""
    stray = [str(p.relative_to(ROOT)) for p in (ROOT / "conformance").rglob("test_*.py")
             if "areas" not in p.relative_to(ROOT / "conformance").parts[:1]]
    assert not stray, stray


def test_matrix_selects_what_it_selected_before_the_move():
    snapshot = json.loads(matrix_selection.SNAPSHOT.read_text())
    problems = matrix_selection.differences(snapshot, matrix_selection.selection())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ["conformance.harness.registry", "conformance.plugin"])
def test_the_graph_sees_imports(name):
    """The checks above are not vacuous: the graph has the edges we know of."""
    assert GRAPH[name], name
