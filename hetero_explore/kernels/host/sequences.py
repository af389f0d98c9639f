"""Sequences, optionals and maps as host values (CPU provider).

ONNX values that are not tensors -- ``seq(tensor(...))``, ``optional(...)``,
``map(...)`` -- are carried through the node runner as **host values**: the
IR gives them the dtype :data:`~hetero_explore.ir.graph.HOST_DTYPE` (``object``) and
the shape ``()``, so that a host provider allocates a 0-d object array for one
and the planner, the runner and the executor move it like any other buffer
(8 bytes: a reference). The array holds the Python value:

* a sequence: a ``list`` of numpy arrays (or of dicts, for ZipMap);
* an optional: ``None`` (empty) or its element (an array or a list);
* a map: a ``dict``.

Kernels never mutate a host value they read: every op below builds a new
list/dict, and the arrays it takes from tensor inputs are copied, so a buffer
freed later cannot change a sequence that outlives it. Device providers cannot
hold host values: these ops are CPU-only and the control ops decline non-host
targets for them (:mod:`hetero_explore.kernels.host.control`). Every op here only moves
data (slices, copies, concatenation), so its results are bitwise what numpy
copies.

Graph inputs that are sequences/optionals/maps are given as Python lists /
``None`` / dicts (:func:`wrap`), and graph outputs of those types come back the
same way (:func:`unwrap`).
"""

from __future__ import annotations

import numpy as np

from ...ir.errors import KernelError
from ...ir.graph import HOST_DTYPE
from ..opdef import OpList

OPS = OpList()

#: skips the registry's dtype check (host-value ops move arrays of any numeric dtype)
NO_DTYPE_CHECK = 1 << 30
HOST_ONLY = ("cpu",)


# -- host values -------------------------------------------------------------------------
def wrap(value) -> np.ndarray:
    """A Python value (list, dict, None, array) as the 0-d object array a host buffer holds."""
    a = np.empty((), dtype=HOST_DTYPE)
    a[()] = value
    return a


def unwrap(arr):
    """The Python value in a host buffer's array (a 0-d object array)."""
    return arr[()] if isinstance(arr, np.ndarray) and arr.dtype == HOST_DTYPE and arr.ndim == 0 else arr


def as_host_input(name: str, value, type_str: str, problems: list[str]):
    """A caller's value for a graph input of a host type (``type_str``), checked and wrapped;
    None with a problem appended when it does not fit."""
    kind = type_str.split("(", 1)[0]
    if isinstance(value, np.ndarray) and value.dtype == HOST_DTYPE and value.ndim == 0:
        value = value[()]
    if kind == "seq":
        if not isinstance(value, (list, tuple)):
            problems.append(f"input {name!r}: expected a {type_str} (a list of numpy arrays), got "
                            f"{type(value).__name__}")
            return None
        return wrap([_host_elem(name, x, problems) for x in value])
    if kind == "optional":
        if value is None:
            return wrap(None)
        inner = type_str[len("optional("):-1]
        if inner.startswith("seq("):
            got = as_host_input(name, value, inner, problems)
            return None if got is None else wrap(got[()])
        return wrap(_host_elem(name, value, problems))
    if kind == "map":
        if not isinstance(value, dict):
            problems.append(f"input {name!r}: expected a {type_str} (a dict), got {type(value).__name__}")
            return None
        return wrap(dict(value))
    problems.append(f"input {name!r}: type {type_str} cannot be fed")
    return None


def _host_elem(name, x, problems):
    if isinstance(x, dict):
        return dict(x)
    a = np.asarray(x)
    if a.dtype.kind in "OSUV":
        problems.append(f"input {name!r}: a sequence element of dtype {a.dtype}; the providers hold "
                        "numeric and bool arrays only")
    return np.array(a, copy=True, order="C")


def _node_error(ctx, msg) -> KernelError:
    n = ctx.node
    return KernelError(f"node {n.name!r} ({n.op_type}): {msg}")


def _host_check(ctx, target):
    # strings inside (a map's string keys, a sequence of string tensors) are host values too
    if not target.host:
        return "sequences/optionals/maps are host values (CPU provider only)"
    return None


def _store(out: np.ndarray, arr: np.ndarray, ctx, what: str = "output") -> None:
    """Copy a tensor into a preallocated output, refusing a shape or dtype the plan did not expect."""
    arr = np.asarray(arr)
    if out.shape != arr.shape or out.dtype != arr.dtype:
        raise _node_error(ctx, f"{what} is {arr.dtype} {arr.shape} at run time, but the plan allocated "
                               f"{out.dtype} {out.shape} (the shape known at load time does not hold)")
    np.copyto(out, arr, casting="no")


