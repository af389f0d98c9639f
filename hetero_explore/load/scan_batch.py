"""Load-time rewrite: a Scan whose iterations are independent becomes one batched pass.

A Scan runs its body once per slice of its scan inputs. When nothing flows from one
iteration to the next -- every state output is its own state input, unchanged -- and every
body node that reads a slice works element by element (with numpy broadcasting) or reduces
over given axes, the N iterations are one computation over the stacked slices: the scan
inputs keep their leading scan axis, each body node runs once on the whole stack, and the
stacked scan outputs come out as they are. skl2onnx's nearest-neighbour models compute their
distance matrix this way (a Scan over the training rows whose body is Sub then
ReduceSumSquare): one node per training row becomes three nodes in all.

The rewrite keeps every output element's sequence of operations: an element-wise node
computes each element from the same operands, and a reduction reduces each output element's
elements in the same order, whatever dims lie before them (the kernels' contract). So the
batched graph is bitwise the Scan (``tests/test_scan_batch.py`` runs both on the CPU and the
CUDA simulator).

The body, slice by slice (``r``: a value's rank inside the body):

* a node none of whose inputs depends on the slice runs once, before the others (hoisted),
  unless it is random, has a subgraph or is not in the default domain;
* an element-wise node (:data:`ELEMENTWISE`) on batched inputs: a batched input whose body
  rank is below the node's result rank gets size-1 axes after its scan axis (``Unsqueeze``),
  so that broadcasting aligns it as inside the body;
* a reduction (:data:`REDUCTIONS`) on a batched input: its axes (attribute or constant
  input; none means all) shift by one past the scan axis;
* ``Identity`` passes its input on.

Anything else declines the rewrite for that Scan (it then runs as it is): opset 8's Scan
(batch axis and sequence lengths), reversed directions, scan axes other than 0, a state that
changes, a scan output that does not depend on the slice, body values whose rank inference
did not give, or a batched value over :data:`MAX_BATCHED_BYTES` (the iterations' buffers
would exist all at once).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: element-wise ops (every output element from the operands' elements at its index, numpy
#: broadcasting between the inputs): one or more inputs, any attributes
ELEMENTWISE = frozenset((
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Where", "BitwiseAnd", "BitwiseOr",
    "BitwiseXor", "BitwiseNot", "Abs", "Neg", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round",
    "Sign", "Relu", "Sigmoid", "Tanh", "Erf", "Softplus", "Softsign", "Sin", "Cos", "Tan", "Asin", "Acos",
    "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid",
    "HardSwish", "ThresholdedRelu", "Mish", "Gelu", "IsNaN", "IsInf", "Cast",
))
#: reductions over an ``axes`` attribute or constant input (keepdims kept as it is)
REDUCTIONS = frozenset(("ReduceSum", "ReduceSumSquare", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"))
#: ops whose every run draws new values: never hoisted out of the iterations
RANDOM = frozenset(("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                    "Bernoulli", "Dropout"))
#: the largest batched value (all iterations' buffers of one body value at once) the rewrite makes
MAX_BATCHED_BYTES = 256 << 20


class _Decline(Exception):
    """This Scan stays as it is (the message says why)."""


def _attr(n: onnx.NodeProto, name: str, default=None):
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _body_shapes(body: onnx.GraphProto) -> dict[str, tuple]:
    """Body value -> (dims, element type) from its declarations, inference and initializers
    (an unknown dim is None)."""
    out = {}
    for vi in list(body.input) + list(body.value_info) + list(body.output):
        t = vi.type
        if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
            out[vi.name] = ([d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim],
                            t.tensor_type.elem_type)
    for t in body.initializer:
        out[t.name] = ([int(d) for d in t.dims], t.data_type)
    return out


class _Batcher:
    """One Scan's rewrite: the outer nodes and initializers that replace it."""

    def __init__(self, s, scan: onnx.NodeProto, index: int, opset: int):
        self.s, self.scan, self.opset = s, scan, opset
        self.prefix = scan.name or f"Scan_{index}"
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[tuple[str, np.ndarray]] = []
        self.rename: dict[str, str] = {}      # body value -> outer value
        self.batched: dict[str, int] = {}     # outer value -> its rank inside the body (batched values)
        self.taken: set[str] = set()

    # -- names
    def fresh(self, base: str) -> str:
        name, k = f"{self.prefix}/{base}", 1
        while name in self.s.names or name in self.taken:
            name, k = f"{self.prefix}/{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def const(self, base: str, arr: np.ndarray) -> str:
        name = self.fresh(base)
        self.inits.append((name, arr))
        return name

    def node(self, op: str, ins: list[str], outs: list[str], base: str, **attrs) -> None:
        self.nodes.append(helper.make_node(op, ins, outs, name=self.fresh(base), **attrs))

    # -- the rewrite
    def run(self) -> None:
        scan, s = self.scan, self.s
        if self.opset < 9:
            raise _Decline("Scan-8 (batch axis, sequence lengths)")
        body = _attr(scan, "body")
        k = int(_attr(scan, "num_scan_inputs", 0))
        m = len(scan.input) - k
        if k < 1 or m < 0:
            raise _Decline("no scan input")
        for a in ("scan_input_directions", "scan_output_directions", "scan_input_axes", "scan_output_axes"):
            if any(int(v) != 0 for v in (_attr(scan, a) or [])):
                raise _Decline(f"{a} other than 0")
        dims = _body_shapes(body)
        ranks = {name: len(d) for name, (d, _) in dims.items()}
        n_iter = None
        for j in range(k):
            outer = scan.input[m + j]
            d = s.dims(outer)
            if not outer or d is None or not d or d[0] is None:
                raise _Decline(f"scan input {outer!r} of unknown shape")
            n_iter = int(d[0])
        self.n_iter = n_iter
        bin_ = [vi.name for vi in body.input]
        bout = [vi.name for vi in body.output]
        if len(bin_) != m + k or len(bout) < m:
            raise _Decline("body signature")
        for i in range(m):
            self.rename[bin_[i]] = scan.input[i]
            if not scan.input[i]:
                raise _Decline("a missing state input")
        for j in range(k):
            outer = scan.input[m + j]
            self.rename[bin_[m + j]] = outer
            self.batched[outer] = len(s.dims(outer)) - 1
        for t in body.initializer:
            self.rename[t.name] = self.const(t.name, numpy_helper.to_array(t))
        # every state output must be its state input, unchanged (through Identity)
        alias = {}
        for n in body.node:
            if n.op_type == "Identity" and n.domain in ("", "ai.onnx"):
                alias[n.output[0]] = alias.get(n.input[0], n.input[0])
        for i in range(m):
            if alias.get(bout[i], bout[i]) != bin_[i]:
                raise _Decline(f"state {bin_[i]!r} changes between iterations")
        for n in body.node:
            self.body_node(n, ranks, dims)
        for j, name in enumerate(bout[m:]):
            outer_out = scan.output[m + j] if m + j < len(scan.output) else ""
            v = self.rename.get(name, name)
            if v not in self.batched:
                raise _Decline(f"scan output {name!r} does not depend on the scan inputs")
            if outer_out:
                self.node("Identity", [v], [outer_out], f"{name}_out")
        for i in range(m):
            if i < len(scan.output) and scan.output[i]:
                self.node("Identity", [scan.input[i]], [scan.output[i]], f"{bout[i]}_final")

    def body_node(self, n: onnx.NodeProto, ranks: dict, dims: dict) -> None:
        ins = [self.rename.get(x, x) if x else "" for x in n.input]
        bat = [x in self.batched for x in ins]
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            raise _Decline(f"body node {n.name or n.op_type!r} has a subgraph")
        if n.domain not in ("", "ai.onnx"):
            raise _Decline(f"body node {n.name or n.op_type!r} in domain {n.domain!r}")
        outs = []
        for o in n.output:
            if o:
                self.rename[o] = self.fresh(o)
            outs.append(self.rename.get(o, "") if o else "")
        if not any(bat):
            if n.op_type in RANDOM:
                raise _Decline(f"body node {n.name or n.op_type!r} is random")
            self.nodes.append(_copy(n, ins, outs, self.fresh(n.name or n.op_type)))
            return
        op = n.op_type
        if op == "Identity":
            self.rename[n.output[0]] = ins[0]
            self.taken.discard(outs[0])
            return
        out = n.output[0]
        r_out = ranks.get(out)
        if r_out is None or len([o for o in n.output if o]) != 1:
            raise _Decline(f"body node {n.name or op!r}: output rank unknown")
        self._check_size(out, dims)
        if op in ELEMENTWISE:
            fixed = []
            for x, b in zip(ins, bat):
                if b and self.batched[x] < r_out:   # broadcasting aligns dims from the right
                    x = self.unsqueeze(x, r_out - self.batched[x])
                fixed.append(x)
            self.nodes.append(_copy(n, fixed, outs, self.fresh(n.name or op)))
        elif op in REDUCTIONS:
            if not bat[0] or any(bat[1:]):
                raise _Decline(f"body node {n.name or op!r}: reduces over batched axes")
            self.nodes.append(self.reduction(n, ins, outs, self.batched[ins[0]]))
        else:
            raise _Decline(f"body node {n.name or op!r} ({op}) on a value of the scan inputs")
        self.batched[outs[0]] = r_out

    def _check_size(self, name: str, dims: dict) -> None:
        d, et = dims.get(name, (None, 0))
        if d is None or any(v is None for v in d):
            return     # shapes the body leaves open: the size is checked at run time as for any node
        dt = onnx.helper.tensor_dtype_to_np_dtype(et) if et else np.dtype(np.float32)
        if int(np.prod(d, dtype=np.int64)) * self.n_iter * np.dtype(dt).itemsize > MAX_BATCHED_BYTES:
            raise _Decline(f"the batched {name!r} would take over {MAX_BATCHED_BYTES >> 20} MiB")

    def unsqueeze(self, x: str, k: int) -> str:
        axes = list(range(1, k + 1))
        y = self.fresh(f"{x.rsplit('/', 1)[-1]}_aligned")
        if self.opset >= 13:
            self.node("Unsqueeze", [x, self.const("axes", np.array(axes, np.int64))], [y], "align")
        else:
            self.node("Unsqueeze", [x], [y], "align", axes=axes)
        self.batched[y] = self.batched[x] + k
        return y

    def reduction(self, n: onnx.NodeProto, ins: list[str], outs: list[str], r: int) -> onnx.NodeProto:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if len(ins) > 1 and ins[1]:
            axes = self.s.const(ins[1])
            if axes is None:
                axes = self.body_const(n.input[1])
            if axes is None:
                raise _Decline(f"body node {n.name or n.op_type!r}: axes not constant")
            axes = [int(v) for v in np.asarray(axes).reshape(-1)]
            from_input = True
        else:
            axes = attrs.pop("axes", None)
            from_input = False
            axes = None if axes is None else [int(v) for v in axes]
        if not axes:
            if int(attrs.get("noop_with_empty_axes", 0)):
                raise _Decline(f"body node {n.name or n.op_type!r}: noop_with_empty_axes")
            axes = list(range(r))
        if any(not -r <= a < r for a in axes):
            raise _Decline(f"body node {n.name or n.op_type!r}: axes out of range")
        shifted = [(a + r if a < 0 else a) + 1 for a in axes]
        new_in = [ins[0]]
        if from_input or (self.opset >= 18 or (n.op_type == "ReduceSum" and self.opset >= 13)):
            new_in.append(self.const("axes", np.array(shifted, np.int64)))
        else:
            attrs["axes"] = shifted
        return helper.make_node(n.op_type, new_in, outs, name=self.fresh(n.name or n.op_type), **attrs)

    def body_const(self, name: str):
        for (nm, arr) in self.inits:
            if self.rename.get(name) == nm:
                return arr
        return None


