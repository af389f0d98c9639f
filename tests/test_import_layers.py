"""Layers point one way: ir → loader → providers → planner → execution → compare → explorer →
views/CLI. A module may import its own layer and the layers below it; an import of a higher
layer (module-level or inside a function) fails this test unless it is one of the recorded
exceptions below, and so does an import cycle among module-level imports.

Read from the source with :mod:`ast` (nothing is imported), so the test is quick and sees
the imports of code paths no other test runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hetero_explore"

#: layer name → the top-level modules / subpackages of ``hetero_explore`` in it, bottom first
LAYERS = [
    ("ir", {"ir", "data"}),  # data: bundled and generated models (onnx only)
    ("kernels", {"kernels"}),
    ("providers", {"providers"}),
    ("runner", {"runner"}),
    ("load", {"load"}),
    ("planner", {"planner"}),
    ("execution", {"execution"}),
    ("analysis", {"analysis"}),
    ("session", {"session"}),
    ("views", {"viz", "cli", "__main__"}),
]

#: upward imports that exist today, each inside a function (imported only when called), with
#: why; remove an entry when its import goes (the test fails on entries that no longer occur)
KNOWN_UPWARD: dict = {}


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _targets(mod: str, path: Path, node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    if node.level:
        base = ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _imports():
    """(importer, imported, at module level?, line) for every import of a package module."""
    out = set()
    for mod, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = set(map(id, tree.body))
        for stmt in tree.body:  # module level includes `if`/`try` blocks at the top
            if isinstance(stmt, (ast.If, ast.Try)):
                top.update(id(n) for n in ast.walk(stmt))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(mod, path, node):
                    if t == "hetero_explore" or t.startswith("hetero_explore."):
                        out.add((mod, t, id(node) in top, node.lineno))
    return sorted(out)


def _layer(mod: str) -> int:
    if mod == "hetero_explore":
        return len(LAYERS)  # the package's front door re-exports every layer
    sub = mod.split(".")[1]
    for i, (_name, members) in enumerate(LAYERS):
        if sub in members:
            return i
    raise AssertionError(f"module {mod} is in no layer: add {sub!r} to LAYERS in {Path(__file__).name}")


def test_every_module_has_a_layer():
    for m in MODULES:
        _layer(m)


def test_no_upward_imports():
    found, problems = set(), []
    for a, b, top, line in _imports():
        la, lb = _layer(a), _layer(b)
        if lb <= la:
            continue
        if (a, b) in KNOWN_UPWARD and not top:
            found.add((a, b))
            continue
        problems.append(f"{MODULES[a].relative_to(PKG.parent)}:{line}: {a} ({LAYERS[la][0]}) imports "
                        f"{b} ({LAYERS[lb][0] if lb < len(LAYERS) else 'the package front door'})"
                        + (" at module level" if top else ""))
    assert not problems, ("imports that point up the layers " + " → ".join(n for n, _ in LAYERS)
                          + ":\n  " + "\n  ".join(problems))
    gone = set(KNOWN_UPWARD) - found
    assert not gone, f"these recorded upward imports are gone: remove them from KNOWN_UPWARD: {sorted(gone)}"


def test_no_import_cycles_at_module_level():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for a, b, top, _line in _imports():
        if top and a != b and b in graph:
            graph[a].add(b)
    # Tarjan's strongly connected components
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    # a package's __init__ importing its own submodules, which import names back from it, is
    # Python's usual package layout: only cycles that are not inside one package fail
    def one_package(comp):
        pkgs = {m for m in comp if MODULES[m].name == "__init__.py"}
        return any(all(m == p or m.startswith(p + ".") for m in comp) for p in pkgs)

    bad = [c for c in cycles if not one_package(c)]
    assert not bad, f"module-level import cycles: {bad}"


def test_the_layer_map_sees_imports():
    """The analysis itself: it finds a known import (so an empty result cannot pass silently)."""
    edges = {(a, b) for a, b, _top, _line in _imports()}
    assert ("hetero_explore.execution.executor", "hetero_explore.planner") in edges or \
        any(a == "hetero_explore.execution.executor" and b.startswith("hetero_explore.planner") for a, b in edges)
    assert ("hetero_explore.viz", "hetero_explore.viz.widget") in edges  # a function-level import
