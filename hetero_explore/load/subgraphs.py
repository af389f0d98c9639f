"""Child graphs: a control node's subgraph (``then_branch``, ``body`` ...) as a standalone model
and its IR, inferred for the input types it is given and folded as the loader folds.

A child graph's inputs are the subgraph's own, plus one per value it reads from an enclosing
scope (the control node's implicit inputs in the parent IR), except the parent's small
constants, which become the child's initializers so that it places and folds as it would at
top level."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ..ir.errors import HeteroExploreError
from ..ir.graph import Graph, outer_names
from .fold import fold_model
from .infer import infer_shapes
from .passes import graph_from_model


class ChildGraphError(HeteroExploreError):
    """A subgraph cannot be made into a child graph for the types it is given."""


def value_type(v) -> onnx.TypeProto:
    """The TypeProto of a parent value (declared/inferred, or from its dtype and shape)."""
    if v.type_proto is not None:
        return v.type_proto
    shape = None if v.shape is None else [d if isinstance(d, (int, str)) else None for d in v.shape]
    return helper.make_tensor_type_proto(v.elem_type, shape)


#: outer-scope constants up to this many bytes are bound as constants of a child graph (so it
#: places and folds as it would at top level: a branch's Slice reading the outer graph's
#: starts/ends); larger ones (weights) stay inputs of the child, moved like any captured value
CAPTURED_CONST_MAX_BYTES = 1 << 20


def _bound_constant(parent: Graph, name: str):
    """The parent's initializer ``name`` when it is small enough to bind into a child, else None."""
    t = parent.initializer_protos.get(name)
    if t is None:
        return None
    n = int(np.prod(list(t.dims), dtype=np.int64))
    itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize if t.data_type else 8
    return t if n * itemsize <= CAPTURED_CONST_MAX_BYTES else None


def child_model(parent: Graph, sub: onnx.GraphProto, types: dict | None = None) -> onnx.ModelProto:
    """The subgraph ``sub`` of a node of ``parent`` as a standalone model: its own inputs, then
    one input per outer-scope value it reads, except the parent's constants (up to
    :data:`CAPTURED_CONST_MAX_BYTES`), which become its initializers. ``types`` (input name →
    TypeProto) gives the run-time types; their intermediate and output shapes are then inferred
    afresh."""
    g = onnx.GraphProto()
    g.CopyFrom(sub)
    formal = {vi.name for vi in g.input} | {t.name for t in g.initializer}
    for name in outer_names(sub):
        if name in formal:
            continue
        t = _bound_constant(parent, name)
        if t is not None:
            g.initializer.append(t)
            continue
        vi = g.input.add()
        vi.name = name
        if types is not None and name in types:
            vi.type.CopyFrom(types[name])
        elif name in parent.values:
            vi.type.CopyFrom(value_type(parent.values[name]))
    if types is not None:
        for vi in g.input:
            if vi.name in types:
                vi.type.CopyFrom(types[vi.name])
        del g.value_info[:]
        for o in g.output:  # recomputed from the actual inputs
            t = o.type
            if t.HasField("tensor_type"):
                et = t.tensor_type.elem_type
                t.ClearField("tensor_type")
                t.tensor_type.elem_type = et
    src = parent.model
    m = helper.make_model(g, opset_imports=list(src.opset_import), producer_name="hetero_explore")
    m.ir_version = src.ir_version
    m.functions.extend(src.functions)
    return m


def child_graph(parent: Graph, sub: onnx.GraphProto, types: dict | None = None, *,
                where: str = "") -> Graph:
    """The child :class:`Graph` of ``sub`` (see :func:`child_model`), inferred and folded."""
    m = child_model(parent, sub, types)
    if types is not None:
        try:
            m = infer_shapes(m)
        except HeteroExploreError as e:
            raise ChildGraphError(f"{where}: shape inference of the subgraph with its run-time inputs "
                                  f"failed: {e}") from e
    folded: list[str] = []
    try:
        res = fold_model(m)
        m, folded = res.model, res.folded
    except HeteroExploreError:
        pass  # unfolded: a node that cannot run says so when its kernel is built
    g = graph_from_model(m, folded)
    g.name = where or g.name
    return g
