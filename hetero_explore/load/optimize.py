"""Load-time graph optimisation (onnxruntime's "basic" level, in part): ONNX graph → ONNX graph.

:func:`hetero_explore.load.loader.load_model` runs :func:`optimize_model` after shape
inference and constant folding, unless ``optimize=False``. The rewrites:

* **Identity elimination**: ``Y = Identity(X)``; the consumers of ``Y`` read ``X``.
  When ``Y`` is a graph output, ``X``'s producer writes ``Y`` instead (so graph
  output names never change); an Identity from a graph input or an initializer
  to a graph output, or whose input is itself a graph output, stays.
* **Dropout elimination**: an inference Dropout (opset >= 7; ``training_mode``
  absent or a constant False; the ``mask`` output absent or unused) is an
  Identity and is removed the same way.
* **Conv + BatchNormalization folding**: ``BN(Conv(x, W, B))`` with W, B and
  BN's scale/bias/mean/var initializers, the Conv output read by that BN only,
  becomes one ``Conv(x, W', B')`` with ``f = scale / sqrt(var + eps)``,
  ``W' = W * f`` (per output channel) and ``B' = (B - mean) * f + bias``
  (computed in float64, rounded once to the weights' dtype). The Conv keeps its
  name and writes the BN's output. This changes the rounding (as onnxruntime's
  fusion does): results stay within onnxruntime's tolerance, not bitwise equal
  to the unfolded graph.
* **MatMul + Add → Gemm**: ``Add(MatMul(A, B), bias)`` with A 2-D, B a 2-D
  float32 initializer, bias a float32 initializer of shape ``[N]`` or
  ``[1, N]`` without NaN, the MatMul output read by that Add only, becomes
  ``Gemm(A, B, bias)`` (alpha = beta = 1). This one is **bitwise exact** for
  this project's kernels: Gemm's kernel finishes the same k-ascending dot
  product as MatMul's and then adds ``1 * bias`` once (``1 * x`` is exact), as
  Add does (``tests/test_optimize.py`` proves it on CPU and the CUDA simulator).

Both reference and heterogeneous runs execute the optimised graph, so byte
identity between them is untouched. Nothing inside control-flow subgraphs is
rewritten, and no value a subgraph reads from the outer scope is renamed or
removed. Every rewrite is recorded (:class:`Rewrite`) and the loader puts the
records on ``Graph.optimizations``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..ir.graph import outer_names, subgraph_attrs

#: rule id → how the one-line summary says it ("12 Conv+BN folded")
RULES = {
    "conv_bn": "Conv+BN folded",
    "identity": "Identity removed",
    "dropout": "Dropout removed",
    "matmul_add_gemm": "MatMul+Add → Gemm",
}

#: rule id → the op types whose nodes it removes
REMOVED_OPS = {"conv_bn": ("BatchNormalization",), "identity": ("Identity",), "dropout": ("Dropout",),
               "matmul_add_gemm": ("MatMul", "Add")}

_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16)


@dataclass
class Rewrite:
    """One applied rewrite."""

    rule: str
    """A key of :data:`RULES`."""
    node: str
    """The node that stands for the result (the folded Conv, the new Gemm, the removed Identity)."""
    removed: list[str] = field(default_factory=list)
    """Names (labels) of the nodes removed."""
    created: list[str] = field(default_factory=list)
    """Names (labels) of the nodes created."""
    detail: str = ""

    def to_dict(self) -> dict:
        return {"rule": self.rule, "node": self.node, "removed": list(self.removed),
                "created": list(self.created), "detail": self.detail}


def summary_text(records) -> str:
    """``"optimised: 12 Conv+BN folded, 3 Identity removed"`` (``""`` when nothing was applied)."""
    counts: dict[str, int] = {}
    for r in records:
        rule = r["rule"] if isinstance(r, dict) else r.rule
        counts[rule] = counts.get(rule, 0) + 1
    if not counts:
        return ""
    return "optimised: " + ", ".join(f"{n} {RULES.get(rule, rule)}" for rule, n in counts.items())


def removed_op_types(records) -> set[str]:
    """Op types some of whose nodes the applied rewrites removed."""
    return {op for r in records for op in REMOVED_OPS.get(r["rule"] if isinstance(r, dict) else r.rule, ())}


def node_notes(records) -> dict[str, str]:
    """Node name → what the rewrites made of it ("folded bn1", "from fc, fc_add"), for the
    placement table's ``optimised`` column; nodes the rewrites did not touch are absent."""
    out: dict[str, str] = {}
    for r in records:
        r = r if isinstance(r, dict) else r.to_dict()
        if r["rule"] == "conv_bn":
            text = "folded " + ", ".join(r["removed"])
        elif r["rule"] == "matmul_add_gemm":
            text = "from " + ", ".join(r["removed"])
        else:
            continue  # the removed node has no row
        out[r["node"]] = f"{out[r['node']]}; {text}" if r["node"] in out else text
    return out


