"""Elementwise ops. Scalar math is written once (``@njit``) and called from a
CPU loop and from a CUDA kernel alike, so both targets compute bit for bit the
same thing (see the kernel contract in DESIGN.md and common.py).

Layout
------
Ops are grouped into *families* by the dtypes they map between; each family
has one ``@njit`` scalar function that dispatches on an integer op code, one
CPU kernel and one CUDA kernel:

=============  ===========================  ===================================================
family         scalar function              ops
=============  ===========================  ===================================================
float binary   ``binary_f32``               Add Sub Mul Div Max Min Sum (float32)
int binary     ``binary_int``               Add Sub Mul Div Max Min Sum (int32, int64)
to bool        ``compare``                  Equal Less LessOrEqual Greater GreaterOrEqual
                                            And Or Xor
pow            ``pow_float`` / ``pow_int``  Pow (float32 or integer base, any exponent type)
float unary    ``unary_f32``                Reciprocal Neg Abs Relu LeakyRelu HardSigmoid
                                            HardSwish Clip
math           ``pmath.*_f32``              Exp Log Tanh Sigmoid Erf Sqrt (a kernel pair each)
int unary      ``unary_int``                Neg Abs Relu Clip (int32, int64)
unary to bool  ``unary_bool``               IsNaN IsInf Not
cast           ``cast_*``                   Cast CastLike (float32, int64, int32, bool)
where          (a plain copy)               Where
=============  ===========================  ===================================================

numba compiles each scalar function once per input dtype combination, so cold
start stays small. Broadcasting follows numpy: every input gets a *mode* --
``FULL`` (same shape as the output: index i), ``SCALAR`` (one element: index 0)
or ``BCAST`` (general: :func:`common.bcast_offset`) -- and the CPU kernels
have a plain loop for the common "all FULL" and "FULL op SCALAR" cases.
Variadic Max/Min/Sum fold their inputs left to right into the output
(``((x0 op x1) op x2) ...``), which is also numpy's order.

Transcendental ops (Exp Log Tanh Sigmoid Erf Sqrt) have one kernel pair each
instead of an op code: pmath inlines into the loop and LLVM vectorises it
(~1.5-2.5 ns per element on the CPU instead of ~25 with a run-time dispatch).

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
* Pow: float base follows C99 ``pow`` as ``np.power`` on arrays does (see
  :func:`pmath.pow_f32`); an integer exponent >= 2**24 keeps its own parity for
  the sign. Integer base: integer exponents are computed exactly by repeated
  squaring (wrapping), negative exponents truncate like ORT's
  ``(T)std::pow(x, y)``: 1**-n = 1, (-1)**-n = +-1, else 0 (0**-n: 0, where ORT is
  undefined); a non-integral float exponent goes through ``pow_f32`` and a
  truncating cast.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, njit

from ...errors import KernelError
from ...ir import onnx_to_np_dtype
from .common import bcast_offset, broadcast_strides, cpu_kernel, cuda_kernel, dual, flat, launch, shape_array, to_target
from .pmath import erf_f32, exp_f32, log_f32, pow_f32, sigmoid_f32, sqrt_f32, tanh_f32
from .registry import ALL, FLOAT, NUMERIC, register

F = np.float32
_JIT = dict(cache=True, error_model="numpy")

F_ZERO = F(0.0)
F_ONE = F(1.0)
F_HALF = F(0.5)
F_SIXTH = F(1.0 / 6.0)
F_INF = F(np.inf)
F_2P24 = F(2.0 ** 24)
F_2P31 = F(2.0 ** 31)
F_2P63 = F(2.0 ** 63)
I64_MIN = np.int64(-(2 ** 63))
I32_MIN = np.int32(-(2 ** 31))

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


def _mode(in_shape, out_shape) -> int:
    if tuple(in_shape) == tuple(out_shape):
        return FULL
    if int(np.prod(in_shape, dtype=np.int64)) == 1:
        return SCALAR
    return BCAST


class _Operand:
    """Index metadata of one input broadcast to the output (already on the target)."""

    def __init__(self, target, in_shape, out_shape):
        self.mode = _mode(in_shape, out_shape)
        self.strides = to_target(target, broadcast_strides(in_shape, out_shape))


def _bits(dtype) -> int:
    return 32 if np.dtype(dtype) == np.int32 else 64


@njit(**_JIT)
def _wrap(v, bits):
    """Two's-complement wrap of an int64 value to ``bits`` (32 or 64)."""
    if bits == 32:
        return ((v + 2147483648) & 4294967295) - 2147483648
    return v


