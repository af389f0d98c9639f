"""Schema versions before opset 7 (and the old pooling/convolution versions): the
definitions that old exporters (the pytorch-converted / pytorch-operator backend
folders, the opset-6..9 model-zoo CNNs) need, each reusing the kernels of the
current definition.

Two kinds, both read off onnx's schema history (``onnx.defs.get_schema(op, v)``):

* **same semantics, fewer attributes**: Conv-1, ConvTranspose-1, AveragePool-1/7/10,
  MaxPool-1/8/10/11, MatMul-1, Max/Min/Sum-6 (same-shape inputs; the version-8
  kernels broadcast, a superset). The schema diff is only attributes added later
  (``count_include_pad``, ``ceil_mode``, ``dilations``, ``storage_order``, the
  MaxPool ``Indices`` output) whose defaults are the old behaviour, or type lists:
  the current build and check run unchanged.
* **legacy broadcasting** (Add/Sub/Mul/Div-1..6, Pow-1, Gemm-6): ``broadcast=1``
  aligns B with A starting at ``axis`` (default: B is a suffix of A's shape; a dim of
  B may be 1, as the pytorch exporters of that time emit, e.g. B (2, 1) on A (2, 3)); with
  ``broadcast=0`` the shapes must be equal (Gemm: C must be (M, N)). Here B's shape
  is rewritten to A's rank (trailing 1s, the same elements in the same order) and
  the version-7 kernels run with numpy broadcasting, which then means the same.
* **PRelu-6**: (PRelu-7 only adds types: the current build) the slope has one element, or one per channel (axis 1) -- Caffe2's
  PRelu, which PRelu-7 replaced by unidirectional broadcasting. Per-channel slopes
  are reshaped to (C, 1, ..., 1); the version-9 kernels run.
* **BatchNormalization-1/6**: ``is_test=1`` is the inference formula of version 7
  (the only mode the version-7 kernel runs); ``is_test=0`` (training) is declined.

Each definition claims only schema versions strictly before the current
definition's, so no opset is claimed twice.
"""

from __future__ import annotations

import dataclasses

from .common import node_error
from .opdef import OpDef, OpList, schema_version

OPS = OpList()


def _current(module, op_type: str, opset: int) -> OpDef:
    """The definition in ``module.OPS`` that claims ``op_type`` at ``opset``."""
    for d in module.OPS:
        if d.op_type == op_type and d.domain == "" and d.claims(opset):
            return d
    raise LookupError(f"no {op_type} definition claims opset {opset} in {module.__name__}")


def _reuse(base: OpDef, since: int, until: int, *, build=None, check=None, note: str = "") -> OpDef:
    d = dataclasses.replace(base, since=since, until=until,
                            build=build or base.build, check=check if check is not None else base.check,
                            note=note or base.note)
    OPS.append(d)
    return d


def _with_shapes(ctx, shapes):
    return dataclasses.replace(ctx, in_shapes=list(shapes))


# -- same semantics: the current build on the old versions ---------------------------------
def _same(module, op_type: str, current_opset: int, why: str):
    base = _current(module, op_type, current_opset)
    first = base.versions()[0]
    # every opset before the current definition's first schema version
    last_old = max(n for n in range(1, current_opset + 1)
                   if (schema_version("", op_type, n) or first) < first)
    _reuse(base, 1, last_old, note=f"{base.note}; opsets before {first}: {why}")


