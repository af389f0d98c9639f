"""ONNX → IR: read, validate, bind symbolic dims, infer shapes; fold (in :mod:`.fold`).

Uses onnx's own checker, operator schemas and shape inference (with data
propagation), so that what we call "static" is what ONNX itself infers. Every
size that comes from the model is checked before anything of that size is read
or allocated. Constant folding runs the CPU provider's kernels and therefore
lives above the providers, in :mod:`hetero_explore.load.fold`; :func:`load_model`
composes the two (this module imports no provider at module level).
"""

from __future__ import annotations

import gc
import math
import os
import stat
from pathlib import Path
from typing import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, shape_inference

from ..ir.errors import (FunctionExpansionError, InvalidModelError, ModelLoadError, ShapeBindingError,
                     ShapeConflictError)
from ..ir.graph import Graph, build_graph, shape_is_static

#: the largest dim (and the largest element count of one tensor) a model may declare or infer;
#: 2**40 elements is 4 TiB of float32 -- anything beyond is a corrupt or hostile model
MAX_ELEMENTS = 1 << 40
#: default bound on the node count once every model-local function call is inlined
DEFAULT_MAX_INLINED_NODES = 1 << 20
#: default budget for the values that constant folding may create at load time (bytes)
DEFAULT_FOLD_LIMIT_BYTES = 1 << 30

_STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training")
_PACKED_BITS = {getattr(TensorProto, n): b for n, b in
                (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2)) if hasattr(TensorProto, n)}


def _short(text: str, limit: int = 120) -> str:
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]} ({len(text)} characters)"


# -- reading -----------------------------------------------------------------------------
def _parse(data: bytes, what: str, fmt: str | None = None) -> onnx.ModelProto:
    if not data:
        raise ModelLoadError(f"{what} is empty (0 bytes); it is not an ONNX model")
    try:
        m = onnx.load_model_from_string(data, format=fmt) if fmt else onnx.load_model_from_string(data)
    except MemoryError:
        raise
    except Exception as e:
        raise ModelLoadError(f"{what} is not a serialized ONNX model: {e}") from e
    if not m.HasField("graph"):
        raise ModelLoadError(f"{what} parses but holds no ONNX graph; it is not an ONNX model "
                             f"(or an empty one)")
    return m


def _format_of(path: Path) -> str | None:
    ext = path.suffix.lower()
    return {".onnxtxt": "textproto", ".textproto": "textproto", ".json": "json"}.get(ext)