# =============================================================================
# scalar functions
# =============================================================================
# --- binary arithmetic ----------------------------------------------------------
ADD, SUB, MUL, DIV, MAX, MIN = range(6)
BINARY_CODES = {"Add": ADD, "Sub": SUB, "Mul": MUL, "Div": DIV, "Max": MAX, "Min": MIN, "Sum": ADD}


@njit(**_JIT)
def binary_f32(code, a, b):
    if code == ADD:
        return a + b
    if code == SUB:
        return a - b
    if code == MUL:
        return a * b
    if code == DIV:
        return a / b
    # MAX / MIN: np.maximum / np.minimum semantics
    if a != a:
        return a
    if b != b:
        return b
    if code == MAX:
        return a if a > b else b
    return a if a < b else b


@njit(**_JIT)
def _trunc_div(a, b):
    if b == 0:
        return a - a           # defined as 0 (see module docs)
    if b == -1:
        return -a              # wraps for INT_MIN instead of trapping
    q = a // b
    if q < 0 and q * b != a:
        q += 1                 # floor -> toward zero
    return q


@njit(**_JIT)
def binary_int(code, a, b, bits):
    x = np.int64(a)
    y = np.int64(b)
    if code == ADD:
        r = x + y
    elif code == SUB:
        r = x - y
    elif code == MUL:
        r = x * y
    elif code == DIV:
        r = _trunc_div(x, y)
    elif code == MAX:
        r = x if x > y else y
    else:
        r = x if x < y else y
    return _wrap(r, bits)


# --- comparisons and logic (output bool) ---------------------------------------
EQ, LT, LE, GT, GE, AND, OR, XOR = range(8)
COMPARE_CODES = {"Equal": EQ, "Less": LT, "LessOrEqual": LE, "Greater": GT, "GreaterOrEqual": GE,
                 "And": AND, "Or": OR, "Xor": XOR}


@njit(**_JIT)
def compare(code, a, b):
    if code == EQ:
        return a == b
    if code == LT:
        return a < b
    if code == LE:
        return a <= b
    if code == GT:
        return a > b
    if code == GE:
        return a >= b
    pa = a != 0
    pb = b != 0
    if code == AND:
        return pa and pb
    if code == OR:
        return pa or pb
    return pa != pb


# --- pow -----------------------------------------------------------------------------
@njit(**_JIT)
def pow_float(x, y, y_int):
    """float32 base; exponent float32 or (``y_int``) an integer type."""
    yf = F(y)
    r = pow_f32(x, yf)
    # float32(y) of an integer |y| >= 2**24 is even; keep the integer's own parity
    if y_int and (yf >= F_2P24 or yf <= -F_2P24) and x < F_ZERO and np.int64(y) % 2 != 0:
        r = -r
    return r


@njit(**_JIT)
def _f32_to_i64(v):
    if v != v or v >= F_2P63 or v < -F_2P63:
        return I64_MIN
    return np.int64(v)


@njit(**_JIT)
def pow_int(a, y, bits):
    """Integer base, exponent integer or float32 (see module docs)."""
    x = np.int64(a)
    yf = F(y)
    integral = y == y and abs(yf) < F_2P63 and np.float32(np.int64(yf)) == yf
    if not integral:
        r = _f32_to_i64(pow_f32(F(x), yf))
        return _wrap(r, bits)
    n = np.int64(y)
    if n < 0:
        if x == 1:
            return np.int64(1)
        if x == -1:
            return np.int64(1) if n % 2 == 0 else np.int64(-1)
        return np.int64(0)
    r = np.int64(1)
    b = x
    while n > 0:
        if n & 1:
            r = r * b
        b = b * b
        n >>= 1
    return _wrap(r, bits)