def _position(ctx, pos, n: int, *, insert: bool) -> int:
    p = int(np.asarray(pos).reshape(()))
    hi = n if insert else n - 1
    if not -n <= p <= hi:
        raise _node_error(ctx, f"position {p} is out of range for a sequence of {n} element(s) "
                               f"(valid: {-n}..{hi})")
    return p + n if p < 0 else p


def _reg(op, since=11, until=21, **kw):
    kw.setdefault("targets", HOST_ONLY)
    kw.setdefault("dtype_input", NO_DTYPE_CHECK)
    kw.setdefault("check", _host_check)
    return OPS.register(op, since=since, until=until, **kw)


@_reg("SequenceEmpty", note="an empty list")
def _sequence_empty(ctx, target):
    def run(inputs, outputs):
        outputs[0][()] = []
    return run


@_reg("SequenceConstruct", note="a list of copies of the inputs")
def _sequence_construct(ctx, target):
    def run(inputs, outputs):
        outputs[0][()] = [np.array(x, copy=True) for x in inputs]
    return run


@_reg("SequenceInsert", note="a new list with the tensor inserted at position (default: the end)")
def _sequence_insert(ctx, target):
    def run(inputs, outputs):
        seq = list(inputs[0][()])
        p = len(seq) if len(inputs) < 3 or inputs[2] is None else _position(ctx, inputs[2], len(seq), insert=True)
        seq.insert(p, np.array(inputs[1], copy=True))
        outputs[0][()] = seq
    return run


@_reg("SequenceErase", note="a new list without the element at position (default: the last)")
def _sequence_erase(ctx, target):
    def run(inputs, outputs):
        seq = list(inputs[0][()])
        if not seq:
            raise _node_error(ctx, "cannot erase from an empty sequence")
        p = len(seq) - 1 if len(inputs) < 2 or inputs[1] is None else _position(ctx, inputs[1], len(seq),
                                                                                  insert=False)
        del seq[p]
        outputs[0][()] = seq
    return run


def _sequence_at_infer(ctx, arrays):
    """The element's shape and dtype, from the sequence itself (run-time shapes)."""
    seq = arrays[0][()]
    try:
        p = _position(ctx, arrays[1], len(seq), insert=False)
    except KernelError as e:  # the runner reports a ValueError of a shape function, naming the node
        raise ValueError(str(e)) from None
    return [(seq[p].shape, seq[p].dtype)]


@_reg("SequenceAt", note="the element at position, copied into the planned output; its shape is the "
                         "element's, computed at run time", shape_inputs=(0, 1), infer=_sequence_at_infer)
def _sequence_at(ctx, target):
    def run(inputs, outputs):
        seq = inputs[0][()]
        p = _position(ctx, inputs[1], len(seq), insert=False)
        _store(outputs[0], seq[p], ctx)
    return run


@_reg("SequenceLength", note="the element count, an int64 scalar")
def _sequence_length(ctx, target):
    def run(inputs, outputs):
        outputs[0][()] = np.int64(len(inputs[0][()]))
    return run


@_reg("SplitToSequence", until=24,
      note="numpy slices (copies) along axis; v24 only adds bfloat16 to the type constraints")
