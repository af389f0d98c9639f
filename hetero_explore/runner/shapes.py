"""Output shapes computed at run time, from the actual inputs.

The plan's shapes come from load-time inference (and the model's declarations).
They are only a promise: a shape input given at run time (Reshape's ``shape``,
Range's bounds, Split's sizes ...), a symbolic dim, or a data-dependent op
(NonZero, Unique ...) decides the real output shape when the node runs. The node
runner (:mod:`hetero_explore.runner.core`) asks this module, for such nodes only,
what the outputs are from the actual input shapes and dtypes and the actual
values of the **shape inputs**, before it allocates:

* the generic path is onnx's own per-node inference,
  ``onnx.shape_inference.infer_node_outputs``, fed the actual input types and
  the shape inputs' values (so every op onnx infers is covered without a
  hand-written shape function), plus the few checks onnx leaves out
  (Reshape's element count);
* an op definition may give its own function (``OpDef.infer``): the
  data-dependent ops of :mod:`hetero_explore.kernels.dynamic` count their outputs
  from the data (their ``value_inputs`` are read on the host); the sequence ops
  (SequenceAt, ConcatFromSequence) read the elements' shapes off the sequence;
  StringSplit's width is counted here (:data:`HOST_INFER`);
* control flow (If, Loop, Scan: :func:`runs_to_know`) cannot be inferred
  without running its subgraphs: its kernel runs them and allocates its
  outputs at the shapes they produced
  (:meth:`hetero_explore.kernels.host.control.ControlKernel.run_allocating`); the runner
  then checks them against what the plan knows.

:data:`SHAPE_INPUTS` lists, per op type, which inputs' values shape the outputs;
a node is dynamic (decided once, when the runner is built) when one of them is
not a constant, when a shape of the plan is not static, or when its op is
data-dependent.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..ir.context import KernelContext
from ..ir.errors import ExecutionError

__all__ = ["SHAPE_INPUTS", "shape_inputs", "op_infer", "infer_outputs", "RuntimeContext",
           "RuntimeShapeError", "runs_to_know", "unshaped_context", "HOST_INFER"]

_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")

#: op type → indices of the inputs whose *values* decide output shapes (default domain)
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Split": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "TopK": (1,), "OneHot": (1,),
    "Resize": (2, 3), "Upsample": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "CenterCropPad": (1, 2),
    "MaxUnpool": (2,), "HannWindow": (0,), "HammingWindow": (0,), "BlackmanWindow": (0,),
    "DFT": (1, 2), "STFT": (1, 3), "MelWeightMatrix": (0, 1, 2), "Col2Im": (1, 2),
    **{op: (1,) for op in _REDUCE},
}


class RuntimeShapeError(ExecutionError):
    """The output shapes of a node cannot be computed from its run-time inputs."""


def shape_inputs(node) -> tuple[int, ...]:
    """Indices of ``node``'s present inputs whose values decide its output shapes."""
    d = _opdef(node.domain, node.op_type, node.opset)
    idx = d.shape_inputs if d is not None and d.shape_inputs is not None else (
        SHAPE_INPUTS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ())
    return tuple(i for i in idx if i < len(node.inputs) and node.inputs[i])


def op_infer(node):
    """The op definition of ``node`` when it computes its own output shapes (``OpDef.infer``, or
    an entry of :data:`HOST_INFER`), else None."""
    d = _opdef(node.domain, node.op_type, node.opset)
    if d is not None and d.infer is not None:
        return d
    return HOST_INFER.get((node.domain, node.op_type)) if d is not None else None


#: ops whose output shapes only running them tells (their kernels allocate their outputs)
RUNS_TO_KNOW = frozenset({"If", "Loop", "Scan"})


def runs_to_know(node) -> bool:
    """Are ``node``'s output shapes known only by running it (control flow)?"""
    return node.op_type in RUNS_TO_KNOW and node.domain in ("", "ai.onnx")


def unshaped_context(ctx):
    """``ctx`` with every shape the plan does not know replaced by ``()``: the context a
    control kernel is built with when its output shapes are left to the run (it reads only the
    node, its subgraphs and the graph; the actual shapes come with its inputs and outputs)."""
    from ..ir.graph import shape_is_static

    def fix(shapes):
        return [s if s is None or shape_is_static(s) else () for s in shapes]
    outs = [() if s is None else s for s in fix(ctx.out_shapes)]
    return KernelContext(ctx.node, ctx.opset, fix(ctx.in_shapes), list(ctx.in_dtypes), outs,
                         list(ctx.out_dtypes), graph=ctx.graph)


@dataclass(frozen=True)
class _HostInfer:
    """A run-time shape function kept here for an op whose kernel module has none."""

    infer: object
    shape_inputs: tuple
    #: its answer depends on the input shapes and dtypes only (the runner keeps it per signature)
    static: bool = False