# --- unary ------------------------------------------------------------------------------
IDENTITY, NEG, ABS, RELU, CLIP, RECIPROCAL, LEAKYRELU, HARDSIGMOID, HARDSWISH = range(9)
UNARY_CODES = {"Identity": IDENTITY, "Neg": NEG, "Abs": ABS, "Relu": RELU, "Clip": CLIP,
               "Reciprocal": RECIPROCAL, "LeakyRelu": LEAKYRELU, "HardSigmoid": HARDSIGMOID,
               "HardSwish": HARDSWISH}


@njit(**_JIT)
def clip_f32(x, lo, hi):
    """np.clip semantics (see module docs)."""
    if x != x:
        return x
    if lo != lo:
        return lo
    if hi != hi:
        return hi
    v = lo if x < lo else x
    return hi if v > hi else v


@njit(**_JIT)
def unary_f32(code, x, p0, p1):
    """float32 unary op; p0/p1: alpha/beta (LeakyRelu, HardSigmoid) or lo/hi (Clip)."""
    alpha = F(p0)
    beta = F(p1)
    if code == IDENTITY:
        return x
    if code == NEG:
        return -x
    if code == ABS:
        return abs(x)
    if code == RELU:
        return x if (x > F_ZERO or x != x) else F_ZERO
    if code == CLIP:
        return clip_f32(x, alpha, beta)
    if code == RECIPROCAL:
        return F_ONE / x
    if code == LEAKYRELU:
        return x if x >= F_ZERO else alpha * x
    if code == HARDSIGMOID:
        return clip_f32(alpha * x + beta, F_ZERO, F_ONE)
    # HARDSWISH
    return x * clip_f32(F_SIXTH * x + F_HALF, F_ZERO, F_ONE)


@njit(**_JIT)
def unary_int(code, a, lo, hi, bits):
    x = np.int64(a)
    if code == NEG:
        r = -x
    elif code == ABS:
        r = -x if x < 0 else x
    elif code == RELU:
        r = x if x > 0 else x - x
    elif code == CLIP:
        r = lo if x < lo else x
        r = hi if r > hi else r
    else:
        r = x
    return _wrap(r, bits)


ISNAN, ISINF, NOT = range(3)
BOOL_UNARY_CODES = {"IsNaN": ISNAN, "IsInf": ISINF, "Not": NOT}


@njit(**_JIT)
def unary_bool(code, x, pos, neg):
    if code == ISNAN:
        return x != x
    if code == ISINF:
        return (pos and x == F_INF) or (neg and x == -F_INF)
    return not x


# --- cast --------------------------------------------------------------------------------
TO_F32, TO_I64, TO_I32, TO_BOOL = range(4)
CAST_TO = {"float32": TO_F32, "int64": TO_I64, "int32": TO_I32, "bool": TO_BOOL}
CAST_TYPES = tuple(CAST_TO)


@njit(**_JIT)
def cast_to_i64(x, src_float):
    if src_float:
        return _f32_to_i64(F(x))
    return np.int64(x)


@njit(**_JIT)
def cast_to_i32(x, src_float):
    if src_float:
        v = F(x)
        if v != v or v >= F_2P31 or v < -F_2P31:
            return I32_MIN
        return np.int32(v)
    return np.int32(np.int64(x) & 4294967295)   # wraps (two's complement)


@njit(**_JIT)
def cast_to_f32(x):
    return F(x)


@njit(**_JIT)
def cast_to_bool(x):
    return x != 0


# =============================================================================
# kernels: one CPU loop and one CUDA kernel per family
# =============================================================================
@cpu_kernel
def _binary_f32_cpu(code, a, b, out, ma, mb, shape, sa, sb):
    n = out.shape[0]
    if ma == FULL and mb == FULL:
        for i in range(n):
            out[i] = binary_f32(code, a[i], b[i])
    elif ma == FULL and mb == SCALAR:
        bv = b[0]
        for i in range(n):
            out[i] = binary_f32(code, a[i], bv)
    elif ma == SCALAR and mb == FULL:
        av = a[0]
        for i in range(n):
            out[i] = binary_f32(code, av, b[i])
    else:
        idx = np.zeros(shape.shape[0], np.int64)
        oa = 0
        ob = 0
        for i in range(n):
            out[i] = binary_f32(code, a[oa], b[ob])
            oa, ob = _step2(idx, shape, sa, sb, oa, ob)