def _read_path(path: Path) -> bytes:
    shown = _short(repr(str(path)))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelLoadError(f"model file not found: {shown}") from None
    except OSError as e:
        raise ModelLoadError(f"cannot open model path {shown}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelLoadError(f"{shown} is a directory; pass the .onnx file inside it")
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(f"{shown} is not a regular file (a FIFO, device or socket); "
                             "load ONNX models from regular files")
    try:
        # O_NONBLOCK: never block on a FIFO swapped in after the stat; fstat re-checks
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ModelLoadError(f"cannot open model file {shown}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ModelLoadError(f"{shown} is not a regular file; load ONNX models from regular files")
        return f.read(st.st_size)


def read_model(model) -> tuple[onnx.ModelProto, Path | None]:
    """The model as a fresh ``ModelProto`` and the directory its external data lives in."""
    if isinstance(model, onnx.ModelProto):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        if not m.HasField("graph"):
            raise ModelLoadError("this ModelProto holds no graph; it is not a usable ONNX model")
        return m, None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _parse(bytes(model), "these bytes"), None
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        data = _read_path(path)
        return _parse(data, _short(repr(str(path))), _format_of(path)), path.parent
    raise ModelLoadError(f"cannot load a model from {type(model).__name__}; "
                         "pass a path, an onnx.ModelProto or the serialized bytes")


# -- tensors and external data --------------------------------------------------------------
def _numel(dims, what: str) -> int:
    n = 1
    for d in dims:
        d = int(d)
        if d < 0:
            raise InvalidModelError(f"{what} has a negative dim in {list(dims)}")
        n *= d
    if n > MAX_ELEMENTS:
        raise InvalidModelError(f"{what} declares dims {list(dims)}: {n} elements, over the bound of "
                                f"{MAX_ELEMENTS}; the model is corrupt or hostile")
    return n


def _expected_bytes(t: TensorProto, n: int) -> int | None:
    """Bytes of raw data a dense tensor of ``n`` elements takes (None for strings)."""
    if t.data_type == TensorProto.STRING:
        return None
    if t.data_type in _PACKED_BITS:
        return (n * _PACKED_BITS[t.data_type] + 7) // 8
    return n * np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize


def _typed_count(t: TensorProto, n: int) -> tuple[str, int]:
    """(field, number of entries that field must hold) for a tensor without raw data."""
    field = helper.tensor_dtype_to_field(t.data_type)
    if t.data_type in (TensorProto.COMPLEX64, TensorProto.COMPLEX128):
        return field, 2 * n
    if t.data_type in _PACKED_BITS:
        # packed 4-bit (2-bit) values: one packed byte per int32_data entry
        return field, (n * _PACKED_BITS[t.data_type] + 7) // 8
    return field, n


def check_tensor(t: TensorProto, what: str) -> None:
    """Check that a tensor's data holds exactly what its dims declare (before reading it)."""
    valid = set(TensorProto.DataType.values()) - {TensorProto.UNDEFINED}
    if t.data_type not in valid:
        raise InvalidModelError(f"{what} has an invalid data type {t.data_type}")
    n = _numel(t.dims, what)
    if t.data_location == TensorProto.EXTERNAL:
        return  # checked against its file in _load_external_data, and again once read
    if t.HasField("raw_data") or t.raw_data:
        want = _expected_bytes(t, n)
        if want is None:
            raise InvalidModelError(f"{what} is a string tensor with raw_data; strings go in string_data")
        if len(t.raw_data) != want:
            raise InvalidModelError(f"{what} declares dims {list(t.dims)} ({n} elements, {want} bytes) but "
                                    f"holds {len(t.raw_data)} bytes of data; the model is corrupt")
        return
    try:
        field, want = _typed_count(t, n)
    except Exception as e:
        raise InvalidModelError(f"{what} has data type {t.data_type} whose storage is unknown: {e}") from e
    have = len(getattr(t, field))
    if have != want:
        raise InvalidModelError(f"{what} declares dims {list(t.dims)} ({n} elements) but its {field} holds "
                                f"{have} entries (expected {want}); the model is corrupt")


def _tensors_to_check(m: onnx.ModelProto):
    g = m.graph
    for t in g.initializer:
        yield t, f"initializer {t.name!r}"
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t, f"tensor attribute {a.name!r} of node {n.name or n.op_type!r}"
            elif a.type == onnx.AttributeProto.TENSORS:
                for i, t in enumerate(a.tensors):
                    yield t, f"tensor {i} of attribute {a.name!r} of node {n.name or n.op_type!r}"


def _external_location(t: TensorProto) -> dict:
    return {e.key: e.value for e in t.external_data}


def _load_external_data(m: onnx.ModelProto, base: Path | None) -> None:
    """Resolve external tensor data, only from regular files inside the model's own directory
    (no absolute paths, no ``..``, no symlinks, no hard links, offsets within the file)."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    tensors = [t for t in _get_all_tensors(m) if uses_external_data(t)]
    if not tensors:
        return
    if base is None:
        raise ModelLoadError("the model keeps tensors in external data files; load it from its "
                             "path so that they can be found next to it")
    root = Path(os.path.realpath(base))
    for t in tensors:
        info = _external_location(t)
        loc = info.get("location", "")
        where = f"tensor {t.name!r} points at external data {_short(repr(loc))}"
        if not loc:
            raise InvalidModelError(f"tensor {t.name!r} uses external data but names no location")
        parts = Path(loc).parts
        if os.path.isabs(loc) or Path(loc).drive or ".." in parts:
            raise ModelLoadError(f"{where} outside the model's directory (absolute or with '..'); "
                                 "refusing to read it")
        lexical = root / loc
        if os.path.realpath(lexical) != os.path.normpath(lexical):
            raise ModelLoadError(f"{where} through a symbolic link (or outside the model's directory); "
                                 "refusing to read it: copy the data file next to the model")
        try:
            st = os.lstat(lexical)
        except FileNotFoundError:
            raise ModelLoadError(f"external data file {_short(repr(loc))} for tensor {t.name!r} is missing") \
                from None
        except OSError as e:
            raise ModelLoadError(f"{where} that cannot be read: {e.strerror or e}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ModelLoadError(f"{where}, which is not a regular file (a FIFO, device, socket or "
                                 "directory); refusing to read it")
        if st.st_nlink > 1:
            raise ModelLoadError(f"{where}, a file with {st.st_nlink} hard links; refusing to read it "
                                 "(a hard link can reach outside the model's directory): copy it instead")
        try:
            offset = int(info.get("offset", 0) or 0)
            length = int(info["length"]) if info.get("length") not in (None, "") else None
        except ValueError:
            raise InvalidModelError(f"{where} with a non-integer offset or length: {info}") from None
        n = _numel(t.dims, f"tensor {t.name!r}")
        want = _expected_bytes(t, n)
        if offset < 0 or (length is not None and length < 0):
            raise InvalidModelError(f"{where} with a negative offset or length ({offset}, {length})")
        if offset > st.st_size or (length is not None and offset + length > st.st_size):
            raise InvalidModelError(f"{where} at offset {offset} length {length}, beyond the end of the "
                                    f"{st.st_size}-byte file; the model or its data is corrupt")
        avail = st.st_size - offset if length is None else length
        if want is not None and avail != want:
            raise InvalidModelError(f"tensor {t.name!r} declares dims {list(t.dims)} ({want} bytes) but its "
                                    f"external data holds {avail} bytes; the model or its data is corrupt")
    try:
        onnx.load_external_data_for_model(m, str(root))
    except MemoryError:
        raise
    except Exception as e:
        raise ModelLoadError(f"could not read external data: {e}") from e


# -- structural validation (kept even with check=False) -------------------------------------
def _opsets(m: onnx.ModelProto) -> dict[str, int]:
    return {("" if o.domain == "ai.onnx" else o.domain): o.version for o in m.opset_import}


def validate_structure(m: onnx.ModelProto) -> None:
    """What the kernels and the IR rely on, checked whether or not onnx.checker runs:
    a known IR version, unique producers, unique graph inputs, and attributes whose
    names and types match the operator's schema at the model's opset."""
    max_ir = onnx.IR_VERSION
    if not 1 <= m.ir_version <= max_ir:
        raise InvalidModelError(f"the model's ir_version is {m.ir_version}; this onnx ({onnx.__version__}) "
                                f"reads IR versions 1 to {max_ir}")
    g = m.graph
    opsets = _opsets(m)
    max_opset = onnx.defs.onnx_opset_version()
    if opsets.get("", 0) > max_opset:
        raise InvalidModelError(f"the model imports opset {opsets['']} of the default domain; this onnx "
                                f"knows opsets up to {max_opset}")
    seen_inputs: set[str] = set()
    for vi in g.input:
        if vi.name in seen_inputs:
            raise InvalidModelError(f"graph input {vi.name!r} is listed twice")
        seen_inputs.add(vi.name)
    producer: dict[str, str] = {}
    for name in seen_inputs:
        producer[name] = "a graph input"
    for t in g.initializer:
        if t.name in producer and producer[t.name] != "a graph input":
            raise InvalidModelError(f"initializer {t.name!r} is defined twice")
        producer[t.name] = "an initializer"
    functions = {(f.domain, f.name) for f in m.functions}
    for i, n in enumerate(g.node):
        label = f"node {n.name!r} ({n.op_type})" if n.name else f"node #{i} ({n.op_type})"
        for o in n.output:
            if not o:
                continue
            if o in producer:
                raise InvalidModelError(f"value {o!r} is produced by {label} and also by {producer[o]}; "
                                        "every value must have exactly one producer")
            producer[o] = label
        _validate_attributes(n, label, opsets, functions)


_ATTR_NAMES = {v: k for k, v in onnx.AttributeProto.AttributeType.items()}


def _validate_attributes(n: onnx.NodeProto, label: str, opsets: dict, functions: set) -> None:
    domain = "" if n.domain == "ai.onnx" else n.domain
    if domain not in _STANDARD_DOMAINS or (n.domain, n.op_type) in functions:
        return
    version = opsets.get(domain)
    if version is None:
        raise InvalidModelError(f"{label} uses domain {domain or 'ai.onnx'!r}, which the model does not "
                                "import (add it to opset_import)")
    try:
        schema = onnx.defs.get_schema(n.op_type, version, domain)
    except onnx.defs.SchemaError:
        raise InvalidModelError(f"{label}: no operator {n.op_type!r} exists in domain {domain or 'ai.onnx'!r} "
                                f"at opset {version}") from None
    allowed = schema.attributes
    names = set()
    for a in n.attribute:
        if a.name in names:
            raise InvalidModelError(f"{label} has attribute {a.name!r} twice")
        names.add(a.name)
        if a.ref_attr_name:
            raise InvalidModelError(f"{label} attribute {a.name!r} refers to a function attribute "
                                    f"({a.ref_attr_name!r}) outside a function")
        spec = allowed.get(a.name)
        if spec is None:
            raise InvalidModelError(
                f"{label} has attribute {a.name!r}, which {n.op_type}-{schema.since_version} (the version "
                f"opset {version} runs) does not define; its attributes are: {sorted(allowed) or 'none'}")
        if int(a.type) != int(spec.type):
            raise InvalidModelError(
                f"{label} attribute {a.name!r} is {_ATTR_NAMES.get(a.type, a.type)}, but "
                f"{n.op_type}-{schema.since_version} defines it as {spec.type.name}")
    missing = [k for k, s in allowed.items() if s.required and k not in names]
    if missing:
        raise InvalidModelError(f"{label} lacks required attribute(s) {missing} of "
                                f"{n.op_type}-{schema.since_version}")


def _run_checker(m: onnx.ModelProto) -> None:
    try:
        onnx.checker.check_model(m)
    except onnx.checker.ValidationError as e:
        msg = " ".join(line.strip() for line in str(e).strip().splitlines() if line.strip()) or repr(e)
        raise InvalidModelError(f"onnx.checker rejected the model: {msg}") from e
    except MemoryError:
        raise
    except Exception as e:  # protobuf errors and the like
        raise InvalidModelError(f"onnx.checker could not check the model: {e}") from e


def drop_unused_optional_outputs(m: onnx.ModelProto) -> None:
    """Drop the trailing optional outputs of main-graph nodes that nothing reads.

    Old exporters name outputs no one uses: Dropout-7's ``mask``, MaxPool-8's
    ``Indices``. onnx's shape inference leaves some of them without a shape (Dropout-7),
    which would otherwise make the node look invalid and its model unplannable; an
    optional output that is neither consumed (here or in a subgraph) nor a graph output
    changes nothing when it is not computed."""
    g = m.graph
    used = {o.name for o in g.output}

    def reads(graph):
        for n in graph.node:
            used.update(n.input)
            for sg in _subgraphs(n):
                reads(sg)

    reads(g)
    opsets = _opsets(m)
    types = _known_elem_types(g)
    for n in g.node:
        domain = "" if n.domain == "ai.onnx" else n.domain
        if domain not in _STANDARD_DOMAINS or not n.output or n.output[-1] in used:
            continue
        try:
            formal = onnx.defs.get_schema(n.op_type, opsets.get(domain, 1), domain).outputs
        except Exception:  # no schema: validated elsewhere
            continue
        outs = list(n.output)
        while (outs and len(outs) <= len(formal) and (not outs[-1] or outs[-1] not in used)
               and formal[len(outs) - 1].option == onnx.defs.OpSchema.FormalParameterOption.Optional):
            outs.pop()
        if len(outs) < len(n.output):
            keep = _outputs_inference_needs(n, len(outs), opsets.get(domain, 1), domain, types)
            del n.output[keep:]


def _known_elem_types(g) -> dict:
    """Element types the main graph declares (inputs, initializers, value_info, outputs)."""
    types = {t.name: t.data_type for t in g.initializer}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types.setdefault(vi.name, vi.type.tensor_type.elem_type)
    return types


def _outputs_inference_needs(node, keep: int, opset: int, domain: str, types: dict) -> int:
    """How many outputs of ``node`` to keep when ``keep`` would do for its readers: ``keep``,
    unless onnx's inference for the node rejects that many although it accepts them all
    (a training-mode BatchNormalization must list all three outputs); then the fewest it
    accepts. Checked with ``onnx.shape_inference.infer_node_outputs`` on the declared element
    types (float where one is not declared yet); when even the full node does not infer
    this way, ``keep`` (inference of the whole model judges the node)."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, domain)
    except Exception:
        return keep

    def infers(k: int) -> bool:
        trial = onnx.NodeProto()
        trial.CopyFrom(node)
        del trial.output[k:]
        ins = {}
        for name in trial.input:
            if name:
                tp = onnx.TypeProto()
                tp.tensor_type.elem_type = types.get(name, TensorProto.FLOAT)
                ins[name] = tp
        try:
            onnx.shape_inference.infer_node_outputs(schema, trial, ins)
        except Exception:
            return False
        return True

    full = len(node.output)
    if infers(keep) or not infers(full):
        return keep
    return next(k for k in range(keep + 1, full + 1) if infers(k))


# -- model-local functions -------------------------------------------------------------------
def _subgraphs(n: onnx.NodeProto):
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def inlined_node_count(model: onnx.ModelProto, keys=None) -> int:
    """How many nodes the main graph would hold (subgraphs included) once calls to the
    model-local functions ``keys`` ((domain, name) pairs; all of them when None) are
    inlined, recursively. Computed without inlining, in time linear in the model's size.

    Raises FunctionExpansionError for recursive functions."""
    fns = {(f.domain, f.name): f for f in model.functions}
    keys = set(fns) if keys is None else {k for k in keys if k in fns}
    memo: dict = {}
    active: set = set()

    def nodes_of(nodes) -> int:
        total = 0
        for n in nodes:
            key = (n.domain, n.op_type)
            total += size(key) if key in keys else 1
            for sg in _subgraphs(n):
                total += nodes_of(sg.node)
        return total

    def size(key) -> int:
        if key in memo:
            return memo[key]
        if key in active:
            raise FunctionExpansionError(f"model-local function {key[0]}::{key[1]} calls itself (directly "
                                         "or through others); recursive functions cannot be inlined")
        active.add(key)
        memo[key] = nodes_of(fns[key].node)
        active.discard(key)
        return memo[key]

    return nodes_of(model.graph.node)


def check_inline_size(model: onnx.ModelProto, keys=None, limit: int = DEFAULT_MAX_INLINED_NODES) -> int:
    """Raise FunctionExpansionError when inlining ``keys`` would produce more than ``limit``
    nodes; returns the count. Call it before ``onnx.inliner`` or shape inference, both
    of which expand every call."""
    count = inlined_node_count(model, keys)
    if count > limit:
        raise FunctionExpansionError(
            f"the model's function calls expand to {count} nodes once inlined (bound: {limit}); "
            "a model this large is refused before inlining or shape inference. Raise the bound with "
            "load_model(..., max_inlined_nodes=...) if the model is genuine")
    return count


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


# -- shape inference -------------------------------------------------------------------------
def _constant_ref_attrs(body) -> set:
    """Attributes a function body's Constant nodes take their value from (``ref_attr_name``)."""
    return {a.ref_attr_name for n in body.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx")
            for a in n.attribute if a.ref_attr_name}


def fill_inference_defaults(m: onnx.ModelProto) -> None:
    """Write the schema's default value of attributes onnx's shape inference reads wrongly when
    they are absent (onnx 1.23), on the graph's default-domain nodes, in place:

    * of ops that onnx infers through their function body (no inference function of their own),
      the attributes a Constant of the body takes its value from (``ref_attr_name``): inference
      through the body does not substitute the default (MeanVarianceNormalization without
      ``axes``: "One and only one of the attributes 'value', 'value_*' ... must be specified for
      a Constant node");
    * STFT's ``onesided``: inference takes 0 where the schema's default is 1 (an STFT of a real
      signal inferred with every bin, the model declaring n/2 + 1).

    The values written are the defaults, so the model means what it meant."""
    opset = _opsets(m).get("", None)
    if opset is None:
        return
    for n in m.graph.node:
        if n.domain not in ("", "ai.onnx"):
            continue
        try:
            s = onnx.defs.get_schema(n.op_type, opset, "")
        except Exception:  # unknown op: the checker and the planner report it
            continue
        names = {"onesided"} if n.op_type == "STFT" else set()
        if s.has_function and not s.has_type_and_shape_inference_function:  # inferred through its body
            names |= _constant_ref_attrs(s.function_body)
        have = {a.name for a in n.attribute}
        for name in sorted(names - have):
            at = s.attributes.get(name)
            if at is None or not at.default_value.name:
                continue
            d = onnx.AttributeProto.FromString(at.default_value.SerializeToString())
            d.name = name
            n.attribute.append(d)


def infer_shapes(m: onnx.ModelProto, *, strict: bool = False) -> onnx.ModelProto:
    """onnx's shape inference with data propagation; its errors become InvalidModelError."""
    try:
        return shape_inference.infer_shapes(m, check_type=True, strict_mode=strict, data_prop=True)
    except MemoryError:
        raise
    except Exception as e:
        msg = " ".join(line.strip() for line in str(e).strip().splitlines() if line.strip())
        raise InvalidModelError(f"ONNX shape inference rejected the model: {msg}") from e


def _fmt_type(t: onnx.TypeProto) -> str:
    if not t.HasField("tensor_type"):
        return t.WhichOneof("value") or "unknown type"
    tt = t.tensor_type
    dt = TensorProto.DataType.Name(tt.elem_type).lower() if tt.elem_type else "?"
    if not tt.HasField("shape"):
        return f"{dt}[unknown rank]"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return f"{dt}[{', '.join(dims)}]"


def _conflict(declared: onnx.TypeProto, inferred: onnx.TypeProto) -> bool:
    if not declared.HasField("tensor_type") or not inferred.HasField("tensor_type"):
        return False
    d, i = declared.tensor_type, inferred.tensor_type
    if d.elem_type and i.elem_type and d.elem_type != i.elem_type:
        return True
    if d.HasField("shape") and i.HasField("shape"):
        if len(d.shape.dim) != len(i.shape.dim):
            return True
        for a, b in zip(d.shape.dim, i.shape.dim):
            if a.HasField("dim_value") and b.HasField("dim_value") and a.dim_value != b.dim_value:
                return True
    return False


def infer_checked(m: onnx.ModelProto) -> onnx.ModelProto:
    """Shape inference that reports invalid nodes and lying declarations.

    onnx's inference keeps what a model declares and, when not strict, silently gives
    up on an invalid node. So it first runs strictly on a copy without the declared
    intermediate and output types (an invalid node is a typed error naming it), then
    compares every declared type with the inferred one (a conflict is a typed error
    naming the value, as onnxruntime rejects it at session creation), and finally
    infers on the model itself, which then merges declared and inferred information.
    """
    g = m.graph
    declared = [(vi.name, vi.type) for vi in list(g.value_info) + list(g.output)]
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    del probe.graph.value_info[:]
    for o in probe.graph.output:
        o.ClearField("type")
    probe = infer_shapes(probe, strict=True)
    inferred = {vi.name: vi.type for vi in list(probe.graph.value_info) + list(probe.graph.output)}
    producers = {o: n for n in g.node for o in n.output if o}
    outputs = {o.name for o in g.output}
    for name, t in declared:
        it = inferred.get(name)
        if it is not None and _conflict(t, it):
            n = producers.get(name)
            by = f" by node {n.name or n.op_type!r} ({n.op_type})" if n is not None else ""
            kind = "graph output" if name in outputs else "value"
            raise ShapeConflictError(
                f"{kind} {name!r} is declared {_fmt_type(t)} but is computed{by} as {_fmt_type(it)}; "
                "the model's declared type/shape is wrong: fix or remove that declaration")
    out = complete_op_shapes(infer_shapes(m))
    if any(n.op_type == "Loop" for n in out.graph.node):  # Loop-carried shapes at a fixed point
        from ..execution.control import complete_loop_shapes
        out = complete_loop_shapes(out)
    for vi in list(out.graph.value_info) + list(out.graph.output):
        _check_value_dims(vi, "value")
    return out


#: domains whose ops onnx's shape inference mostly leaves without output shapes; the kernel
#: definitions' own ``shape`` functions give them
_SHAPE_FN_DOMAINS = ("ai.onnx.ml",)
#: ops of other domains whose outputs onnx's inference leaves unknown (its function body is not
#: inferred): their kernel definitions' ``shape`` functions give them too
_SHAPE_FN_OPS = {("", "GroupNormalization")}


def _completed_by_op_shapes(n) -> bool:
    """Whether :func:`complete_op_shapes` completes node ``n``'s outputs."""
    return n.domain in _SHAPE_FN_DOMAINS or (n.domain, n.op_type) in _SHAPE_FN_OPS


def complete_op_shapes(m: onnx.ModelProto) -> onnx.ModelProto:
    """Output shapes that onnx's inference leaves unknown, from the op definitions.

    onnx infers only the element types of most ``ai.onnx.ml`` outputs
    (TreeEnsembleClassifier, LinearClassifier, SVMRegressor, ...), and nothing of a
    GroupNormalization's (its function body is not inferred); a kernel definition
    that knows its output shapes (``OpDef.shape``) gives them (an unknown element type
    is then input 0's), and inference runs again so that the nodes downstream see
    them. Nothing changes for models without such nodes."""
    g = m.graph
    if not any(_completed_by_op_shapes(n) for n in g.node):
        return m
    from ..ir.graph import Node, onnx_to_np_dtype
    from ..ir.context import KernelContext
    from ..kernels import registry as reg   # the op definitions (no provider state)

    opsets = {o.domain or "": o.version for o in m.opset_import}
    for _ in range(sum(1 for n in g.node if _completed_by_op_shapes(n)) + 1):
        types = {vi.name: vi for vi in list(g.input) + list(g.value_info) + list(g.output)}
        inits = {t.name: list(t.dims) for t in g.initializer}

        def static(name):
            if name in inits:
                return tuple(int(d) for d in inits[name])
            vi = types.get(name)
            if vi is None or not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
                return None
            dims = vi.type.tensor_type.shape.dim
            return tuple(int(d.dim_value) for d in dims) if all(d.HasField("dim_value") for d in dims) else None

        def elem(name):
            vi = types.get(name)
            return onnx_to_np_dtype(vi.type.tensor_type.elem_type) if vi is not None and vi.type.HasField(
                "tensor_type") else None

        changed = False
        for i, n in enumerate(g.node):
            if not _completed_by_op_shapes(n) or all(not o or static(o) is not None for o in n.output):
                continue
            opset = opsets.get(n.domain, 1)
            defs = [d for d in reg.registry() if d.domain == n.domain and d.op_type == n.op_type
                    and d.shape is not None and d.claims(opset)]
            ins = [static(x) if x else None for x in n.input]
            if not defs or any(x and s is None for x, s in zip(n.input, ins)):
                continue
            ctx = KernelContext(Node(i, n, opset), opset, ins, [elem(x) if x else None for x in n.input])
            try:
                shapes = defs[0].shape(ctx)
            except Exception:  # the kernel's check will explain what is wrong with the node
                continue
            for o, shp in zip(n.output, shapes):
                if not o or static(o) is not None or shp is None:
                    continue
                vi = types.get(o)
                if vi is None:
                    vi = g.value_info.add()
                    vi.name = o
                    types[o] = vi
                tt = vi.type.tensor_type
                et = tt.elem_type or (types[n.input[0]].type.tensor_type.elem_type if n.input[0] in types else 0)
                tt.ClearField("shape")
                tt.elem_type = et
                for d in shp:
                    tt.shape.dim.add().dim_value = int(d)
                changed = True
        if not changed:
            break
        m = infer_shapes(m)
        g = m.graph
    return m


# -- the pipeline ------------------------------------------------------------------------------
def prepare_model(model, input_shapes: Mapping[str, tuple] | None = None,
                  dim_values: Mapping[str, int] | None = None, *, check: bool = True,
                  max_inlined_nodes: int = DEFAULT_MAX_INLINED_NODES) -> onnx.ModelProto:
    """Read, validate, bind and infer: the checked, inferred ``ModelProto`` (not folded)."""
    m, base = read_model(model)
    for t, what in _tensors_to_check(m):
        check_tensor(t, what)
    _load_external_data(m, base)
    for t, what in _tensors_to_check(m):  # external data now read: its length is checked too
        if t.data_location != TensorProto.EXTERNAL:
            check_tensor(t, what)
    if check:
        _run_checker(m)
    validate_structure(m)
    drop_unused_optional_outputs(m)
    check_inline_size(m, limit=max_inlined_nodes)
    _normalize_declared_dims(m)
    _bind(m, input_shapes, dim_values)
    _check_input_dims(m)
    fill_inference_defaults(m)
    return infer_checked(m)


_INT_TYPES = (TensorProto.INT64, TensorProto.INT32)


def check_inference_complete(m: onnx.ModelProto) -> None:
    """Raise when shape inference silently gave up on a node it has all it needs for.

    onnx's inference, even strict, returns without an output shape for some invalid
    nodes (Conv ``dilations=[0, 0]``, Slice step 0, Split sizes that do not add up, ...).
    A node of a standard domain whose inputs all have static shapes, whose integer inputs
    after the first are constants (so its output rank cannot depend on run-time data),
    and whose output still has no shape is such a node: it is reported by name instead
    of surfacing later as an unexplained symbolic shape."""
    g = m.graph
    info: dict[str, onnx.TypeProto] = {vi.name: vi.type for vi in list(g.input) + list(g.value_info)
                                       + list(g.output)}
    consts = {t.name for t in g.initializer}
    for t in g.initializer:
        info[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
    functions = {(f.domain, f.name) for f in m.functions}

    def static(name) -> bool:
        t = info.get(name)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.elem_type:
            return False
        tt = t.tensor_type
        return tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)

    for n in g.node:
        if (n.domain not in _STANDARD_DOMAINS or (n.domain, n.op_type) in functions
                or any(True for _ in _subgraphs(n))):
            continue
        present = [i for i in n.input if i]
        if not all(static(i) for i in present):
            continue
        if any(i and i not in consts and info[i].tensor_type.elem_type in _INT_TYPES
               for i in list(n.input)[1:]):
            continue
        for o in n.output:
            t = info.get(o) if o else None
            if t is not None and t.WhichOneof("value") not in (None, "tensor_type"):
                continue  # a sequence, map or optional: no tensor shape to expect
            if o and (t is None or not t.tensor_type.HasField("shape")):
                ins = ", ".join(f"{i}: {_fmt_type(info[i])}" for i in present)
                attrs = ", ".join(f"{a.name}={helper.get_attribute_value(a)!r}" for a in n.attribute)
                raise InvalidModelError(
                    f"node {n.name or n.op_type!r} ({n.op_type}) is invalid: ONNX shape inference cannot "
                    f"compute its output {o!r} from its inputs ({ins}) and attributes ({attrs or 'none'}); "
                    "check the attributes and constant inputs against the operator's specification")


def graph_from_model(m: onnx.ModelProto, folded: list[str] | None = None, info: dict | None = None,
                     optimizations: list[dict] | None = None) -> Graph:
    """The IR of a prepared (and maybe folded and optimised) model, with ``symbolic_values`` filled in."""
    g = build_graph(m, folded_nodes=folded or [])
    g.info.update(info or {})
    g.optimizations = list(optimizations or [])
    non_tensor = {vi.name for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)
                  if vi.type.WhichOneof("value") not in (None, "tensor_type")}
    g.symbolic_values = [name for name, v in g.values.items()
                         if v.kind != "initializer" and name not in non_tensor and not shape_is_static(v.shape)]
    # the planner's integer arrays are part of the loaded graph (immutable from here on): built
    # now from the slots build_graph recorded, so that the first plan costs what a re-plan does
    g.arrays  # noqa: B018
    return g


def load_model(model, input_shapes: Mapping[str, tuple] | None = None,
               dim_values: Mapping[str, int] | None = None, *, fold_constants: bool = True,
               check: bool = True, fold_limit_bytes: int = DEFAULT_FOLD_LIMIT_BYTES,
               max_inlined_nodes: int = DEFAULT_MAX_INLINED_NODES, optimize: bool = True) -> Graph:
    """Load an ONNX model into the IR.

    Args:
        model: a path (a regular file), an ``onnx.ModelProto`` or serialized bytes.
        input_shapes: graph input name → concrete shape, to bind symbolic dims (declared
            ``-1`` / ``0`` input dims are symbolic too, named ``"<input>:<axis>"``).
        dim_values: symbolic dim name (``dim_param``) → value, bound wherever it appears.
        fold_constants: fold every node whose inputs are all constant, computed by the
            CPU provider's kernels (see :mod:`hetero_explore.load.fold`); folded node names are
            listed on ``Graph.folded_nodes``, nodes left unfolded and why on
            ``Graph.info["fold_skipped"]``.
        check: run ``onnx.checker`` first. The project's own validation (unique producers,
            attribute names and types against the op schemas, IR version, tensor sizes,
            shape inference errors, declared shapes that contradict inference) runs always.
        fold_limit_bytes: the most bytes that folding may create in all; a node whose
            outputs would exceed the rest of the budget is left unfolded (checked before
            anything is computed).
        max_inlined_nodes: refuse models whose model-local function calls expand to more
            nodes than this.
        optimize: after folding, apply the load-time graph rewrites of
            :mod:`hetero_explore.load.optimize` (Identity/Dropout elimination, Conv+BatchNormalization
            folding, MatMul+Add → Gemm where bitwise exact); what was applied is listed on
            ``Graph.optimizations``. ``optimize=False`` keeps the graph as it was written.

    Values still symbolic afterwards are listed on ``Graph.symbolic_values``.
    """
    # a load allocates millions of long-lived objects for a large model; the cyclic collector
    # would traverse them all again and again while they are made (a sixth of a 10^5-node
    # load), then once more in whatever runs next (the first plan). It is paused while
    # loading, and a large load is collected once here instead.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        g = _load_model(model, input_shapes, dim_values, fold_constants, check, fold_limit_bytes,
                        max_inlined_nodes, optimize)
    finally:
        if was_enabled:
            gc.enable()
    if was_enabled and len(g.nodes) >= COLLECT_AFTER_NODES:
        gc.collect()
    return g