def _string_split_infer(ctx, arrays):
    """StringSplit: Y is X's shape plus the longest split's length; Z is X's shape."""
    x = np.asarray(arrays[0])
    delim = ctx.attrs.get("delimiter")
    if isinstance(delim, bytes):
        delim = delim.decode()
    ms = ctx.attrs.get("maxsplit")
    maxsplit = -1 if ms is None else int(ms)
    width = max((len(str(w).split(delim or None, maxsplit)) for w in x.reshape(-1)), default=0)
    dt = list(ctx.out_dtypes) + [None, None]
    return [(tuple(x.shape) + (width,), dt[0]), (tuple(x.shape), dt[1] if dt[1] is not None else np.int64)]


def _host_value_infer(ctx, arrays):
    """Ops whose every output is a host value (a sequence or optional): shape (), dtype object."""
    from ..ir.graph import HOST_DTYPE
    return [((), np.dtype(HOST_DTYPE)) for _ in ctx.out_dtypes]


def _optional_get_element_infer(ctx, arrays):
    """OptionalGetElement: the element's shape and dtype (a tensor), or a host value."""
    from ..ir.graph import HOST_DTYPE
    v = arrays[0][()] if isinstance(arrays[0], np.ndarray) and arrays[0].dtype == HOST_DTYPE else arrays[0]
    if isinstance(v, np.ndarray):
        return [(tuple(v.shape), v.dtype)]
    return [((), np.dtype(HOST_DTYPE))]


#: (domain, op type) → run-time shape function for ops whose definition has none. The sequence
#: ops are here because onnx's per-node inference cannot be given a host value's type (a
#: sequence's element type is not in its buffer): their outputs are host values of shape ()
HOST_INFER = {("", "StringSplit"): _HostInfer(_string_split_infer, (0,)),
              **{("", op): _HostInfer(_host_value_infer, (), static=True) for op in (
                  "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceEmpty", "SplitToSequence",
                  "Optional")},
              ("", "SequenceLength"): _HostInfer(lambda ctx, a: [((), np.dtype(np.int64))], (), static=True),
              ("", "OptionalHasElement"): _HostInfer(lambda ctx, a: [((), np.dtype(np.bool_))], (), static=True),
              ("", "OptionalGetElement"): _HostInfer(_optional_get_element_infer, (0,))}


def rejected_input_types(node, in_shapes, in_dtypes) -> str | None:
    """onnx's per-node inference given only the input types (all static tensors): its error
    message when it rejects them (e.g. Range's bounds that are not scalars), else None. Used at
    plan time for nodes whose output shapes are left to the run, so that a node which cannot
    run with these inputs fails closed before the run."""
    import onnx
    from onnx.shape_inference import infer_node_outputs

    if runs_to_know(node) or op_infer(node) is not None or node.domain not in ("", "ai.onnx"):
        return None
    if any(s is None or d is None or np.dtype(d) == object for n, s, d in zip(node.inputs, in_shapes, in_dtypes)
           if n):  # symbolic dims are fine (their rank is known): they go to onnx as dim_params
        return None
    types = {n: _type(s, d) for n, s, d in zip(node.inputs, in_shapes, in_dtypes) if n}
    try:
        schema = _schema(node.op_type, node.opset, node.domain)
        infer_node_outputs(schema, node.proto, types, {},
                           opset_imports=[onnx.helper.make_opsetid(node.domain, node.opset)])
    except Exception as e:  # noqa: BLE001 - onnx raises its own InferenceError / ValueError types
        return " ".join(str(e).split())   # whole: onnx's text is never cut
    return None


@functools.lru_cache(maxsize=None)
def _opdef(domain: str, op_type: str, opset: int):
    from ..kernels import registry as reg
    defs = [d for d in reg.registry() if d.domain == domain and d.op_type == op_type and d.claims(opset)]
    for d in defs:
        if d.infer is not None or d.shape_inputs is not None:
            return d
    return defs[0] if defs else None


@dataclass
class _Values:
    """Stands in for the graph in a :class:`RuntimeContext`: the run-time values of shape inputs
    answer ``is_constant``/``initializer``; everything else (``values``, ``opset_imports`` ...)
    is the graph's."""

    runtime: dict = field(default_factory=dict)
    graph: object = None

    def is_constant(self, name):
        return name in self.runtime or (self.graph is not None and self.graph.is_constant(name))

    def initializer(self, name):
        return self.runtime[name] if name in self.runtime else self.graph.initializer(name)

    def __getattr__(self, name):
        if name in ("runtime", "graph") or self.graph is None:
            raise AttributeError(name)
        return getattr(self.graph, name)


def RuntimeContext(ctx, in_shapes, in_dtypes, out_shapes, out_dtypes, values: dict):
    """A copy of the kernel context ``ctx`` with the actual shapes and the run-time values of the
    shape inputs (``values``: input name → host array) answering ``ctx.const``."""
    return KernelContext(ctx.node, ctx.opset, list(in_shapes), list(in_dtypes), list(out_shapes),
                         list(out_dtypes), graph=_Values(dict(values), ctx.graph))


