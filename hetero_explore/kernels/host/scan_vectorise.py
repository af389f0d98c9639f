"""A Scan body run once over all its steps, stacked, instead of once per step.

A Scan whose body carries no real state from one step to the next (every state output is its
state input passed through, by name or by an Identity) computes each step from that step's
slices of the scan inputs and from values that are the same at every step (the states, the
outer scope, the body's constants). When every body node that reads a step's slice is
*batchable* -- an elementwise op with numpy broadcasting, a reduction, ArgMax/ArgMin, Identity,
Cast, Clip with constant bounds -- the body can run once on the scan inputs stacked along a
new leading axis of length N (the steps) instead of N times: a slice input of per-step rank
``r`` becomes one of rank ``r + 1``; an elementwise node whose per-step output has rank ``R``
reads a stacked input of lower per-step rank through an ``Unsqueeze`` (axes ``1 .. R - r``,
so that numpy's right-aligned broadcasting lines up the per-step dims as before, the step axis
in front); a reduction's non-negative axes move up by one (negative ones stay; "all axes"
becomes axes ``1 .. r``); ArgMax/ArgMin's axis likewise. Nodes that read no stacked value run
once, as they would compute the same value at every step. skl2onnx's k-nearest-neighbours
``cdist`` is such a Scan (a state passed through; ``Sub``, ``ReduceSumSquare``, ``Identity``).

**Bitwise.** Each element of a stacked output is computed by the same op sequence as in its
step: elementwise kernels compute every element by itself; a reduction visits each output
element's reduced elements in ascending flat index order whatever the other dims are (the
kernel contract, :mod:`..reduce`); broadcasting only repeats values. So the vectorised Scan
gives the iterated Scan's bits (``tests/test_control_flow.py`` compares the two on the kNN
body and on random bodies; ``ControlKernel`` runs the iterated path when
``control.VECTORISE_SCANS`` is False).

**Declined** (the Scan iterates, as before): a state that is really carried (an output that is
not its input passed through), a reverse scan input or output direction, a body node with a
subgraph, a stacked value read by any other op (MatMul, Reshape, Gather, Softmax ... whose
semantics an extra leading axis changes), Scan-8 (its batch axis), host values (sequences),
a per-step shape or rank that is not known for the inputs given.

:func:`static_check` decides what can be decided from the body alone (the kernel asks it once;
the placement table says a Scan is vectorised from it); :func:`vectorised_body` builds the
stacked body for the per-step ranks and constants of one specialisation.
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

import numpy as np

#: multidirectional-broadcasting elementwise ops (every input the same role)
BROADCAST = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal", "Less", "LessOrEqual",
    "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Where", "BitShift", "BitwiseAnd", "BitwiseOr",
    "BitwiseXor"})
#: one-input elementwise ops (the output has the input's shape)
UNARY = frozenset({
    "Identity", "Abs", "Neg", "Sqrt", "Reciprocal", "Exp", "Log", "Tanh", "Sigmoid", "Relu", "Floor", "Ceil",
    "Round", "Sign", "Not", "Cast", "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
    "Asinh", "Acosh", "Atanh", "Softplus", "Softsign", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid",
    "HardSwish", "ThresholdedRelu", "Shrink", "Mish", "IsNaN", "IsInf", "BitwiseNot", "Gelu", "Swish"})
#: reductions (axes renumbered for the leading step axis)
REDUCE = frozenset({
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
ARG = frozenset({"ArgMax", "ArgMin"})
#: what a stacked value may flow into (Clip: its bounds must be per-scan constants)
BATCHABLE = BROADCAST | UNARY | REDUCE | ARG | {"Clip"}
#: what else may run once on per-scan values (deterministic ops whose inputs are the same at
#: every step; random ops, Dropout, sequences and control flow are not here)
ONCE = BATCHABLE | {
    "Constant", "Reshape", "Transpose", "Unsqueeze", "Squeeze", "Concat", "Slice", "Gather", "Shape", "Size",
    "ConstantOfShape", "Expand", "MatMul", "Gemm", "Flatten", "Range", "CastLike"}

#: ReduceSum takes its axes as an input from opset 13, the other reductions from 18
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _axes_from_input(op: str, opset: int) -> bool:
    return opset >= _AXES_INPUT_SINCE.get(op, 18)


def _is_default(domain: str) -> bool:
    return domain in ("", "ai.onnx")


def static_check(attrs: dict, body: onnx.GraphProto, n_state: int) -> str | None:
    """None when the Scan (attributes ``attrs``, Scan-9+) can run its body vectorised over the
    scan axis for inputs whose shapes allow it; else why not (one line)."""
    m = int(attrs.get("num_scan_inputs", 0))
    if any(int(d) for d in (attrs.get("scan_input_directions") or [])):
        return "a scan input is read in reverse"
    if any(int(d) for d in (attrs.get("scan_output_directions") or [])):
        return "a scan output is written in reverse"
    names = [vi.name for vi in body.input]
    outs = [o.name for o in body.output]
    if len(names) != n_state + m or len(outs) < n_state:
        return "the body's inputs or outputs do not match the node's"
    producer = {o: n for n in body.node for o in n.output if o}
    for k in range(n_state):
        o = outs[k]
        if o == names[k]:
            continue
        p = producer.get(o)
        if p is None or p.op_type != "Identity" or not _is_default(p.domain) or list(p.input[:1]) != [names[k]]:
            return f"state {names[k]!r} is carried from one step to the next"
    batched = set(names[n_state:])
    for n in body.node:
        label = n.name or f"{n.op_type}:{next((o for o in n.output if o), '?')}"
        if not _is_default(n.domain):
            return f"body node {label!r} is {n.domain}::{n.op_type}"
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            return f"body node {label!r} ({n.op_type}) holds a subgraph"
        reads = [bool(x) and x in batched for x in n.input]
        if not any(reads):
            if n.op_type not in ONCE:
                return f"body node {label!r} ({n.op_type}) is not known to give the same value at every step"
            continue
        if n.op_type not in BATCHABLE:
            return f"body node {label!r} ({n.op_type}) reads a step's slice and is not elementwise or a reduction"
        if n.op_type in REDUCE | ARG | {"Clip"} and any(reads[1:]):
            return f"body node {label!r} ({n.op_type}) takes its axes or bounds from a step's slice"
        batched.update(o for o in n.output if o)
    return None


def _new_name(taken: set, base: str) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _all_names(g: onnx.GraphProto) -> set:
    names = {vi.name for vi in g.input} | {o.name for o in g.output} | {t.name for t in g.initializer}
    for n in g.node:
        names.update(x for x in n.input if x)
        names.update(o for o in n.output if o)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                names.update(_all_names(a.g))
    return names


class Declined(Exception):
    """The body cannot be vectorised for this specialisation (the message says why)."""


def vectorised_body(body: onnx.GraphProto, n_state: int, opset: int, rank, const) -> tuple[onnx.GraphProto, set]:
    """The body (which :func:`static_check` accepts) stacked along a leading step axis: the same
    inputs (the scan inputs now with the step axis in front), the same nodes with the
    ``Unsqueeze`` and axes changes of the module docs, and the scan outputs only (the states
    pass through). ``rank(name)``: a value's per-step rank (None: unknown); ``const(name)``: a
    constant's value (None: not a constant). Returns (graph, names of its stacked values);
    raises :class:`Declined`."""
    names = [vi.name for vi in body.input]
    taken = _all_names(body)
    batched = set(names[n_state:])
    nodes: list = []
    inits: list = []
    lifted: dict = {}   # (name, extra dims) -> the Unsqueeze output

    def need_rank(x):
        r = rank(x)
        if r is None:
            raise Declined(f"the rank of {x!r} is not known")
        return r

    def axes_value(base, values):
        nm = _new_name(taken, base)
        inits.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), nm))
        return nm

    def lift(x, extra):
        key = (x, extra)
        got = lifted.get(key)
        if got is None:
            axes = list(range(1, extra + 1))
            got = lifted[key] = _new_name(taken, f"{x}__steps_r{extra}")
            if opset >= 13:
                nodes.append(helper.make_node("Unsqueeze", [x, axes_value(f"{got}_axes", axes)], [got]))
            else:
                nodes.append(helper.make_node("Unsqueeze", [x], [got], axes=axes))
            batched.add(got)
        return got

    for n in body.node:
        reads = [bool(x) and x in batched for x in n.input]
        if not any(reads):
            nodes.append(n)
            continue
        op = n.op_type
        m = onnx.NodeProto()
        m.CopyFrom(n)
        if op in BROADCAST:
            R = need_rank(n.output[0])
            for i, x in enumerate(n.input):
                if reads[i]:
                    r = need_rank(x)
                    if r > R:
                        raise Declined(f"{x!r} has a higher rank than {op}'s output")
                    if r < R:
                        m.input[i] = lift(x, R - r)
        elif op in REDUCE:
            r = need_rank(n.input[0])
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            noop = bool(int(attrs.get("noop_with_empty_axes", 0)))
            if _axes_from_input(op, opset):
                raw = None
                if len(n.input) > 1 and n.input[1]:
                    raw = const(n.input[1])
                    if raw is None:
                        raise Declined(f"the axes of {op} are not a constant")
                    raw = np.asarray(raw).reshape(-1).tolist()
                if not raw:
                    if noop:
                        raw = None          # an identity: stays as it is
                    else:
                        raw = list(range(r))
                if raw is not None:
                    new = [int(a) + 1 if int(a) >= 0 else int(a) for a in raw]
                    del m.input[1:]
                    m.input.append(axes_value(f"{n.output[0]}__steps_axes", new))
            else:
                raw = attrs.get("axes")
                if not raw:
                    raw = list(range(r))
                new = [int(a) + 1 if int(a) >= 0 else int(a) for a in raw]
                keep = [a for a in m.attribute if a.name != "axes"]
                del m.attribute[:]
                m.attribute.extend(keep + [helper.make_attribute("axes", new)])
        elif op in ARG:
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            a = int(attrs.get("axis", 0))
            keep = [x for x in m.attribute if x.name != "axis"]
            del m.attribute[:]
            m.attribute.extend(keep + [helper.make_attribute("axis", a + 1 if a >= 0 else a)])
        # UNARY and Clip (bounds per scan): unchanged, the step axis rides along
        nodes.append(m)
        batched.update(o for o in n.output if o)
    # only what the scan outputs need (the states' pass-through Identity nodes go)
    need = {o.name for o in body.output[n_state:]}
    live = []
    for n in reversed(nodes):
        if any(o in need for o in n.output if o):
            live.append(n)
            need.update(x for x in n.input if x)
    g = onnx.GraphProto()
    g.name = (body.name or "body") + "_over_steps"
    for vi in body.input:
        g.input.add().CopyFrom(vi)
    g.initializer.extend(list(body.initializer) + inits)
    g.sparse_initializer.extend(body.sparse_initializer)
    g.node.extend(reversed(live))
    for o in body.output[n_state:]:
        g.output.add().CopyFrom(o)
    return g, batched
