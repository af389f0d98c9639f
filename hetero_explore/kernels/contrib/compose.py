"""Contrib ops as compositions of standard ops: one node's little dataflow of standard kernels.

Where an onnxruntime contrib op is a sequence of standard ops (SkipLayerNormalization is an
Add, an Add and a LayerNormalization; DynamicQuantizeMatMul is DynamicQuantizeLinear, then
MatMulInteger, a Cast, two Muls and an Add), its kernel is exactly that sequence: each step is
the standard op's own :class:`~..opdef.OpDef`, found in the registry for the target and built
for a synthetic node whose shapes and dtypes the composition states. The contrib op then
computes bit for bit what the standard kernels compute for the same graph of standard nodes,
on every target, and inherits their portability.

A :class:`Flow` names the node's inputs ``in0``, ``in1`` ... and its outputs ``out0`` ...;
scratch values (``temp``), constants computed at build time (``const``: moved to the target
once) and flat views of another value (``view``: a slice of its elements, reshaped) join them.
``step(op, ins, outs, **attrs)`` appends a standard node. :meth:`Flow.check` asks each step's
definition whether it takes the node (the reason names the step); :meth:`Flow.build` builds
every step and returns the node's run function, which allocates its scratch per run (builds
may run concurrently on one executor).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import helper

from ...ir.context import KernelContext
from ...ir.graph import Node
from ..common import flat, node_error
from ..opdef import definitions, dtype_name

#: the opset the standard steps are built at (their definitions claim it); a step may name another
STEP_OPSET = 21


@dataclass
class _Step:
    op: str
    ins: tuple
    outs: tuple
    attrs: dict
    domain: str
    opset: int


@dataclass(frozen=True)
class _Local:
    """A step kernel of the composing module (see :attr:`Flow.local`)."""

    build: object


class _Lazy:
    """A constant computed when first read (a dequantised weight table: planning asks every
    provider about the node, and only a build needs the values)."""

    def __init__(self, fn):
        self._fn, self._value = fn, None

    def __call__(self):
        if self._value is None:
            self._value = np.ascontiguousarray(self._fn())
        return self._value


def _value(v):
    return v() if isinstance(v, _Lazy) else v


class _Consts:
    """The stand-in graph of a step's context: its constant inputs (``ctx.const``)."""

    def __init__(self, consts: dict):
        self._c = consts

    def is_constant(self, name):
        return name in self._c

    def initializer(self, name):
        return _value(self._c[name])


