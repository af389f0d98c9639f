"""The scalar functions of the elementwise ops (:mod:`.elementwise`): one per family, chosen
by an op code (binary arithmetic, comparisons, unary functions, casts, Mod, BitShift,
rounding, the activations written in float32), the constants they use and the integer
wrapping rule. Each takes and returns scalars only, so it is plain ``@njit`` code that the
CPU kernels call compiled and the CUDA kernels call retargeted: the same IEEE operations on
every target (the rules they follow are in :mod:`.elementwise`'s docs).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .pmath import erf_f32, exp_f32, pow_f32, tanh_f32

F = np.float32
_JIT = dict(cache=True, error_model="numpy")
#: scalar helpers that call pmath inside a unary kernel's loop: inlined like pmath's own, so
#: that LLVM sees (and vectorises) the whole loop body instead of a call per element
_JIT_INLINE = dict(_JIT, inline="always")

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
D_ZERO = np.float64(0.0)
D_ONE = np.float64(1.0)
D_2P52 = np.float64(2.0 ** 52)
F_2P23 = F(2.0 ** 23)
U0 = np.uint64(0)
U1 = np.uint64(1)
U64 = np.uint64(64)

# dtype groups (beyond opdef's FLOAT/NUMERIC/ALL)
SINT = ("int8", "int16", "int32", "int64")
UINT = ("uint8", "uint16", "uint32", "uint64")
INTS = SINT + UINT
FLOATS = ("float32", "float64")
NUM = FLOATS + INTS
EVERY = NUM + ("bool",)


def _bits(dtype) -> int:
    """The integer width code of a dtype for :func:`_wrap`: +bits for signed, -bits for
    unsigned integers; 64 for anything else."""
    dt = np.dtype(dtype)
    if dt.kind == "i":
        return dt.itemsize * 8
    if dt.kind == "u":
        return -dt.itemsize * 8
    return 64


@njit(**_JIT)
def _wrap(v, bits):
    """Wrap an int64 value to the integer type of width code ``bits`` (see :func:`_bits`):
    two's complement for signed widths 8/16/32 (64: as is), modulo 2**w for unsigned
    widths 8/16/32. uint64 has kernels of its own (kind ``u64``)."""
    if bits == 32:
        return ((v + 2147483648) & 4294967295) - 2147483648
    if bits == 64:
        return v
    if bits == 16:
        return ((v + 32768) & 65535) - 32768
    if bits == 8:
        return ((v + 128) & 255) - 128
    if bits == -8:
        return v & 255
    if bits == -16:
        return v & 65535
    if bits == -32:
        return v & 4294967295
    return v


# =============================================================================
# scalar functions
# =============================================================================
# --- binary arithmetic ----------------------------------------------------------
ADD, SUB, MUL, DIV, MAX, MIN = range(6)


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


# --- more dtypes: Mod, BitShift, uint64, float64, rounding -------------------------------
@njit(**_JIT)
def mod_int(a, b, bits, fmod):
    """Integer Mod: fmod=0 takes the divisor's sign (Python/numpy ``%``), fmod=1 the
    dividend's (C ``%``); x mod 0 = 0 (as numpy; ORT leaves it undefined)."""
    x = np.int64(a)
    y = np.int64(b)
    if y == 0:
        return x - x
    r = x - _trunc_div(x, y) * y
    if fmod == 0 and r != 0 and ((r < 0) != (y < 0)):
        r += y
    return _wrap(r, bits)


@njit(**_JIT)
def div_u64(a, b):
    return U0 if b == U0 else a // b


@njit(**_JIT)
def mod_u64(a, b):
    return U0 if b == U0 else a % b


@njit(**_JIT)
def _mod_adjust(r, b, zero):
    """numpy's floor-mod from the C fmod ``r`` (npy_divmod): the divisor's sign; a zero
    result takes the divisor's sign."""
    if r != zero:
        if (b < zero) != (r < zero):
            r = r + b
        return r
    return -zero if b < zero else zero


@njit(**_JIT)
def _fmod(x, y, two, zero):
    """C fmod (the remainder of truncating division, exact) with IEEE operations only:
    subtract y * 2**k, from the largest k down; each subtraction is exact (Sterbenz), so
    every target computes the same bits (numba's CPU target has no math.fmod, and the
    simulator's would run in float64). ``two``/``zero``: constants of x's type."""
    ax = abs(x)
    ay = abs(y)
    if x != x or y != y or ay == zero or ax == ax + ax and ax != zero:
        return (x - x) / (y - y) if ay == zero else (x - x) * y   # NaN
    if ax < ay:
        return x
    t = ay
    while t * two <= ax:
        t = t * two
    r = ax
    while t >= ay:
        if r >= t:
            r = r - t
        t = t / two
    return math.copysign(r, x)


