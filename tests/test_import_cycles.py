"""No import cycles among the modules of asynciocomm, nor among the benchmark's.

A cycle makes the order of imports matter and hides which module depends on which.
Every import counts, those inside functions too (a deferred import is still a
dependency). The modules are read with :mod:`ast`, not imported. A package's
``__init__`` importing its own submodules is not a dependency of theirs on it, so
the edges from a package to what it contains are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: installed name -> folder in the checkout
PACKAGES = {"asynciocomm": ROOT / "asynciocomm",
            "asynciocomm_bench": ROOT / "bench" / "asynciocomm_bench"}
#: The cycles there are, exactly: none.
KNOWN: dict[str, list[list[str]]] = {"asynciocomm": [], "asynciocomm_bench": []}


def modules(name: str, folder: Path) -> dict[str, Path]:
    """Every module of the package ``name`` kept in ``folder``, by dotted name."""
    found = {}
    for path in folder.rglob("*.py"):
        rel = path.relative_to(folder).with_suffix("")
        if not (path.parent / "__init__.py").is_file() or rel.name.startswith("_c"):
            continue  # a data folder, or a build-time copy
        parts = [name, *rel.parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute name of a ``from ... import`` in ``module`` (at ``path``)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if path.name == "__init__.py" else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` imports, anywhere in its file."""
    out: set[str] = set()

    def add(name: str) -> None:
        while name and name not in known:  # a name in a module: the module
            name = name.rpartition(".")[0]
        if name:
            out.add(name)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base)
    # a package importing what it contains, and a module its own package's
    # __init__ (run before it anyway), are not dependencies between modules
    return {m for m in out if m != module and not m.startswith(module + ".")
            and not module.startswith(m + ".")}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def graph_of(name: str) -> dict[str, set[str]]:
    mods = modules(name, PACKAGES[name])
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_no_import_cycles(name: str) -> None:
    graph = graph_of(name)
    assert len(graph) > 10
    assert cycles(graph) == KNOWN[name]


def test_a_cycle_is_found() -> None:
    """The check can fail: a cycle of three, and one through a deferred import."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = graph_of("asynciocomm_bench")
    graph["asynciocomm_bench.common.stats"].add("asynciocomm_bench.suites")
    assert cycles(graph)


def test_imports_inside_functions_and_relative_ones_count(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import g\n")
    (pkg / "b.py").write_text("from .a import f\n")
    mods = modules("pkg", pkg)
    graph = {m: imports(m, p, set(mods)) for m, p in mods.items()}
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