def _label(n: onnx.NodeProto) -> str:
    first = next((o for o in n.output if o), "?")
    return n.name or f"{n.op_type}:{first}"


def _opset(m: onnx.ModelProto) -> int:
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 0


class _State:
    """Producer/consumer maps over the main graph's nodes, kept up to date by the rules."""

    def __init__(self, m: onnx.ModelProto):
        g = m.graph
        self.m = m
        self.g = g
        self.nodes: list[onnx.NodeProto | None] = list(g.node)
        self.inits = {t.name: t for t in g.initializer}
        self.graph_inputs = {vi.name for vi in g.input}
        self.outputs = {o.name for o in g.output}
        self.types = {vi.name: vi.type for vi in list(g.input) + list(g.value_info) + list(g.output)}
        self.sub_reads: set[str] = set()
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        producer, consumers = self.producer, self.consumers
        for i, n in enumerate(self.nodes):
            for o in n.output:
                if o:
                    producer[o] = i
            ins = n.input
            for x in (ins if len(ins) < 2 else set(ins)):
                if x:
                    lst = consumers.get(x)
                    if lst is None:
                        consumers[x] = [i]
                    else:
                        lst.append(i)
            if n.attribute:
                for _, sg in subgraph_attrs(n):
                    self.sub_reads.update(outer_names(sg))
        self.dropped_values: set[str] = set()
        self.maybe_orphaned: set[str] = set()
        self.new_inits: list[onnx.TensorProto] = []
        self.names = set(self.producer) | set(self.inits) | self.graph_inputs | self.outputs

    # -- queries
    def live_consumers(self, name: str) -> list[int]:
        return [i for i in self.consumers.get(name, []) if self.nodes[i] is not None]

    def pinned(self, name: str) -> bool:
        """A value that must keep its name: a graph output or read by a subgraph."""
        return name in self.outputs or name in self.sub_reads

    def const(self, name: str) -> np.ndarray | None:
        t = self.inits.get(name)
        return None if t is None else numpy_helper.to_array(t)

    def elem_type(self, name: str) -> int:
        t = self.inits.get(name)
        if t is not None:
            return t.data_type
        tp = self.types.get(name)
        return tp.tensor_type.elem_type if tp is not None and tp.HasField("tensor_type") else 0

    def rank(self, name: str) -> int | None:
        t = self.inits.get(name)
        if t is not None:
            return len(t.dims)
        tp = self.types.get(name)
        if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
            return None
        return len(tp.tensor_type.shape.dim)

    def dims(self, name: str) -> list | None:
        t = self.inits.get(name)
        if t is not None:
            return [int(d) for d in t.dims]
        tp = self.types.get(name)
        if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
            return None
        return [int(d.dim_value) if d.HasField("dim_value") else None for d in tp.tensor_type.shape.dim]

    # -- edits
    def remove(self, i: int) -> None:
        n = self.nodes[i]
        self.nodes[i] = None
        for x in n.input:
            if x:
                self.maybe_orphaned.add(x)

    def rename_uses(self, old: str, new: str) -> None:
        """Every live node reading ``old`` reads ``new``."""
        for i in self.live_consumers(old):
            n = self.nodes[i]
            for k, x in enumerate(n.input):
                if x == old:
                    n.input[k] = new
            lst = self.consumers.setdefault(new, [])
            if i not in lst:
                lst.append(i)
        self.consumers[old] = []

    def rename_output(self, i: int, old: str, new: str) -> None:
        n = self.nodes[i]
        for k, o in enumerate(n.output):
            if o == old:
                n.output[k] = new
        self.producer.pop(old, None)
        self.producer[new] = i

    def add_init(self, base: str, arr: np.ndarray) -> str:
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        t = numpy_helper.from_array(arr, name)
        self.inits[name] = t
        self.new_inits.append(t)
        return name


