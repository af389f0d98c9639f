"""Elementwise ops: each one line, ``unary(...)`` or ``binary(...)``.

A declaration gives the op's per-element expression for each dtype kind
(``f32``, ``int``, ``bool``) over ``x`` (unary) or ``a``, ``b`` (binary), with
up to two float attributes as ``p0``, ``p1`` and an integer ``aux`` (the output's
integer width, or what ``aux_of(ctx)`` gives). :func:`target.kernel_pair`
turns each expression into a kernel for every target from one of the templates
below (unary map; binary with numpy broadcasting), so each op gets its own
kernels -- the scalar math inlines and LLVM vectorises it -- and both targets
compute the same per-element operations. Scalar helpers (``binary_f32``,
``binary_int``, ``compare``, ``pow_float``, ``unary_f32``, ``unary_int``,
``cast_to_*``, in :mod:`.scalar`) are ``@njit`` functions written once; an op
code passed as a literal in the expression is folded by the compiler. Clip, Cast/CastLike and
Where have builds of their own over generated kernels.

Broadcasting follows numpy: every input gets a *mode* -- ``FULL`` (same shape
as the output: index i), ``SCALAR`` (one element: index 0) or ``BCAST``
(general: :func:`common.bcast_offset`) -- and the CPU loop hoists the common
"all FULL" and "FULL op SCALAR" cases and steps through broadcast offsets
without divisions. Variadic Max/Min/Sum fold their inputs left to right into
the output (``((x0 op x1) op x2) ...``), which is also numpy's order.

NaN bit patterns are not part of the bitwise contract: LLVM does not preserve
NaN sign and payload (a vectorised CPU loop yields x86's default NaN 0xffc00000
where a scalar path yields 0x7fc00000, and GPUs generate 0x7fffffff), so both
targets agree on every non-NaN bit and on where the NaNs are; compare NaNs as
NaNs.

Semantics chosen where ONNX leaves room (all match numpy on float32/int arrays):

* Max/Min: a NaN operand propagates (the NaN itself); otherwise ``a if a > b
  else b`` (``<`` for Min), i.e. on ties the second operand: Max(-0, +0) = +0,
  Max(+0, -0) = -0, as ``np.maximum``/``np.minimum``.
* Relu(x) = ``np.maximum(x, 0)``: Relu(-0) = +0, Relu(NaN) = NaN.
* Clip(x, lo, hi) = ``np.clip``: NaN in x, lo or hi gives NaN; on ties x is kept
  (Clip(-0, 0, 1) = -0); lo > hi gives hi. Absent bounds are -inf/+inf (or the
  integer type's limits). HardSigmoid = clip(alpha*x + beta, 0, 1),
  HardSwish = x * clip(x/6 + 1/2, 0, 1) (two roundings, no FMA).
* Integer Div truncates toward zero (C/ORT); integer division by zero gives 0
  (ORT's behaviour is undefined there; a run-time decline is impossible) and
  INT_MIN / -1 wraps to INT_MIN. Integer Add/Sub/Mul/Neg/Abs/Pow wrap around
  (two's complement), as numpy and C do.
* Cast float32 -> int truncates toward zero; NaN, +-inf and out-of-range values
  give INT_MIN of the target type (what x86, numpy and ORT on x86 give; the
  GPU's saturating conversion is not used). float -> bool is ``x != 0`` (NaN ->
  True); int64 -> int32 wraps; int -> float32 rounds to nearest even.
  Every other pair of numeric dtypes (float64, float16, bfloat16, float8/6/4,
  the integers down to int2) converts on the bit patterns with integer
  operations only (:mod:`.floatfmt`): one round-to-nearest-even, ONNX's
  saturate tables for float8, Cast-24's round_mode for float8e8m0.
* float16/bfloat16 (ops declared ``half=True``: + - * /, Max/Min/Sum, Sqrt,
  Reciprocal, Neg/Abs/Relu/Sign, Floor/Ceil/Round, IsNaN/IsInf, comparisons,
  Mod; Where moves bits): inputs widened to float32 (exact), the float32 kernel, the output
  rounded once (:func:`half_build`); transcendental ops stay float32-only, except Elu and
  Celu, whose half-type cases onnx's reference and backend cases reproduce with one rounding
  (Swish's reference rounds every step, so Swish stays float32-only).
* Pow: float base follows C99 ``pow`` as ``np.power`` on arrays does (see
  :func:`pmath.pow_f32`); an integer exponent >= 2**24 keeps its own parity for
  the sign. Integer base: integer exponents are computed exactly by repeated
  squaring (wrapping), negative exponents truncate like ORT's
  ``(T)std::pow(x, y)``: 1**-n = 1, (-1)**-n = +-1, else 0 (0**-n: 0, where ORT is
  undefined); a non-integral float exponent goes through ``pow_f32`` and a
  truncating cast.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..ir.errors import KernelError
from ..ir.graph import onnx_to_np_dtype
from . import floatfmt
from .common import (attr_str, bcast_offset, bits, broadcast_strides, copy_array, dual, flat, replayable, shape_array,
                     to_target)
from .target import kernel_pair
from .pmath import erf_f32, exp_f32, log_f32, pow_f32, sigmoid_f32, softplus_f32, sqrt_f32, tanh_f32  # noqa: F401
from .pmath import (acos_f32, acosh_f32, asin_f32, asinh_f32, atan_f32, atanh_f32, cos_f32, cosh_f32,  # noqa: F401
                    sin_f32, sinh_f32, tan_f32)
from .opdef import FLOAT, NUMERIC, OpList
# the scalar functions, op codes and constants the kernel expressions below name
from .scalar import (ABS, ADD, AND, CAST_TO, CAST_TYPES, CLIP, COMPARE_CODES, D_ONE, D_ZERO, DIV, EQ,  # noqa: F401
                     EVERY, F, F_INF, F_ONE, F_ZERO, FLOATS, GE, GT, HARDSIGMOID, HARDSWISH, INTS, LE, LEAKYRELU, LT,
                     MAX, MIN, MUL, NEG, NUM, OR, RECIPROCAL, RELU, SINT, SUB, U0, U1, XOR, _bits, binary_f32,
                     binary_int, cast_to_bool, cast_to_f32, cast_to_i32, cast_to_i64, ceil_f32, ceil_f64, celu_f32,
                     clip_f32, compare, div_u64, floor_f32, floor_f64, gelu_f32, gelu_tanh_f32, mod_f32, mod_f64,
                     mod_int, mod_u64, pow_float, pow_int, round_f32, round_f64, shift_int, shift_u64, shrink_f32,
                     sign_float, unary_f32, unary_int)

OPS = OpList()
register = OPS.register


# input index modes
FULL, SCALAR, BCAST = 0, 1, 2


@dual
def _pick(i, mode, shape, strides):
    """Flat input index for flat output index ``i`` (see the module docs)."""
    if mode == FULL:
        return i
    if mode == SCALAR:
        return 0
    return bcast_offset(i, shape, strides)


@njit(cache=True)
def _step2(idx, shape, sa, sb, oa, ob):
    """CPU broadcasting without divisions: advance the output multi-index ``idx`` by
    one element and return the two inputs' new flat offsets."""
    d = shape.shape[0] - 1
    while d >= 0:
        idx[d] += 1
        oa += sa[d]
        ob += sb[d]
        if idx[d] < shape[d]:
            return oa, ob
        idx[d] = 0
        oa -= sa[d] * shape[d]
        ob -= sb[d] * shape[d]
        d -= 1
    return oa, ob


