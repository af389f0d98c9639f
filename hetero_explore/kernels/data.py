"""Data-movement and shape ops: Reshape, Transpose, Concat, Split, Slice,
Gather, GatherElements, GatherND, Squeeze, Unsqueeze, Flatten, Expand,
Identity, TensorScatter (both targets) and Shape, Size, ConstantOfShape, Constant, Range
(CPU only, as in real GPU runtimes, which keep these small shape computations
on the host).

How the movement ops work
-------------------------
* Nothing here does arithmetic on element values: a kernel moves bits. Every
  array is viewed as unsigned integers of its own width (:func:`bits`), so one
  compiled kernel serves float32/int32 (and float16, which numba's CPU target
  cannot load as a float), NaN payloads survive, and both targets are bitwise
  equal by construction.
* The index math is written once, in ``@dual`` functions that both the CPU and
  the CUDA kernels call: a strided gather ``out[i] = x[base + offset(i)]``
  (Transpose, Slice, Split, Expand — only ``base`` and the per-dimension
  strides differ), its scatter twin (Concat), a contiguous copy (Reshape,
  Flatten, Squeeze, Unsqueeze, Identity — never an alias of the input) and
  the three Gathers. CUDA kernels run one thread per element; the CPU fast
  paths (``cpu_fast/movement.py``) walk the strided copies coalesced (size-1 dims
  dropped, dims merged where the strided side is contiguous across them):
  contiguous rows by an odometer, or tiles for a transposition.
* Output shapes come from static shape inference (``ctx.out_shapes``), so the
  kernels for Reshape, Squeeze, Unsqueeze, Flatten, Expand and Split need no
  parameter input at run time. Slice needs ``starts`` (and ``axes``/``steps``
  when present): the CPU kernel reads them from the input at run time when
  they are not constants; CUDA declines such a Slice at planning time.
* CPU row loops index with ``np.uint64(offset)``: an unsigned index skips
  numba's negative-index wraparound branch, which lets LLVM vectorize the
  copy (5-10x faster here). Offsets are never negative.
* Gather indices may be negative. Out-of-range indices raise
  :class:`~hetero_explore.ir.errors.ExecutionError` on every target, checked *on
  the device*: a kernel cannot raise, so each item that meets an index outside
  ``[-n, n)`` sets a one-element flag (and reads element 0 instead of going out
  of bounds); after the launch the build reads the flag (4 bytes back from a
  device) and, when it is set, finds the first bad index on the host for the
  message — the same message on every target. No pre-pass over the indices on
  the CPU: the check is the branch the kernel already takes.

Opsets: 13 to 28, and earlier ones where the schema versions differ only in
types or in attributes the kernels do not read (``OLD``); Slice-1 has a definition of its own. The schema changes of these ops after 13 up to 28 (as of
onnx 1.23) only add element types — except Split-18 (``num_outputs``; the
kernel reads sizes from the output shapes, so both forms are handled), Shape-15
(``start``/``end``, handled) and Range-27 (``stash_type``, which only affects
float16/bfloat16, not claimed here).
"""

from __future__ import annotations

import numpy as np

from ..ir.errors import ExecutionError, KernelError
from .common import (bcast_offset, bits, broadcast_strides, copy_array, dual, kernel_pair, replayable,
                     to_target)
from .opdef import OpList

OPS = OpList()
register = OPS.register

SINCE = 13
#: the first opset each op is claimed from where it is earlier than ``SINCE``: the schema
#: versions between differ only in element types, in attributes the kernels do not read
#: (Reshape-1's ``shape``, Squeeze/Unsqueeze-1/11's ``axes``, Split-1/2/11's ``split``: shapes
#: come from inference) or in allowing negative axes/indices, which the kernels already take.
#: Concat-1 (``axis`` defaulting to 1) and Slice-1 (attributes; its own definition below) differ.
OLD = {"Reshape": 1, "Flatten": 1, "Squeeze": 1, "Unsqueeze": 1, "Identity": 1, "Transpose": 1,
       "Expand": 8, "Concat": 4, "Split": 1, "Slice": 10, "Gather": 1, "GatherElements": 11,
       "GatherND": 11, "Shape": 1, "Size": 1, "Constant": 1}
#: last opset checked against onnx's schema history for these ops (see module docs)
UNTIL = 28

#: element types the movement ops accept (they copy bits, so width is all that matters)
MOVE = ("float32", "int64", "int32", "bool", "float64", "float16", "int8", "uint8",
        "int16", "uint16", "uint32", "uint64", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "int4", "uint4", "int2", "uint2")
INDEX = ("int64", "int32")
#: element types the host-side shape ops accept for their (untouched) data input
ANY = MOVE
#: element types ConstantOfShape / Constant may produce
CONST_OUT = MOVE
RANGE = ("float32", "float64", "int64", "int32", "int16")

def _prod(shape) -> int:
    return int(np.prod(tuple(shape), dtype=np.int64)) if len(shape) else 1


def _strides(shape) -> list[int]:
    """Contiguous element strides of ``shape``."""
    out = [1] * len(shape)
    acc = 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = acc
        acc *= int(shape[d])
    return out


