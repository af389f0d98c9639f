"""Run one ONNX node on a provider the way users run models: a one-node model through the
loader (:func:`hetero_explore.load_model`: validation, shape inference) and
:func:`hetero_explore.execution.runtime.run_graph` (the executor: kernels built first, the
memory plan, a compiled program). Only a caller that gives the output shapes itself (a case
onnx's inference cannot compute) gets a hand-built context, run through
:meth:`~hetero_explore.runner.core.NodeRunner.run_once` -- the same program path."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from hetero_explore.ir.graph import Node, onnx_to_np_dtype
from hetero_explore.ir.context import KernelContext
from hetero_explore.execution.runtime import run_graph
from hetero_explore.load.loader import load_model
from hetero_explore.runner.core import NodeRunner


class _ConstGraph:
    """Minimal stand-in for Graph.is_constant/initializer used by KernelContext.const."""

    def __init__(self, consts: dict):
        self._c = consts

    def is_constant(self, name):
        return name in self._c

    def initializer(self, name):
        return self._c[name]


def node_model(node_proto: onnx.NodeProto, inputs, opset: int = 17, const_inputs=()):
    """A one-node model with graph inputs typed from ``inputs``; inputs whose index
    is in ``const_inputs`` become initializers."""
    g_inputs, inits = [], []
    for i, (name, arr) in enumerate(zip(node_proto.input, inputs)):
        if not name or arr is None:
            continue
        arr = np.asarray(arr)
        if i in const_inputs:
            inits.append(numpy_helper.from_array(arr, name))
        else:
            g_inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
    outs = [helper.make_tensor_value_info(o, 0, None) for o in node_proto.output if o]
    graph = helper.make_graph([node_proto], "t", g_inputs, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def infer_outputs(model):
    """Output shapes and dtypes by onnx's inference (types unchecked: see run_node's beyond_schema)."""
    inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    shapes, dtypes = [], []
    for o in inferred.graph.output:
        tt = o.type.tensor_type
        shapes.append(tuple(d.dim_value for d in tt.shape.dim))
        dtypes.append(onnx_to_np_dtype(tt.elem_type))
    return shapes, dtypes


def _aligned(node_proto, values):
    """Per-output values listed for the node's non-empty outputs, aligned to its present
    outputs (None where an optional output in the middle is absent), as node_context does."""
    present = list(node_proto.output)
    while present and not present[-1]:
        present.pop()
    values = list(values)
    if len(values) == len(present) or len(values) != sum(1 for o in present if o):
        return values
    it = iter(values)
    return [next(it) if o else None for o in present]


def make_context(node_proto, inputs, opset=17, const_inputs=(), out_shapes=None, out_dtypes=None):
    model = node_model(node_proto, inputs, opset, const_inputs)
    if out_shapes is None:
        out_shapes, out_dtypes = infer_outputs(model)
    node = Node(0, node_proto, opset)
    consts = {node_proto.input[i]: np.asarray(inputs[i]) for i in const_inputs}
    in_shapes = [None if a is None else tuple(np.shape(a)) for a in inputs]
    in_dtypes = [None if a is None else np.asarray(a).dtype for a in inputs]
    # pad absent trailing optional inputs
    while len(in_shapes) < len(node_proto.input):
        in_shapes.append(None)
        in_dtypes.append(None)
    return KernelContext(node, opset, in_shapes, in_dtypes, _aligned(node_proto, out_shapes),
                         _aligned(node_proto, out_dtypes), graph=_ConstGraph(consts))


def run_node(provider, node_proto, inputs, opset: int = 17, const_inputs=(), out_shapes=None,
             out_dtypes=None, *, beyond_schema: bool | None = None):
    """Run ``node_proto`` on ``provider``; returns its (non-empty) outputs as numpy arrays.

    ``beyond_schema``: the node's types are beyond onnx's type constraints at ``opset`` (a
    kernel that takes more than the spec asks): the loader would refuse the model, so the
    context is built here, with onnx's inference not checking types. None (the default):
    decided by :func:`schema_allows` on the node's input and output types. Raises whatever loading or
    building the kernel raises (KernelError when the provider declines the node); a kernel
    failing at run time is a NodeExecutionError (an ExecutionError); a kernel keeping an
    allocation is an AllocationLeak."""
    feeds = {}   # every input; a constant one is the model's initializer on the loader's path
    for name, a in zip(node_proto.input, inputs):
        if not name or a is None:
            continue
        a = np.asarray(a)
        if name in feeds:
            if not np.array_equal(feeds[name], a, equal_nan=a.dtype.kind in "fc"):
                raise ValueError(f"input {name!r} is given twice with different values")
            continue
        feeds[name] = a
    keep = [o for o in node_proto.output if o]
    if beyond_schema is None:
        beyond_schema = not schema_allows(node_proto, inputs, opset, const_inputs)
    if out_shapes is None and not beyond_schema:
        graph = load_model(node_model(node_proto, inputs, opset, const_inputs), fold_constants=False,
                           check=False, optimize=False)
        got = run_graph(graph, provider, {n: a for n, a in feeds.items() if n in graph.inputs})
        return [got[o] for o in keep]
    ctx = make_context(node_proto, inputs, opset, const_inputs, out_shapes, out_dtypes)
    got = NodeRunner(provider, [ctx], keep).run_once(feeds)
    return [got[o] for o in keep]


def schema_allows(node_proto, inputs, opset: int = 17, const_inputs=()) -> bool:
    """Whether onnx's schema of the node at ``opset`` allows its input and output element types
    (its type constraints); True for a domain onnx has no schema for."""
    import onnx.defs
    try:
        schema = onnx.defs.get_schema(node_proto.op_type, opset, node_proto.domain or "")
    except Exception:
        return True
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}

    def ok(params, i, dtype) -> bool:
        if not params or dtype is None:
            return True
        param = params[min(i, len(params) - 1)]
        want = allowed.get(param.type_str)
        if want is None:   # a concrete type string, not a constraint
            want = {param.type_str}
        name = onnx.TensorProto.DataType.Name(helper.np_dtype_to_tensor_dtype(np.dtype(dtype))).lower()
        return f"tensor({name})" in want or not any(w.startswith("tensor(") for w in want)

    ins = [None if a is None else np.asarray(a).dtype for a in inputs]
    if not all(ok(schema.inputs, i, d) for i, d in enumerate(ins)):
        return False
    try:
        _, outs = infer_outputs(node_model(node_proto, inputs, opset, const_inputs))
    except Exception:   # onnx's inference itself fails: the loader path says why
        return True
    return all(ok(schema.outputs, i, d) for i, d in enumerate(outs))


def supports(provider, node_proto, inputs, opset=17, const_inputs=()):
    ctx = make_context(node_proto, inputs, opset, const_inputs)
    return provider.supports(ctx)


def _providers():
    from hetero_explore.providers.cpu import NumbaCPUProvider
    from hetero_explore.providers.cuda import NumbaCUDAProvider
    global _CPU, _CUDA
    if _CPU is None:
        _CPU, _CUDA = NumbaCPUProvider(), NumbaCUDAProvider()
    return _CPU, _CUDA


_CPU = _CUDA = None


def run_both(node_proto, inputs, opset: int = 17, const_inputs=(), *, cuda: bool = True, out_shapes=None,
             out_dtypes=None, beyond_schema: bool | None = None):
    """The node's outputs on the CPU provider; with ``cuda`` also on the CUDA provider (the
    simulator in the suite), every output asserted bitwise equal (:mod:`support.bits`'s rule).
    Returns the CPU outputs."""
    from support.bits import assert_bits_equal
    cpu, gpu = _providers()
    c = run_node(cpu, node_proto, inputs, opset, const_inputs, out_shapes, out_dtypes, beyond_schema=beyond_schema)
    if cuda:
        g = run_node(gpu, node_proto, inputs, opset, const_inputs, out_shapes, out_dtypes,
                     beyond_schema=beyond_schema)
        assert len(c) == len(g)
        for k, (a, b) in enumerate(zip(c, g)):
            assert_bits_equal(a, b, f"{node_proto.op_type} output {k}: CPU vs CUDA")
    return c


def reference(node_proto, inputs, opset: int = 17, const_inputs=(), domain: str = ""):
    """onnx's ReferenceEvaluator on the one-node model (``domain``: a custom domain to import)."""
    from onnx.reference import ReferenceEvaluator
    m = node_model(node_proto, inputs, opset, const_inputs)
    if domain:
        m.opset_import.append(helper.make_opsetid(domain, 1))
    feeds = {n: a for i, (n, a) in enumerate(zip(node_proto.input, inputs))
             if n and a is not None and i not in const_inputs}
    return ReferenceEvaluator(m).run(None, feeds)