# -- legacy broadcasting (broadcast / axis attributes) --------------------------------------
def _legacy_b_shape(ctx, a_shape, b_shape, what: str = "B"):
    """B's shape at A's rank under ONNX's pre-opset-7 broadcasting, or a reason (str)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    bc = int(ctx.attrs.get("broadcast", 0))
    if not bc:
        if a_shape != b_shape:
            return (f"{ctx.node.op_type}-{ctx.opset}: broadcast=0 needs {what} of A's shape {a_shape}, "
                    f"got {b_shape}")
        return b_shape
    ra, rb = len(a_shape), len(b_shape)
    if rb > ra:
        return f"{ctx.node.op_type}-{ctx.opset}: {what} of rank {rb} does not broadcast to A of rank {ra}"
    if b_shape == () or (rb == 1 and b_shape[0] == 1):
        return (1,) * ra
    axis = ctx.attrs.get("axis")
    axis = ra - rb if axis is None else int(axis)
    if axis < 0:
        axis += ra
    if axis < 0 or axis + rb > ra or any(bd not in (1, ad) for bd, ad in zip(b_shape, a_shape[axis:])):
        return (f"{ctx.node.op_type}-{ctx.opset}: {what} shape {b_shape} does not match A's dims "
                f"{a_shape} at axis {ctx.attrs.get('axis', 'default (suffix)')}")
    return (1,) * axis + b_shape + (1,) * (ra - axis - rb)


def _broadcast_pair(base: OpDef, b_index: int = 1, what: str = "B"):
    def aligned(ctx):
        shapes = list(ctx.in_shapes)
        a, b = shapes[0], shapes[b_index] if b_index < len(shapes) else None
        if a is None or b is None:
            return shapes, None
        if b_index == 2:   # Gemm: C against the (M, N) output
            a = ctx.out_shapes[0]
        s = _legacy_b_shape(ctx, a, b, what)
        if isinstance(s, str):
            return shapes, s
        shapes[b_index] = s
        return shapes, None

    def check(ctx, target):
        shapes, why = aligned(ctx)
        if why:
            return why
        return base.check(_with_shapes(ctx, shapes), target) if base.check else None

    def build(ctx, target):
        shapes, why = aligned(ctx)
        if why:
            raise node_error(ctx, why)
        return base.build(_with_shapes(ctx, shapes), target)

    return check, build


def _legacy_binary(module, op_type: str, until: int):
    base = _current(module, op_type, 7)
    check, build = _broadcast_pair(base)
    _reuse(base, 1, until, build=build, check=check,
           note=f"{base.note + '; ' if base.note else ''}opsets 1-6: broadcast/axis attributes (legacy "
                "broadcasting) mapped onto numpy broadcasting")


# -- PRelu-6: scalar or per-channel slope ---------------------------------------------------
def _prelu6(base: OpDef):
    def aligned(ctx):
        x, s = ctx.in_shapes[0], ctx.in_shapes[1]
        if x is None or s is None:
            return list(ctx.in_shapes), None
        x, s = tuple(x), tuple(s)
        n = 1
        for d in s:
            n *= int(d)
        if n == 1:
            return [x, (1,) * len(x)], None
        if len(x) >= 2 and n == x[1] and len(s) == 1:
            return [x, (1, x[1]) + (1,) * (len(x) - 2)], None
        return list(ctx.in_shapes), (f"PRelu-6: the slope must have one element or one per channel "
                                     f"({x[1] if len(x) >= 2 else '?'}), got shape {s}")

    def check(ctx, target):
        shapes, why = aligned(ctx)
        if why:
            return why
        return base.check(_with_shapes(ctx, shapes), target) if base.check else None

    def build(ctx, target):
        shapes, why = aligned(ctx)
        if why:
            raise node_error(ctx, why)
        return base.build(_with_shapes(ctx, shapes), target)

    return check, build


# -- BatchNormalization-6: is_test --------------------------------------------------------
def _bn6(base: OpDef):
    def check(ctx, target):
        if int(ctx.attrs.get("is_test", 0)) != 1:
            return "BatchNormalization-6: is_test=0 (training mode) is not supported (inference only)"
        return base.check(ctx, target) if base.check else None

    return check


def _declare():
    from . import elementwise, nn, norm, pool

    for mod, op in ((nn, "Conv"), (nn, "ConvTranspose"), (pool, "AveragePool"), (pool, "MaxPool")):
        _same(mod, op, 12, "the same computation; the attributes added later (ceil_mode, "
                          "count_include_pad, dilations, storage_order, Indices) default to it")
    _same(nn, "MatMul", 9, "MatMul-1 (float types only)")
    for op in ("Max", "Min", "Sum"):
        _same(elementwise, op, 8, "same-shape inputs (a subset of version 8's broadcasting)")
    for op in ("Add", "Sub", "Mul", "Div"):
        _legacy_binary(elementwise, op, 6)
    _legacy_binary(elementwise, "Pow", 6)

    gemm = _current(nn, "Gemm", 7)
    gcheck, gbuild = _broadcast_pair(gemm, b_index=2, what="C")
    _reuse(gemm, 1, 6, build=gbuild, check=gcheck,
           note=f"{gemm.note}; opsets 1-6: C under the broadcast attribute (legacy broadcasting)")

    prelu = _current(elementwise, "PRelu", 9)
    pcheck, pbuild = _prelu6(prelu)
    _reuse(prelu, 6, 6, build=pbuild, check=pcheck,
           note=f"{prelu.note}; PRelu-6: one slope, or one per channel (axis 1)")
    _reuse(prelu, 7, 8, note=f"{prelu.note}; PRelu-7 (float types only)")

    bn = _current(norm, "BatchNormalization", 7)
    _reuse(bn, 1, 6, check=_bn6(bn), note=f"{bn.note}; BatchNormalization-1/6 with is_test=1")


_declare()