@cuda_kernel
def _binary_f32_cuda(code, a, b, out, ma, mb, shape, sa, sb):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = binary_f32(code, a[_pick(i, ma, shape, sa)], b[_pick(i, mb, shape, sb)])


@cpu_kernel
def _binary_int_cpu(code, a, b, out, ma, mb, shape, sa, sb, bits):
    n = out.shape[0]
    if ma == FULL and mb == FULL:
        for i in range(n):
            out[i] = binary_int(code, a[i], b[i], bits)
    elif ma == FULL and mb == SCALAR:
        bv = b[0]
        for i in range(n):
            out[i] = binary_int(code, a[i], bv, bits)
    elif ma == SCALAR and mb == FULL:
        av = a[0]
        for i in range(n):
            out[i] = binary_int(code, av, b[i], bits)
    else:
        idx = np.zeros(shape.shape[0], np.int64)
        oa = 0
        ob = 0
        for i in range(n):
            out[i] = binary_int(code, a[oa], b[ob], bits)
            oa, ob = _step2(idx, shape, sa, sb, oa, ob)


@cuda_kernel
def _binary_int_cuda(code, a, b, out, ma, mb, shape, sa, sb, bits):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = binary_int(code, a[_pick(i, ma, shape, sa)], b[_pick(i, mb, shape, sb)], bits)


@cpu_kernel
def _compare_cpu(code, a, b, out, ma, mb, shape, sa, sb):
    n = out.shape[0]
    if ma == FULL and mb == FULL:
        for i in range(n):
            out[i] = compare(code, a[i], b[i])
    elif ma == FULL and mb == SCALAR:
        bv = b[0]
        for i in range(n):
            out[i] = compare(code, a[i], bv)
    elif ma == SCALAR and mb == FULL:
        av = a[0]
        for i in range(n):
            out[i] = compare(code, av, b[i])
    else:
        idx = np.zeros(shape.shape[0], np.int64)
        oa = 0
        ob = 0
        for i in range(n):
            out[i] = compare(code, a[oa], b[ob])
            oa, ob = _step2(idx, shape, sa, sb, oa, ob)


@cuda_kernel
def _compare_cuda(code, a, b, out, ma, mb, shape, sa, sb):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = compare(code, a[_pick(i, ma, shape, sa)], b[_pick(i, mb, shape, sb)])


@cpu_kernel
def _pow_float_cpu(a, b, out, ma, mb, shape, sa, sb, y_int):
    n = out.shape[0]
    if ma == FULL and mb == FULL:
        for i in range(n):
            out[i] = pow_float(a[i], b[i], y_int)
    elif ma == FULL and mb == SCALAR:
        bv = b[0]
        for i in range(n):
            out[i] = pow_float(a[i], bv, y_int)
    elif ma == SCALAR and mb == FULL:
        av = a[0]
        for i in range(n):
            out[i] = pow_float(av, b[i], y_int)
    else:
        idx = np.zeros(shape.shape[0], np.int64)
        oa = 0
        ob = 0
        for i in range(n):
            out[i] = pow_float(a[oa], b[ob], y_int)
            oa, ob = _step2(idx, shape, sa, sb, oa, ob)


@cuda_kernel
def _pow_float_cuda(a, b, out, ma, mb, shape, sa, sb, y_int):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = pow_float(a[_pick(i, ma, shape, sa)], b[_pick(i, mb, shape, sb)], y_int)