@njit(cache=True)
def _step2_rows(idx, shape, sa, sb, oa, ob):
    """:func:`_step2` by one row: advance the output multi-index ``idx`` over every axis but
    the last (which stays 0) and return the two inputs' flat offsets of the next row."""
    d = shape.shape[0] - 2
    while d >= 0:
        idx[d] += 1
        oa += sa[d]
        ob += sb[d]
        if idx[d] < shape[d]:
            return oa, ob
        idx[d] = 0
        oa -= sa[d] * shape[d]
        ob -= sb[d] * shape[d]
        d -= 1
    return oa, ob


@njit(cache=True)
def _step3(idx, shape, sa, sb, sc, oa, ob, oc):
    """:func:`_step2` for three inputs."""
    d = shape.shape[0] - 1
    while d >= 0:
        idx[d] += 1
        oa += sa[d]
        ob += sb[d]
        oc += sc[d]
        if idx[d] < shape[d]:
            return oa, ob, oc
        idx[d] = 0
        oa -= sa[d] * shape[d]
        ob -= sb[d] * shape[d]
        oc -= sc[d] * shape[d]
        d -= 1
    return oa, ob, oc


@njit(cache=True)
def _step3_rows(idx, shape, sa, sb, sc, oa, ob, oc):
    """:func:`_step2_rows` for three inputs."""
    d = shape.shape[0] - 2
    while d >= 0:
        idx[d] += 1
        oa += sa[d]
        ob += sb[d]
        oc += sc[d]
        if idx[d] < shape[d]:
            return oa, ob, oc
        idx[d] = 0
        oa -= sa[d] * shape[d]
        ob -= sb[d] * shape[d]
        oc -= sc[d] * shape[d]
        d -= 1
    return oa, ob, oc


def _mode(in_shape, out_shape) -> int:
    if tuple(in_shape) == tuple(out_shape):
        return FULL
    if int(np.prod(in_shape, dtype=np.int64)) == 1:
        return SCALAR
    return BCAST


class _Operand:
    """Index metadata of one input broadcast to the output (already on the target);
    ``strides``: broadcast strides over ``shape`` (``out_shape``, or its coalesced form
    from :func:`_coalesce`)."""

    def __init__(self, target, in_shape, out_shape, strides=None):
        self.mode = _mode(in_shape, out_shape)
        self.strides = to_target(target, broadcast_strides(in_shape, out_shape) if strides is None else strides)


def _coalesce(out_shape, in_shapes):
    """The output shape and every input's broadcast strides over it with the axes merged
    that index the same way: output axes of extent 1 dropped, and two adjacent axes
    merged where, for every input, the outer stride is the inner stride times the inner
    extent (both contiguous, or both broadcast). Each output element still reads the
    same input elements (the flat offsets are the same functions of the flat index), in
    fewer, longer rows: ``[N, C, H, W] * [N, C, 1, 1]`` walks as ``[N*C, H*W]``. An empty
    output keeps its shape. Returns ``(shape, [strides per input])`` as int64 arrays."""
    out_shape = tuple(int(d) for d in out_shape)
    strides = [broadcast_strides(s, out_shape) for s in in_shapes]
    if not out_shape or 0 in out_shape:
        return shape_array(out_shape), strides
    keep = [d for d in range(len(out_shape)) if out_shape[d] != 1]
    shape = [out_shape[d] for d in keep]
    st = [[int(s[d]) for d in keep] for s in strides]
    d = len(shape) - 2
    while d >= 0:
        if all(s[d] == s[d + 1] * shape[d + 1] for s in st):
            shape[d] *= shape[d + 1]
            del shape[d + 1]
            for s in st:
                s[d] = s[d + 1]
                del s[d + 1]
        d -= 1
    if not shape:
        return shape_array(()), [np.zeros(1, np.int64) for _ in strides]
    return np.asarray(shape, np.int64), [np.asarray(s, np.int64) for s in st]


# =============================================================================
# kernel templates: one per shape of op, each op's kernels generated from its
# expression (see target.kernel_pair)
# =============================================================================
_MOD = __name__

# binary, with numpy broadcasting. The CPU loop hoists the common "all FULL" and
# "FULL op SCALAR" cases and steps through broadcast offsets without divisions;
# every element still gets exactly EXPR(a, b).
_BINARY_PARAMS = "A, B, out, ma, mb, shape, sa, sb, aux"
_BINARY_CUDA = """
a = A[_pick(i, ma, shape, sa)]
b = B[_pick(i, mb, shape, sb)]
out[i] = {expr}
"""
_BINARY_CPU = """
n = out.shape[0]
if ma == FULL and mb == FULL:
    for i in range(n):
        a = A[i]
        b = B[i]
        out[i] = {expr}
elif ma == FULL and mb == SCALAR:
    b = B[0]
    for i in range(n):
        a = A[i]
        out[i] = {expr}
elif ma == SCALAR and mb == FULL:
    a = A[0]
    for i in range(n):
        b = B[i]
        out[i] = {expr}
elif n > 0 and shape.shape[0] > 0:
    # broadcasting, a row (the last axis) at a time: the outer multi-index steps once per
    # row; each input walks the row with its last-axis stride (a bias row: 1, a value
    # repeated along the row: 0), the same elements in the same order as per element. One
    # row loop per stride case, each in a loop of its own (a case test inside one row loop
    # kept LLVM from vectorising the row loops: [576, 16] rows ran 2.7x slower)
    last = shape.shape[0] - 1
    L = shape[last]
    sal = sa[last]
    sbl = sb[last]
    idx = np.zeros(shape.shape[0], np.int64)
    oa = 0
    ob = 0
    if sal == 1 and sbl == 1:
        for r in range(n // L):
            ra = A[oa:oa + L]
            rb = B[ob:ob + L]
            ro = out[r * L:(r + 1) * L]
            for j in range(L):
                a = ra[j]
                b = rb[j]
                ro[j] = {expr}
            oa, ob = _step2_rows(idx, shape, sa, sb, oa, ob)
    elif sal == 1 and sbl == 0:
        for r in range(n // L):
            b = B[ob]
            ra = A[oa:oa + L]
            ro = out[r * L:(r + 1) * L]
            for j in range(L):
                a = ra[j]
                ro[j] = {expr}
            oa, ob = _step2_rows(idx, shape, sa, sb, oa, ob)
    elif sal == 0 and sbl == 1:
        for r in range(n // L):
            a = A[oa]
            rb = B[ob:ob + L]
            ro = out[r * L:(r + 1) * L]
            for j in range(L):
                b = rb[j]
                ro[j] = {expr}
            oa, ob = _step2_rows(idx, shape, sa, sb, oa, ob)
    else:
        for r in range(n // L):
            o = r * L
            for j in range(L):
                a = A[oa + j * sal]
                b = B[ob + j * sbl]
                out[o + j] = {expr}
            oa, ob = _step2_rows(idx, shape, sa, sb, oa, ob)
"""