# -- rules ---------------------------------------------------------------------------------------
def _dropout_is_identity(s: _State, n: onnx.NodeProto, opset: int) -> bool:
    if opset < 7:
        return False  # Dropout-1/6: is_test semantics; left to the kernels (which decline it)
    if len(n.input) > 2 and n.input[2]:
        t = s.const(n.input[2])
        if t is None or t.size != 1 or bool(t.reshape(-1)[0]):
            return False
    if len(n.output) > 1 and n.output[1]:
        mask = n.output[1]
        if s.pinned(mask) or s.live_consumers(mask):
            return False
    return True


def _eliminate_identities(s: _State, opset: int, out: list[Rewrite]) -> None:
    for i, n in enumerate(s.nodes):
        if n is None or n.domain not in ("", "ai.onnx") or not n.input or not n.output:
            continue
        if n.op_type == "Identity":
            rule = "identity"
        elif n.op_type == "Dropout" and _dropout_is_identity(s, n, opset):
            rule = "dropout"
        else:
            continue
        x, y = n.input[0], n.output[0]
        if not x or not y or y in s.sub_reads or x in s.sub_reads:
            continue
        label = _label(n)
        if y not in s.outputs:
            s.rename_uses(y, x)
            s.remove(i)
            s.dropped_values.add(y)
        else:
            p = s.producer.get(x)
            if p is None or s.nodes[p] is None or x in s.outputs or x in s.graph_inputs or x in s.inits:
                continue  # from a graph input / initializer / another output: it stays
            s.rename_uses(x, y)
            s.rename_output(p, x, y)
            s.remove(i)
            s.dropped_values.add(x)
        for extra in list(n.output)[1:]:
            if extra:
                s.dropped_values.add(extra)
        out.append(Rewrite(rule, label, removed=[label], detail=f"{y!r} now read from {x!r}"
                           if y not in s.outputs else f"{x!r}'s producer writes graph output {y!r}"))


def _fold_conv_bn(s: _State, opset: int, out: list[Rewrite]) -> None:
    if opset < 7:
        return  # BatchNormalization-1/6 (is_test, consumed_inputs): not folded
    for bi, bn in enumerate(s.nodes):
        if bn is None or bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx"):
            continue
        if len(bn.input) < 5 or not bn.input[0]:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in bn.attribute}
        if int(attrs.get("spatial", 1)) != 1 or int(attrs.get("training_mode", 0)) != 0:
            continue
        if any(o and (s.pinned(o) or s.live_consumers(o)) for o in list(bn.output)[1:]):
            continue
        x = bn.input[0]
        ci = s.producer.get(x)
        conv = s.nodes[ci] if ci is not None else None
        if conv is None or conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx"):
            continue
        if s.pinned(x) or s.live_consumers(x) != [bi] or x in bn.input[1:] or len(conv.output) != 1:
            continue
        if len(conv.input) < 2 or conv.input[1] not in s.inits:
            continue
        has_b = len(conv.input) > 2 and bool(conv.input[2])
        if has_b and conv.input[2] not in s.inits:
            continue
        if any(p not in s.inits for p in bn.input[1:5]):
            continue
        w_t = s.inits[conv.input[1]]
        dt = w_t.data_type
        if dt not in _FLOATS or len(w_t.dims) < 3:
            continue
        params = list(bn.input[1:5]) + ([conv.input[2]] if has_b else [])
        m_out = int(w_t.dims[0])
        if any(s.inits[p].data_type != dt or [int(d) for d in s.inits[p].dims] != [m_out] for p in params):
            continue
        w = s.const(conv.input[1]).astype(np.float64)
        scale, bias, mean, var = (s.const(p).astype(np.float64) for p in bn.input[1:5])
        b = s.const(conv.input[2]).astype(np.float64) if has_b else np.zeros(m_out)
        eps = float(attrs.get("epsilon", 1e-5))
        f = scale / np.sqrt(var + eps)
        npdt = helper.tensor_dtype_to_np_dtype(dt)
        w2 = (w * f.reshape((m_out,) + (1,) * (w.ndim - 1))).astype(npdt)
        b2 = ((b - mean) * f + bias).astype(npdt)
        wname = s.add_init(f"{conv.input[1]}_bn_folded", w2)
        bname = s.add_init(f"{conv.input[2] if has_b else conv.input[1] + '_bias'}_bn_folded", b2)
        y = bn.output[0]
        label_bn = _label(bn)
        for p in list(conv.input[1:3]):
            if p:
                s.maybe_orphaned.add(p)
        del conv.input[1:]
        conv.input.extend([wname, bname])
        s.remove(bi)
        s.rename_output(ci, x, y)
        s.dropped_values.add(x)
        out.append(Rewrite("conv_bn", _label(conv), removed=[label_bn],
                           detail=f"BatchNormalization {label_bn!r} folded into the Conv's weights and bias"))


