"""Data-dependent ops: NonZero, Compress, Unique, NonMaxSuppression; and TopK.

The output size of the first four depends on the input *data*, so no
load-time inference can give it. Each definition has a run-time shape function
(``OpDef.infer``): the node runner reads the inputs it names
(``shape_inputs``) on the host, the function counts the outputs (the *count
pass*), the runner checks the counts against the plan and the memory budget,
allocates, and the kernel fills the outputs (the *fill pass*). Both passes are
deterministic and sequential.

TopK's output size depends only on ``k``: its shapes come from onnx's per-node
inference like every other op's (``k`` is a shape input, read at run time when it
is computed).

All five are CPU-only (host code, numpy and ``@njit``): a CUDA version would
need the count on the host anyway (a device-to-host copy of the data before the
allocation) and a parallel deterministic compaction or sort; not written yet.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..ir.errors import ExecutionError, KernelError
from .opdef import ALL, NUMERIC, OpList

OPS = OpList()
register = OPS.register

HOST = ("cpu",)
_FLOATS = ("float32",)
#: the last opset checked: the schema versions after 21 (TopK-24, Compress-28, Unique-28) only add
#: bfloat16, which is not claimed (onnx 1.23's schema history)
UNTIL = 28


def _where(ctx) -> str:
    return f"node {ctx.node.name!r} ({ctx.node.op_type})"


def _axis(ctx, rank, default=None):
    a = ctx.attrs.get("axis", default)
    if a is None:
        return None
    a = int(a)
    if not -rank <= a < max(rank, 1):
        raise KernelError(f"{_where(ctx)}: axis={a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


# --- NonZero -------------------------------------------------------------------------------
def _nonzero_infer(ctx, arrays):
    x = arrays[0]
    return [((x.ndim, int(np.count_nonzero(x))), np.dtype(np.int64))]


@register("NonZero", dtypes=ALL, since=9, until=UNTIL, targets=HOST, shape_inputs=(0,), infer=_nonzero_infer,
          data_dependent_output=True,
          note="indices of the non-zero elements in row-major order (count pass, then fill); host only")
def _build_nonzero(ctx, target):
    def run(inputs, outputs):
        x, out = inputs[0], outputs[0]
        if x.ndim and out.size:
            out[...] = np.stack(np.nonzero(x)).astype(np.int64, copy=False)

    return run


# --- Compress ------------------------------------------------------------------------------
def _compress_args(ctx, x, cond):
    axis = _axis(ctx, x.ndim)
    cond = np.asarray(cond).reshape(-1)
    n = x.size if axis is None else x.shape[axis]
    if cond.size > n:
        raise ValueError(f"condition has {cond.size} element(s), more than the {n} of "
                         f"{'the flattened input' if axis is None else f'axis {axis}'}")
    return axis, cond


def _compress_infer(ctx, arrays):
    x_shape = tuple(ctx.in_shapes[0])
    axis, cond = _compress_args(ctx, np.empty(x_shape, np.uint8), arrays[1])
    k = int(np.count_nonzero(cond))
    shape = (k,) if axis is None else x_shape[:axis] + (k,) + x_shape[axis + 1:]
    return [(shape, np.dtype(ctx.in_dtypes[0]))]


@register("Compress", dtypes=ALL + ("float64", "float16", "bfloat16", "int8", "uint8", "int16", "uint16"), since=9, until=UNTIL, targets=HOST, shape_inputs=(1,), infer=_compress_infer,
          data_dependent_output=True,
          note="np.compress along axis (flattened without one); a shorter condition drops the tail; host only")
def _build_compress(ctx, target):
    def run(inputs, outputs):
        x, cond = inputs[0], inputs[1]
        axis, cond = _compress_args(ctx, x, cond)
        outputs[0][...] = np.compress(cond.astype(bool), x, axis=axis)

    return run


# --- Unique --------------------------------------------------------------------------------
def unique(x, axis, sort: bool):
    """ONNX Unique: (Y, indices, inverse_indices, counts); without ``sort`` in order of first
    occurrence (the order of ``indices``)."""
    if axis is None:
        y, idx, inv, cnt = np.unique(x.reshape(-1), return_index=True, return_inverse=True, return_counts=True)
    else:
        y, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inv = inv.reshape(-1)
    if not sort:
        perm = np.argsort(idx, kind="stable")        # sorted position -> first-occurrence order
        rank = np.empty_like(perm)
        rank[perm] = np.arange(perm.size)
        y = np.take(y, perm, axis=0 if axis is None else axis)
        idx, cnt, inv = idx[perm], cnt[perm], rank[inv]
    return y, idx.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)


def _unique_infer(ctx, arrays):
    x = arrays[0]
    axis = _axis(ctx, x.ndim)
    y, idx, inv, cnt = unique(x, axis, bool(int(ctx.attrs.get("sorted", 1))))
    i64 = np.dtype(np.int64)
    return [(y.shape, x.dtype), (idx.shape, i64), (inv.shape, i64), (cnt.shape, i64)][:len(ctx.out_shapes)]


@register("Unique", dtypes=NUMERIC + ("bfloat16",), since=11, until=UNTIL, targets=HOST, shape_inputs=(0,), infer=_unique_infer,
          data_dependent_output=True,
          note="np.unique (sorted, or in order of first occurrence with sorted=0), with axis; NaNs are one "
               "value; host only")
def _build_unique(ctx, target):
    sort = bool(int(ctx.attrs.get("sorted", 1)))
    axis = _axis(ctx, len(ctx.in_shapes[0]))

    def run(inputs, outputs):
        res = unique(inputs[0], axis, sort)
        for out, r in zip(outputs, res):
            if out is not None:
                out[...] = r

    return run


# --- NonMaxSuppression ---------------------------------------------------------------------
@njit(cache=True)
def _suppress(b1, b2, center, iou_threshold):
    """onnxruntime's and onnx's reference IoU test, in float32 throughout."""
    half = np.float32(0.5)
    if center == 0:
        x1_min, x1_max = min(b1[1], b1[3]), max(b1[1], b1[3])
        x2_min, x2_max = min(b2[1], b2[3]), max(b2[1], b2[3])
        y1_min, y1_max = min(b1[0], b1[2]), max(b1[0], b1[2])
        y2_min, y2_max = min(b2[0], b2[2]), max(b2[0], b2[2])
    else:
        x1_min, x1_max = b1[0] - b1[2] * half, b1[0] + b1[2] * half
        x2_min, x2_max = b2[0] - b2[2] * half, b2[0] + b2[2] * half
        y1_min, y1_max = b1[1] - b1[3] * half, b1[1] + b1[3] * half
        y2_min, y2_max = b2[1] - b2[3] * half, b2[1] + b2[3] * half
    ix_min, ix_max = max(x1_min, x2_min), min(x1_max, x2_max)
    if ix_max <= ix_min:
        return False
    iy_min, iy_max = max(y1_min, y2_min), min(y1_max, y2_max)
    if iy_max <= iy_min:
        return False
    inter = (ix_max - ix_min) * (iy_max - iy_min)
    if inter <= 0:
        return False
    a1 = (x1_max - x1_min) * (y1_max - y1_min)
    a2 = (x2_max - x2_min) * (y2_max - y2_min)
    union = a1 + a2 - inter
    if a1 <= 0 or a2 <= 0 or union <= 0:
        return False
    return inter / union > iou_threshold


@njit(cache=True)
def _nms(boxes, scores, max_out, iou_threshold, score_threshold, use_score, center, out):
    """Selected (batch, class, box) triples into ``out`` (when it is big enough); returns their count."""
    n_sel = 0
    nb, nc, n = scores.shape[0], scores.shape[1], scores.shape[2]
    chosen = np.empty(n, np.int64)
    for b in range(nb):
        for c in range(nc):
            s = scores[b, c]
            order = np.argsort(-s, kind="mergesort")   # score descending, ties: lower index first
            k = 0
            for j in range(n):
                if k >= max_out:
                    break
                i = order[j]
                if use_score and not s[i] > score_threshold:
                    continue
                keep = True
                for q in range(k):
                    if _suppress(boxes[b, i], boxes[b, chosen[q]], center, iou_threshold):
                        keep = False
                        break
                if keep:
                    chosen[k] = i
                    k += 1
                    if n_sel < out.shape[0]:
                        out[n_sel, 0] = b
                        out[n_sel, 1] = c
                        out[n_sel, 2] = i
                    n_sel += 1
    return n_sel


def _nms_args(ctx, arrays):
    boxes, scores = arrays[0], arrays[1]
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
            or scores.shape[2] != boxes.shape[1]:
        raise ValueError(f"boxes {boxes.shape} must be [batches, boxes, 4] and scores {scores.shape} "
                         "[batches, classes, boxes]")

    def scalar(i, dt, default):
        a = arrays[i] if i < len(arrays) else None
        if a is None or a.size == 0:
            return default, False
        return dt(np.asarray(a).reshape(-1)[0]), True

    max_out, _ = scalar(2, int, 0)
    iou, _ = scalar(3, np.float32, np.float32(0))
    sth, use = scalar(4, np.float32, np.float32(0))
    center = int(ctx.attrs.get("center_point_box", 0))
    if center not in (0, 1):
        raise ValueError(f"center_point_box={center} must be 0 or 1")
    return (np.ascontiguousarray(boxes, np.float32), np.ascontiguousarray(scores, np.float32),
            max(max_out, 0), np.float32(iou), np.float32(sth), use, center)


def _nms_infer(ctx, arrays):
    args = _nms_args(ctx, arrays)
    return [((int(_nms(*args, np.empty((0, 3), np.int64))), 3), np.dtype(np.int64))]


@register("NonMaxSuppression", dtypes=_FLOATS, since=10, until=UNTIL, targets=HOST, shape_inputs=(0, 1, 2, 3, 4),
          infer=_nms_infer, data_dependent_output=True,
          note="onnxruntime's greedy per-class selection (float32 IoU, ties: lower box index first); host only")
def _build_nms(ctx, target):
    def run(inputs, outputs):
        try:
            args = _nms_args(ctx, [None if a is None else np.asarray(a) for a in inputs])
        except ValueError as e:
            raise ExecutionError(f"{_where(ctx)}: {e}") from e
        out = outputs[0]
        n = _nms(*args, out)
        if n != out.shape[0]:  # pragma: no cover - the count pass ran on the same data
            raise ExecutionError(f"{_where(ctx)}: selected {n} boxes, the count pass said {out.shape[0]}")

    return run


# --- TopK ----------------------------------------------------------------------------------
def topk(x, k, axis, largest: bool):
    """Values and int64 indices of the ``k`` largest (smallest) along ``axis``, sorted; equal values
    keep the lower index first (as onnx's reference and onnxruntime); NaN counts as the largest."""
    n = x.shape[axis]
    if largest:   # a stable ascending sort of the reversed axis, reversed: descending, ties low-index first
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


@register("TopK", dtypes=NUMERIC, since=10, until=UNTIL, targets=HOST,
          note="sorted top-k (largest/smallest) along axis; ties: lower index first; k may be computed at "
               "run time; host only")
def _build_topk(ctx, target):
    xs = ctx.in_shapes[0]
    axis = _axis(ctx, len(xs), -1)
    if axis is None or not xs:
        raise KernelError(f"{_where(ctx)}: TopK needs an input of rank >= 1")
    k = int(ctx.out_shapes[0][axis])
    largest = bool(int(ctx.attrs.get("largest", 1)))

    def run(inputs, outputs):
        v, i = topk(inputs[0], k, axis, largest)
        outputs[0][...] = v
        if len(outputs) > 1 and outputs[1] is not None:
            outputs[1][...] = i

    return run