@dataclass
class Flow:
    """The standard steps of one contrib node (see the module docs)."""

    ctx: KernelContext
    vals: dict = field(default_factory=dict)
    """name -> (shape, numpy dtype)"""
    kinds: dict = field(default_factory=dict)
    """name -> ("in", i) | ("out", k) | ("temp",) | ("const", array) | ("view", base, offset)"""
    steps: list = field(default_factory=list)
    error: str | None = None
    """why the composition cannot be made (a value it needs has no known shape)"""
    local: dict = field(default_factory=dict)
    """step op name -> ``build(ctx, target)`` of a kernel of the composing module itself (index and
    copy kernels that no standard op provides)"""

    def __post_init__(self):
        ctx = self.ctx
        for i, (s, d) in enumerate(zip(ctx.in_shapes, ctx.in_dtypes)):
            if ctx.has_input(i) and s is not None and d is not None:
                self.vals[f"in{i}"] = (tuple(s), np.dtype(d))
                self.kinds[f"in{i}"] = ("in", i)
        outs = ctx.node.outputs
        for k, (s, d) in enumerate(zip(ctx.out_shapes, ctx.out_dtypes)):
            if k < len(outs) and outs[k] and s is not None and d is not None:
                self.vals[f"out{k}"] = (tuple(s), np.dtype(d))
                self.kinds[f"out{k}"] = ("out", k)

    # -- values ---------------------------------------------------------------------------
    def has(self, name) -> bool:
        return name in self.vals

    def shape(self, name) -> tuple:
        return self.vals[name][0]

    def dtype(self, name) -> np.dtype:
        return self.vals[name][1]

    def _new(self, name) -> None:
        if name in self.vals:   # a composition names each value once
            raise ValueError(f"{self.ctx.node.op_type} composition: value {name!r} is declared twice")

    def temp(self, name, shape, dtype=np.float32) -> str:
        self._new(name)
        self.vals[name] = (tuple(int(d) for d in shape), np.dtype(dtype))
        self.kinds[name] = ("temp",)
        return name

    def const(self, name, array) -> str:
        self._new(name)
        a = np.ascontiguousarray(array)
        self.vals[name] = (tuple(a.shape), a.dtype)
        self.kinds[name] = ("const", a)
        return name

    def lazy_const(self, name, shape, dtype, fn) -> str:
        """A constant of ``shape``/``dtype`` whose values ``fn()`` computes when a build first
        needs them (checks read only its shape)."""
        self._new(name)
        self.vals[name] = (tuple(int(d) for d in shape), np.dtype(dtype))
        self.kinds[name] = ("const", _Lazy(fn))
        return name

    def view(self, name, base, offset, shape) -> str:
        """``name``: elements ``offset ..`` of ``base`` (flat), as ``shape``."""
        self._new(name)
        self.vals[name] = (tuple(int(d) for d in shape), self.vals[base][1])
        self.kinds[name] = ("view", base, int(offset))
        return name

    # -- steps ----------------------------------------------------------------------------
    def step(self, op, ins, outs, *, domain="", opset=STEP_OPSET, **attrs) -> None:
        """Append the standard node ``op`` reading ``ins`` and writing ``outs`` (value names;
        ``""`` for an absent optional input or output)."""
        for n in list(ins) + list(outs):
            if n and n not in self.vals and self.error is None:
                what = {"in": "input", "out": "output"}.get(n.rstrip("0123456789"), "value")
                self.error = (f"{self.ctx.node.op_type}: {what} {n.lstrip('inout') if what != 'value' else n} "
                              "has no known shape and dtype")
        self.steps.append(_Step(op, tuple(ins), tuple(outs), attrs, domain, opset))

    def _step_ctx(self, k, st: _Step) -> KernelContext:
        attrs = {a: v for a, v in st.attrs.items() if v is not None}
        proto = helper.make_node(st.op, [n for n in st.ins], [n for n in st.outs], domain=st.domain or None,
                                 name=f"{self.ctx.node.name}/{k}:{st.op}", **attrs)
        node = Node(self.ctx.node.id, proto, st.opset)
        consts = {n: self.kinds[n][1] for n in st.ins if n and self.kinds[n][0] == "const"}
        outs = list(st.outs)
        while outs and not outs[-1]:
            outs.pop()
        return KernelContext(node, st.opset, [self.vals[n][0] if n else None for n in st.ins],
                             [self.vals[n][1] if n else None for n in st.ins],
                             [self.vals[n][0] if n else None for n in outs],
                             [self.vals[n][1] if n else None for n in outs], graph=_Consts(consts))

    def _find(self, k, st: _Step, target):
        """(definition, context) of step ``k`` for ``target``, or (None, reason)."""
        ctx = self._step_ctx(k, st)
        if st.op in self.local:
            return _Local(self.local[st.op]), ctx
        reasons = []
        for d in definitions(st.domain, st.op, target.name):
            if not d.claims(st.opset):
                continue
            dt = ctx.in_dtypes[d.dtype_input] if d.dtype_input < len(ctx.in_dtypes) else None
            if d.dtype_input < len(ctx.in_dtypes) and dtype_name(dt) not in d.dtypes:
                reasons.append(f"dtype {dtype_name(dt)} not supported")
                continue
            why = d.check(ctx, target) if d.check is not None else None
            if why:
                reasons.append(why)
                continue
            return d, ctx
        return None, "; ".join(dict.fromkeys(reasons)) or f"no {st.op} kernel for {target.name}"

    def check(self, target) -> str | None:
        """None when every step has a kernel for ``target``, else the first step's reason."""
        if self.error:
            return self.error
        for k, st in enumerate(self.steps):
            d, why = self._find(k, st, target)
            if d is None:
                return f"{self.ctx.node.op_type}: its {st.op} step: {why}"
        return None

    def build(self, target):
        """The node's run function: every step built for ``target`` (KernelError naming the node
        and the step when one cannot be)."""
        if self.error:
            raise node_error(self.ctx, self.error)
        runs = []
        for k, st in enumerate(self.steps):
            d, c = self._find(k, st, target)
            if d is None:
                raise node_error(self.ctx, f"its {st.op} step: {c}")
            runs.append((d.build(c, target), st))
        consts = {n: target.to_device(_value(kd[1])) for n, kd in self.kinds.items() if kd[0] == "const"}
        vals, kinds = dict(self.vals), dict(self.kinds)
        host = target.host

        def resolve(env, name, inputs, outputs):
            a = env.get(name)
            if a is not None:
                return a
            shape, dt = vals[name]
            kd = kinds[name]
            if kd[0] == "in":
                a = inputs[kd[1]]
            elif kd[0] == "out":
                a = outputs[kd[1]]
            elif kd[0] == "const":
                a = consts[name]
            elif kd[0] == "temp":
                a = np.empty(shape, dt)
                a = a if host else target.to_device(a)
            else:
                base = flat(resolve(env, kd[1], inputs, outputs))
                n = int(np.prod(shape, dtype=np.int64))
                a = base[kd[2]:kd[2] + n]
            if tuple(a.shape) != shape:
                a = a.reshape(shape) if len(shape) else a.reshape(())
            env[name] = a
            return a

        def run(inputs, outputs):
            env = {}
            for fn, st in runs:
                fn([resolve(env, n, inputs, outputs) if n else None for n in st.ins],
                   [resolve(env, n, inputs, outputs) if n else None for n in st.outs])

        run.steps = tuple(st.op for st in self.steps)
        return run


