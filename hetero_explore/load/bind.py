"""Binding symbolic dims: declared unknown dims made symbolic, input shapes and dim values
bound and checked before shape inference."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import onnx

from ..ir.errors import InvalidModelError, ShapeBindingError
from ..ir.graph import fmt_type as _fmt_type
from .options import MAX_ELEMENTS


# -- declared shapes and bindings ------------------------------------------------------------
def _normalize_declared_dims(m: onnx.ModelProto) -> None:
    """Exporters write unknown dims as -1 (paddle2onnx) or 0 on graph inputs: make those symbolic
    (named ``<input>:<axis>``, bindable by input_shapes or dim_values); a negative dim elsewhere
    is unknown, and so is a 0 when the inputs used 0 for unknown."""
    g = m.graph
    inits = {t.name for t in g.initializer}
    params = {d.dim_param for vi in list(g.input) + list(g.output) + list(g.value_info)
              for d in vi.type.tensor_type.shape.dim if d.HasField("dim_param")}
    zero_inputs = False
    for vi in g.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value <= 0:
                name = f"{vi.name}:{i}"
                while name in params:
                    name += "'"
                params.add(name)
                zero_inputs |= d.dim_value == 0
                d.ClearField("dim_value")
                d.dim_param = name
    # an exporter that writes unknown input dims as 0 writes unknown output dims as 0 too
    lowest = 0 if zero_inputs else -1
    for vi in list(g.output) + list(g.value_info):
        if vi.type.HasField("tensor_type"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_value") and d.dim_value <= lowest:
                    d.ClearField("dim_value")


def _dim_value(v, what: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise ShapeBindingError(f"{what} is {v!r} ({type(v).__name__}); dims must be non-negative ints")
    v = int(v)
    if v < 0:
        raise ShapeBindingError(f"{what} is {v}; dims must be non-negative ints")
    if v > MAX_ELEMENTS:
        raise ShapeBindingError(f"{what} is {v}, over the bound of {MAX_ELEMENTS} elements")
    return v


def _as_mapping(x, what: str) -> dict:
    if x is None:
        return {}
    if not isinstance(x, Mapping):
        raise ShapeBindingError(f"{what} must be a dict, got {type(x).__name__}")
    for k in x:
        if not isinstance(k, str):
            raise ShapeBindingError(f"{what} keys must be names (str), got {k!r}")
    return dict(x)


def _shape_arg(name: str, s) -> tuple[int, ...]:
    if isinstance(s, (str, bytes)) or not hasattr(s, "__iter__"):
        raise ShapeBindingError(f"input_shapes[{name!r}] = {s!r} must be a sequence of ints, e.g. (1, 3, 224, 224)")
    try:
        dims = list(s)
    except Exception as e:
        raise ShapeBindingError(f"input_shapes[{name!r}] = {s!r} must be a sequence of ints: {e}") from e
    out = tuple(_dim_value(d, f"input_shapes[{name!r}][{i}]") for i, d in enumerate(dims))
    _numel_binding(name, out)
    return out


def _numel_binding(name: str, shape) -> None:
    if math.prod(shape) > MAX_ELEMENTS:
        raise ShapeBindingError(f"input_shapes[{name!r}] = {shape} has {math.prod(shape)} elements, over "
                                f"the bound of {MAX_ELEMENTS}")


def _bind(m: onnx.ModelProto, input_shapes, dim_values) -> None:
    g = m.graph
    inits = {t.name for t in g.initializer}
    real_inputs = {vi.name: vi for vi in g.input if vi.name not in inits}
    input_shapes = _as_mapping(input_shapes, "input_shapes")
    dim_values = {k: _dim_value(v, f"dim_values[{k!r}]")
                  for k, v in _as_mapping(dim_values, "dim_values").items()}
    for name in input_shapes:
        if name not in real_inputs:
            raise ShapeBindingError(f"input_shapes names {name!r}, which is not a graph input; "
                                    f"inputs are: {sorted(real_inputs)}")
    input_shapes = {k: _shape_arg(k, v) for k, v in input_shapes.items()}
    known_params = {d.dim_param for vi in real_inputs.values()
                    for d in vi.type.tensor_type.shape.dim if d.HasField("dim_param")}
    for p in dim_values:
        if p not in known_params:
            raise ShapeBindingError(f"dim_values names {p!r}, which is no symbolic dim of any input; "
                                    f"symbolic dims are: {sorted(known_params)}")
    for name, vi in real_inputs.items():
        tt = vi.type.tensor_type
        if name in input_shapes:
            shape = input_shapes[name]
            if tt.HasField("shape"):
                dims = tt.shape.dim
                if len(dims) != len(shape):
                    raise ShapeBindingError(
                        f"input {name!r} has rank {len(dims)} but input_shapes gives {shape} "
                        f"(rank {len(shape)})")
                for i, (d, v) in enumerate(zip(dims, shape)):
                    if d.HasField("dim_value") and d.dim_value != v:
                        raise ShapeBindingError(
                            f"input {name!r} dim {i} is fixed at {d.dim_value}, input_shapes gives {v}")
                    if d.HasField("dim_param") and d.dim_param in dim_values and dim_values[d.dim_param] != v:
                        raise ShapeBindingError(f"input {name!r} dim {i} ({d.dim_param}) is bound to "
                                                f"{dim_values[d.dim_param]} by dim_values but {v} here")
            tt.ClearField("shape")
            tt.shape.SetInParent()  # rank 0 is a shape with no dims, not an unknown shape
            for v in shape:
                tt.shape.dim.add().dim_value = int(v)
        elif tt.HasField("shape"):
            for d in tt.shape.dim:
                if d.HasField("dim_param") and d.dim_param in dim_values:
                    v = dim_values[d.dim_param]
                    d.ClearField("dim_param")
                    d.dim_value = v
    # drop stale intermediate annotations: shape inference recomputes them from the bound inputs
    if input_shapes or dim_values:
        del g.value_info[:]
        for o in g.output:
            tt = o.type.tensor_type
            if tt.HasField("shape") and any(d.HasField("dim_param") for d in tt.shape.dim):
                tt.ClearField("shape")


def _check_input_dims(m: onnx.ModelProto) -> None:
    inits = {t.name for t in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name not in inits:
            _check_value_dims(vi, "graph input")


def _check_value_dims(vi: onnx.ValueInfoProto, what: str) -> None:
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return
    dims = [d.dim_value for d in vi.type.tensor_type.shape.dim if d.HasField("dim_value")]
    if any(d > MAX_ELEMENTS for d in dims) or math.prod(dims) > MAX_ELEMENTS:
        raise InvalidModelError(f"{what} {vi.name!r} has shape {_fmt_type(vi.type)}: "
                                f"{math.prod(dims)} elements, over the bound of {MAX_ELEMENTS}")