#: loads of at least this many nodes are followed by one collection (see :func:`load_model`)
COLLECT_AFTER_NODES = 20_000


def _load_model(model, input_shapes, dim_values, fold_constants, check, fold_limit_bytes,
                max_inlined_nodes, optimize) -> Graph:
    try:
        if not isinstance(optimize, bool):
            from ..ir.errors import ArgumentTypeError
            raise ArgumentTypeError(f"optimize must be True or False, got {optimize!r}")
        m = prepare_model(model, input_shapes, dim_values, check=check, max_inlined_nodes=max_inlined_nodes)
        if not fold_constants:
            check_inference_complete(m)
            m, recs = _optimized(m, optimize)
            return graph_from_model(m, optimizations=recs)
        from .fold import fold_model  # above the providers: imported only when folding

        res = fold_model(m, limit_bytes=fold_limit_bytes)
        check_inference_complete(res.model)
        m, recs = _optimized(res.model, optimize)
        return graph_from_model(m, res.folded,
                                {"fold_skipped": dict(res.skipped), "folded_bytes": res.folded_bytes}, recs)
    except MemoryError as e:
        raise ModelLoadError(f"ran out of memory while loading the model ({e or 'no detail'}); "
                             "the model may be too large for this machine") from None


def _optimized(m: onnx.ModelProto, optimize: bool) -> tuple[onnx.ModelProto, list[dict]]:
    if not optimize:
        return m, []
    from .optimize import optimize_model

    m, recs = optimize_model(m)
    return m, [r.to_dict() for r in recs]


def __getattr__(name: str):
    # FOLDABLE_OPS (op types constant folding can remove) comes from the CPU provider's op
    # table, so it is computed lazily in hetero_explore.load.fold: this module imports no provider
    if name == "FOLDABLE_OPS":
        from .fold import foldable_op_types

        return foldable_op_types()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
