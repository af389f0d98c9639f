"""Constant folding at load time, computed by the CPU provider's own kernels.

Every node whose inputs are all constant (initializers, or outputs of nodes
folded before it) is run once on a :class:`~hetero_explore.providers.cpu.NumbaCPUProvider`
and replaced by an initializer holding its result, so that a folded value is
bitwise what the CPU provider computes at run time. ``Shape`` and ``Size`` of a
value whose shape is static fold from the shape alone.

Sizes are checked before anything is computed: a node whose outputs would take
more than what is left of ``limit_bytes`` is left unfolded (and said so in
``FoldResult.skipped``), never allocated. A node the CPU provider does not claim
(an op or opset it lacks) is left unfolded too: there is no silent fallback to
another evaluator. After each round shape inference runs again, so that shapes
depending on the new constants (Reshape targets, ...) become known and the next
round can fold further.

This module sits above the providers (ir → loader → providers → fold); the
public :func:`hetero_explore.load.loader.load_model` calls it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..ir.errors import KernelError, ModelLoadError
from ..ir.graph import Graph, build_graph, shape_is_static
from ..runner.core import NodeRunner
from .infer import complete_op_shapes, infer_shapes
from .options import DEFAULT_FOLD_LIMIT_BYTES
from .passes import LoadPass
from ..ir.context import node_context, present_outputs
from ..providers.cpu import NumbaCPUProvider

#: ops never folded although their inputs may all be constant: their value changes per run
NONDETERMINISTIC_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                  "Multinomial", "Bernoulli"})


@dataclass
class FoldResult:
    """What :func:`fold_model` did."""

    model: onnx.ModelProto
    """The folded, re-inferred model."""
    folded: list[str] = field(default_factory=list)
    """Names of the folded nodes, in the order they were folded."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Node name → why a node with all-constant inputs was left unfolded."""
    folded_bytes: int = 0
    """Bytes of all values folding created."""


def _label(node) -> str:
    # stable across rounds (an unnamed node's IR name holds its id, which folding changes)
    first = next((o for o in node.outputs if o), "?")
    return node.proto.name or f"{node.op_type}:{first}"


def _has_subgraph(proto: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in proto.attribute)


def _names_used(graph: onnx.GraphProto, out: set) -> None:
    """Every value name read in ``graph`` and its subgraphs (outer-scope captures included)."""
    for n in graph.node:
        out.update(i for i in n.input if i)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _names_used(a.g, out)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    _names_used(sg, out)
    out.update(o.name for o in graph.output)


def _out_bytes(ctx) -> int | None:
    total = 0
    for shape, dtype in zip(ctx.out_shapes, ctx.out_dtypes):
        if shape is None and dtype is None:
            continue  # an absent optional output
        if dtype is None or not shape_is_static(shape):
            return None
        total += math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize
    return total


def _shape_fold(graph: Graph, node) -> list[np.ndarray] | None:
    """Shape / Size of a value with a static shape, from the shape alone."""
    v = graph.values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    if v is None or not shape_is_static(v.shape):
        return None
    shp = tuple(int(d) for d in v.shape)
    if node.op_type == "Size":
        return [np.array(math.prod(shp), dtype=np.int64)]
    r = len(shp)
    s = int(node.attr("start", 0))
    e = int(node.attr("end", r))
    s = min(max(s + r if s < 0 else s, 0), r)
    e = min(max(e + r if e < 0 else e, 0), r)
    return [np.array(shp[s:e], dtype=np.int64)]


def _run_node(provider, graph: Graph, ctx) -> list[np.ndarray]:
    """The node of ``ctx`` run once on ``provider`` through the node runner (its constant inputs
    staged, a one-shot program): the outputs as host arrays, in the node's output order."""
    node = ctx.node
    outs = present_outputs(node)
    runner = NodeRunner(provider, [ctx], keep=[o for o in outs if o])
    got = runner.run_once({name: graph.initializer(name) for name in dict.fromkeys(node.inputs) if name})
    return [got.get(o) for o in outs]