def _matmul_add_to_gemm(s: _State, opset: int, out: list[Rewrite]) -> None:
    if opset < 7:
        return  # Gemm-6 and older: the broadcast attribute
    f32 = onnx.TensorProto.FLOAT
    for ai, add in enumerate(s.nodes):
        if add is None or add.op_type != "Add" or add.domain not in ("", "ai.onnx") or len(add.input) != 2:
            continue
        for j in (0, 1):
            x, c = add.input[j], add.input[1 - j]
            mi = s.producer.get(x)
            mm = s.nodes[mi] if mi is not None else None
            if mm is None or mm.op_type != "MatMul" or mm.domain not in ("", "ai.onnx") or x == c:
                continue
            if s.pinned(x) or s.live_consumers(x) != [ai]:
                continue
            a, b = mm.input[0], mm.input[1]
            if b not in s.inits or c not in s.inits or s.rank(a) != 2:
                continue
            if s.elem_type(a) != f32 or s.inits[b].data_type != f32 or s.inits[c].data_type != f32:
                continue
            bd = [int(d) for d in s.inits[b].dims]
            cd = [int(d) for d in s.inits[c].dims]
            if len(bd) != 2 or cd not in ([bd[1]], [1, bd[1]]):
                continue
            if np.isnan(s.const(c)).any():
                continue  # two NaN operands: which payload survives may depend on the operand order
            ad = s.dims(a)
            yd = s.dims(add.output[0])
            if ad is None or ad[1] not in (None, bd[0]) or yd is None or len(yd) != 2:
                continue
            gemm = helper.make_node("Gemm", [a, b, c], [add.output[0]], name=mm.name or add.name)
            removed = [_label(mm), _label(add)]
            s.nodes[mi] = gemm          # in the MatMul's place: its inputs are ready there
            for k in (a, b):
                lst = s.consumers.setdefault(k, [])
                if mi not in lst:
                    lst.append(mi)
            s.consumers.setdefault(c, []).append(mi)
            s.remove(ai)
            s.producer[add.output[0]] = mi
            s.dropped_values.add(x)
            out.append(Rewrite("matmul_add_gemm", _label(gemm), removed=removed, created=[_label(gemm)],
                               detail=f"Gemm({a}, {b}, {c}); bitwise the MatMul then Add"))
            break


# -- the pass ------------------------------------------------------------------------------------
def optimize_model(m: onnx.ModelProto) -> tuple[onnx.ModelProto, list[Rewrite]]:
    """Apply the rewrites to ``m`` (an inferred, maybe folded model) in place; the model and
    the records of what was applied (empty when nothing matched: the model is unchanged)."""
    opset = _opset(m)
    ops = {n.op_type for n in m.graph.node}
    if not (ops & {"Identity", "Dropout", "BatchNormalization"} or {"MatMul", "Add"} <= ops):
        return m, []          # nothing any rule could match: skip building the maps
    s = _State(m)
    records: list[Rewrite] = []
    _eliminate_identities(s, opset, records)
    _fold_conv_bn(s, opset, records)
    _matmul_add_to_gemm(s, opset, records)
    if not records:
        return m, records
    g = m.graph
    kept = [n for n in s.nodes if n is not None]
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(s.new_inits)
    if m.ir_version < 4:  # IR < 4: every initializer is also a graph input
        g.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in s.new_inits)
    # initializers this pass left unused (the unfolded weights, ...) go; others are not touched
    used: set[str] = set(s.outputs) | s.sub_reads
    for n in kept:
        used.update(x for x in n.input if x)
    orphans = {x for x in s.maybe_orphaned if x in s.inits and x not in used}
    if orphans:
        keep = [t for t in g.initializer if t.name not in orphans]
        del g.initializer[:]
        g.initializer.extend(keep)
        if m.ir_version < 4:
            keep_in = [vi for vi in g.input if vi.name not in orphans]
            del g.input[:]
            g.input.extend(keep_in)
    gone = s.dropped_values | orphans
    vis = [vi for vi in g.value_info if vi.name not in gone]
    del g.value_info[:]
    g.value_info.extend(vis)
    return m, records