_UNARY_PARAMS = "X, out, p0, p1, aux"


def _gen_binary(name: str, expr: str):
    return kernel_pair(name, _BINARY_PARAMS, _BINARY_CUDA.format(expr=expr),
                       host_body=_BINARY_CPU.format(expr=expr), module=_MOD)


def _gen_unary(name: str, expr: str):
    return kernel_pair(name, _UNARY_PARAMS, f"x = X[i]\nout[i] = {expr}", module=_MOD)


def _err(ctx, msg) -> KernelError:
    return KernelError(f"node {ctx.node.name!r} ({ctx.node.op_type}): {msg}")


def _dt(ctx, i) -> str | None:
    d = ctx.in_dtypes[i] if i < len(ctx.in_dtypes) else None
    return None if d is None else np.dtype(d).name


def _kind(dt) -> str:
    """The kernel kind of a dtype: f32, f64, bool, u64 (uint64: native unsigned 64-bit
    arithmetic) or int (every other integer type, computed in int64 and wrapped)."""
    dt = np.dtype(dt)
    if dt == np.float32:
        return "f32"
    if dt == np.float64:
        return "f64"
    if dt == np.bool_:
        return "bool"
    if dt == np.uint64:
        return "u64"
    return "int"


def _n(ctx) -> int:
    return int(np.prod(ctx.out_shapes[0], dtype=np.int64))


# =============================================================================
# float16 / bfloat16: computed in float32, rounded once
# =============================================================================
#: the half-precision types the ops declared with ``half=True`` take
HALF = ("float16", "bfloat16")


def _temp(target, shape):
    """A float32 scratch array on ``target`` (per run: builds may run concurrently)."""
    a = np.empty(shape, np.float32)
    return a if target.host else target.to_device(a)


def half_build(build32):
    """Wrap a float32 build for float16/bfloat16 inputs and outputs: each half input is
    widened to float32 (exact), the float32 kernel runs, a half output is rounded once to
    its type (round to nearest even, on the bit patterns: :func:`floatfmt.cast_bits`).
    For + - * / sqrt that is the correctly rounded half result (float32 has more than
    2p + 2 bits for both types, so the double rounding is innocuous), as numpy's float16
    and ml_dtypes' bfloat16 arithmetic give; selections (max, abs, comparisons) are exact."""
    import dataclasses

    def build(ctx, target):
        ins = [None if d is None else np.dtype(d).name for d in ctx.in_dtypes]
        outs = [None if d is None else np.dtype(d).name for d in ctx.out_dtypes]
        if not any(d in HALF for d in ins + outs):
            return build32(ctx, target)
        f32 = np.dtype(np.float32)
        ctx32 = dataclasses.replace(ctx, in_dtypes=[f32 if d in HALF else ctx.in_dtypes[i] for i, d in enumerate(ins)],
                                    out_dtypes=[f32 if d in HALF else ctx.out_dtypes[i] for i, d in enumerate(outs)])
        run32 = build32(ctx32, target)
        fmt32 = floatfmt.fmt(np.float32)
        widen = {d: tuple(np.int64(v) for v in floatfmt.fmt(d) + fmt32) for d in HALF}
        narrow = {d: tuple(np.int64(v) for v in fmt32 + floatfmt.fmt(d)) for d in HALF}
        no_sat, rne = False, np.int64(floatfmt.ROUND_UP)    # round_mode is read for float8e8m0 only

        def run(inputs, outputs):
            xs = []
            for a, d in zip(inputs, ins):
                if d in HALF:
                    t = _temp(target, a.shape)
                    target.launch(_CAST_BITS, a.size, bits(a), bits(t), *widen[d], no_sat, rne)
                    a = t
                xs.append(a)
            ys = [(_temp(target, o.shape) if d in HALF else o) for o, d in zip(outputs, outs)]
            run32(xs, ys)
            for o, y, d in zip(outputs, ys, outs):
                if d in HALF:
                    target.launch(_CAST_BITS, o.size, bits(y), bits(o), *narrow[d], no_sat, rne)

        # its scratch arrays are written in full (widened inputs, float32 outputs) before they are read
        return replayable(run) if getattr(run32, "replayable", False) else run

    build.kernels = getattr(build32, "kernels", ())
    return build


# =============================================================================
# binary ops: Add Sub Mul Div Max Min Sum (variadic), comparisons, logic, Pow
# =============================================================================
def _binary_build(pairs: dict, aux_of=None):
    """A build function for a (variadic) binary op whose kernels are ``pairs[kind]``
    (kind of the output for arithmetic, of the input for comparisons)."""

    def build(ctx, target):
        out_shape = tuple(ctx.out_shapes[0])
        out_dt = np.dtype(ctx.out_dtypes[0])
        kind = _kind(ctx.in_dtypes[0])
        pair = pairs.get(kind)
        if pair is None:
            raise _err(ctx, f"no kernel for {np.dtype(ctx.in_dtypes[0]).name} inputs")
        aux = aux_of(ctx) if aux_of is not None else _bits(out_dt)
        cshape, cstrides = _coalesce(out_shape, list(ctx.in_shapes) + [out_shape])
        shape = target.to_device(cshape)
        ops = [_Operand(target, s, out_shape, st) for s, st in zip(ctx.in_shapes, cstrides)]
        acc = _Operand(target, out_shape, out_shape, cstrides[-1])   # the output as the running accumulator
        n = int(np.prod(out_shape, dtype=np.int64))

        @replayable
        def run(inputs, outputs):
            out = flat(outputs[0])
            if len(inputs) == 1:        # Max/Min/Sum of one input: a copy
                copy_array(target, flat(inputs[0]), out)
                return
            a, b = flat(inputs[0]), flat(inputs[1])
            target.launch(pair, n, a, b, out, ops[0].mode, ops[1].mode, shape, ops[0].strides,
                          ops[1].strides, aux)
            for k in range(2, len(inputs)):
                target.launch(pair, n, out, flat(inputs[k]), out, FULL, ops[k].mode, shape, acc.strides,
                              ops[k].strides, aux)

        return run

    build.kernels = tuple(pairs.values())
    return build