@cpu_kernel
def _pow_int_cpu(a, b, out, ma, mb, shape, sa, sb, bits):
    n = out.shape[0]
    if ma == FULL and mb == FULL:
        for i in range(n):
            out[i] = pow_int(a[i], b[i], bits)
    elif ma == FULL and mb == SCALAR:
        bv = b[0]
        for i in range(n):
            out[i] = pow_int(a[i], bv, bits)
    elif ma == SCALAR and mb == FULL:
        av = a[0]
        for i in range(n):
            out[i] = pow_int(av, b[i], bits)
    else:
        idx = np.zeros(shape.shape[0], np.int64)
        oa = 0
        ob = 0
        for i in range(n):
            out[i] = pow_int(a[oa], b[ob], bits)
            oa, ob = _step2(idx, shape, sa, sb, oa, ob)


@cuda_kernel
def _pow_int_cuda(a, b, out, ma, mb, shape, sa, sb, bits):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = pow_int(a[_pick(i, ma, shape, sa)], b[_pick(i, mb, shape, sb)], bits)


@cpu_kernel
def _unary_f32_cpu(code, x, out, p0, p1):
    for i in range(out.shape[0]):
        out[i] = unary_f32(code, x[i], p0, p1)


@cuda_kernel
def _unary_f32_cuda(code, x, out, p0, p1):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = unary_f32(code, x[i], p0, p1)


# Transcendental ops get one small kernel pair each (a runtime op code inside the
# loop would stop LLVM from inlining and vectorizing the pmath function: ~15x slower).
@cpu_kernel
def _exp_cpu(x, out):
    for i in range(out.shape[0]):
        out[i] = exp_f32(x[i])