def _meta(shape, strides):
    """(shape, strides) as int64 arrays of length ≥ 1 (a scalar is one element)."""
    if len(shape) == 0:
        return np.ones(1, np.int64), np.zeros(1, np.int64)
    return np.asarray(shape, np.int64), np.asarray(strides, np.int64)


def _where(ctx) -> str:
    return f"node {ctx.node.name!r} ({ctx.node.op_type})"


def _norm_axis(ctx, axis: int, rank: int, what: str = "axis") -> int:
    a = int(axis)
    if not -rank <= a < max(rank, 1):
        raise KernelError(f"{_where(ctx)}: {what}={axis} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def _shapes_known(ctx, inputs=(0,)) -> str | None:
    for i in inputs:
        if ctx.has_input(i) and (i >= len(ctx.in_shapes) or ctx.in_shapes[i] is None):
            return f"{ctx.node.op_type}: the shape of input {i} is unknown"
    return None


# --- index math, written once for both targets -------------------------------
@dual
def strided_gather_item(i, x, out, base, shape, strides):
    """out[i] = x[base + Σ coord_d(i) · strides[d]] (coordinates of i in ``shape``)."""
    out[i] = x[base + bcast_offset(i, shape, strides)]


@dual
def strided_scatter_item(i, x, out, base, shape, strides):
    """out[base + Σ coord_d(i) · strides[d]] = x[i] (coordinates of i in ``shape``)."""
    out[base + bcast_offset(i, shape, strides)] = x[i]


@dual
def gather_index(idx, j, n, bad):
    """Index ``idx[j]`` along an axis of length ``n``: negative counts from the end; an
    index outside [-n, n) sets ``bad[0]`` (the build raises after the launch) and gives 0."""
    k = idx[j]
    if k < 0:
        k += n
    if k < 0 or k >= n:
        bad[0] = 1
        k = 0
    return k


@dual
def gather_row_checked(t, data, idx, out, axis_dim, n_idx, inner):
    """Gather: output row ``t`` = (outer, j) copies ``inner`` elements of data[outer, idx[j], :],
    for indices already checked to lie in [-axis_dim, axis_dim) (the CPU fast path's rows)."""
    outer = t // n_idx
    j = t - outer * n_idx
    k = idx[j]
    if k < 0:
        k += axis_dim
    src = (outer * axis_dim + k) * inner
    o = t * inner
    for r in range(inner):
        out[np.uint64(o + r)] = data[np.uint64(src + r)]


@dual
def gather_item(i, data, idx, out, axis_dim, n_idx, inner, bad):
    t = i // inner
    r = i - t * inner
    outer = t // n_idx
    j = t - outer * n_idx
    k = gather_index(idx, j, axis_dim, bad)
    out[i] = data[(outer * axis_dim + k) * inner + r]


@dual
def gather_elements_item(i, data, idx, out, ishape, dstrides, axis, axis_dim, bad):
    """GatherElements: out[c] = data[c with c[axis] = idx[c]] (c = coordinates of i)."""
    off = 0
    rem = i
    for d in range(ishape.shape[0] - 1, -1, -1):
        n = ishape[d]
        c = rem % n
        rem //= n
        if d == axis:
            c = gather_index(idx, i, axis_dim, bad)
        off += c * dstrides[d]
    out[i] = data[off]


@dual
def gathernd_item(i, data, idx, out, m, inner, batch_div, batch_stride, dshape, dstrides, bad):
    """GatherND: output element i = (tuple t, inner r); t's index tuple idx[t, :m]
    addresses data[batch(t), idx[t, 0], ..., idx[t, m-1], r]."""
    t = i // inner
    r = i - t * inner
    off = (t // batch_div) * batch_stride
    for j in range(m):
        k = gather_index(idx, t * m + j, dshape[j], bad)
        off += k * dstrides[j]
    out[i] = data[off + r]


_GATHER_STRIDED = kernel_pair(
    "gather_strided", "x, out, base, shape, strides",
    """
    strided_gather_item(i, x, out, base, shape, strides)
    """, count="out.shape[0]", index="i", module=__name__)


_SCATTER_STRIDED = kernel_pair(
    "scatter_strided", "x, out, base, shape, strides",
    """
    strided_scatter_item(i, x, out, base, shape, strides)
    """, count="x.shape[0]", index="i", module=__name__)


_GATHER = kernel_pair(
    "gather", "data, idx, out, axis_dim, n_idx, inner, bad",
    """
    gather_item(i, data, idx, out, axis_dim, n_idx, inner, bad)
    """, count="out.shape[0]", index="i", module=__name__)


_GATHER_ELEMENTS = kernel_pair(
    "gather_elements", "data, idx, out, ishape, dstrides, axis, axis_dim, bad",
    """
    gather_elements_item(i, data, idx, out, ishape, dstrides, axis, axis_dim, bad)
    """, count="out.shape[0]", index="i", module=__name__)


_GATHERND = kernel_pair(
    "gathernd", "data, idx, out, m, inner, batch_div, batch_stride, dshape, dstrides, bad",
    """
    gathernd_item(i, data, idx, out, m, inner, batch_div, batch_stride, dshape, dstrides, bad)
    """, count="out.shape[0]", index="i", module=__name__)


def _gather_strided(target, x, out, base, shape, strides) -> None:
    x, out = bits(x), bits(out)
    if out.shape[0] == 0:
        return
    target.launch(_GATHER_STRIDED, out.shape[0], x, out, base, shape, strides)


def _scatter_strided(target, x, out, base, shape, strides) -> None:
    x, out = bits(x), bits(out)
    if x.shape[0] == 0:
        return
    target.launch(_SCATTER_STRIDED, x.shape[0], x, out, base, shape, strides)


# --- Reshape, Flatten, Squeeze, Unsqueeze, Identity: contiguous copies ---------
def _unknown_until_run(ctx) -> bool:
    """Is input 0 present with a shape the plan does not know at all (a Scan/Loop/If output:
    not even its rank)? The runner makes such a node dynamic (``runner._is_dynamic``): its
    output shape is inferred from the actual input (and shape input) when it runs, and the
    kernel is built and checked (this check again) for the actual shapes then."""
    return ctx.has_input(0) and (len(ctx.in_shapes) == 0 or ctx.in_shapes[0] is None)


def _check_copy(ctx, target):
    if _unknown_until_run(ctx):
        return None   # checked with the actual shapes when it runs (see _unknown_until_run)
    why = _shapes_known(ctx)
    if why:
        return why
    if _prod(ctx.in_shapes[0]) != _prod(ctx.out_shapes[0]):
        return (f"{ctx.node.op_type}: input shape {tuple(ctx.in_shapes[0])} and inferred output "
                f"shape {tuple(ctx.out_shapes[0])} hold different numbers of elements")
    return None


def _build_copy(ctx, target):
    @replayable
    def run(inputs, outputs):
        copy_array(target, inputs[0], outputs[0])

    return run


for _op, _note in (("Reshape", "copy; the target shape comes from shape inference (at run time when "
                               "the input's shape is known only then)"),
                   ("Flatten", "copy"),
                   ("Squeeze", "copy; axes (input from 13) come from shape inference"),
                   ("Unsqueeze", "copy; axes (input from 13) come from shape inference"),
                   ("Identity", "copy (tensors only)")):
    register(_op, dtypes=MOVE, since=OLD[_op], until=UNTIL, check=_check_copy,
             may_alias_input=False, note=_note)(_build_copy)


# --- Transpose ---------------------------------------------------------------
def _perm(ctx):
    rank = len(ctx.in_shapes[0])
    perm = ctx.attrs.get("perm")
    perm = list(range(rank - 1, -1, -1)) if perm is None else [int(p) for p in perm]
    return perm, rank


def _check_transpose(ctx, target):
    if _unknown_until_run(ctx):
        return None   # perm is checked against the actual rank when it runs
    why = _shapes_known(ctx)
    if why:
        return why
    perm, rank = _perm(ctx)
    if sorted(perm) != list(range(rank)):
        return f"Transpose: perm={perm} is not a permutation of 0..{rank - 1}"
    return None


@register("Transpose", dtypes=MOVE, since=OLD["Transpose"], until=UNTIL, check=_check_transpose)
def _build_transpose(ctx, target):
    perm, _ = _perm(ctx)
    in_str = _strides(ctx.in_shapes[0])
    out_shape = tuple(ctx.out_shapes[0])
    shape, strides = to_target(target, *_meta(out_shape, [in_str[p] for p in perm]))

    @replayable
    def run(inputs, outputs):
        _gather_strided(target, inputs[0], outputs[0], 0, shape, strides)

    return run


# --- Expand ------------------------------------------------------------------
def _check_expand(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    ins, outs = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    pad = (1,) * (len(outs) - len(ins)) + ins
    if len(ins) > len(outs) or any(a != b and a != 1 for a, b in zip(pad, outs)):
        return f"Expand: input shape {ins} does not broadcast to the inferred output shape {outs}"
    return None


@register("Expand", dtypes=MOVE, since=OLD["Expand"], until=UNTIL, check=_check_expand,
          note="broadcast copy; the shape input comes from shape inference")
def _build_expand(ctx, target):
    out_shape = tuple(ctx.out_shapes[0])
    shape, strides = to_target(target, *_meta(out_shape, broadcast_strides(ctx.in_shapes[0], out_shape)))

    @replayable
    def run(inputs, outputs):
        _gather_strided(target, inputs[0], outputs[0], 0, shape, strides)

    return run


# --- Concat ------------------------------------------------------------------
def _check_concat(ctx, target):
    n = len(ctx.node.inputs)
    why = _shapes_known(ctx, range(n))
    if why:
        return why
    out = tuple(ctx.out_shapes[0])
    rank = len(out)
    if rank == 0:
        return "Concat: scalars cannot be concatenated"
    try:
        axis = _norm_axis(ctx, ctx.attrs.get("axis", 0), rank)
    except KernelError as e:
        return str(e)
    total = 0
    for i in range(n):
        if not ctx.has_input(i):
            return "Concat: empty input name"
        s = tuple(ctx.in_shapes[i])
        if len(s) != rank or any(a != b for d, (a, b) in enumerate(zip(s, out)) if d != axis):
            return f"Concat: input {i} shape {s} does not fit output shape {out} on axis {axis}"
        if ctx.in_dtypes[i] != ctx.in_dtypes[0]:
            return "Concat: inputs have different dtypes"
        total += s[axis]
    if total != out[axis]:
        return f"Concat: inputs add up to {total} on axis {axis}, output has {out[axis]}"
    return None


@register("Concat", dtypes=MOVE, since=OLD["Concat"], until=UNTIL, check=_check_concat)
def _build_concat(ctx, target):
    out_shape = tuple(ctx.out_shapes[0])
    axis = _norm_axis(ctx, ctx.attrs.get("axis", 0), len(out_shape))
    out_str = _strides(out_shape)
    parts = []  # (input index, base, shape, strides)
    off = 0
    for i in range(len(ctx.node.inputs)):
        s = tuple(ctx.in_shapes[i])
        if _prod(s):
            shape, strides = to_target(target, *_meta(s, out_str))
            parts.append((i, off * out_str[axis], shape, strides))
        off += s[axis]

    @replayable
    def run(inputs, outputs):
        for i, base, shape, strides in parts:
            _scatter_strided(target, inputs[i], outputs[0], base, shape, strides)

    return run


# --- Split -------------------------------------------------------------------
def _check_split(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    ins = tuple(ctx.in_shapes[0])
    if not ins:
        return "Split: cannot split a scalar"
    try:
        axis = _norm_axis(ctx, ctx.attrs.get("axis", 0), len(ins))
    except KernelError as e:
        return str(e)
    total = 0
    for k, o in enumerate(ctx.out_shapes):
        if o is None:
            return f"Split: output {k} is absent"
        o = tuple(o)
        if len(o) != len(ins) or any(a != b for d, (a, b) in enumerate(zip(o, ins)) if d != axis):
            return f"Split: output {k} shape {o} does not fit input shape {ins} on axis {axis}"
        total += o[axis]
    if total != ins[axis]:
        return f"Split: outputs add up to {total} on axis {axis}, input has {ins[axis]}"
    return None


@register("Split", dtypes=MOVE, since=OLD["Split"], until=UNTIL, check=_check_split,
          note="split sizes (input from 13, num_outputs from 18) come from shape inference")
def _build_split(ctx, target):
    ins = tuple(ctx.in_shapes[0])
    axis = _norm_axis(ctx, ctx.attrs.get("axis", 0), len(ins))
    in_str = _strides(ins)
    parts = []
    off = 0
    for k, o in enumerate(ctx.out_shapes):
        o = tuple(o)
        shape, strides = to_target(target, *_meta(o, in_str))
        parts.append((k, off * in_str[axis], shape, strides))
        off += o[axis]

    @replayable
    def run(inputs, outputs):
        for k, base, shape, strides in parts:
            _gather_strided(target, inputs[0], outputs[k], base, shape, strides)

    return run


# --- Slice -------------------------------------------------------------------
def slice_params(in_shape, starts, ends, axes=None, steps=None):
    """(base offset, element strides, output shape) of ``x[starts:ends:steps]`` on ``axes``
    (ONNX Slice semantics: negative values count from the end, clamping). ``ends``
    may be None: the output shape entries for sliced axes are then None."""
    in_shape = tuple(int(d) for d in in_shape)
    rank = len(in_shape)
    starts = [int(v) for v in np.asarray(starts).reshape(-1)]
    n = len(starts)
    ends = None if ends is None else [int(v) for v in np.asarray(ends).reshape(-1)]
    axes = list(range(n)) if axes is None else [int(v) for v in np.asarray(axes).reshape(-1)]
    steps = [1] * n if steps is None else [int(v) for v in np.asarray(steps).reshape(-1)]
    if len(axes) != n or len(steps) != n or (ends is not None and len(ends) != n):
        raise ValueError(f"starts/ends/axes/steps have different lengths "
                         f"({n}, {None if ends is None else len(ends)}, {len(axes)}, {len(steps)})")
    in_str = _strides(in_shape)
    strides = list(in_str)
    out_shape: list = list(in_shape)
    base = 0
    seen = set()
    for j in range(n):
        a = axes[j] + rank if axes[j] < 0 else axes[j]
        if not 0 <= a < rank or a in seen:
            raise ValueError(f"axes={axes} has an out-of-range or repeated axis for rank {rank}")
        seen.add(a)
        st = steps[j]
        if st == 0:
            raise ValueError("steps must not be 0")
        dim = in_shape[a]
        s = starts[j] + dim if starts[j] < 0 else starts[j]
        s = min(max(s, 0), dim) if st > 0 else min(max(s, 0), dim - 1)
        if ends is None:
            out_shape[a] = None
        else:
            e = ends[j] + dim if ends[j] < 0 else ends[j]
            e = min(max(e, 0), dim) if st > 0 else min(max(e, -1), dim - 1)
            out_shape[a] = max(0, -((s - e) // st))
        base += s * in_str[a]
        strides[a] = in_str[a] * st
    return base, strides, tuple(out_shape)


def _slice_inputs(ctx):
    """Which parameter inputs the kernel needs at run time: (index, name, optional)."""
    return [(1, "starts", False), (3, "axes", True), (4, "steps", True)]


def _check_slice(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    if not target.host:
        for i, name, optional in _slice_inputs(ctx):
            if (ctx.has_input(i) or not optional) and ctx.const(i) is None:
                return f"Slice {name!r} must be a constant on {target}"
    if all(ctx.const(i) is not None for i, _, opt in _slice_inputs(ctx) if ctx.has_input(i) or not opt):
        try:
            _slice_static(ctx)
        except (ValueError, KernelError) as e:
            return f"Slice: {e}"
    return None


def _slice_static(ctx):
    """Slice parameters from constant inputs, checked against the inferred output shape."""
    opt = lambda i: ctx.const(i) if ctx.has_input(i) else None  # noqa: E731
    ends = ctx.const(2)
    base, strides, shape = slice_params(ctx.in_shapes[0], ctx.const(1), ends, opt(3), opt(4))
    out = tuple(ctx.out_shapes[0])
    if any(a is not None and a != b for a, b in zip(shape, out)) or len(shape) != len(out):
        raise KernelError(f"{_where(ctx)}: slice gives shape {shape}, shape inference says {out}")
    return base, strides


@register("Slice", dtypes=MOVE, since=OLD["Slice"], until=UNTIL, check=_check_slice,
          note="CUDA needs constant starts/axes/steps; the CPU reads them at run time")
def _build_slice(ctx, target):
    out_shape = tuple(ctx.out_shapes[0])
    static = all(ctx.const(i) is not None for i, _, opt in _slice_inputs(ctx)
                 if ctx.has_input(i) or not opt)
    if static:
        base, strides = _slice_static(ctx)
        shape, strides = to_target(target, *_meta(out_shape, strides))

        @replayable
        def run(inputs, outputs):
            _gather_strided(target, inputs[0], outputs[0], base, shape, strides)

        return run
    if not target.host:  # pragma: no cover - declined by the check
        raise KernelError(f"{_where(ctx)}: Slice parameters must be constants on {target}")

    def run_dynamic(inputs, outputs):
        try:
            base, strides, shape = slice_params(ctx.in_shapes[0], inputs[1], inputs[2],
                                                inputs[3] if len(inputs) > 3 else None,
                                                inputs[4] if len(inputs) > 4 else None)
        except ValueError as e:
            raise ExecutionError(f"{_where(ctx)}: {e}") from e
        if shape != out_shape:
            raise ExecutionError(f"{_where(ctx)}: the slice parameters give shape {shape}, "
                                 f"but the output was planned as {out_shape}")
        _gather_strided(target, inputs[0], outputs[0], base, *_meta(out_shape, strides))

    return run_dynamic


def _slice1_static(ctx):
    a = ctx.attrs
    if "starts" not in a or "ends" not in a:
        raise KernelError(f"{_where(ctx)}: Slice-1 needs the starts and ends attributes")
    base, strides, shape = slice_params(ctx.in_shapes[0], a["starts"], a["ends"], a.get("axes"), None)
    out = tuple(ctx.out_shapes[0])
    if shape != out:
        raise KernelError(f"{_where(ctx)}: slice gives shape {shape}, shape inference says {out}")
    return base, strides


def _check_slice1(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    try:
        _slice1_static(ctx)
    except (ValueError, KernelError) as e:
        return f"Slice: {e}"
    return None


@register("Slice", dtypes=MOVE, since=1, until=9, check=_check_slice1,
          note="Slice-1: starts/ends/axes attributes (a strided copy)")
def _build_slice1(ctx, target):
    base, strides = _slice1_static(ctx)
    shape, strides = to_target(target, *_meta(tuple(ctx.out_shapes[0]), strides))

    @replayable
    def run(inputs, outputs):
        _gather_strided(target, inputs[0], outputs[0], base, shape, strides)

    return run


# --- Gather, GatherElements, GatherND -----------------------------------------
def _check_indices(ctx, target, op):
    why = _shapes_known(ctx, (0, 1))
    if why:
        return why
    dt = ctx.in_dtypes[1] if len(ctx.in_dtypes) > 1 else None
    if dt is None or np.dtype(dt).name not in INDEX:
        return f"{op}: indices must be int64 or int32, got {None if dt is None else np.dtype(dt).name}"
    return None


def _validate(idx, n, ctx, what="index"):
    """Raise on host indices outside [-n, n) (naming the first)."""
    idx = np.asarray(idx)
    if idx.size and (int(idx.min()) < -n or int(idx.max()) >= n):
        bad = idx[(idx < -n) | (idx >= n)].reshape(-1)[0]
        raise ExecutionError(f"{_where(ctx)}: {what} {int(bad)} is out of range for an axis of "
                             f"length {n} (valid: {-n}..{n - 1})")


def index_flag(target):
    """A fresh one-element flag that index-checking kernels set on a bad index."""
    return target.to_device(np.zeros(1, np.int32))


def raise_if_flagged(target, ctx, flag, idx, dims, what="index"):
    """After an index-checking launch: when ``flag`` is set, raise ExecutionError naming the
    first bad index. ``dims`` is the axis length, or one length per index column (GatherND
    style, indices reshaped to (-1, len(dims)))."""
    if not int(target.to_host(flag)[0]):
        return
    host = np.asarray(target.to_host(idx))
    if isinstance(dims, (int, np.integer)):
        _validate(host, int(dims), ctx, what)
    else:
        cols = host.reshape(-1, len(dims))
        for j, n in enumerate(dims):
            _validate(cols[:, j], int(n), ctx, what)
    raise ExecutionError(f"{_where(ctx)}: a kernel flagged an out-of-range {what}")  # pragma: no cover


def _check_gather(ctx, target):
    why = _check_indices(ctx, target, "Gather")
    if why:
        return why
    rank = len(ctx.in_shapes[0])
    if rank == 0:
        return "Gather: data must have rank >= 1"
    try:
        _norm_axis(ctx, ctx.attrs.get("axis", 0), rank)
    except KernelError as e:
        return str(e)
    return None


@register("Gather", dtypes=MOVE, since=OLD["Gather"], until=UNTIL, check=_check_gather,
          note="negative indices; out-of-range indices raise (checked in the kernel)")
def _build_gather(ctx, target):
    ds = tuple(ctx.in_shapes[0])
    axis = _norm_axis(ctx, ctx.attrs.get("axis", 0), len(ds))
    axis_dim = ds[axis]
    n_idx = _prod(ctx.in_shapes[1])
    inner = _prod(ds[axis + 1:])

    def run(inputs, outputs):
        data, idx, out = bits(inputs[0]), inputs[1], bits(outputs[0])
        if out.shape[0] == 0:
            return
        if axis_dim == 0:
            raise ExecutionError(f"{_where(ctx)}: cannot gather from an empty axis")
        idx = idx if idx.ndim == 1 else idx.reshape(idx.size)
        bad = index_flag(target)
        target.launch(_GATHER, out.shape[0], data, idx, out, axis_dim, n_idx, inner, bad)
        raise_if_flagged(target, ctx, bad, idx, axis_dim)

    return run


def _check_gather_elements(ctx, target):
    why = _check_indices(ctx, target, "GatherElements")
    if why:
        return why
    ds, ish = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    if len(ds) == 0 or len(ds) != len(ish):
        return f"GatherElements: data {ds} and indices {ish} must have the same rank >= 1"
    try:
        axis = _norm_axis(ctx, ctx.attrs.get("axis", 0), len(ds))
    except KernelError as e:
        return str(e)
    if any(i > d for k, (i, d) in enumerate(zip(ish, ds)) if k != axis):
        return f"GatherElements: indices {ish} exceed data {ds} outside axis {axis}"
    return None


@register("GatherElements", dtypes=MOVE, since=OLD["GatherElements"], until=UNTIL, check=_check_gather_elements,
          note="negative indices; out-of-range indices raise (checked in the kernel)")
def _build_gather_elements(ctx, target):
    ds, ish = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    axis = _norm_axis(ctx, ctx.attrs.get("axis", 0), len(ds))
    axis_dim = ds[axis]
    ishape, dstrides = to_target(target, *_meta(ish, _strides(ds)))

    def run(inputs, outputs):
        data, idx, out = bits(inputs[0]), inputs[1], bits(outputs[0])
        if out.shape[0] == 0:
            return
        if axis_dim == 0:
            raise ExecutionError(f"{_where(ctx)}: cannot gather from an empty axis")
        idx = idx if idx.ndim == 1 else idx.reshape(idx.size)
        bad = index_flag(target)
        target.launch(_GATHER_ELEMENTS, out.shape[0], data, idx, out, ishape, dstrides, axis, axis_dim, bad)
        raise_if_flagged(target, ctx, bad, idx, axis_dim)

    return run


def _check_gathernd(ctx, target):
    why = _check_indices(ctx, target, "GatherND")
    if why:
        return why
    ds, ish = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    b = int(ctx.attrs.get("batch_dims", 0))
    if len(ds) < 1 or len(ish) < 1:
        return "GatherND: data and indices must have rank >= 1"
    if not 0 <= b < min(len(ds), len(ish)):
        return f"GatherND: batch_dims={b} must be < min(rank(data), rank(indices))"
    if ds[:b] != ish[:b]:
        return f"GatherND: the first {b} dims of data {ds} and indices {ish} differ"
    m = ish[-1]
    if m > len(ds) - b:
        return f"GatherND: indices.shape[-1]={m} exceeds rank(data) - batch_dims"
    return None


def _shape_gathernd(ctx):
    """indices.shape[:-1] + data.shape[batch_dims + m:] (the spec's output shape; onnx's inference
    gives none when it is a scalar)."""
    ds, ish = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    b = int(ctx.attrs.get("batch_dims", 0))
    return [ish[:-1] + ds[b + int(ish[-1]):]]


@register("GatherND", dtypes=MOVE, since=OLD["GatherND"], until=UNTIL, check=_check_gathernd,
          shape=_shape_gathernd,
          note="batch_dims; negative indices; out-of-range indices raise (checked in the kernel)")
def _build_gathernd(ctx, target):
    ds, ish = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    b = int(ctx.attrs.get("batch_dims", 0))
    m = int(ish[-1])
    dstr = _strides(ds)
    inner = _prod(ds[b + m:])
    batch_div = _prod(ish[b:-1])
    batch_stride = _prod(ds[b:])
    dshape_np = np.asarray(ds[b:b + m] or (1,), np.int64)
    dstr_np = np.asarray(dstr[b:b + m] or (0,), np.int64)
    dshape, dstrides = to_target(target, dshape_np, dstr_np)

    def run(inputs, outputs):
        data, idx, out = bits(inputs[0]), inputs[1], bits(outputs[0])
        if out.shape[0] == 0:
            return
        if any(d == 0 for d in ds[b:b + m]):
            raise ExecutionError(f"{_where(ctx)}: cannot gather from an empty axis")
        idx = idx if idx.ndim == 1 else idx.reshape(idx.size)
        bad = index_flag(target)
        target.launch(_GATHERND, out.shape[0], data, idx, out, m, inner, batch_div, batch_stride,
                      dshape, dstrides, bad)
        if m:
            raise_if_flagged(target, ctx, bad, idx, [int(v) for v in dshape_np[:m]])

    return run


# --- host-only shape ops: Shape, Size, ConstantOfShape, Constant, Range ----------
def _check_out_dtype(ctx, allowed):
    dt = ctx.out_dtypes[0] if ctx.out_dtypes else None
    if dt is None or np.dtype(dt).name not in allowed:
        return (f"{ctx.node.op_type}: output dtype {None if dt is None else np.dtype(dt).name} "
                f"not supported (takes {', '.join(allowed)})")
    return None


def _shape_slice(ctx):
    shp = tuple(ctx.in_shapes[0])
    r = len(shp)
    s = int(ctx.attrs.get("start", 0))
    e = int(ctx.attrs.get("end", r))
    s = min(max(s + r if s < 0 else s, 0), r)
    e = min(max(e + r if e < 0 else e, 0), r)
    return np.asarray(shp[s:e], dtype=np.int64).reshape(-1)


def _check_shape(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    if tuple(ctx.out_shapes[0]) != _shape_slice(ctx).shape:
        return "Shape: the inferred output shape does not match start/end"
    return None


@register("Shape", dtypes=ANY, since=OLD["Shape"], until=UNTIL, targets=("cpu",), check=_check_shape,
          note="start/end (15); host only")
def _build_shape(ctx, target):
    vals = _shape_slice(ctx)

    def run(inputs, outputs):
        outputs[0][...] = vals

    return run


@register("Size", dtypes=ANY, since=OLD["Size"], until=UNTIL, targets=("cpu",),
          check=lambda ctx, target: _shapes_known(ctx),
          note="host only")
def _build_size(ctx, target):
    n = np.int64(_prod(ctx.in_shapes[0]))

    def run(inputs, outputs):
        outputs[0][...] = n

    return run


def _cos_value(ctx):
    v = ctx.attrs.get("value")
    if v is None:
        return np.zeros((), np.float32)
    return np.asarray(v)


def _check_constant_of_shape(ctx, target):
    v = _cos_value(ctx)
    if v.size != 1:
        return f"ConstantOfShape: value must hold one element, it holds {v.size}"
    if v.dtype.name not in CONST_OUT:
        return f"ConstantOfShape: value dtype {v.dtype.name} not supported"
    return _check_out_dtype(ctx, CONST_OUT)


@register("ConstantOfShape", dtypes=("int64",), since=SINCE, until=UNTIL, targets=("cpu",),
          check=_check_constant_of_shape, note="host only")
def _build_constant_of_shape(ctx, target):
    v = _cos_value(ctx).reshape(()).astype(ctx.out_dtypes[0])

    def run(inputs, outputs):
        outputs[0][...] = v

    return run


def _constant_value(ctx):
    a = ctx.attrs
    if "value" in a:
        return np.asarray(a["value"])
    if "value_float" in a:
        return np.asarray(a["value_float"], dtype=np.float32)
    if "value_floats" in a:
        return np.asarray(a["value_floats"], dtype=np.float32)
    if "value_int" in a:
        return np.asarray(a["value_int"], dtype=np.int64)
    if "value_ints" in a:
        return np.asarray(a["value_ints"], dtype=np.int64)
    return None


def _check_constant(ctx, target):
    v = _constant_value(ctx)
    if v is None:
        kinds = sorted(k for k in ctx.attrs if k.startswith(("value", "sparse")))
        return f"Constant: attribute {kinds or '(none)'} not supported (strings and sparse tensors)"
    if v.dtype.name not in CONST_OUT:
        return f"Constant: dtype {v.dtype.name} not supported"
    if not ctx.out_shapes or ctx.out_shapes[0] is None or tuple(ctx.out_shapes[0]) != v.shape:
        return "Constant: the inferred output shape does not match the value"
    return None


@register("Constant", dtypes=CONST_OUT, since=OLD["Constant"], until=UNTIL, targets=("cpu",),
          check=_check_constant, note="host only; no strings or sparse tensors")
def _build_constant(ctx, target):
    v = _constant_value(ctx)

    def run(inputs, outputs):
        outputs[0][...] = v

    return run


def _check_range(ctx, target):
    dts = [None if d is None else np.dtype(d) for d in ctx.in_dtypes[:3]]
    if len(dts) != 3 or len(set(dts)) != 1:
        return "Range: start, limit and delta must have one dtype"
    # scalars, as the spec says; a 1-element vector too, as onnxruntime and onnx's reference
    # accept (onnx's own AffineGrid function body passes them)
    if any(s is not None and not (len(s) == 0 or tuple(s) == (1,)) for s in ctx.in_shapes[:3]):
        return "Range: start, limit and delta must be scalars (or 1-element vectors)"
    if ctx.out_shapes[0] is None or len(ctx.out_shapes[0]) != 1:
        return "Range: the output length is unknown"
    return None


@register("Range", dtypes=RANGE, since=SINCE, until=UNTIL, targets=("cpu",), check=_check_range,
          note="output[i] = start + i*delta in the input dtype; host only")
def _build_range(ctx, target):
    n = int(ctx.out_shapes[0][0])
    dt = np.dtype(ctx.out_dtypes[0])

    def run(inputs, outputs):
        start = np.asarray(inputs[0], dt).reshape(())
        delta = np.asarray(inputs[2], dt).reshape(())
        if n:
            outputs[0][...] = start + np.arange(n, dtype=dt) * delta

    return run



# --- TensorScatter (24): a KV-cache update ----------------------------------------------
_TENSOR_SCATTER = kernel_pair(
    "tensor_scatter", "past, upd, widx, out, L, S, inner, per_batch, circular, has_w, bad, n",
    """
    q = i % inner
    s = (i // inner) % L
    p = i // (inner * L)
    w = widx[p // per_batch] if has_w else 0
    if w < 0 or (not circular and w + S > L):
        bad[0] = 1
    if w < 0:
        w = 0
    if circular:
        w = w % L
    j = s - w
    if circular and j < 0:
        j += L
    if j >= 0 and j < S:
        out[i] = upd[(p * S + j) * inner + q]
    else:
        out[i] = past[i]
    """, count="n", module=__name__)


def _check_tensor_scatter(ctx, target):
    why = _shapes_known(ctx, (0, 1) + ((2,) if len(ctx.node.inputs) > 2 and ctx.node.inputs[2] else ()))
    if why:
        return why
    ps, us = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    rank = len(ps)
    if rank < 2 or len(us) != rank:
        return f"TensorScatter: past_cache {ps} and update {us} must have one rank >= 2"
    try:
        axis = _norm_axis(ctx, ctx.attrs.get("axis", -2), rank)
    except KernelError as e:
        return str(e)
    if axis == 0:
        return "TensorScatter: axis 0 is the batch axis, not a sequence axis"
    if any(a != b for k, (a, b) in enumerate(zip(ps, us)) if k != axis) or us[axis] > ps[axis]:
        return f"TensorScatter: update {us} must match past_cache {ps} except along axis {axis}, and not exceed it"
    mode = ctx.attrs.get("mode", "linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("linear", "circular"):
        return f"TensorScatter: mode {mode!r} is not 'linear' or 'circular'"
    if len(ctx.node.inputs) > 2 and ctx.node.inputs[2]:
        dt = ctx.in_dtypes[2]
        if dt is None or np.dtype(dt).name != "int64" or tuple(ctx.in_shapes[2]) != (ps[0],):
            return f"TensorScatter: write_indices must be int64 of shape ({ps[0]},)"
    return None


@register("TensorScatter", dtypes=MOVE, since=24, until=28, check=_check_tensor_scatter,
          note="present = past with update written at write_indices along axis (linear: must fit; "
               "circular: modulo the axis); a bad write index raises")
def _build_tensor_scatter(ctx, target):
    ps, us = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    axis = _norm_axis(ctx, ctx.attrs.get("axis", -2), len(ps))
    mode = ctx.attrs.get("mode", "linear")
    circular = (mode.decode() if isinstance(mode, bytes) else mode) == "circular"
    L, S, inner, per_batch = int(ps[axis]), int(us[axis]), _prod(ps[axis + 1:]), _prod(ps[1:axis])
    n = _prod(ps)
    has_w = len(ctx.node.inputs) > 2 and bool(ctx.node.inputs[2])
    no_w = None if has_w else target.to_device(np.zeros(1, np.int64))

    def run(inputs, outputs):
        if n == 0:
            return
        past, upd, out = bits(inputs[0]), bits(inputs[1]), bits(outputs[0])
        widx = inputs[2].reshape(-1) if has_w else no_w
        bad = index_flag(target)
        target.launch(_TENSOR_SCATTER, n, past.reshape(-1), upd.reshape(-1), widx, out.reshape(-1), L, S,
                      inner, per_batch, circular, has_w, bad, n)
        if int(target.to_host(bad)[0]):
            w = np.asarray(target.to_host(widx)).reshape(-1).tolist()
            raise ExecutionError(f"{_where(ctx)}: write_indices {w} do not fit: an update of length {S} "
                                 f"must start in [0, {L - S if not circular else L - 1}] along axis {axis} "
                                 f"of length {L} ({'circular' if circular else 'linear'} mode)")

    return run
