"""ONNX → IR: read, check, bind symbolic dims, infer shapes, fold shape subgraphs.

Uses onnx's own checker, shape inference (with data propagation) and reference
evaluator (for folding constant subgraphs), so that what we call "static" is
what ONNX itself infers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from .errors import InvalidModelError, ModelLoadError, ShapeBindingError
from .ir import Graph, build_graph, shape_is_static

#: ops folded at load time when all their inputs are constant (shape computations,
#: as real exporters emit them: Shape → Gather → Unsqueeze → Concat → Reshape ...)
FOLDABLE_OPS = frozenset({
    "Shape", "Size", "Constant", "ConstantOfShape", "Gather", "Unsqueeze", "Squeeze", "Concat",
    "Reshape", "Slice", "Cast", "Range", "Add", "Sub", "Mul", "Div", "Equal", "Where", "Expand",
    "Identity", "ReduceProd", "Min", "Max", "Not", "Less", "Greater", "Floor", "Ceil", "Neg",
    "Abs", "Mod", "And", "Or", "Transpose", "Flatten", "Tile", "CastLike", "NonZero",
})
#: never fold a value larger than this many elements (keeps models small and weights honest)
FOLD_MAX_ELEMENTS = 1 << 16
_FOLD_ROUNDS = 8


def _read(model) -> tuple[onnx.ModelProto, Path | None]:
    if isinstance(model, onnx.ModelProto):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        return m, None
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            m = onnx.load_from_string(bytes(model))
        except Exception as e:
            raise ModelLoadError(f"these bytes are not a serialized ONNX model: {e}") from e
        return m, None
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.exists():
            raise ModelLoadError(f"model file not found: {str(path)!r}")
        if path.is_dir():
            raise ModelLoadError(f"{str(path)!r} is a directory; pass the .onnx file inside it")
        try:
            m = onnx.load(str(path), load_external_data=False)
        except Exception as e:
            raise ModelLoadError(f"{str(path)!r} is not a readable ONNX model: {e}") from e
        return m, path.parent
    raise ModelLoadError(f"cannot load a model from {type(model).__name__}; "
                         "pass a path, an onnx.ModelProto or the serialized bytes")


def _load_external_data(m: onnx.ModelProto, base: Path | None) -> None:
    """Resolve external tensor data, but only files inside the model's own directory."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    tensors = [t for t in _get_all_tensors(m) if uses_external_data(t)]
    if not tensors:
        return
    if base is None:
        raise ModelLoadError("the model keeps tensors in external data files; load it from its "
                             "path so that they can be found next to it")
    root = base.resolve()
    for t in tensors:
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        target = (root / loc).resolve()
        if root != target and root not in target.parents:
            raise ModelLoadError(f"tensor {t.name!r} points at external data {loc!r} outside the "
                                 f"model's directory; refusing to read it")
        if not target.is_file():
            raise ModelLoadError(f"external data file {loc!r} for tensor {t.name!r} is missing")
    try:
        onnx.load_external_data_for_model(m, str(root))
    except Exception as e:
        raise ModelLoadError(f"could not read external data: {e}") from e


def _bind(m: onnx.ModelProto, input_shapes, dim_values) -> None:
    g = m.graph
    inits = {t.name for t in g.initializer}
    real_inputs = {vi.name: vi for vi in g.input if vi.name not in inits}
    input_shapes = dict(input_shapes or {})
    dim_values = dict(dim_values or {})
    for name in input_shapes:
        if name not in real_inputs:
            raise ShapeBindingError(f"input_shapes names {name!r}, which is not a graph input; "
                                    f"inputs are: {sorted(real_inputs)}")
    known_params = {d.dim_param for vi in real_inputs.values()
                    for d in vi.type.tensor_type.shape.dim if d.HasField("dim_param")}
    for p in dim_values:
        if p not in known_params:
            raise ShapeBindingError(f"dim_values names {p!r}, which is no symbolic dim of any input; "
                                    f"symbolic dims are: {sorted(known_params)}")
    for name, vi in real_inputs.items():
        tt = vi.type.tensor_type
        if name in input_shapes:
            shape = tuple(input_shapes[name])
            if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
                raise ShapeBindingError(f"input_shapes[{name!r}] = {shape} must be non-negative ints")
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
                    v = int(dim_values[d.dim_param])
                    d.ClearField("dim_param")
                    d.dim_value = v
    # drop stale intermediate annotations: shape inference recomputes them from the bound inputs
    if input_shapes or dim_values:
        del g.value_info[:]
        for o in g.output:
            tt = o.type.tensor_type
            if tt.HasField("shape") and any(d.HasField("dim_param") for d in tt.shape.dim):
                tt.ClearField("shape")