def _pairs(gen, op: str, exprs: dict, tag: str = "") -> dict:
    return {k: gen(f"{op}{tag}_{k}", e) for k, e in exprs.items() if e is not None}


def _check_kinds(dtypes, exprs, op):
    missing = sorted({_kind(d) for d in dtypes} - {k for k, e in exprs.items() if e is not None})
    if missing:
        raise ValueError(f"{op}: dtypes {dtypes} need kernels of kind {missing}")


def binary(op: str, since: int, dtypes=NUMERIC, *, f32: str | None = None, int_: str | None = None,
           bool_: str | None = None, f64: str | None = None, u64: str | None = None, check=None,
           aux_of=None, note: str = "", dtype_input: int = 0, until: int | None = None, tag: str = "",
           add: bool = True, half: bool = False):
    """Declare a binary elementwise op from its per-element expressions over ``a``, ``b``
    (and ``aux``: the output's integer width code for ``int_`` (see :func:`_bits`), or what
    ``aux_of(ctx)`` gives), one per kernel kind (see :func:`_kind`)."""
    exprs = {"f32": f32, "int": int_, "bool": bool_, "f64": f64, "u64": u64}
    if dtype_input == 0:
        _check_kinds(dtypes, exprs, op)
    pairs = _pairs(_gen_binary, op, exprs, tag)
    build = _binary_build(pairs, aux_of)
    if half:                 # float16/bfloat16: the float32 kernels, inputs widened, output rounded once
        build, dtypes = half_build(build), tuple(dtypes) + HALF
    if not add:
        return build
    family = "binary_pred" if op in COMPARE_CODES else "binary"
    kw = {} if until is None else {"until": until}
    return OPS.add(op, build, since=since, dtypes=dtypes, check=check, note=note, dtype_input=dtype_input,
                   kernels=tuple(pairs.values()), family=family, **kw)


# float64 uses the float32 expressions where they are IEEE + - * / and comparisons only
# (exactly rounded, so portable); uint64 has native unsigned kernels (kind u64)
binary("Add", 7, NUM, half=True, f32="a + b", f64="a + b", int_="binary_int(ADD, a, b, aux)", u64="a + b")
binary("Sub", 7, NUM, half=True, f32="a - b", f64="a - b", int_="binary_int(SUB, a, b, aux)", u64="a - b")
binary("Mul", 7, NUM, half=True, f32="a * b", f64="a * b", int_="binary_int(MUL, a, b, aux)", u64="a * b")
binary("Div", 7, NUM, half=True, f32="a / b", f64="a / b", int_="binary_int(DIV, a, b, aux)", u64="div_u64(a, b)",
       note="integer Div truncates toward zero; x/0 = 0")
binary("Max", 8, NUM, half=True, f32="binary_f32(MAX, a, b)", f64="binary_f32(MAX, a, b)",
       int_="binary_int(MAX, a, b, aux)", u64="a if a > b else b",
       note="NaN propagates; ties give the second operand (np.maximum)")
binary("Min", 8, NUM, half=True, f32="binary_f32(MIN, a, b)", f64="binary_f32(MIN, a, b)",
       int_="binary_int(MIN, a, b, aux)", u64="a if a < b else b",
       note="NaN propagates; ties give the second operand (np.minimum)")
binary("Sum", 8, NUMERIC + ("float64",), half=True, f32="a + b", f64="a + b", int_="binary_int(ADD, a, b, aux)",
       note="folded left to right")
for _op, _since, _code in (("Equal", 7, EQ), ("Less", 7, LT), ("LessOrEqual", 12, LE), ("Greater", 7, GT),
                           ("GreaterOrEqual", 12, GE)):
    _c = f"compare({_code}, a, b)"
    binary(_op, _since, EVERY if _op == "Equal" else NUM, half=True, f32=_c, f64=_c, int_=_c, u64=_c,
           bool_=(_c if _op == "Equal" else None))
for _op, _code in (("And", AND), ("Or", OR), ("Xor", XOR)):
    binary(_op, 7, ("bool",), bool_=f"compare({_code}, a, b)")


_POW_UNSIGNED = ("uint8", "uint16", "uint32")   # exponents that int64 holds exactly


def _check_pow(ctx, target):
    t = _dt(ctx, 1)
    base_float = np.dtype(ctx.in_dtypes[0]) == np.float32
    # a float32 base reads an unsigned exponent as float32 (and its parity, modulo 2, from its bits)
    takes = NUMERIC + _POW_UNSIGNED + (("uint64",) if base_float else ())
    if t not in takes:
        return f"Pow exponent dtype {t} not supported (kernel takes {', '.join(takes)})"
    return None


def _pow_aux(ctx):
    if np.dtype(ctx.out_dtypes[0]) == np.float32:
        return np.int64(np.dtype(ctx.in_dtypes[1]).kind in "iu")
    return np.int64(_bits(ctx.out_dtypes[0]))


binary("Pow", 7, f32="pow_float(a, b, aux != 0)", int_="pow_int(a, b, aux)", check=_check_pow, aux_of=_pow_aux,
       note="float base: portable pow (<= 1 ULP measured); integer base: exact integer powers")


# --- Mod ---------------------------------------------------------------------------------
def _mod_exprs(fmod: int) -> dict:
    return dict(f32=f"mod_f32(a, b, {fmod})", f64=f"mod_f64(a, b, {fmod})",
                int_=f"mod_int(a, b, aux, {fmod})", u64="mod_u64(a, b)")


_MOD_BUILD = {m: binary("Mod", 10, NUM, tag=f"_fmod{m}", add=False, **_mod_exprs(m)) for m in (0, 1)}


def _fmod_attr(ctx) -> int:
    v = ctx.attrs.get("fmod", 0)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) not in (0, 1):
        raise _err(ctx, f"attribute 'fmod' must be 0 or 1, got {v!r}")
    return int(v)


def _check_mod(ctx, target):
    v = ctx.attrs.get("fmod", 0)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) not in (0, 1):
        return f"Mod attribute fmod must be 0 or 1, got {v!r}"
    return None


def _build_mod(ctx, target):
    return _MOD_BUILD[_fmod_attr(ctx)](ctx, target)


OPS.add("Mod", half_build(_build_mod), since=10, until=28, dtypes=NUM + HALF, check=_check_mod, family="binary",
        kernels=tuple(_MOD_BUILD[0].kernels) + tuple(_MOD_BUILD[1].kernels),
        note="fmod=0: sign of the divisor (numpy mod, also for floats as Mod-28 defines); fmod=1: C fmod "
             "(exact, portable); integer x mod 0 = 0")


# --- BitShift, bitwise ops ---------------------------------------------------------------
_SHIFT_BUILD = {d: binary("BitShift", 11, INTS, tag=f"_{d.lower()}", add=False,
                          int_=f"shift_int(a, b, aux, {int(d == 'LEFT')})", u64=f"shift_u64(a, b, {int(d == 'LEFT')})")
                for d in ("LEFT", "RIGHT")}