def _split_to_sequence(ctx, target):
    axis = int(ctx.attrs.get("axis", 0))
    keepdims = int(ctx.attrs.get("keepdims", 1))

    def run(inputs, outputs):
        x = inputs[0]
        r = x.ndim
        if not -r <= axis < r:
            raise ValueError(f"axis {axis} is out of range for a rank-{r} input")
        ax = axis + r if axis < 0 else axis
        n = x.shape[ax]
        split = inputs[1] if len(inputs) > 1 else None
        if split is None:
            parts = [np.take(x, [i], axis=ax) for i in range(n)]
            if not keepdims:
                parts = [np.squeeze(p, axis=ax) for p in parts]
        else:
            s = np.asarray(split).astype(np.int64)
            if s.ndim == 0:
                k = int(s)
                if k <= 0:
                    raise ValueError(f"split {k} must be positive")
                sizes = [k] * (n // k) + ([n % k] if n % k else [])
            else:
                sizes = [int(v) for v in s.reshape(-1)]
                if any(v < 0 for v in sizes) or sum(sizes) != n:
                    raise ValueError(f"split sizes {sizes} do not add up to the axis length {n}")
            bounds = np.cumsum([0] + sizes)
            parts = [np.take(x, np.arange(bounds[i], bounds[i + 1]), axis=ax) for i in range(len(sizes))]
        outputs[0][()] = [np.array(p, order="C", copy=True) for p in parts]
    return run


def _concat_from_sequence_infer(ctx, arrays):
    """The result's shape and dtype from the elements' shapes (run-time shapes), checked."""
    seq = arrays[0][()]
    axis = int(ctx.attrs.get("axis"))
    new_axis = int(ctx.attrs.get("new_axis", 0))
    if not seq:
        raise ValueError("cannot concatenate an empty sequence")
    s0 = seq[0].shape
    r = len(s0) + (1 if new_axis else 0)
    if not -r <= axis < r:
        raise ValueError(f"axis {axis} is out of range for rank {r}")
    ax = axis + r if axis < 0 else axis
    for x in seq:
        same = x.shape == s0 if new_axis else (x.ndim == len(s0) and all(
            a == b for i, (a, b) in enumerate(zip(x.shape, s0)) if i != ax))
        if not same or x.dtype != seq[0].dtype:
            raise ValueError(f"the elements cannot be concatenated on axis {axis}: {x.dtype} {x.shape} "
                                   f"and {seq[0].dtype} {s0}")
    if new_axis:
        shape = s0[:ax] + (len(seq),) + s0[ax:]
    else:
        shape = s0[:ax] + (sum(x.shape[ax] for x in seq),) + s0[ax + 1:]
    return [(shape, seq[0].dtype)]


@_reg("ConcatFromSequence", note="np.concatenate (new_axis=0) or np.stack (new_axis=1) of the elements; "
                                 "the result's shape computed at run time", shape_inputs=(0,),
      infer=_concat_from_sequence_infer)
def _concat_from_sequence(ctx, target):
    axis = int(ctx.attrs.get("axis"))
    new_axis = int(ctx.attrs.get("new_axis", 0))

    def run(inputs, outputs):
        seq = inputs[0][()]
        if not seq:
            raise _node_error(ctx, "cannot concatenate an empty sequence")
        r = seq[0].ndim + (1 if new_axis else 0)
        if not -r <= axis < r:
            raise _node_error(ctx, f"axis {axis} is out of range for rank {r}")
        try:
            y = np.stack(seq, axis=axis) if new_axis else np.concatenate(seq, axis=axis)
        except ValueError as e:
            raise _node_error(ctx, f"the elements cannot be concatenated: {e}") from None
        _store(outputs[0], y, ctx)
    return run


def _is_optional_input(ctx, i: int) -> bool:
    g = ctx.graph
    name = ctx.node.inputs[i] if i < len(ctx.node.inputs) else ""
    v = g.values.get(name) if (g is not None and name) else None
    return v is not None and v.type_proto is not None and v.type_proto.WhichOneof("value") == "optional_type"


def _is_host_output(ctx, i: int = 0) -> bool:
    d = ctx.out_dtypes[i] if i < len(ctx.out_dtypes) else None
    return d is not None and np.dtype(d) == HOST_DTYPE


def _identity_host_check(ctx, target):
    """Identity of a sequence/optional (tensors have their own Identity kernels)."""
    d = ctx.in_dtypes[0] if ctx.in_dtypes else None
    if d is None or np.dtype(d) != HOST_DTYPE:
        return "Identity of a tensor: the tensor kernels run it"
    return _host_check(ctx, target)


@_reg("Identity", since=14, until=25, dtype_input=0, dtypes=(np.dtype(HOST_DTYPE).name,),
      check=_identity_host_check,
      note="a sequence (14) or optional (16) passed on as is (host values are never mutated); "
           "versions after 16 only add tensor element types")
def _identity_host(ctx, target):
    def run(inputs, outputs):
        outputs[0][()] = inputs[0][()]
    return run


@_reg("Optional", since=15, until=28,
      note="None (no input) or a copy of the input; v28 only adds element types")
def _optional(ctx, target):
    def run(inputs, outputs):
        x = inputs[0] if inputs else None
        if x is None:
            outputs[0][()] = None
        elif isinstance(x, np.ndarray) and x.dtype == HOST_DTYPE and x.ndim == 0:
            outputs[0][()] = x[()]          # a sequence: shared, never mutated
        else:
            outputs[0][()] = np.array(x, copy=True)
    return run


@_reg("OptionalHasElement", since=15, until=28,
      note="False for an absent input or an empty optional; True for a tensor or sequence")
def _optional_has_element(ctx, target):
    optional = _is_optional_input(ctx, 0)

    def run(inputs, outputs):
        x = inputs[0] if inputs else None
        has = x is not None and (not optional or x[()] is not None)
        outputs[0][()] = np.bool_(has)
    return run


@_reg("OptionalGetElement", since=15, until=28,
      note="the element of a non-empty optional (a tensor or sequence passes through); empty: an error")
def _optional_get_element(ctx, target):
    optional = _is_optional_input(ctx, 0)
    host_out = _is_host_output(ctx, 0)

    def run(inputs, outputs):
        x = inputs[0]
        v = x[()] if optional or (isinstance(x, np.ndarray) and x.dtype == HOST_DTYPE and x.ndim == 0) else x
        if v is None:
            raise _node_error(ctx, "the optional input is empty (OptionalGetElement needs an element)")
        if host_out:
            outputs[0][()] = v
        else:
            _store(outputs[0], v, ctx)
    return run


# -- ai.onnx.ml maps ------------------------------------------------------------------------
def _ml_reg(op, **kw):
    return _reg(op, since=1, until=1, domain="ai.onnx.ml", **kw)


@_ml_reg("ZipMap", note="one dict per row: class label -> score (float32 values)", shape_inputs=(),
         infer=lambda ctx, arrays: [((), np.dtype(HOST_DTYPE))])   # a host value: its rows come with it
def _zipmap(ctx, target):
    ints = ctx.attrs.get("classlabels_int64s")
    strs = ctx.attrs.get("classlabels_strings")
    labels = list(ints) if ints is not None else list(strs or [])

    def run(inputs, outputs):
        x = np.asarray(inputs[0])
        if x.ndim == 1:
            x = x.reshape(1, -1)
        if x.ndim != 2 or x.shape[1] != len(labels):
            raise _node_error(ctx, f"input {x.shape} does not have one column per class label "
                                   f"({len(labels)})")
        outputs[0][()] = [{k: np.float32(row[j]) for j, k in enumerate(labels)} for row in x]
    return run


@_ml_reg("DictVectorizer", note="the map's values at the vocabulary's keys, 0 for absent keys")
def _dict_vectorizer(ctx, target):
    ints = ctx.attrs.get("int64_vocabulary")
    strs = ctx.attrs.get("string_vocabulary")
    vocab = list(ints) if ints else list(strs or [])
    index = {k: i for i, k in enumerate(vocab)}

    def run(inputs, outputs):
        m = inputs[0][()]
        out = outputs[0]
        row = np.zeros(out.shape[-1] if out.ndim else len(vocab), dtype=out.dtype)
        for k, v in m.items():
            j = index.get(k.item() if isinstance(k, np.generic) else k)
            if j is not None:
                row[j] = v
        _store(out, row.reshape(out.shape), ctx)
    return run


@_ml_reg("CastMap", check=lambda ctx, target: _cast_map_check(ctx, target), note="map values in key order as a dense tensor (cast_to, map_form, max_map)")
def _cast_map(ctx, target):
    cast_to = ctx.attrs.get("cast_to", "TO_FLOAT")
    map_form = ctx.attrs.get("map_form", "DENSE")
    max_map = int(ctx.attrs.get("max_map", 1))
    if cast_to != "TO_FLOAT" and cast_to != "TO_INT64":
        raise _node_error(ctx, f"cast_to={cast_to!r}: only TO_FLOAT and TO_INT64 are supported "
                               "(TO_STRING makes a string tensor)")

    def run(inputs, outputs):
        m = inputs[0][()]
        out = outputs[0]
        keys = sorted(int(k) for k in m)
        if map_form == "DENSE":
            vals = [m[k] for k in keys]
        else:  # SPARSE: max_map slots, absent keys 0
            vals = [0] * max_map
            for k in keys:
                if not 0 <= k < max_map:
                    raise _node_error(ctx, f"key {k} is outside 0..{max_map - 1} (max_map)")
                vals[k] = m[k]
        arr = np.asarray(vals, dtype=out.dtype).reshape(out.shape)
        _store(out, arr, ctx)
    return run


def _cast_map_check(ctx, target):
    return _host_check(ctx, target) or (
        "cast_to=TO_STRING makes a string tensor" if ctx.attrs.get("cast_to") == "TO_STRING" else None)


def host_outputs(graph, outputs: dict) -> dict:
    """Graph outputs that are host values (sequences/maps/optionals) as Python values."""
    vals = graph.values
    return {k: (unwrap(v) if vals.get(k) is not None and vals[k].is_host_value else v)
            for k, v in outputs.items()}