def _type(shape, dtype):
    from onnx import helper
    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                         [d if d is None or isinstance(d, str) else int(d) for d in shape])


@functools.lru_cache(maxsize=None)
def _schema(op_type, opset, domain):
    import onnx.defs
    return onnx.defs.get_schema(op_type, opset, domain)


def infer_outputs(node, in_shapes, in_dtypes, values: dict) -> list:
    """``[(shape, dtype)]`` of the node's present outputs (None for absent ones), from the
    actual input shapes/dtypes and the values of its shape inputs (name → host array), by
    onnx's per-node inference. Raises :class:`RuntimeShapeError` when onnx cannot give
    static shapes, or when the values are invalid for the op."""
    import onnx
    from onnx import numpy_helper
    from onnx.shape_inference import infer_node_outputs
    from ..ir.graph import onnx_to_np_dtype
    from ..ir.context import present_outputs

    if node.op_type == "Range" and node.domain in ("", "ai.onnx"):
        # 1-element vector bounds count as scalars (onnxruntime and onnx's reference accept
        # them; onnx's inference does not): inferred as the scalars they hold
        in_shapes = [() if s is not None and tuple(s) == (1,) else s for s in in_shapes]
        values = {k: np.asarray(v).reshape(()) if np.asarray(v).shape == (1,) else v for k, v in values.items()}
    types = {n: _type(s, d) for n, s, d in zip(node.inputs, in_shapes, in_dtypes) if n and s is not None}
    data = {n: numpy_helper.from_array(np.asarray(v, order="C"), n) for n, v in values.items()}
    try:
        schema = _schema(node.op_type, node.opset, node.domain)
        res = infer_node_outputs(schema, node.proto, types, data,
                                 opset_imports=[onnx.helper.make_opsetid(node.domain, node.opset)])
    except Exception as e:
        msg = " ".join(str(e).split())
        ins = ", ".join(f"{k} {n!r} ({np.dtype(d).name if d is not None else '?'}{list(sh) if sh is not None else '[?]'})"
                        for k, (n, sh, d) in enumerate(zip(node.inputs, in_shapes, in_dtypes)) if n)
        raise RuntimeShapeError(f"its run-time inputs ({ins}) are invalid for it; valid: inputs as "
                                f"{node.op_type}-{node.opset}'s specification allows\nONNX shape inference: {msg}") from e
    out = []
    own = None   # the op definition's shapes, where onnx's inference gives none (a scalar GatherND)
    for k, name in enumerate(present_outputs(node)):
        if not name:
            out.append(None)
            continue
        t = res.get(name)
        if (t is not None and t.HasField("tensor_type") and not t.tensor_type.HasField("shape")
                and all(s is not None for n, s in zip(node.inputs, in_shapes) if n)):
            if own is None:
                d = _opdef(node.domain, node.op_type, node.opset)
                own = (d.shape(KernelContext(node, node.opset, list(in_shapes), list(in_dtypes)))
                       if d is not None and d.shape is not None else [])
            if k < len(own) and own[k] is not None:
                t.tensor_type.shape.SetInParent()
                for dim in own[k]:
                    t.tensor_type.shape.dim.add().dim_value = int(dim)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            raise RuntimeShapeError(f"onnx's inference gives no shape for output {name!r} from inputs "
                                    f"{_fmt(in_shapes, in_dtypes)}")
        dims = t.tensor_type.shape.dim
        if not all(d.HasField("dim_value") for d in dims):
            raise RuntimeShapeError(f"onnx's inference gives no static shape for output {name!r} from "
                                    f"inputs {_fmt(in_shapes, in_dtypes)}")
        out.append((tuple(int(d.dim_value) for d in dims), onnx_to_np_dtype(t.tensor_type.elem_type)))
    _check(node, in_shapes, out)
    return out


def _check(node, in_shapes, out) -> None:
    """What onnx's inference does not check and a kernel must not be given."""
    if node.op_type == "Reshape" and in_shapes and in_shapes[0] is not None and out and out[0] is not None:
        a, b = _prod(in_shapes[0]), _prod(out[0][0])
        if a != b:
            raise RuntimeShapeError(f"cannot reshape {a} element(s) of shape {tuple(in_shapes[0])} to "
                                    f"{out[0][0]} ({b} element(s))")
    for o in out:
        if o is not None and any(d < 0 for d in o[0]):
            raise RuntimeShapeError(f"the run-time inputs give a negative dim: {o[0]}")


def _prod(s) -> int:
    p = 1
    for d in s:
        p *= int(d)
    return p


def _fmt(shapes, dtypes) -> str:
    return ", ".join("absent" if s is None else f"{np.dtype(d).name} {tuple(s)}" for s, d in zip(shapes, dtypes))