def _by_string_attr(op: str, name: str, default, builds: dict):
    """(check, build) for an op whose kernels are chosen by a string attribute: ``builds``
    maps each accepted value to the build function of its kernels."""
    choices = " or ".join(repr(k) for k in builds)

    def value(ctx):
        return attr_str(ctx, name, default)

    def check(ctx, target):
        if value(ctx) not in builds:
            return f"{op} {name} must be {choices}, got {value(ctx)!r}"
        return None

    def build(ctx, target):
        v = value(ctx)
        if v not in builds:
            raise _err(ctx, f"attribute {name!r} must be {choices}, got {v!r}")
        return builds[v](ctx, target)

    return check, build


_check_shift, _build_shift = _by_string_attr("BitShift", "direction", None, _SHIFT_BUILD)
OPS.add("BitShift", _build_shift, since=11, until=28, dtypes=INTS, check=_check_shift, family="binary",
        kernels=tuple(_SHIFT_BUILD["LEFT"].kernels) + tuple(_SHIFT_BUILD["RIGHT"].kernels),
        note="signed right shift is arithmetic; a shift < 0 or >= the width gives the sign fill (BitShift-28)")
for _op, _e in (("BitwiseAnd", "a & b"), ("BitwiseOr", "a | b"), ("BitwiseXor", "a ^ b")):
    binary(_op, 18, INTS, int_=_e, u64=_e)


# --- PRelu: the slope broadcasts to X (unidirectional) -------------------------------------
# --- Mean: the Sum fold, then one division by the count ------------------------------------
_MEAN_SUM = binary("Mean", 8, FLOATS, f32="a + b", f64="a + b", add=False, tag="_sum")
_MEAN_DIV = {"f32": _gen_unary("Mean_div_f32", "x / p0"), "f64": _gen_unary("Mean_div_f64", "x / np.float64(p0)")}


def _build_mean(ctx, target):
    fold = _MEAN_SUM(ctx, target)
    pair = _MEAN_DIV[_kind(ctx.in_dtypes[0])]
    k = F(len(ctx.in_shapes))
    n = _n(ctx)

    @replayable
    def run(inputs, outputs):
        fold(inputs, outputs)
        out = flat(outputs[0])
        target.launch(pair, n, out, out, k, F_ZERO, np.int64(64))

    return run


OPS.add("Mean", _build_mean, since=8, dtypes=FLOATS, family="binary",
        kernels=tuple(_MEAN_SUM.kernels) + tuple(_MEAN_DIV.values()),
        note="summed left to right, then divided by the number of inputs (as numpy)")


binary("PRelu", 9, ("float32", "float64"), f32="a if a >= F_ZERO else a * b", f64="a if a >= D_ZERO else a * b",
       note="x < 0: slope * x (one rounding); NaN x stays NaN")


# =============================================================================
# unary ops
# =============================================================================
def _attr_f32(ctx, name, default):
    v = ctx.attrs.get(name, default)
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise _err(ctx, f"attribute {name!r} must be a float, got {type(v).__name__} {v!r}")
    return F(v)


def _unary_build(pairs: dict, attrs: tuple):
    def build(ctx, target):
        kind = _kind(ctx.in_dtypes[0])
        pair = pairs.get(kind)
        if pair is None:
            raise _err(ctx, f"no kernel for {np.dtype(ctx.in_dtypes[0]).name} inputs")
        p = [_attr_f32(ctx, name, default) for name, default in attrs] + [F_ZERO, F_ZERO]
        p0, p1 = p[0], p[1]
        aux = _bits(ctx.in_dtypes[0])
        n = _n(ctx)

        @replayable
        def run(inputs, outputs):
            target.launch(pair, n, flat(inputs[0]), flat(outputs[0]), p0, p1, aux)

        return run

    build.kernels = tuple(pairs.values())
    return build


def unary(op: str, since: int, dtypes=FLOAT, *, f32: str | None = None, int_: str | None = None,
          bool_: str | None = None, f64: str | None = None, u64: str | None = None, attrs: tuple = (),
          note: str = "", until: int | None = None, tag: str = "", add: bool = True, check=None,
          half: bool = False, targets: tuple | None = None):
    """Declare a unary elementwise op from its per-element expressions over ``x``.

    ``attrs``: up to two float attributes ``(name, default)``, passed as ``p0``, ``p1``
    (float32); ``aux`` is the integer width code (see :func:`_bits`) for ``int_``."""
    exprs = {"f32": f32, "int": int_, "bool": bool_, "f64": f64, "u64": u64}
    _check_kinds(dtypes, exprs, op)
    pairs = _pairs(_gen_unary, op, exprs, tag)
    build = _unary_build(pairs, attrs)
    if half:                 # float16/bfloat16: the float32 kernels, input widened, output rounded once
        build, dtypes = half_build(build), tuple(dtypes) + HALF
    if not add:
        return build
    kw = {} if until is None else {"until": until}
    if targets is not None:
        kw["targets"] = targets
    family = "unary_pred" if op in ("IsNaN", "IsInf") else "unary"
    return OPS.add(op, build, since=since, dtypes=dtypes, note=note, check=check,
                   kernels=tuple(pairs.values()), family=family, **kw)


_PM = "portable float32 math (pmath), <= 1 ULP measured"
unary("Exp", 6, f32="exp_f32(x)", note=_PM)
unary("Log", 6, f32="log_f32(x)", note=_PM)
# float64 (e.g. onnx's ReduceLogSumExp function body casts to double): the CPU's libm, which
# a CUDA device's exp/log do not match bit for bit, so the CUDA provider does not claim it
_LIBM = "float64: the CPU's libm (CPU only: not bitwise portable to CUDA)"
unary("Exp", 6, ("float64",), f64="math.exp(x)", tag="_libm", targets=("cpu",), note=_LIBM)
unary("Log", 6, ("float64",), f64="math.log(x) if x > D_ZERO else (-math.inf if x == D_ZERO else math.nan)",
      tag="_libm", targets=("cpu",), note=_LIBM)
unary("Tanh", 6, f32="tanh_f32(x)", note=_PM)
_SIGMOID = unary("Sigmoid", 6, f32="sigmoid_f32(x)", note=_PM).kernels[0]   # CPU fast path: cpu_fast.elementwise
_ERF = unary("Erf", 9, f32="erf_f32(x)", note=_PM).kernels[0]   # its CPU fast path: cpu_fast.elementwise._erf_cpu
unary("Sqrt", 6, half=True, f32="sqrt_f32(x)", note="IEEE sqrt")
# trigonometric and hyperbolic (pmath: exact argument reduction, <= 1 ULP measured)
_TRIG = "portable float32 math (pmath), <= 1 ULP measured"
for _op, _f, _v in (("Sin", "sin", 7), ("Cos", "cos", 7), ("Tan", "tan", 7), ("Asin", "asin", 7),
                    ("Acos", "acos", 7), ("Atan", "atan", 7), ("Sinh", "sinh", 9), ("Cosh", "cosh", 9),
                    ("Asinh", "asinh", 9), ("Acosh", "acosh", 9), ("Atanh", "atanh", 9)):
    unary(_op, _v, f32=f"{_f}_f32(x)", until=22, note=_TRIG)