def _copy(n: onnx.NodeProto, ins: list[str], outs: list[str], name: str) -> onnx.NodeProto:
    c = onnx.NodeProto()
    c.CopyFrom(n)
    del c.input[:]
    c.input.extend(ins)
    del c.output[:]
    c.output.extend(outs)
    c.name = name
    return c


def batch_scans(m: onnx.ModelProto, opset: int) -> list:
    """Rewrite each Scan of ``m``'s main graph that batches (see the module docs) in place: its
    nodes take the Scan's place. Returns the records (:class:`.optimize.Rewrite`) of what was
    rewritten; the caller infers the new values' shapes."""
    from .optimize import Rewrite, _label, _State
    s = _State(m)
    records, new_nodes = [], []
    for i, scan in enumerate(s.nodes):
        if scan.op_type != "Scan" or scan.domain not in ("", "ai.onnx"):
            new_nodes.append(scan)
            continue
        b = _Batcher(s, scan, i, opset)
        try:
            b.run()
        except _Decline:
            new_nodes.append(scan)
            continue
        for name, arr in b.inits:
            m.graph.initializer.append(numpy_helper.from_array(arr, name))
            if m.ir_version < 4:  # IR < 4: every initializer is also a graph input
                m.graph.input.append(helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
        s.names.update(b.taken)
        new_nodes.extend(b.nodes)     # where the Scan was: its inputs are ready there
        records.append(Rewrite("scan_batch", _label(scan), removed=[_label(scan)],
                               created=[nd.name for nd in b.nodes],
                               detail=f"{b.n_iter} iterations as one pass over the stacked scan inputs "
                                      f"({len(b.nodes)} nodes)"))
    if records:
        del m.graph.node[:]
        m.graph.node.extend(new_nodes)
    return records