def _fold_round(m: onnx.ModelProto, provider, budget: int, res: FoldResult) -> dict[str, onnx.TensorProto]:
    """Fold what can be folded now; returns the new constants (output name → tensor)."""
    graph = build_graph(m)
    new: dict[str, onnx.TensorProto] = {}
    for node in graph.nodes:
        outs = [o for o in present_outputs(node)]
        if (node.domain != "" or node.op_type in NONDETERMINISTIC_OPS or not any(outs)
                or _has_subgraph(node.proto) or graph.function_for(node) is not None
                or any(o and graph.values[o].is_host_value for o in outs)):  # sequences are no initializers
            continue
        present = [i for i in node.inputs if i]
        all_const = all(graph.is_constant(i) for i in present)
        if node.op_type in ("Shape", "Size") and not all_const:
            arrays = _shape_fold(graph, node)
            if arrays is None:
                continue
        elif not all_const:
            continue
        else:
            ctx = node_context(graph, node)
            nbytes = _out_bytes(ctx)
            if nbytes is None:
                res.skipped[_label(node)] = "its output shapes are not known from its constant inputs"
                continue
            if nbytes > budget - res.folded_bytes:
                res.skipped[_label(node)] = (
                    f"its outputs would take {nbytes} bytes, over what is left of the fold budget "
                    f"({budget - res.folded_bytes} of {budget} bytes; load_model(..., fold_limit_bytes=...)); "
                    "nothing was computed")
                continue
            match = provider.supports(ctx)
            if not match.supported:
                res.skipped[_label(node)] = f"the CPU provider does not run it: {match.reason}"
                continue
            try:
                arrays = _run_node(provider, graph, ctx)
            except KernelError as e:
                res.skipped[_label(node)] = f"the CPU kernel declined it: {e}"
                continue
        for name, arr in zip(outs, arrays):
            if not name:
                continue
            t = numpy_helper.from_array(np.asarray(arr), name)
            new[name] = t
            graph.initializer_protos[name] = t
            graph._init_cache[name] = np.asarray(arr)  # the IR's lazy cache: no second conversion
            res.folded_bytes += int(np.asarray(arr).nbytes)
        res.skipped.pop(_label(node), None)
        res.folded.append(_label(node))
    return new


def _rewrite(m: onnx.ModelProto, new: dict[str, onnx.TensorProto]) -> None:
    g = m.graph
    kept = [n for n in g.node if not any(o in new for o in n.output if o)]
    kept = [_copy(n) for n in kept]
    del g.node[:]
    g.node.extend(kept)
    used: set[str] = set()
    _names_used(g, used)
    added = [t for name, t in new.items() if name in used]
    g.initializer.extend(added)
    if m.ir_version < 4:
        # IR < 4: every initializer must also be a graph input, and onnx's shape inference
        # ignores initializers that are not -- so list the new constants as inputs too
        g.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in added)
    keep_vi = [vi for vi in g.value_info if vi.name not in new]
    del g.value_info[:]
    g.value_info.extend(keep_vi)
    # symbols onnx made up for dims it could not compute ("unk__N") would stick on re-inference
    # (it keeps existing graph-output dims): forget them, so the new constants can refine them
    for vi in list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and d.dim_param.startswith("unk__"):
                    d.ClearField("dim_param")


def _copy(n: onnx.NodeProto) -> onnx.NodeProto:
    c = onnx.NodeProto()
    c.CopyFrom(n)
    return c


def fold_model(m: onnx.ModelProto, *, limit_bytes: int = DEFAULT_FOLD_LIMIT_BYTES,
               provider=None) -> FoldResult:
    """Fold ``m`` (an inferred model, see :func:`hetero_explore.load.loader.prepare_model`).

    Args:
        m: the model; it is rewritten (a fresh model is returned in the result).
        limit_bytes: the most bytes folding may create in all.
        provider: the CPU provider to compute with (a fresh NumbaCPUProvider by default).
    """
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, (int, np.integer)) or limit_bytes < 0:
        raise ModelLoadError(f"fold_limit_bytes must be a non-negative int, got {limit_bytes!r}")
    provider = provider or NumbaCPUProvider("fold")
    res = FoldResult(m)
    while True:
        new = _fold_round(m, provider, int(limit_bytes), res)
        if not new:
            break
        _rewrite(m, new)
        # the new constants may make the inputs of ops onnx cannot infer (ai.onnx.ml, com.microsoft)
        # static: their definitions give their outputs then
        m = complete_op_shapes(infer_shapes(m))
    res.model = m
    return res


class Fold(LoadPass):
    """Constant folding (``LoadOptions.fold_constants``; see the module docs)."""
    name, requires, ensures = "fold", ("inferred",), ("folded",)

    def enabled(self, options):
        return options.fold_constants

    def run(self, state):
        res = fold_model(state.model, limit_bytes=state.options.fold_limit_bytes)
        state.model, state.folded = res.model, res.folded
        state.info.update(fold_skipped=dict(res.skipped), folded_bytes=res.folded_bytes)
        return bool(res.folded)


def foldable_op_types() -> frozenset[str]:
    """Op types (default domain) that folding can remove: what the CPU provider runs, plus
    Shape and Size of static values."""
    return frozenset((NumbaCPUProvider("fold").supported_op_types() | {"Shape", "Size"}) - NONDETERMINISTIC_OPS)