unary("Softplus", 1, f32="softplus_f32(x)", until=22, note="log(1 + e**x) from pmath (double-float 1 + e**-|x|)")
unary("Softsign", 1, f32="x / (F_ONE + abs(x))", until=22, note="x / (1 + |x|): two IEEE roundings")
unary("Reciprocal", 6, FLOATS, half=True, f32="unary_f32(RECIPROCAL, x, p0, p1)", f64="D_ONE / x")
unary("LeakyRelu", 6, f32="unary_f32(LEAKYRELU, x, p0, p1)", attrs=(("alpha", 0.01),))
unary("HardSigmoid", 6, f32="unary_f32(HARDSIGMOID, x, p0, p1)", attrs=(("alpha", 0.2), ("beta", 0.5)),
      until=22)
unary("HardSwish", 14, f32="unary_f32(HARDSWISH, x, p0, p1)", until=22)
_I0 = "np.int64(0), np.int64(0)"
unary("Neg", 6, FLOATS + SINT, half=True, f32=f"unary_f32(NEG, x, p0, p1)", f64="-x",
      int_=f"unary_int(NEG, x, {_I0}, aux)")
unary("Abs", 6, NUM, half=True, f32=f"unary_f32(ABS, x, p0, p1)", f64="abs(x)", int_=f"unary_int(ABS, x, {_I0}, aux)",
      u64="x")
unary("Relu", 6, FLOATS + SINT, half=True, f32=f"unary_f32(RELU, x, p0, p1)", f64="x if (x > D_ZERO or x != x) else D_ZERO",
      int_=f"unary_int(RELU, x, {_I0}, aux)")
unary("Sign", 9, NUM, half=True, f32="sign_float(x, F_ONE, F_ZERO)", f64="sign_float(x, D_ONE, D_ZERO)",
      int_="np.int64(1) if x > 0 else (np.int64(-1) if x < 0 else np.int64(0))", u64="U1 if x > U0 else U0",
      note="np.sign: +-1, +0 for +-0, NaN for NaN")
unary("Floor", 6, FLOATS, half=True, f32="floor_f32(x)", f64="floor_f64(x)", note="exact; floor(-0) = -0")
unary("Ceil", 6, FLOATS, half=True, f32="ceil_f32(x)", f64="ceil_f64(x)", note="exact; ceil(-0.5) = -0")
unary("Round", 11, FLOATS, half=True, f32="round_f32(x)", f64="round_f64(x)", until=22, note="half to even; exact")
unary("IsNaN", 9, FLOATS, half=True, f32="x != x", f64="x != x", until=20)
unary("IsInf", 10, FLOATS, half=True, f32="(p0 != 0 and x == F_INF) or (p1 != 0 and x == -F_INF)",
      f64="(p0 != 0 and x == F_INF) or (p1 != 0 and x == -F_INF)",
      attrs=(("detect_positive", 1), ("detect_negative", 1)), until=20)
unary("Not", 1, ("bool",), bool_="not x")
unary("BitwiseNot", 18, INTS, int_="~x", u64="~x")

# activations (float32, from pmath's portable functions; each a fixed sequence of roundings)
unary("Elu", 6, half=True, f32="x if x >= F_ZERO else p0 * (exp_f32(x) - F_ONE)", attrs=(("alpha", 1.0),), until=22,
      note="x < 0: alpha * (exp(x) - 1) with pmath's exp")
unary("Selu", 6, f32="p1 * (x if x > F_ZERO else p0 * exp_f32(x) - p0)",
      attrs=(("alpha", 1.67326319217681884765625), ("gamma", 1.05070102214813232421875)), until=22,
      note="gamma * (x > 0 ? x : alpha * exp(x) - alpha)")
unary("Celu", 12, half=True, f32="celu_f32(x, p0)", attrs=(("alpha", 1.0),), until=28,
      note="max(0, x) + min(0, alpha * (exp(x / alpha) - 1))")
unary("ThresholdedRelu", 10, f32="x if x > p0 else F_ZERO", attrs=(("alpha", 1.0),), until=22)
unary("Shrink", 9, f32="shrink_f32(x, p0, p1)", attrs=(("lambd", 0.5), ("bias", 0.0)))
unary("Mish", 18, f32="x * tanh_f32(softplus_f32(x))", until=22, note="x * tanh(softplus(x)) from pmath")
unary("Swish", 24, f32="x * sigmoid_f32(p0 * x)", attrs=(("alpha", 1.0),), until=24,
      note="x * sigmoid(alpha * x) from pmath")

_GELU_BUILD = {"none": unary("Gelu", 20, f32="gelu_f32(x)", add=False, tag="_erf"),
               "tanh": unary("Gelu", 20, f32="gelu_tanh_f32(x)", add=False, tag="_tanh")}


_check_gelu, _build_gelu = _by_string_attr("Gelu", "approximate", "none", _GELU_BUILD)
OPS.add("Gelu", _build_gelu, since=20, until=21, dtypes=FLOAT, check=_check_gelu, family="unary",
        kernels=tuple(_GELU_BUILD["none"].kernels) + tuple(_GELU_BUILD["tanh"].kernels),
        note="approximate='none': 0.5 x (1 + erf(x / sqrt 2)); 'tanh': the tanh form; pmath erf/tanh")


# --- Clip: bounds are inputs (read at run time on host targets) ------------------------
_CLIP = {"f32": _gen_unary("Clip_f32", "clip_f32(x, p0, p1)"),
         "int": _gen_unary("Clip_int", "unary_int(CLIP, x, np.int64(p0), np.int64(p1), aux)")}


def _limits(dt):
    if dt == np.float32:
        return -F_INF, F_INF
    info = np.iinfo(dt)
    return np.int64(info.min), np.int64(info.max)


def _clip_bound(ctx, i, default):
    """A Clip bound: None when it must be read at run time, else the value."""
    if not ctx.has_input(i):
        return default
    c = ctx.const(i)
    if c is None:
        return None
    return np.asarray(c).reshape(-1)[0]


def _check_clip(ctx, target):
    for i in (1, 2):
        if ctx.has_input(i):
            s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
            if s is not None and int(np.prod(s, dtype=np.int64)) != 1:
                return f"Clip {'min' if i == 1 else 'max'} must be a scalar, got shape {tuple(s)}"
            if not target.host and ctx.const(i) is None:
                return f"Clip {'min' if i == 1 else 'max'} is not a constant (the CUDA kernel needs it at build time)"
    return None


