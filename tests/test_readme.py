"""The documentation says what the code does.

* The provider figures in ``docs/providers.md`` (op types, claimed conformance cases) are those of the
  providers' op tables (``support_df()``) and of the conformance manifest.
* ``docs/layout.md`` lists every module of the package, by layer and sub-package, with the first
  line of its docstring: generated from the source, so it cannot omit one. After adding,
  moving or re-documenting a module: ``WRITE_LAYOUT=1 python -m pytest tests/test_readme.py``.
* No module of the package is longer than :data:`MAX_LINES` lines (a family module that grows
  past it splits by sub-family).
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest

from test_import_layers import LAYERS, PKG, layer_of, modules

ROOT = PKG.parent
PROVIDERS_PAGE = ROOT / "docs" / "providers.md"
LAYOUT = ROOT / "docs" / "layout.md"
MANIFEST = Path(__file__).with_name("conformance_manifest.json")
#: the most lines a module of the package may have
MAX_LINES = 1200


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _row(name: str) -> str:
    line = next((ln for ln in PROVIDERS_PAGE.read_text(encoding="utf-8").splitlines() if ln.startswith(f"| `{name}` |")), None)
    assert line is not None, f"docs/providers.md's provider table has no row for `{name}`"
    return line


def _standard(table) -> int:
    """How many of onnx's own default-domain op types the op table covers (onnxruntime's default-domain
    additions, such as SimplifiedLayerNormalization, are counted with its contrib ops, not here)."""
    from hetero_explore.load.ort_schemas import ORT_DEFAULT_DOMAIN_OPS
    ops = set(table[table.domain == "ai.onnx"].op_type) - set(ORT_DEFAULT_DOMAIN_OPS)
    return len(ops)


def test_provider_figures_are_the_op_tables_and_the_manifest():
    from hetero_explore.analysis.conformance import folder_cases, load_folder_manifest, node_cases
    from hetero_explore.providers.cpu import NumbaCPUProvider
    from hetero_explore.providers.cuda import NumbaCUDAProvider

    doc = json.loads(MANIFEST.read_text())["providers"]
    folders = load_folder_manifest(MANIFEST)
    cpu, cuda = NumbaCPUProvider().support_df(), NumbaCUDAProvider().support_df()

    m = re.search(r"([\d,]+) standard op types .*?all ([\d,]+) `ai\.onnx\.ml` ones and ([\d,]+) of onnxruntime's "
                  r"`com\.microsoft` ones.*?, claiming ([\d,]+) of onnx's "
                  r"([\d,]+) backend node cases .*?and ([\d,]+) of the ([\d,]+) cases of the on-disk backend folders",
                  _row("cpu"))
    assert m, "docs/providers.md's `cpu` row no longer reads as this test expects: update both"
    want = (_standard(cpu), cpu[cpu.domain == "ai.onnx.ml"].op_type.nunique(),
            cpu[cpu.domain == "com.microsoft"].op_type.nunique(),
            len(doc["cpu"]["claimed"]), len(node_cases()), folders["cpu"]["claimed"].__len__(), len(folder_cases()))
    assert tuple(map(_number, m.groups())) == want, f"docs `cpu` row says {m.groups()}, the code {want}"

    m = re.search(r"([\d,]+) standard op types, claiming ([\d,]+) node cases in the simulator \(([\d,]+) more "
                  r"skipped by its size cap\)", _row("cuda"))
    assert m, "docs/providers.md's `cuda` row no longer reads as this test expects: update both"
    want = (_standard(cuda), len(doc["cuda-simulator"]["claimed"]),
            len(doc["cuda-simulator"]["size_capped"]))
    assert tuple(map(_number, m.groups())) == want, f"docs `cuda` row says {m.groups()}, the code {want}"


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ")
    first = re.sub(r"\s+", " ", first).strip()
    return first or "(no docstring)"


def layout_text() -> str:
    """``docs/layout.md``, generated from the package's modules and the layer test's layers."""
    mods = modules(PKG)
    lines = ["# Package layout", "",
             "Generated from the modules' docstrings by `tests/test_readme.py` (which fails when this page "
             "differs from the source; `WRITE_LAYOUT=1 python -m pytest tests/test_readme.py` rewrites it).",
             "Layers point one way, bottom first; a module imports its own layer and those below "
             "(`tests/test_import_layers.py`).", ""]
    front = mods.pop("hetero_explore")
    lines += ["## The front door", "", f"- `hetero_explore/__init__.py`: {_summary(front)}", ""]
    for i, (name, members) in enumerate(LAYERS):
        inside = sorted(m for m in mods if layer_of(m) == i)
        if not inside:
            continue
        lines += [f"## {i + 1}. {name}", ""]
        for m in inside:
            path = mods[m]
            rel = path.relative_to(ROOT).as_posix()
            lines.append(f"- `{rel}`: {_summary(path)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def test_docs_layout_lists_every_module():
    text = layout_text()
    if os.environ.get("WRITE_LAYOUT") == "1":
        LAYOUT.parent.mkdir(exist_ok=True)
        LAYOUT.write_text(text, encoding="utf-8")
    assert LAYOUT.exists(), "docs/layout.md is missing: WRITE_LAYOUT=1 python -m pytest tests/test_readme.py"
    assert LAYOUT.read_text(encoding="utf-8") == text, (
        "docs/layout.md differs from the package's modules: WRITE_LAYOUT=1 python -m pytest tests/test_readme.py")
    for m, path in modules(PKG).items():
        assert f"`{path.relative_to(ROOT).as_posix()}`" in text, m


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: p.relative_to(PKG).as_posix())
def test_no_module_is_longer_than_the_limit(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(ROOT)} has {n} lines (limit {MAX_LINES}): split it by sub-family"