def _infer(m: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(m, check_type=True, strict_mode=False, data_prop=True)
    except Exception as e:
        raise InvalidModelError(f"ONNX shape inference failed: {e}") from e


def _static_shape(vi) -> tuple | None:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    dims = []
    for d in tt.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return tuple(dims)


def _fold_once(m: onnx.ModelProto) -> list[str]:
    """Fold every node whose inputs are constant (or Shape/Size of a static value).
    Returns the names of folded nodes; ``m`` is rewritten in place."""
    from onnx.reference import ReferenceEvaluator

    g = m.graph
    consts: dict[str, np.ndarray] = {}
    for t in g.initializer:
        if int(np.prod(t.dims, dtype=np.int64)) <= FOLD_MAX_ELEMENTS:
            consts[t.name] = None  # lazily materialized
    init_by_name = {t.name: t for t in g.initializer}
    shapes = {vi.name: _static_shape(vi) for vi in list(g.value_info) + list(g.input) + list(g.output)}
    for t in g.initializer:
        shapes[t.name] = tuple(t.dims)
    graph_outputs = {o.name for o in g.output}
    opsets = {o.domain: o.version for o in m.opset_import}

    def value(name):
        v = consts[name]
        if v is None:
            v = numpy_helper.to_array(init_by_name[name])
            consts[name] = v
        return v

    folded: list[str] = []
    keep = []
    new_inits = []
    for n in g.node:
        if n.domain not in ("", "ai.onnx") or n.op_type not in FOLDABLE_OPS or any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            keep.append(n)
            continue
        outs: list | None = None
        if n.op_type in ("Shape", "Size") and n.input and shapes.get(n.input[0]) is not None:
            shp = shapes[n.input[0]]
            if n.op_type == "Size":
                outs = [np.array(int(np.prod(shp, dtype=np.int64)), dtype=np.int64)]
            else:
                attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
                r = len(shp)
                s = attrs.get("start", 0)
                e = attrs.get("end", r)
                s = min(max(s + r if s < 0 else s, 0), r)
                e = min(max(e + r if e < 0 else e, 0), r)
                outs = [np.array(shp[s:e], dtype=np.int64)]
        elif all((not i) or i in consts for i in n.input):
            feeds = {i: value(i) for i in n.input if i}
            try:
                ev = ReferenceEvaluator(helper.make_model(
                    helper.make_graph(
                        [n], "fold",
                        [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                         for i, v in feeds.items()],
                        [helper.make_tensor_value_info(o, 0, None) for o in n.output if o]),
                    opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()]))
                outs = ev.run(None, feeds)
            except Exception:
                outs = None
        if outs is None or any(np.asarray(o).size > FOLD_MAX_ELEMENTS for o in outs):
            keep.append(n)
            continue
        present = [o for o in n.output if o]
        for name, arr in zip(present, outs):
            arr = np.asarray(arr)
            consts[name] = arr
            shapes[name] = arr.shape
            t = numpy_helper.from_array(arr, name)
            new_inits.append(t)
            init_by_name[name] = t
        folded.append(n.name or f"{n.op_type}:{present[0] if present else '?'}")
    if not folded:
        return []
    # Only keep initializers for folded outputs that someone still uses.
    used = {i for n in keep for i in n.input} | graph_outputs
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(t for t in new_inits if t.name in used)
    names = {t.name for t in new_inits}
    keep_vi = [vi for vi in g.value_info if vi.name not in names]
    del g.value_info[:]
    g.value_info.extend(keep_vi)
    # A folded graph output must stay an output; make it an initializer-backed output.
    return folded


def load_model(model, input_shapes: Mapping[str, tuple] | None = None,
               dim_values: Mapping[str, int] | None = None, *, fold_constants: bool = True,
               check: bool = True) -> Graph:
    """Load an ONNX model into the IR.

    Args:
        model: a path, an ``onnx.ModelProto`` or serialized bytes.
        input_shapes: graph input name → concrete shape, to bind symbolic dims.
        dim_values: symbolic dim name (``dim_param``) → value, bound wherever it appears.
        fold_constants: fold shape-computing constant subgraphs at load time (as a
            runtime's graph optimizer would); folded node names are listed on
            ``Graph.folded_nodes``.
        check: run ``onnx.checker`` first.

    Values still symbolic afterwards are listed on ``Graph.symbolic_values``.
    """
    m, base = _read(model)
    if not m.HasField("graph"):
        raise InvalidModelError("the model has no graph")
    _load_external_data(m, base)
    if check:
        try:
            onnx.checker.check_model(m)
        except onnx.checker.ValidationError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
            raise InvalidModelError(f"onnx.checker rejected the model: {first}") from e
        except Exception as e:  # protobuf errors and the like
            raise InvalidModelError(f"onnx.checker could not check the model: {e}") from e
    _bind(m, input_shapes, dim_values)
    m = _infer(m)
    folded: list[str] = []
    if fold_constants:
        for _ in range(_FOLD_ROUNDS):
            f = _fold_once(m)
            if not f:
                break
            folded += f
            # re-infer with the new constants (Reshape targets etc. become known)
            del m.graph.value_info[:]
            m = _infer(m)
    g = build_graph(m, folded_nodes=folded)
    non_tensor = {vi.name for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)
                  if vi.type.WhichOneof("value") not in (None, "tensor_type")}
    g.symbolic_values = [name for name, v in g.values.items()
                         if v.kind != "initializer" and name not in non_tensor and not shape_is_static(v.shape)]
    return g