def _build_clip(ctx, target):
    dt = np.dtype(ctx.in_dtypes[0])
    kind = _kind(dt)
    pair = _CLIP[kind]
    n = _n(ctx)
    dlo, dhi = _limits(dt)
    lo, hi = _clip_bound(ctx, 1, dlo), _clip_bound(ctx, 2, dhi)
    if not target.host and (lo is None or hi is None):
        raise _err(ctx, "Clip bounds must be constants on CUDA")
    # float bounds travel as float32; integer bounds as int64 (exact for every int32/int64)
    cast = (lambda v: F(v)) if kind == "f32" else (lambda v: np.int64(v))
    aux = _bits(dt)

    def run(inputs, outputs):
        a = cast(lo if lo is not None else np.asarray(inputs[1]).reshape(-1)[0])
        b = cast(hi if hi is not None else np.asarray(inputs[2]).reshape(-1)[0])
        target.launch(pair, n, flat(inputs[0]), flat(outputs[0]), a, b, aux)

    return replayable(run) if lo is not None and hi is not None else run   # else it reads them per run


_CLIP_NOTE = "min/max read at run time on the CPU; constants required on CUDA"
OPS.add("Clip", _build_clip, dtypes=NUMERIC + ("int8", "int16", "uint8", "uint16", "uint32"), since=12, check=_check_clip, note=_CLIP_NOTE,
        kernels=tuple(_CLIP.values()), family="clip")
OPS.add("Clip", _build_clip, dtypes=FLOAT, since=11, until=11, check=_check_clip, note=_CLIP_NOTE,
        kernels=tuple(_CLIP.values()), family="clip")


# =============================================================================
# Cast / CastLike
# =============================================================================
_CAST = [kernel_pair(f"cast_to_{t}", "X, out, src_float", f"out[i] = {e}", module=_MOD)
         for t, e in (("f32", "cast_to_f32(X[i])"), ("i64", "cast_to_i64(X[i], src_float)"),
                      ("i32", "cast_to_i32(X[i], src_float)"), ("bool", "cast_to_bool(X[i])"))]

# every other pair of dtypes: on the bit patterns (floatfmt.cast_bits: integer operations
# only, one round-to-nearest-even), so float16, bfloat16, float8/6/4 and int4/int2 run on
# every target and give the same bits
_CAST_BITS = kernel_pair("cast_bits", "X, out, sc, se, sm, sb, sw, dc, de, dm, db, dw, sat, rmode",
                         "out[i] = cast_bits(X[i], sc, se, sm, sb, sw, dc, de, dm, db, dw, sat, rmode)",
                         module=_MOD, cast_bits=floatfmt.cast_bits)
#: every dtype Cast converts between (all numeric types numpy holds, with ml_dtypes)
CAST_DTYPES = tuple(floatfmt.FORMATS)
_FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def _cast_target(ctx):
    """The dtype name Cast/CastLike converts to (None when unknown)."""
    to = ctx.out_dtypes[0] if ctx.out_dtypes else None
    if to is None and ctx.node.op_type == "Cast":
        to = onnx_to_np_dtype(ctx.attrs.get("to", 0))
    if to is None and ctx.node.op_type == "CastLike":
        to = ctx.in_dtypes[1] if len(ctx.in_dtypes) > 1 else None
    return None if to is None else np.dtype(to).name


def _round_mode(ctx):
    return attr_str(ctx, "round_mode", "up")


def _check_cast(ctx, target):
    name = _cast_target(ctx)
    if name not in CAST_DTYPES:
        return f"{ctx.node.op_type} to {name} not supported (kernel casts between {', '.join(CAST_DTYPES)})"
    if _round_mode(ctx) not in floatfmt.ROUND_MODES:
        return (f"{ctx.node.op_type} round_mode must be one of {', '.join(floatfmt.ROUND_MODES)}, "
                f"got {_round_mode(ctx)!r}")
    return None


def _build_cast(ctx, target):
    src, dst = np.dtype(ctx.in_dtypes[0]).name, np.dtype(ctx.out_dtypes[0]).name
    n = _n(ctx)
    if src in CAST_TYPES and dst in CAST_TYPES:
        pair = _CAST[CAST_TO[dst]]
        src_float = src == "float32"

        @replayable
        def run(inputs, outputs):
            target.launch(pair, n, flat(inputs[0]), flat(outputs[0]), src_float)

        return run
    rmode = floatfmt.ROUND_MODES.get(_round_mode(ctx))
    if rmode is None or dst not in floatfmt.FORMATS or src not in floatfmt.FORMATS:
        raise _err(ctx, f"cannot cast {src} to {dst} with round_mode {_round_mode(ctx)!r}")
    sat = ctx.attrs.get("saturate", 1)
    # saturate applies to the float8 types (and float8e8m0's rounding) only
    sat = bool(sat) if dst in _FLOAT8 + ("float8_e8m0fnu",) else False
    args = tuple(np.int64(v) for v in floatfmt.fmt(src) + floatfmt.fmt(dst))

    @replayable
    def run(inputs, outputs):
        target.launch(_CAST_BITS, n, bits(inputs[0]), bits(outputs[0]), *args, sat, np.int64(rmode))

    return run


_CAST_NOTE = ("float->int truncates; NaN/inf/out of range -> INT_MIN (as x86/numpy); float16, bfloat16, "
              "float8/6/4, int4/int2 on the bit patterns, round to nearest even, ONNX's saturate rules")
OPS.add("Cast", _build_cast, dtypes=CAST_DTYPES, since=6, until=28, check=_check_cast, note=_CAST_NOTE,
        kernels=tuple(_CAST) + (_CAST_BITS,), family="cast")
OPS.add("CastLike", _build_cast, dtypes=CAST_DTYPES, since=15, until=28, check=_check_cast, note=_CAST_NOTE,
        kernels=tuple(_CAST) + (_CAST_BITS,), family="cast")


# --- BitCast: the same bits as another type of the same width -----------------------------
def _bit_width(name):
    """BitCast's bit width of a dtype (bool: its byte; None for dtypes without a format)."""
    f = floatfmt.FORMATS.get(name)
    return None if f is None else (8 if name == "bool" else f[4])


def _check_bitcast(ctx, target):
    src, dst = _dt(ctx, 0), _cast_target(ctx)
    ws, wd = _bit_width(src), _bit_width(dst)
    if wd is None:
        return f"BitCast to {dst} not supported (kernel takes {', '.join(CAST_DTYPES)})"
    if ws != wd:
        return f"BitCast needs the same bit width: {src} has {ws} bits, {dst} {wd}"
    return None