def flow_op(plan):
    """``(check, build)`` of an op whose kernel is the :class:`Flow` that ``plan(ctx)`` returns
    (``plan`` returns a reason string when the node's attributes or shapes are not supported)."""

    def check(ctx, target):
        f = plan(ctx)
        if isinstance(f, str):
            return f
        return f.check(target)

    def build(ctx, target):
        f = plan(ctx)
        if isinstance(f, str):
            raise node_error(ctx, f)
        return f.build(target)

    return check, build


def standard_output_types(ctx, op, attrs, n_inputs=None, opset=STEP_OPSET, domain=""):
    """``[(shape, dtype)]`` of the standard node ``op`` (with ``attrs``) on the node's input types,
    by onnx's per-node inference: the output shapes of a contrib op that is that op plus an
    epilogue (FusedConv, FusedGemm, FusedMatMul's transposes). None entries where unknown."""
    import onnx
    from onnx.shape_inference import infer_node_outputs
    from ...ir.graph import onnx_to_np_dtype

    n = len(ctx.in_shapes) if n_inputs is None else n_inputs
    names = [f"x{i}" if ctx.has_input(i) else "" for i in range(n)]
    types = {}
    for i, nm in enumerate(names):
        if nm:
            s, d = ctx.in_shapes[i], ctx.in_dtypes[i]
            if s is None or d is None:
                return [None]
            types[nm] = helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(np.dtype(d)), list(s))
    while names and not names[-1]:
        names.pop()
    proto = helper.make_node(op, names, ["y"], domain=domain or None,
                             **{k: v for k, v in attrs.items() if v is not None})
    try:
        schema = onnx.defs.get_schema(op, opset, domain)
        res = infer_node_outputs(schema, proto, types, {}, opset_imports=[helper.make_opsetid(domain, opset)])
    except Exception:   # the kernel's check names what is wrong
        return [None]
    t = res.get("y")
    if t is None or not t.tensor_type.HasField("shape") or not all(
            d.HasField("dim_value") for d in t.tensor_type.shape.dim):
        return [None]
    return [(tuple(int(d.dim_value) for d in t.tensor_type.shape.dim), onnx_to_np_dtype(t.tensor_type.elem_type))]
