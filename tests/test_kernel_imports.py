"""Inside the kernels layer, imports form no cycle, counting imports inside functions too, and
the op modules never import the modules that register target-specific rules (the CPU fast
paths import the op modules, JAX-style; ``kernels/overrides.py`` holds the rules by key).

Read from the source with :mod:`ast` (nothing is imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hetero_explore"
KERNELS = PKG / "kernels"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in KERNELS.rglob("*.py")}


def _resolve(mod: str, path: Path, node) -> list[str]:
    """The kernel modules an import statement names (a package's submodule when it names one)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        base = (".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
                if node.level else (node.module or ""))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    out = []
    for n in names:
        while n and n not in MODULES:      # `import a.b.c` imports a.b.c; keep the deepest module known
            n = n.rpartition(".")[0]
        if n:
            out.append(n)
    return out


def import_graph() -> dict[str, set[str]]:
    """Kernel module -> the kernel modules it imports (module level and inside functions)."""
    graph = {m: set() for m in MODULES}
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[mod].update(t for t in _resolve(mod, path, node) if t != mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, plus self-loops (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_imports():
    g = import_graph()
    assert "hetero_explore.kernels.nn" in g["hetero_explore.kernels.cpu_fast.gemm"]          # module level
    assert "hetero_explore.kernels.cpu_fast" in g["hetero_explore.kernels.registry"]        # inside a function


def test_the_cycle_check_can_fail():
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(planted) == [["a", "b", "c"]]


def test_no_import_cycles_inside_kernels():
    # a package's __init__ that imports its submodules counts as well: none of them imports
    # the package back
    assert cycles(import_graph()) == []


def test_op_modules_never_import_the_fast_paths():
    """Only the registry (which registers the rules) imports ``kernels.cpu_fast``; the op
    modules ask their target for registered rules (``Target.launch``, ``Target.prepared``)."""
    pkg = "hetero_explore.kernels.cpu_fast"
    fast = {m for m in MODULES if m == pkg or m.startswith(pkg + ".")}
    importers = {a for a, bs in import_graph().items() if bs & fast and a not in fast}
    assert importers == {"hetero_explore.kernels.registry"}, importers


def test_no_kernel_module_over_1200_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 1200}
    assert not long, f"split these by sub-family: {long}"


def test_the_cache_stamp_covers_every_kernel_source_but_host():
    """numba's cache of the kernels is stamped with the hash of every kernel source: the
    modules of kernels/ and of its sub-packages (cpu_fast/), not the host-value ops."""
    from hetero_explore.kernels import target
    names = {p.relative_to(KERNELS).as_posix() for p in target.kernel_sources()}
    assert {"nn.py", "pmath.py", "cpu_fast/gemm.py", "cpu_fast/llvm.py"} <= names
    assert not any(n.startswith("host/") for n in names)
    assert names == {p.relative_to(KERNELS).as_posix() for p in KERNELS.rglob("*.py")
                     if p.relative_to(KERNELS).parts[0] != "host"}
    assert target.is_kernel_source(KERNELS / "cpu_fast" / "conv.py")
    assert not target.is_kernel_source(KERNELS / "host" / "sequences.py")
    assert not target.is_kernel_source(Path(__file__))