def _build_bitcast(ctx, target):
    reason = _check_bitcast(ctx, target)
    if reason:
        raise _err(ctx, reason)

    @replayable
    def run(inputs, outputs):
        copy_array(target, flat(inputs[0]), flat(outputs[0]))

    return run


OPS.add("BitCast", _build_bitcast, dtypes=CAST_DTYPES, since=26, until=28, check=_check_bitcast,
        family="",
        note="a bit copy (little endian, as numpy's view); sub-byte types keep their one-byte-per-element "
             "storage")


# =============================================================================
# Where
# =============================================================================
@njit(cache=True)
def _where_rows_ok(shape, sc, sx, sy):
    """Whether every operand walks the (coalesced) last axis contiguously or not at all, and
    the rows are long enough (16) for a row's setup to pay."""
    last = shape.shape[0] - 1
    return shape[last] >= 16 and sc[last] in (0, 1) and sx[last] in (0, 1) and sy[last] in (0, 1)


@njit(cache=True)
def _where_row_src(a, o, s, L, buf):
    """An operand's row of L elements from flat offset o: a slice of ``a`` (last-axis stride
    1), or ``buf`` filled with a[o] (stride 0: a value repeated along the row)."""
    if s == 1:
        return a[o:o + L]
    buf[:] = a[o]
    return buf


@njit(cache=True)
def _where_rows(c, x, y, out, shape, sc, sx, sy):
    """CPU Where with broadcasting, a row (the coalesced last axis, stride 0 or 1 for every
    operand) at a time: the outer multi-index steps once per row, each operand's row is a
    slice or its one value repeated, and the row is one select loop over three contiguous
    rows into a fourth array (vectorised; it was per element, ~2.5 ns each). Each output
    element gets the same condition and value as per element: a bit copy."""
    last = shape.shape[0] - 1
    L = shape[last]
    bc = np.empty(L, c.dtype)
    bx = np.empty(L, x.dtype)
    by = np.empty(L, y.dtype)
    idx = np.zeros(shape.shape[0], np.int64)
    oc = 0
    ox = 0
    oy = 0
    for r in range(out.shape[0] // L):
        rc = _where_row_src(c, oc, sc[last], L, bc)
        rx = _where_row_src(x, ox, sx[last], L, bx)
        ry = _where_row_src(y, oy, sy[last], L, by)
        ro = out[r * L:(r + 1) * L]
        for j in range(L):
            a = rx[j]
            b = ry[j]
            ro[j] = a if rc[j] else b   # both loaded: one select, no branch
        oc, ox, oy = _step3_rows(idx, shape, sc, sx, sy, oc, ox, oy)


_WHERE = kernel_pair(
    "where", "c, x, y, out, mc, mx, my, shape, sc, sx, sy",
    """
    if c[_pick(i, mc, shape, sc)]:
        out[i] = x[_pick(i, mx, shape, sx)]
    else:
        out[i] = y[_pick(i, my, shape, sy)]
    """,
    host_body="""
    n = out.shape[0]
    if mc == FULL and mx == FULL and my == FULL:
        for i in range(n):
            a = x[i]
            b = y[i]
            out[i] = a if c[i] else b   # both loaded: one select, no branch (vectorised)
    elif n > 0 and shape.shape[0] > 0 and _where_rows_ok(shape, sc, sx, sy):
        _where_rows(c, x, y, out, shape, sc, sx, sy)
    else:
        idx = np.zeros(shape.shape[0], np.int64)
        oc = 0
        ox = 0
        oy = 0
        for i in range(n):
            out[i] = x[ox] if c[oc] else y[oy]
            oc, ox, oy = _step3(idx, shape, sc, sx, sy, oc, ox, oy)
    """, module=_MOD)


def _check_where(ctx, target):
    if _dt(ctx, 0) != "bool":
        return f"Where condition must be bool, got {_dt(ctx, 0)}"
    return None


def _build_where(ctx, target):
    out_shape = tuple(ctx.out_shapes[0])
    cshape, cstrides = _coalesce(out_shape, ctx.in_shapes[:3])
    shape = target.to_device(cshape)
    oc, ox, oy = (_Operand(target, s, out_shape, st) for s, st in zip(ctx.in_shapes[:3], cstrides))
    n = int(np.prod(out_shape, dtype=np.int64))

    @replayable
    def run(inputs, outputs):
        c, x, y = flat(inputs[0]), bits(inputs[1]), bits(inputs[2])     # values move as bits
        target.launch(_WHERE, n, c, x, y, bits(outputs[0]), oc.mode, ox.mode, oy.mode, shape,
                      oc.strides, ox.strides, oy.strides)

    return run


OPS.add("Where", _build_where, dtypes=EVERY + HALF + _FLOAT8 + ("int4", "uint4"), dtype_input=1, since=9, check=_check_where, kernels=(_WHERE,),
        family="where")


def launch_signature(d, pair) -> tuple:
    """numba argument types of one launch of ``pair`` (a kernel of definition ``d``), with
    the narrowest dtype of each kind (int32 for integer kernels): for compiling every
    elementwise kernel ahead of time (the PTX tests, warm-up)."""
    from numba.core import types as T
    A = lambda t: T.Array(t, 1, "C")  # noqa: E731
    kind = pair.name.rsplit("_", 1)[-1]
    t = {"f32": T.float32, "f64": T.float64, "int": T.int32, "bool": T.boolean,
         "u64": T.uint64}.get(kind, T.float32)
    meta = (T.int64, T.int64, A(T.int64), A(T.int64), A(T.int64))
    params = pair.cpu.py.__code__.co_varnames[:pair.cpu.py.__code__.co_argcount]
    if d.family in ("unary", "unary_pred", "binary", "binary_pred") and params[0] == "X":
        return (A(t), A(T.boolean if d.family == "unary_pred" else t), T.float32, T.float32, T.int64)
    if d.family in ("binary", "binary_pred"):
        return (A(t), A(t), A(T.boolean if d.family == "binary_pred" else t)) + meta + (T.int64,)
    if d.family == "clip":
        p = T.float32 if kind == "f32" else T.int64
        return (A(t), A(t), p, p, T.int64)
    if d.family == "cast" and pair.name == "cast_bits":
        return (A(T.uint32), A(T.uint16)) + (T.int64,) * 10 + (T.boolean, T.int64)
    if d.family == "cast":
        to = {"f32": T.float32, "i64": T.int64, "i32": T.int32, "bool": T.boolean}[kind]
        return (A(T.float32), A(to), T.boolean)
    if d.family == "where":
        return (A(T.boolean), A(T.float32), A(T.float32), A(T.float32), T.int64, T.int64, T.int64,
                A(T.int64), A(T.int64), A(T.int64), A(T.int64))
    raise ValueError(f"no launch signature for family {d.family!r}")


def elementwise_ops() -> list:
    """The unary and binary elementwise definitions (the generated-kernel families the
    bitwise tests sweep)."""
    return [d for d in OPS if d.kernels]
