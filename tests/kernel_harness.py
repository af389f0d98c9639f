"""Run one ONNX node on a provider through the node runner the executors use
(:class:`hetero_explore.runner.core.NodeRunner`), from numpy inputs."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from hetero_explore.ir.graph import Node, onnx_to_np_dtype
from hetero_explore.ir.context import KernelContext, present_outputs
from hetero_explore.runner.core import Ledger, NodeRunner, memory_owners


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
             out_dtypes=None):
    """Run ``node_proto`` on ``provider``; returns its (non-empty) outputs as numpy arrays.

    Raises whatever building the kernel raises (KernelError when the provider
    declines); a kernel failing at run time is a NodeExecutionError (an
    ExecutionError); a kernel keeping an allocation is an AllocationLeak."""
    ctx = make_context(node_proto, inputs, opset, const_inputs, out_shapes, out_dtypes)
    keep = [o for o in present_outputs(ctx.node) if o]
    runner = NodeRunner(provider, [ctx], keep)
    with Ledger(memory_owners([provider])) as ledger:
        env = {}
        for name, a in zip(node_proto.input, inputs):
            if not name or a is None:
                continue
            a = np.asarray(a)
            if name in env:
                if not np.array_equal(provider.copy_to_host(env[name]), a, equal_nan=a.dtype.kind in "fc"):
                    raise ValueError(f"input {name!r} is given twice with different values")
                continue
            env[name] = ledger.allocate(provider, a.shape, a.dtype)
            provider.copy_from_host(np.ascontiguousarray(a).reshape(a.shape), env[name])
        outs = runner.run(env, ledger)
        got = [provider.copy_to_host(outs[o]) for o in keep]
    ledger.check_leaks()
    return got


def supports(provider, node_proto, inputs, opset=17, const_inputs=()):
    ctx = make_context(node_proto, inputs, opset, const_inputs)
    return provider.supports(ctx)