@cuda_kernel
def _exp_cuda(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = exp_f32(x[i])


@cpu_kernel
def _log_cpu(x, out):
    for i in range(out.shape[0]):
        out[i] = log_f32(x[i])


@cuda_kernel
def _log_cuda(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = log_f32(x[i])


@cpu_kernel
def _tanh_cpu(x, out):
    for i in range(out.shape[0]):
        out[i] = tanh_f32(x[i])


@cuda_kernel
def _tanh_cuda(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = tanh_f32(x[i])


@cpu_kernel
def _sigmoid_cpu(x, out):
    for i in range(out.shape[0]):
        out[i] = sigmoid_f32(x[i])


@cuda_kernel
def _sigmoid_cuda(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = sigmoid_f32(x[i])


@cpu_kernel
def _erf_cpu(x, out):
    for i in range(out.shape[0]):
        out[i] = erf_f32(x[i])


@cuda_kernel
def _erf_cuda(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = erf_f32(x[i])


@cpu_kernel
def _sqrt_cpu(x, out):
    for i in range(out.shape[0]):
        out[i] = sqrt_f32(x[i])


@cuda_kernel
def _sqrt_cuda(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = sqrt_f32(x[i])


MATH_KERNELS = {"Exp": (_exp_cpu, _exp_cuda), "Log": (_log_cpu, _log_cuda), "Tanh": (_tanh_cpu, _tanh_cuda),
                "Sigmoid": (_sigmoid_cpu, _sigmoid_cuda), "Erf": (_erf_cpu, _erf_cuda),
                "Sqrt": (_sqrt_cpu, _sqrt_cuda)}


@cpu_kernel
def _unary_int_cpu(code, x, out, lo, hi, bits):
    for i in range(out.shape[0]):
        out[i] = unary_int(code, x[i], lo, hi, bits)


@cuda_kernel
def _unary_int_cuda(code, x, out, lo, hi, bits):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = unary_int(code, x[i], lo, hi, bits)


@cpu_kernel
def _unary_bool_cpu(code, x, out, pos, neg):
    for i in range(out.shape[0]):
        out[i] = unary_bool(code, x[i], pos, neg)


@cuda_kernel
def _unary_bool_cuda(code, x, out, pos, neg):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = unary_bool(code, x[i], pos, neg)


@cpu_kernel
def _cast_cpu(to, src_float, x, out):
    n = out.shape[0]
    if to == TO_F32:
        for i in range(n):
            out[i] = cast_to_f32(x[i])
    elif to == TO_I64:
        for i in range(n):
            out[i] = cast_to_i64(x[i], src_float)
    elif to == TO_I32:
        for i in range(n):
            out[i] = cast_to_i32(x[i], src_float)
    else:
        for i in range(n):
            out[i] = cast_to_bool(x[i])


@cuda_kernel
def _cast_cuda(to, src_float, x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        if to == TO_F32:
            out[i] = cast_to_f32(x[i])
        elif to == TO_I64:
            out[i] = cast_to_i64(x[i], src_float)
        elif to == TO_I32:
            out[i] = cast_to_i32(x[i], src_float)
        else:
            out[i] = cast_to_bool(x[i])


@cpu_kernel
def _where_cpu(c, x, y, out, mc, mx, my, shape, sc, sx, sy):
    n = out.shape[0]
    if mc == FULL and mx == FULL and my == FULL:
        for i in range(n):
            out[i] = x[i] if c[i] else y[i]
    else:
        idx = np.zeros(shape.shape[0], np.int64)
        oc = 0
        ox = 0
        oy = 0
        for i in range(n):
            out[i] = x[ox] if c[oc] else y[oy]
            oc, ox, oy = _step3(idx, shape, sc, sx, sy, oc, ox, oy)


@cuda_kernel
def _where_cuda(c, x, y, out, mc, mx, my, shape, sc, sx, sy):
    i = cuda.grid(1)
    if i < out.shape[0]:
        if c[_pick(i, mc, shape, sc)]:
            out[i] = x[_pick(i, mx, shape, sx)]
        else:
            out[i] = y[_pick(i, my, shape, sy)]


def _go(target, cpu_k, cuda_k, n, *args):
    """Run ``cpu_k(*args)`` or launch ``cuda_k`` over ``n`` output elements."""
    if target == "cpu":
        cpu_k(*args)
    else:
        launch(cuda_k, n, *args)


def _err(ctx, msg) -> KernelError:
    return KernelError(f"node {ctx.node.name!r} ({ctx.node.op_type}): {msg}")


def _dt(ctx, i) -> str | None:
    d = ctx.in_dtypes[i] if i < len(ctx.in_dtypes) else None
    return None if d is None else np.dtype(d).name


# =============================================================================
# builders and registration
# =============================================================================
def _build_nary(ctx, target):
    """Binary ops and variadic Max/Min/Sum (folded left to right into the output)."""
    op = ctx.node.op_type
    code = BINARY_CODES.get(op, COMPARE_CODES.get(op))
    out_shape = tuple(ctx.out_shapes[0])
    out_dt = np.dtype(ctx.out_dtypes[0])
    shape = to_target(target, shape_array(out_shape))
    ops = [_Operand(target, s, out_shape) for s in ctx.in_shapes]
    acc = _Operand(target, out_shape, out_shape)        # the output as the running accumulator
    n = int(np.prod(out_shape, dtype=np.int64))
    if op in COMPARE_CODES:
        kern, extra = (_compare_cpu, _compare_cuda), ()
    elif out_dt == np.float32:
        kern, extra = (_binary_f32_cpu, _binary_f32_cuda), ()
    else:
        kern, extra = (_binary_int_cpu, _binary_int_cuda), (_bits(out_dt),)
    copy = _cast_cpu, _cast_cuda
    to = CAST_TO[out_dt.name]

    def run(inputs, outputs):
        out = flat(outputs[0])
        if len(inputs) == 1:        # Max/Min/Sum of one input: a copy
            _go(target, *copy, n, to, False, flat(inputs[0]), out)
            return
        a, b = flat(inputs[0]), flat(inputs[1])
        _go(target, *kern, n, code, a, b, out, ops[0].mode, ops[1].mode, shape, ops[0].strides,
            ops[1].strides, *extra)
        for k in range(2, len(inputs)):
            _go(target, *kern, n, code, out, flat(inputs[k]), out, FULL, ops[k].mode, shape, acc.strides,
                ops[k].strides, *extra)

    return run


_SINCE = {"Add": 7, "Sub": 7, "Mul": 7, "Div": 7, "Max": 8, "Min": 8, "Sum": 8, "Equal": 7, "Less": 7,
          "Greater": 7, "LessOrEqual": 12, "GreaterOrEqual": 12, "And": 7, "Or": 7, "Xor": 7}

for _op in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"):
    register(_op, dtypes=NUMERIC, since=_SINCE[_op])(_build_nary)
register("Equal", dtypes=ALL, since=_SINCE["Equal"])(_build_nary)
for _op in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
    register(_op, dtypes=NUMERIC, since=_SINCE[_op])(_build_nary)
for _op in ("And", "Or", "Xor"):
    register(_op, dtypes=("bool",), since=_SINCE[_op])(_build_nary)


# --- Pow ---------------------------------------------------------------------------
def _check_pow(ctx, target):
    t = _dt(ctx, 1)
    if t not in NUMERIC:
        return f"Pow exponent dtype {t} not supported (kernel takes {', '.join(NUMERIC)})"
    return None


def _build_pow(ctx, target):
    out_shape = tuple(ctx.out_shapes[0])
    out_dt = np.dtype(ctx.out_dtypes[0])
    shape = to_target(target, shape_array(out_shape))
    oa, ob = (_Operand(target, s, out_shape) for s in ctx.in_shapes[:2])
    n = int(np.prod(out_shape, dtype=np.int64))
    y_int = np.dtype(ctx.in_dtypes[1]).kind == "i"

    def run(inputs, outputs):
        a, b, out = flat(inputs[0]), flat(inputs[1]), flat(outputs[0])
        args = (a, b, out, oa.mode, ob.mode, shape, oa.strides, ob.strides)
        if out_dt == np.float32:
            _go(target, _pow_float_cpu, _pow_float_cuda, n, *args, y_int)
        else:
            _go(target, _pow_int_cpu, _pow_int_cuda, n, *args, _bits(out_dt))

    return run


register("Pow", dtypes=NUMERIC, since=7, check=_check_pow,
         note="float base: portable pow (<= 1 ULP measured); integer base: exact integer powers")(_build_pow)


# --- unary -----------------------------------------------------------------------------
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
            if target == "cuda" and ctx.const(i) is None:
                return f"Clip {'min' if i == 1 else 'max'} is not a constant (the CUDA kernel needs it at build time)"
    return None


def _build_unary(ctx, target):
    op = ctx.node.op_type
    code = UNARY_CODES[op]
    dt = np.dtype(ctx.in_dtypes[0])
    n = int(np.prod(ctx.out_shapes[0], dtype=np.int64))
    is_float = dt == np.float32
    p0, p1 = (F_ZERO, F_ZERO)
    if op == "LeakyRelu":
        p0 = ctx.attrs.get("alpha", 0.01)
    elif op == "HardSigmoid":
        p0, p1 = ctx.attrs.get("alpha", 0.2), ctx.attrs.get("beta", 0.5)
    lo = hi = None
    if op == "Clip":
        dlo, dhi = _limits(dt)
        lo, hi = _clip_bound(ctx, 1, dlo), _clip_bound(ctx, 2, dhi)
        if target == "cuda" and (lo is None or hi is None):
            raise _err(ctx, "Clip bounds must be constants on CUDA")
    cast = (lambda v: F(v)) if is_float else (lambda v: np.int64(v))

    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        if op == "Clip":
            a = cast(lo if lo is not None else np.asarray(inputs[1]).reshape(-1)[0])
            b = cast(hi if hi is not None else np.asarray(inputs[2]).reshape(-1)[0])
        else:
            a, b = cast(p0), cast(p1)
        if is_float:
            _go(target, _unary_f32_cpu, _unary_f32_cuda, n, code, x, out, a, b)
        else:
            _go(target, _unary_int_cpu, _unary_int_cuda, n, code, x, out, a, b, _bits(dt))

    return run


def _build_math(ctx, target):
    kern = MATH_KERNELS[ctx.node.op_type]
    n = int(np.prod(ctx.out_shapes[0], dtype=np.int64))

    def run(inputs, outputs):
        _go(target, *kern, n, flat(inputs[0]), flat(outputs[0]))

    return run


for _op, _since in (("Exp", 6), ("Log", 6), ("Tanh", 6), ("Sigmoid", 6), ("Erf", 9)):
    register(_op, dtypes=FLOAT, since=_since, note="portable float32 math (pmath), <= 1 ULP measured")(_build_math)
register("Sqrt", dtypes=FLOAT, since=6, note="IEEE sqrt")(_build_math)
for _op in ("Reciprocal", "LeakyRelu", "HardSigmoid"):
    register(_op, dtypes=FLOAT, since=6)(_build_unary)
register("HardSwish", dtypes=FLOAT, since=14)(_build_unary)
for _op in ("Neg", "Abs", "Relu"):
    register(_op, dtypes=NUMERIC, since=6)(_build_unary)
register("Clip", dtypes=NUMERIC, since=12, check=_check_clip,
         note="min/max read at run time on the CPU; constants required on CUDA")(_build_unary)
register("Clip", dtypes=FLOAT, since=11, until=11, check=_check_clip)(_build_unary)


def _build_unary_bool(ctx, target):
    op = ctx.node.op_type
    code = BOOL_UNARY_CODES[op]
    n = int(np.prod(ctx.out_shapes[0], dtype=np.int64))
    pos = bool(ctx.attrs.get("detect_positive", 1))
    neg = bool(ctx.attrs.get("detect_negative", 1))

    def run(inputs, outputs):
        _go(target, _unary_bool_cpu, _unary_bool_cuda, n, code, flat(inputs[0]), flat(outputs[0]), pos, neg)

    return run


register("IsNaN", dtypes=FLOAT, since=9)(_build_unary_bool)
register("IsInf", dtypes=FLOAT, since=10)(_build_unary_bool)
register("Not", dtypes=("bool",), since=1)(_build_unary_bool)


# --- Cast / CastLike ------------------------------------------------------------------
def _check_cast(ctx, target):
    to = ctx.out_dtypes[0] if ctx.out_dtypes else None
    if to is None and ctx.node.op_type == "Cast":
        to = onnx_to_np_dtype(ctx.attrs.get("to", 0))
    if to is None and ctx.node.op_type == "CastLike":
        to = ctx.in_dtypes[1] if len(ctx.in_dtypes) > 1 else None
    name = None if to is None else np.dtype(to).name
    if name not in CAST_TYPES:
        return f"{ctx.node.op_type} to {name} not supported (kernel casts between {', '.join(CAST_TYPES)})"
    return None


def _build_cast(ctx, target):
    to = CAST_TO[np.dtype(ctx.out_dtypes[0]).name]
    src_float = np.dtype(ctx.in_dtypes[0]) == np.float32
    n = int(np.prod(ctx.out_shapes[0], dtype=np.int64))

    def run(inputs, outputs):
        _go(target, _cast_cpu, _cast_cuda, n, to, src_float, flat(inputs[0]), flat(outputs[0]))

    return run


register("Cast", dtypes=ALL, since=6, check=_check_cast,
         note="float->int truncates; NaN/inf/out of range -> INT_MIN (as x86/numpy)")(_build_cast)
register("CastLike", dtypes=ALL, since=15, check=_check_cast)(_build_cast)


# --- Where ------------------------------------------------------------------------------
def _check_where(ctx, target):
    if _dt(ctx, 0) != "bool":
        return f"Where condition must be bool, got {_dt(ctx, 0)}"
    return None


def _build_where(ctx, target):
    out_shape = tuple(ctx.out_shapes[0])
    shape = to_target(target, shape_array(out_shape))
    oc, ox, oy = (_Operand(target, s, out_shape) for s in ctx.in_shapes[:3])
    n = int(np.prod(out_shape, dtype=np.int64))

    def run(inputs, outputs):
        c, x, y = (flat(v) for v in inputs[:3])
        _go(target, _where_cpu, _where_cuda, n, c, x, y, flat(outputs[0]), oc.mode, ox.mode, oy.mode, shape,
            oc.strides, ox.strides, oy.strides)

    return run


register("Where", dtypes=ALL, dtype_input=1, since=9, check=_check_where)(_build_where)
