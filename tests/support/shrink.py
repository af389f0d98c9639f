"""Shrinking a failing random model to a minimal one, kept as a regression case (issue 29).

:func:`shrink` keeps a model failing while it removes what the failure does not need: first
every graph output but one (and the nodes only it needed), then node by node, a node whose
outputs can be given as graph inputs instead (fed the values the node made: our reference
run's, else onnxruntime's, else the ReferenceEvaluator's), until nothing more can go.
:func:`save` writes a shrunk model as ``NAME.onnx`` + ``NAME.npz`` (its feeds) into
``tests/fuzz_regressions/`` and records it in that folder's ``index.json`` (op, cause, how it
was found); ``tests/test_fuzz_regressions.py`` checks every case there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

REGRESSIONS = Path(__file__).resolve().parents[1] / "fuzz_regressions"


def prune(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` without the nodes no graph output needs and the inputs and initializers nothing reads."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    g = m2.graph
    need = {o.name for o in g.output}
    keep = []
    for n in reversed(list(g.node)):
        if any(o in need for o in n.output if o):
            keep.append(n)
            need.update(x for x in n.input if x)
    del g.node[:]
    g.node.extend(reversed(keep))
    ins = [vi for vi in g.input if vi.name in need]
    del g.input[:]
    g.input.extend(ins)
    inits = [t for t in g.initializer if t.name in need]
    del g.initializer[:]
    g.initializer.extend(inits)
    return m2


def values_of(m: onnx.ModelProto, feeds: dict) -> dict:
    """Every value ``m`` computes on ``feeds`` (ours where we run it, else the oracles')."""
    vals = dict(feeds)
    vals.update({t.name: numpy_helper.to_array(t) for t in m.graph.initializer})
    try:
        import hetero_explore as he
        g = he.load_model(m, fold_constants=False, optimize=False)
        vals.update(he.execute_reference(g, "cpu", feeds, keep_intermediates=True).intermediates or {})
    except Exception:
        pass
    missing = [o for n in m.graph.node for o in n.output if o and o not in vals]
    if missing:
        from .diffcheck import run_ort, run_refev
        m2 = onnx.ModelProto()
        m2.CopyFrom(m)
        del m2.graph.output[:]
        m2.graph.output.extend(helper.make_tensor_value_info(o, 0, None) for o in missing)
        got = run_ort(m2, feeds) or run_refev(m2, feeds) or {}
        vals.update({k: np.asarray(v) for k, v in got.items()})
    return vals


def cut(m: onnx.ModelProto, feeds: dict, index: int, vals: dict):
    """``m`` with node ``index`` removed and its outputs made graph inputs fed ``vals`` (None
    when a value is unknown)."""
    node = m.graph.node[index]
    outs = [o for o in node.output if o]
    if any(o not in vals for o in outs):
        return None
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    del m2.graph.node[index]
    f2 = dict(feeds)
    for o in outs:
        a = np.asarray(vals[o])
        m2.graph.input.append(helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
        f2[o] = a
    outputs = [vi for vi in m2.graph.output if vi.name not in outs]
    if not outputs:
        return None
    del m2.graph.output[:]
    m2.graph.output.extend(outputs)
    m2 = prune(m2)
    return m2, {k: v for k, v in f2.items() if k in {vi.name for vi in m2.graph.input}}


def shrink(m: onnx.ModelProto, feeds: dict, fails: Callable[[onnx.ModelProto, dict], bool],
           max_tries: int = 400) -> tuple[onnx.ModelProto, dict]:
    """The smallest model found that still ``fails`` (see the module docs)."""
    tries = 0
    for vi in list(m.graph.output):   # one output
        m2 = onnx.ModelProto()
        m2.CopyFrom(m)
        del m2.graph.output[:]
        m2.graph.output.append(vi)
        m2 = prune(m2)
        f2 = {k: v for k, v in feeds.items() if k in {x.name for x in m2.graph.input}}
        tries += 1
        if len(m2.graph.node) < len(m.graph.node) and fails(m2, f2):
            m, feeds = m2, f2
            break
    changed = True
    while changed and tries < max_tries:
        changed = False
        for i in range(len(m.graph.node)):   # the outputs of an earlier node as the only outputs
            got = truncate(m, feeds, i)
            if got is None:
                continue
            tries += 1
            if fails(*got):
                m, feeds = got
                changed = True
                break
        if changed:
            continue
        vals = values_of(m, feeds)
        for i in range(len(m.graph.node) - 1, -1, -1):   # a node's outputs fed as graph inputs
            got = cut(m, feeds, i, vals)
            if got is None:
                continue
            tries += 1
            if fails(*got):
                m, feeds = got
                changed = True
                break
            if tries >= max_tries:
                break
    return m, feeds


def truncate(m: onnx.ModelProto, feeds: dict, index: int):
    """``m`` computing only node ``index``'s outputs (and what they need); None when that is all of ``m``."""
    node = m.graph.node[index]
    outs = [o for o in node.output if o]
    if {vi.name for vi in m.graph.output} == set(outs) or index == len(m.graph.node) - 1:
        return None
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    del m2.graph.output[:]
    m2.graph.output.extend(helper.make_tensor_value_info(o, 0, None) for o in outs)
    inferred = onnx.shape_inference.infer_shapes(m2)
    types = {vi.name: vi.type for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for vi in m2.graph.output:
        if vi.name in types:
            vi.type.CopyFrom(types[vi.name])
    m2 = prune(m2)
    return m2, {k: v for k, v in feeds.items() if k in {x.name for x in m2.graph.input}}


def save(name: str, m: onnx.ModelProto, feeds: dict, meta: dict, folder: Path | None = None) -> Path:
    """Write the regression case ``name`` (model, feeds, an entry in ``index.json``)."""
    folder = REGRESSIONS if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(folder / f"{name}.onnx"))
    np.savez(folder / f"{name}.npz", **feeds)
    idx_path = folder / "index.json"
    idx = json.loads(idx_path.read_text()) if idx_path.exists() else {}
    idx[name] = meta
    idx_path.write_text(json.dumps(idx, indent=1, sort_keys=True) + "\n")
    return folder / f"{name}.onnx"


def load(name: str, folder: Path | None = None) -> tuple[onnx.ModelProto, dict]:
    folder = REGRESSIONS if folder is None else Path(folder)
    m = onnx.load(str(folder / f"{name}.onnx"))
    with np.load(folder / f"{name}.npz") as z:
        feeds = {k: z[k] for k in z.files}
    return m, feeds


def shrink_and_save(seed: int, category: str, info: dict, *, max_nodes: int, min_nodes: int, cuda: bool,
                    masks: int, save: str | None) -> str:
    """Shrink the failing model of ``seed`` (``category`` from the pool) and save it under
    ``save`` (a folder), named after the op and the seed. Crashes and hangs are checked in a
    child process, the other failures here."""
    from .diffcheck import check, make
    m, feeds = make(seed, max_nodes, min_nodes)

    if category in ("crash", "hang"):
        def fails(mm, ff):
            return _in_child(mm, ff, cuda, masks) == category
    else:
        def fails(mm, ff):
            try:
                return check(mm, ff, seed=seed, cuda=cuda, masks=masks)[0] == category
            except Exception:
                return False
    small, f = shrink(m, feeds, fails)
    ops = "-".join(dict.fromkeys(n.op_type for n in small.graph.node)) or "empty"
    name = f"{ops[:60]}-{seed}"
    if save:
        save_to = Path(save)
        globals()["save"](name, small, f, {"op": info.get("op"), "category": category, "seed": seed,
                                          "max_nodes": max_nodes, "nodes": len(small.graph.node),
                                          "detail": str(info.get("detail"))[:500], "cause": "(to be written)"},
                          save_to)
    return f"{name}: {len(small.graph.node)} node(s) ({ops})"


def _in_child(m, feeds, cuda, masks) -> str:
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import fuzz_harness as F
    res = F.run_cases([F.Case("diffmodel", "shrink", (m.SerializeToString(), feeds, cuda, masks))], workers=1,
                      timeout=120)
    return res[0].category