@njit(**_JIT)
def mod_f32(a, b, fmod):
    """float32 Mod: C fmod (exact), or numpy's floor-mod from it for fmod=0."""
    x = F(a)
    y = F(b)
    r = F(_fmod(x, y, F(2.0), F_ZERO))
    if fmod:
        return r
    return _mod_adjust(r, y, F_ZERO)


@njit(**_JIT)
def mod_f64(a, b, fmod):
    x = np.float64(a)
    y = np.float64(b)
    r = np.float64(_fmod(x, y, np.float64(2.0), D_ZERO))
    if fmod:
        return r
    return _mod_adjust(r, y, D_ZERO)


@njit(**_JIT)
def shift_int(a, b, bits, left):
    """BitShift on integers up to 32 bits and int64 (arithmetic right shift for signed
    types); a shift < 0 or >= the width gives the sign fill (-1 for a right shift of a
    negative x, else 0), as BitShift-28 defines."""
    x = np.int64(a)
    y = np.int64(b)
    w = bits if bits > 0 else -bits
    if y < 0 or y >= w:
        if left == 0 and x < 0:
            return np.int64(-1)
        return x - x
    if left:
        return _wrap(x << y, bits)
    return x >> y


@njit(**_JIT)
def shift_u64(a, b, left):
    if b >= U64:
        return U0
    if left:
        return a << b
    return a >> b


@njit(**_JIT)
def floor_f32(x):
    """Floor with IEEE operations only: values with |x| >= 2**23 (and inf, NaN) are
    integral already; the result keeps the sign of zero (floor(-0) = -0)."""
    if not abs(x) < F_2P23:
        return x
    t = F(np.int64(x))
    if t > x:
        t = t - F_ONE
    return F(math.copysign(t, x)) if t == F_ZERO else t


@njit(**_JIT)
def ceil_f32(x):
    if not abs(x) < F_2P23:
        return x
    t = F(np.int64(x))
    if t < x:
        t = t + F_ONE
    return F(math.copysign(t, x)) if t == F_ZERO else t


@njit(**_JIT)
def round_f32(x):
    """Round half to even: (|x| + 2**23) - 2**23 in float32 rounds to the nearest integer,
    ties to even (IEEE default rounding); the sign (and -0) are kept."""
    if not abs(x) < F_2P23:
        return x
    r = (abs(x) + F_2P23) - F_2P23
    return F(math.copysign(r, x))


@njit(**_JIT)
def floor_f64(x):
    if not abs(x) < D_2P52:
        return x
    t = np.float64(np.int64(x))
    if t > x:
        t = t - D_ONE
    return np.float64(math.copysign(t, x)) if t == D_ZERO else t


@njit(**_JIT)
def ceil_f64(x):
    if not abs(x) < D_2P52:
        return x
    t = np.float64(np.int64(x))
    if t < x:
        t = t + D_ONE
    return np.float64(math.copysign(t, x)) if t == D_ZERO else t


@njit(**_JIT)
def round_f64(x):
    if not abs(x) < D_2P52:
        return x
    r = (abs(x) + D_2P52) - D_2P52
    return np.float64(math.copysign(r, x))


@njit(**_JIT)
def sign_float(x, one, zero):
    """np.sign: +-1, NaN for NaN, +0 for +-0."""
    if x > zero:
        return one
    if x < zero:
        return -one
    return x if x != x else zero


@njit(**_JIT_INLINE)
def celu_f32(x, alpha):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    pos = x if x > F_ZERO else F_ZERO
    e = alpha * (exp_f32(x / alpha) - F_ONE)
    neg = e if e < F_ZERO else F_ZERO
    if x != x:
        return x
    return pos + neg


@njit(**_JIT)
def shrink_f32(x, lambd, bias):
    if x < -lambd:
        return x + bias
    if x > lambd:
        return x - bias
    return F_ZERO              # NaN included (as ORT and onnx's reference)


F_SQRT1_2 = F(1.0 / np.sqrt(2.0))
F_SQRT2_PI = F(np.sqrt(2.0 / np.pi))
F_GELU_C = F(0.044715)


@njit(**_JIT_INLINE)
def gelu_f32(x):
    """0.5 * x * (1 + erf(x / sqrt(2))), with x / sqrt(2) as x * float32(1/sqrt(2))."""
    return F_HALF * x * (F_ONE + erf_f32(x * F_SQRT1_2))


@njit(**_JIT_INLINE)
def gelu_tanh_f32(x):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))."""
    return F_HALF * x * (F_ONE + tanh_f32(F_SQRT2_PI * (x + F_GELU_C * x * x * x)))
