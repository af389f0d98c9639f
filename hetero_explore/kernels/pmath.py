"""Portable float32 math: exp, log, tanh, erf, sigmoid, pow, sqrt, softplus, and the
trigonometric and hyperbolic functions (sin cos tan asin acos atan sinh cosh asinh acosh atanh).

Why this module exists
----------------------
``math.exp`` and friends are not portable across our targets: numba's CPU
target calls the C library's float32 routine, the CUDA simulator evaluates in
float64 and rounds, a real GPU calls libdevice. Each gives different last bits.
The functions here are built only from IEEE-754 operations that every target
rounds the same way (``+ - * /``, comparisons, ``math.sqrt``, ``math.copysign``,
float<->int conversion of integral values), all in float32, with no fused
multiply-add (numba's CPU target does not contract a*b+c without fastmath; NVVM
does by default, which ``common.py`` switches off with ``-fma=0``; the PTX is
checked in ``tests/test_pmath.py``). The same source compiled for the CPU, the
simulator (which runs this compiled CPU code) and a GPU therefore gives the same
bits, and each function is within 1 ULP of the correctly rounded result as
measured (goal: 2; ``bench/pmath_ulp.py`` prints the table, ``--exhaustive``
checks every float32 input).

Rules kept throughout (needed for the bitwise contract):

* every constant is a module-level ``np.float32`` (a float literal inside a
  numba function is float64 and would promote the expression);
* integers enter float arithmetic only via ``np.float32(int)`` of small exact
  values;
* powers of two 2**k are built from their exponent bits, (k + 127) << 23
  (:func:`_pow2_bits`, from an integral float32 k in [-126, 127]: exact), rather
  than ``ldexp``, and results are scaled by them with one rounding (:func:`_scale`);
  exponents are found by comparisons (:func:`_reduce`) rather than ``frexp``;
  rounding to an integer uses the ``(t + 1.5*2**23) - 1.5*2**23`` trick;
* the functions the models call most (exp, tanh, erf, sigmoid, log) are
  branch-free: every range's formula is computed (on the argument clamped to that
  range) and the result selected, so that LLVM vectorises the CPU kernel's loop
  8 floats wide (AVX2); each input still gets exactly its own range's arithmetic,
  so the bits are those of the branching form (``bench/pmath_speed.py --vec``
  counts the vector operations; ``tests/test_pmath.py`` checks they are there);
* extra precision, where needed (``pow``, ``erf``), uses Dekker's
  error-free transformations (TwoSum, Veltkamp split + TwoProduct) without FMA.

Polynomial coefficients were fitted for this module (float64 minimax fits by
Lawson iteration on Chebyshev nodes, then rounded to float32); the log series
uses the Taylor coefficients of atanh, which converge fast enough on the
reduced range.

The trigonometric functions reduce their argument exactly with integer arithmetic
(Payne-Hanek with a table of the bits of 2/pi, computed at import by Machin's formula in
Python integers; int64 products only, no float64); sin/cos/tan and the inverse and
hyperbolic functions use Taylor series (coefficients computed at import, rounded to
float32) on small reduced ranges, fdlibm's range splits for atan/asin/acos, and
double-float log/exp/sqrt where the classic formulas (ln(x + sqrt(x^2 +- 1)),
(1 + x)/(1 - x), e**x +- e**-x) would lose bits. Measured: <= 1 ULP for all eleven.

A NaN result is "a NaN": LLVM does not preserve NaN sign and payload, so its
bits may differ between call sites and targets (compare NaNs as NaNs).

Public functions take and return float32: an argument of another type (a
Python float from a simulator kernel, an int) is converted to float32 first,
so every variant numba compiles computes the same float32 bits. They have no
explicit signatures on purpose: an explicit signature disables compilation of
the CPU dispatcher, and numba-cuda then refuses to call it from a GPU kernel
("using cpu function on device but its compilation is disabled"; the
simulator does not notice). They use ``error_model="numpy"`` (no Python
exceptions) and ``inline="always"``: numba inlines them into the caller's loop,
where LLVM can vectorise them (a plain call is not inlined across numba
libraries and runs ~15x slower); the price is ~1 s more compile time per kernel.
numba's inliner deep-copies a callee's IR block by block at every inlined call site,
so compile time grows with (inlined copies) x (blocks): branch-free code selects with
:func:`_sel` (one LLVM ``select``, one block) rather than ``a if c else b`` (three
blocks), and a function inlines each big helper (exp, log) at as few call sites as it
can. Before that, a Sinh or Cosh loop kernel took ~60 s to compile, Softplus 15 s,
Exp 3.5 s (now 0.8, 1.8 and 1.1 s; ``bench/compile_time.py``).

Caching caveat: a caller compiled with ``cache=True`` keeps its inlined copy
of these functions; numba only checks the caller's own source file, so after
editing this module delete the ``*.nbi``/``*.nbc`` files of the kernels that
use it.
"""

from __future__ import annotations

import math

import numpy as np
import llvmlite.ir as llvmir
from numba import njit, types
from numba.extending import intrinsic

from .fmadd import _llvm_fma_f32 as _fma   # the intrinsic itself: a call would not vectorise

F = np.float32

ZERO = F(0.0)
ONE = F(1.0)
TWO = F(2.0)
THREE = F(3.0)
HALF = F(0.5)
INF = F(np.inf)
NAN = F(np.nan)

# powers of two (exact)
P2_1, P2_2, P2_4, P2_8 = F(2.0), F(4.0), F(16.0), F(256.0)
P2_16, P2_32, P2_64 = F(2.0 ** 16), F(2.0 ** 32), F(2.0 ** 64)
P2_126 = F(2.0 ** 126)
P2_23 = F(2.0 ** 23)
P2_24 = F(2.0 ** 24)
P2M1, P2M2, P2M4, P2M8 = F(0.5), F(0.25), F(2.0 ** -4), F(2.0 ** -8)
P2M16, P2M32, P2M64 = F(2.0 ** -16), F(2.0 ** -32), F(2.0 ** -64)
MIN_NORMAL = F(2.0 ** -126)
P2M40 = F(2.0 ** -40)

ROUND_MAGIC = F(12582912.0)     # 1.5 * 2**23: (t + M) - M rounds |t| < 2**22 to nearest integer
SPLITTER = F(4097.0)            # 2**12 + 1: Veltkamp split of a float32 into 12 + 12 bits

LOG2E = F(1.4426950216293335)
LN2_HI = F(0.693145751953125)   # 0x3f317200: 15 significant bits, so k * LN2_HI is exact for |k| < 512
LN2_LO = F(1.428606765330187e-06)  # ln 2 - LN2_HI
SQRT2 = F(1.4142135381698608)

EXP_HI = F(89.0)                # exp(x) overflows for x above ~88.7228
EXP_LO = F(-104.0)              # exp(x) rounds to 0 below ~-103.97

# exp(r) = 1 + r + r^2 * E(r) on |r| <= ln2/2 (fitted, max error ~1.2e-9 relative)
E0 = F(0.5)
E1 = F(0.1666666567325592)
E2 = F(0.04166628047823906)
E3 = F(0.008333503268659115)
E4 = F(0.0013945739483460784)
E5 = F(0.00019789274665527046)

# log: ln(1+f) = 2 atanh(s), s = f / (2 + f), |s| <= 0.1716, z = s^2 <= 0.0295:
# 2 atanh(s) = 2s + s^3 * (2/3 + 2z/5 + 2z^2/7 + ...)
L3 = F(0.6666666865348816)      # 2/3 (float32)
L3_LO = F(-1.9868215517249155e-08)  # 2/3 - L3
L5 = F(0.4000000059604645)
L7 = F(0.2857142984867096)
L9 = F(0.2222222238779068)
L11 = F(0.1818181872367859)
L13 = F(0.1538461595773697)

# tanh(a) = a + a^3 * T(a^2) on [0, 0.625] (fitted, max error ~2.7e-9 relative)
TANH_SMALL = F(0.625)
TANH_ONE = F(9.1)               # tanh(a) rounds to 1 above ~9.01
T0 = F(-0.3333333134651184)
T1 = F(0.1333320587873459)
T2 = F(-0.05394676327705383)
T3 = F(0.021700702607631683)
T4 = F(-0.008177398703992367)
T5 = F(0.002142961835488677)

# erf on [0, 0.84375): erf(a) = a + a * A(a^2) (fitted, ~7.5e-9 relative)
ERF_A = F(0.84375)
A0 = F(0.12837916612625122)
A1 = F(-0.37612637877464294)
A2 = F(0.11283750087022781)
A3 = F(-0.026862680912017822)
A4 = F(0.005209888331592083)
A5 = F(-0.0008252246771007776)
A6 = F(8.876261563273147e-05)
# erf on [0.84375, 1.25): erf(a) = ERX + B(a - 1) (fitted, ~2e-9 absolute)
ERF_B = F(1.25)
ERX = F(0.8450629115104675)
B0 = F(-0.0023621185682713985)
B1 = F(0.41510748863220215)
B2 = F(-0.41510748863220215)
B3 = F(0.13836917281150818)
B4 = F(0.06918405741453171)
B5 = F(-0.06918457895517349)
B6 = F(0.004642213229089975)
B7 = F(0.015095297247171402)
B8 = F(-0.005298464559018612)
# erf on [1.25, 4): erf(a) = 1 - exp(-a^2) * C(1/a) (fitted, ~4e-9 absolute)
ERF_C = F(4.0)                  # erf(a) rounds to 1 above ~3.92
C0 = F(-0.0002278705796925351)
C1 = F(0.5644466876983643)
C2 = F(0.017876053228974342)
C3 = F(-0.41549578309059143)
C4 = F(0.42836901545524597)
C5 = F(-0.21054263412952423)
C6 = F(0.04317201301455498)

_JIT = dict(cache=True, error_model="numpy", inline="always")


@intrinsic
def _sel(typingctx, c, a, b):
    """``a if c else b`` as one LLVM ``select`` (both operands are evaluated: use it on
    values, not on calls with side effects). The same value as the conditional
    expression, which LLVM turns into this select anyway; but a conditional expression
    is three basic blocks of numba IR, and numba's inliner deep-copies the IR once per
    block at every inlined call site, so the branch-free functions here (dozens of
    selects, inlined many times) took minutes to compile with it."""
    t = typingctx.unify_types(a, b)
    if not isinstance(c, types.Boolean) or not isinstance(t, (types.Float, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        x = context.cast(builder, args[1], sig.args[1], t)
        y = context.cast(builder, args[2], sig.args[2], t)
        return builder.select(args[0], x, y)

    return t(c, a, b), codegen


# --- error-free transformations (exact without FMA) ---------------------------
@njit(**_JIT)
def _two_sum(a, b):
    """s + e == a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@njit(**_JIT)
def _fast_two_sum(a, b):
    """s + e == a + b exactly when |a| >= |b| (Dekker)."""
    s = a + b
    e = b - (s - a)
    return s, e


@njit(**_JIT)
def _split(a):
    t = SPLITTER * a
    hi = t - (t - a)
    return hi, a - hi


@njit(**_JIT)
def _two_prod(a, b):
    """p + e == a * b exactly (Dekker, barring over/underflow)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


# --- exponent handling ---------------------------------------------------------
@intrinsic
def _pow2_bits(typingctx, kf):
    """2**k as float32 from its exponent bits, (k + 127) << 23, for an integral float32 k:
    exact for -126 <= k <= 127. k is first clamped to [-127, 128] with compares and selects
    (a NaN becomes -127), so the float->int32 conversion is defined on every lane (an
    out-of-range or NaN lane of a branch-free function computes garbage that its final
    select drops, but must not be poison); k = -127 gives 0 and 128 gives inf. Eight
    vector instructions, 8 lanes wide: fcmp, select, fcmp, select, fptosi, add, shl,
    bitcast (the digit-by-digit product it replaced was ~30)."""
    if kf != types.float32:
        return None

    def codegen(context, builder, sig, args):
        f32 = llvmir.FloatType()
        i32 = llvmir.IntType(32)
        k = args[0]
        lo = llvmir.Constant(f32, -127.0)
        hi = llvmir.Constant(f32, 128.0)
        k = builder.select(builder.fcmp_unordered("<", k, lo), lo, k)
        k = builder.select(builder.fcmp_ordered(">", k, hi), hi, k)
        e = builder.add(builder.fptosi(k, i32), llvmir.Constant(i32, 127))
        return builder.bitcast(builder.shl(e, llvmir.Constant(i32, 23)), f32)

    return types.float32(kf), codegen


@njit(**_JIT)
def _pow2f(kf):
    """2**k as float32, exactly, for an integral float32 -126 <= kf <= 127 (from its
    exponent bits: :func:`_pow2_bits`)."""
    return _pow2_bits(kf)


@njit(**_JIT)
def _scale_powers(kf):
    """(2**k1, 2**(k - k1)) with k1 = floor(k / 2), for an integral float32 -152 <= kf <= 128:
    both normal powers of two. floor(k / 2) is found in float32 (k / 2 is exact, rounded to
    the nearest integer by the magic-number trick, then one down if that went up)."""
    h = kf * HALF
    k1 = (h + ROUND_MAGIC) - ROUND_MAGIC
    k1 = k1 - _sel(k1 > h, ONE, ZERO)
    return _pow2f(k1), _pow2f(kf - k1)


@njit(**_JIT)
def _scale(p, kf):
    """p * 2**k with one rounding (p around 1, integral float32 -152 <= kf <= 128): exact
    unless the result is subnormal (then rounded once, by the last multiply) or overflows
    (inf); p * 2**k1 stays normal (:func:`_scale_powers`)."""
    t1, t2 = _scale_powers(kf)
    return (p * t1) * t2


@njit(**_JIT)
def _scale_pair(p, plo, kf):
    """``_scale(p, kf), _scale(plo, kf)``: the same operations, the powers of two built once."""
    t1, t2 = _scale_powers(kf)
    return (p * t1) * t2, (plo * t1) * t2


@njit(**_JIT)
def _reduce(x):
    """(m, e) with x == m * 2**e exactly and sqrt(2)/2 <= m < sqrt(2), for finite x > 0.

    x is first brought to [1, 2**128) (times 2**24 if subnormal, times 2**126 if
    below 1), then a binary search divides by 2**64, 2**32, ..., 2 while m is at
    least that power -- selects rather than branches, all exact."""
    sub = x < MIN_NORMAL
    m = x * _sel(sub, P2_24, ONE)
    e = _sel(sub, -24, 0)
    low = m < ONE
    m = m * _sel(low, P2_126, ONE)
    e -= _sel(low, 126, 0)
    c = m >= P2_64
    m = m * _sel(c, P2M64, ONE)
    e += _sel(c, 64, 0)
    c = m >= P2_32
    m = m * _sel(c, P2M32, ONE)
    e += _sel(c, 32, 0)
    c = m >= P2_16
    m = m * _sel(c, P2M16, ONE)
    e += _sel(c, 16, 0)
    c = m >= P2_8
    m = m * _sel(c, P2M8, ONE)
    e += _sel(c, 8, 0)
    c = m >= P2_4
    m = m * _sel(c, P2M4, ONE)
    e += _sel(c, 4, 0)
    c = m >= P2_2
    m = m * _sel(c, P2M2, ONE)
    e += _sel(c, 2, 0)
    c = m >= P2_1
    m = m * _sel(c, P2M1, ONE)
    e += _sel(c, 1, 0)
    c = m > SQRT2
    m = m * _sel(c, HALF, ONE)
    e += _sel(c, 1, 0)
    return m, e


@njit(**_JIT)
def _rint_small(a):
    """Nearest integer (ties to even) of 0 <= a < 2**23."""
    return (a + P2_23) - P2_23


# --- exp ------------------------------------------------------------------------
@njit(**_JIT)
def _exp_core(h, l):
    """exp(h + l) == (p + plo) * 2**k for finite EXP_LO <= h <= EXP_HI, |l| <= ulp(h);
    p is the float32 result before scaling, plo the rounding error of its last add and
    k is returned as an integral float32 (for :func:`_scale`)."""
    kf = (h * LOG2E + ROUND_MAGIC) - ROUND_MAGIC
    # h - kf*LN2_HI is exact (kf*LN2_HI is exact and close to h)
    r = ((h - kf * LN2_HI) - kf * LN2_LO) + l
    q = r * r * (E0 + r * (E1 + r * (E2 + r * (E3 + r * (E4 + r * E5)))))
    s = r + q
    p, plo = _fast_two_sum(ONE, s)
    return p, plo, kf


@njit(**_JIT)
def exp_dd_f32(h, l):
    """exp(h + l) for a double-float argument (|l| <= ulp(h)); the building block
    of exp, pow, erf, tanh and sigmoid."""
    if h != h:
        return h
    if h > EXP_HI:
        return INF
    if h < EXP_LO:
        return ZERO
    p, plo, k = _exp_core(h, l)
    return _scale(p, k)


@njit(**_JIT)
def _exp_neg_small(h, l):
    """exp(h + l) for finite -21 <= h <= 0 (|l| <= ulp(h)), without branches: the bits of
    exp_dd_f32(h, l) there (its results are normal numbers, so p * 2**k is exact however
    2**k is built; k >= -31)."""
    p, plo, kf = _exp_core(h, l)
    return p * _pow2f(kf)


@njit(**_JIT)
def _exp_pair(a):
    """e**a as a double-float (eh, el) for finite |a| <= 87: the bits of
    ``_scale(p, k), _scale(plo, k)`` with one power of two instead of four.

    There k = round(a / ln 2) lies in [-126, 127], so 2**k is a normal float32, built
    exactly by _pow2f, and p * 2**k rounds the exact product once -- as _scale does
    (its first product p * 2**k1 is exact). Fewer inlined copies also matter for compile
    time: numba's inliner deep-copies the callee's IR at every inlined call site."""
    p, plo, k = _exp_core(a, ZERO)
    t = _pow2f(k)
    return p * t, plo * t


@njit(**_JIT)
def exp_f32(x):
    """e**x in float32 (<= 1 ULP measured)."""
    return exp_dd_f32(F(x), ZERO)


@intrinsic
def _pow2_bits_in_range(typingctx, kf):
    """:func:`_pow2_bits` without its clamps, for an integral float32 k that the caller keeps
    in [-126, 127] on every lane (NaN and out-of-range lanes included: a float->int
    conversion out of range is poison). Three vector instructions: fptosi, add, shl."""
    if kf != types.float32:
        return None

    def codegen(context, builder, sig, args):
        i32 = llvmir.IntType(32)
        e = builder.add(builder.fptosi(args[0], i32), llvmir.Constant(i32, 127))
        return builder.bitcast(builder.shl(e, llvmir.Constant(i32, 23)), llvmir.FloatType())

    return types.float32(kf), codegen


EXP_K1 = F(-64.0)    # exp_nonpos_f32 scales by 2**max(k, -64), then by 2**(k - that): both normal


@njit(**_JIT)
def exp_nonpos_f32(x_):
    """e**x for x <= 0 (and NaN, -inf): exactly exp_f32's bits there, in fewer operations
    (Softmax's exp(v - max)); any x > 0 gives a finite wrong value.

    The same _exp_core as exp_dd_f32 on the same argument (one not in [EXP_LO, 0], which
    is selected away, is replaced by 0 first, so that every lane converts a k in range);
    no overflow test (k <= 0); and p * 2**k rounded once like :func:`_scale` does, but
    with the exponent split k1 = max(k, -64), k - k1 >= -86 instead of k1 = floor(k/2):
    p * 2**k1 is exact (p is in [0.7, 1.42], so the product stays normal) and the second
    multiply rounds the exact p * 2**k once, which is the one correctly rounded value
    _scale also gives, subnormal results included. Checked bit for bit against exp_f32 on
    every float32 x <= 0 and every NaN (tests/test_pmath.py samples them)."""
    x = F(x_)
    inside = (x >= EXP_LO) & (x <= ZERO)
    p, plo, kf = _exp_core(_sel(inside, x, ZERO), ZERO)
    k1 = _sel(kf > EXP_K1, kf, EXP_K1)
    y = (p * _pow2_bits_in_range(k1)) * _pow2_bits_in_range(kf - k1)
    y = _sel(x >= EXP_LO, y, ZERO)
    return _sel(x != x, x, y)


# --- log -------------------------------------------------------------------------
@njit(**_JIT)
def log_f32(x_):
    """Natural logarithm in float32; log(0) = -inf, log(x<0) = nan.

    Branch-free: the reduction and series run on every input (on 1 where x is not a
    finite positive number) and the special values are selected at the end."""
    x = F(x_)
    m, e = _reduce(_sel((x > ZERO) & (x < INF), x, ONE))
    f = m - ONE
    s = f / (TWO + f)
    z = s * s
    r = z * (L3 + z * (L5 + z * (L7 + z * (L9 + z * L11))))
    hfsq = HALF * f * f
    dk = F(e)
    # ln(1+f) = f - hfsq + s*(hfsq + r)  (fdlibm's arrangement of 2*atanh(s))
    y = dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f)
    y = _sel(x == INF, x, y)
    y = _sel(x == ZERO, -INF, y)
    y = _sel(x < ZERO, NAN, y)
    return _sel(x != x, x, y)


@njit(**_JIT)
def log_dd_f32(x):
    """ln(x) as a double-float (hi, lo), relative error ~2**-40, finite x > 0."""
    m, e = _reduce(x)
    f = m - ONE
    d, dl = _fast_two_sum(TWO, f)
    sh = f / d
    ph, pl = _two_prod(sh, d)
    sl = (((f - ph) - pl) - sh * dl) / d          # s = sh + sl = f / (2 + f)
    zh, zl = _two_prod(sh, sh)
    zl = zl + TWO * sh * sl                       # s^2
    ch, cl = _two_prod(sh, zh)
    cl = cl + (sh * zl + sl * zh)                 # s^3
    th, tl = _two_prod(ch, L3)
    tl = tl + (ch * L3_LO + cl * L3)              # (2/3) s^3
    w = ch * zh * (L5 + zh * (L7 + zh * (L9 + zh * (L11 + zh * L13))))  # s^5 * (2/5 + ...)
    ah, al = _fast_two_sum(TWO * sh, th)
    al = al + ((TWO * sl + tl) + w)
    dk = F(e)
    bh, bl = _two_sum(dk * LN2_HI, ah)
    bl = bl + (al + dk * LN2_LO)
    return _fast_two_sum(bh, bl)


# --- pow ---------------------------------------------------------------------------
@njit(**_JIT)
def _int_odd(y):
    """(is_integer, is_odd_integer) for finite y."""
    ay = abs(y)
    if ay >= P2_24:
        return True, False
    if ay < P2_23 and _rint_small(ay) != ay:
        return False, False
    h = ay * HALF
    return True, _rint_small(h) != h


@njit(**_JIT)
def pow_f32(x_, y_):
    """x**y with ONNX Pow / numpy float32 semantics (C99 pow special cases):
    pow(x, 0) = 1 and pow(1, y) = 1 even for nan; negative x needs an integer y
    (else nan), odd y keeps the sign; 0**negative = inf; inf and -inf bases."""
    x = F(x_)
    y = F(y_)
    # exponents with a correctly rounded one-operation answer (and the same special
    # cases as the general path): exact, and fast for the common x**2, 1/x, sqrt, x**3
    if y == TWO:
        return x * x
    if y == ONE:
        return x
    if y == -ONE:
        return ONE / x
    if y == HALF and x > ZERO:
        return math.sqrt(x)
    if y == THREE and not abs(x) < P2M40:   # x*x*x would round twice; carry x*x exactly
        # (tiny x, whose cube is subnormal, takes the general path: one final rounding)
        h, l = _two_prod(x, x)
        p, e = _two_prod(h, x)
        if not abs(p) < INF:
            return p                # +-inf (overflow) and nan
        return p + (e + l * x)
    if y == ZERO or x == ONE:
        return ONE
    if x != x or y != y:
        return NAN
    ax = abs(x)
    if abs(y) == INF:
        if ax == ONE:
            return ONE
        if (ax > ONE) == (y > ZERO):
            return INF
        return ZERO
    yint, yodd = _int_odd(y)
    if ax == ZERO:
        if y < ZERO:
            return math.copysign(INF, x) if yodd else INF
        return x if yodd else ZERO
    if ax == INF:
        if x > ZERO:
            return INF if y > ZERO else ZERO
        if y > ZERO:
            return -INF if yodd else INF
        return -ZERO if yodd else ZERO
    sign = ONE
    if x < ZERO:
        if not yint:
            return NAN
        if yodd:
            sign = -ONE
        if ax == ONE:
            return sign
    lh, ll = log_dd_f32(ax)
    t = y * lh
    if t > F(200.0):
        return sign * INF
    if t < F(-200.0):
        return sign * ZERO
    ph, pl = _two_prod(y, lh)
    pl = pl + y * ll
    ph, pl = _fast_two_sum(ph, pl)
    return sign * exp_dd_f32(ph, pl)


# --- tanh, sigmoid, erf, sqrt -------------------------------------------------------
@njit(**_JIT)
def tanh_f32(x_):
    """Hyperbolic tangent in float32 (tanh(-0) = -0).

    Branch-free (so that the CPU loop vectorises): both the small-argument polynomial
    and the exp form are computed on every input and the result selected; the exp form
    sees the argument clamped to its range, so each input gets exactly the arithmetic
    of its own range."""
    x = F(x_)
    a = abs(x)
    s = a * a
    y1 = a + a * (s * (T0 + s * (T1 + s * (T2 + s * (T3 + s * (T4 + s * T5))))))
    e = _exp_neg_small(-TWO * min(a, TANH_ONE), ZERO)   # e^(-2a) <= 0.29 where used
    d, dl = _fast_two_sum(ONE, e)       # 1 + e exactly
    q = (TWO * e) / d
    q = q - q * (dl / d)                # 2e / (1 + e)
    y2 = ONE - q
    y = _sel(a < TANH_SMALL, y1, _sel(a < TANH_ONE, y2, ONE))
    r = math.copysign(y, x)
    return _sel(x != x, x, r)


@njit(**_JIT)
def sigmoid_f32(x_):
    """Logistic sigmoid 1 / (1 + e^-x) in float32 (no overflow for large |x|).

    With e = exp(-|x|) carried as a double-float, the result is num / (1 + e)
    (num = 1 for x >= 0, e for x < 0) with the division's remainder folded back,
    so that only the last rounding remains."""
    x = F(x_)
    if x != x:
        return x
    if x < EXP_LO:
        return ZERO
    if -x < EXP_LO:
        return ONE
    p, plo, k = _exp_core(-abs(x), ZERO)
    eh, el = _scale_pair(p, plo, k)
    d, dl = _fast_two_sum(ONE, eh)        # 1 + e == d + dl + el
    dl = dl + el
    if x >= ZERO:
        nh = ONE
        nl = ZERO
    else:
        nh = eh
        nl = el
    y = nh / d
    ph, pl = _two_prod(y, d)
    rem = (((nh - ph) - pl) + nl) - y * dl
    return y + rem / d


SIG_NEAR = F(64.0)      # sigmoid_near_f32 gives sigmoid_f32's bits for |x| <= SIG_NEAR


@njit(**_JIT)
def sigmoid_near_f32(x_):
    """sigmoid_f32's bits for |x| <= SIG_NEAR (64), in about 70% of its time; other inputs
    (NaN included) get a wrong value. For callers that have checked the range, such as the
    CPU Sigmoid fast path (activations lie there). The same operations on the same values,
    two of them obtained more cheaply:

    * e**-|x| as a double-float by :func:`_exp_pair` (one power of two: the bits of
      _scale_pair's four for |x| <= 87);
    * the product's rounding error ``y * d - fl(y * d)`` by one fused multiply-add
      (``llvm.fma``, :mod:`.fmadd`: exact, that error being a float32) instead of Dekker's
      TwoProduct, which is exact too as long as nothing underflows: y >= e**-64 / 2 > 2**-94,
      so every partial product and sum Dekker forms is a multiple of ulp(y) * ulp(d) >=
      2**-140 (no subnormal rounding), hence the same exact error.

    Checked bit for bit against sigmoid_f32 on every float32 |x| <= 64 when it was written
    (tests/test_pmath.py samples them)."""
    x = F(x_)
    xs = _sel(abs(x) <= SIG_NEAR, x, ZERO)   # far lanes and NaN: any finite value in range
    eh, el = _exp_pair(-abs(xs))
    d, dl = _fast_two_sum(ONE, eh)           # 1 + e == d + dl + el
    dl = dl + el
    pos = xs >= ZERO
    nh = _sel(pos, ONE, eh)
    nl = _sel(pos, ZERO, el)
    y = nh / d
    ph = y * d
    pl = _fma(y, d, -ph)
    rem = (((nh - ph) - pl) + nl) - y * dl
    return y + rem / d


@njit(**_JIT)
def _erf_near(a):
    """erf(a) for 0 <= a < ERF_B: the first two ranges' forms, both computed and selected
    (a + a * A(a^2) below ERF_A, ERX + B(a - 1) from there)."""
    s = a * a
    y1 = a + a * (A0 + s * (A1 + s * (A2 + s * (A3 + s * (A4 + s * (A5 + s * A6))))))
    u = a - ONE
    y2 = ERX + (B0 + u * (B1 + u * (B2 + u * (B3 + u * (B4 + u * (B5 + u * (B6 + u * (B7 + u * B8))))))))
    return _sel(a < ERF_A, y1, y2)


@njit(**_JIT)
def erf_f32(x_):
    """Error function in float32 (erf(-0) = -0, erf(+-inf) = +-1).

    Branch-free like tanh_f32: the three ranges' forms are computed on every input
    (the last on the argument clamped to its range) and the result selected."""
    x = F(x_)
    a = abs(x)
    ac = min(a, ERF_C)
    t = ONE / ac
    g = C0 + t * (C1 + t * (C2 + t * (C3 + t * (C4 + t * (C5 + t * C6)))))
    sh, sl = _two_prod(ac, ac)
    y3 = ONE - _exp_neg_small(-sh, -sl) * g
    y = _sel(a < ERF_B, _erf_near(a), _sel(a < ERF_C, y3, ONE))
    r = math.copysign(y, x)
    return _sel(x != x, x, r)


@njit(**_JIT)
def erf_near_f32(x_):
    """erf_f32's bits for |x| < ERF_B (1.25), from its first two ranges only (about a third
    of erf_f32's operations); other inputs (NaN included) get a wrong value. For callers that
    have checked the range, such as the CPU Erf fast path (most GELU inputs lie there)."""
    x = F(x_)
    return math.copysign(_erf_near(abs(x)), x)


@njit(**_JIT)
def sqrt_f32(x_):
    """Correctly rounded square root (IEEE sqrt on every target); sqrt(x<0) = nan."""
    x = F(x_)
    if x < ZERO:
        return NAN
    return math.sqrt(x)


SOFTPLUS_HI = F(20.0)            # above: log(1 + e**x) rounds to x
SOFTPLUS_LO = F(-17.0)           # below: log(1 + e**x) rounds to e**x


@njit(**_JIT)
def softplus_f32(x_):
    """log(1 + e**x) in float32 (Softplus), without overflow: for x in the middle range
    e = e**-|x| is carried as a double-float, 1 + e as a double-float too, and its log
    from log_dd_f32 plus the low part's first-order term; x > 0 adds x last."""
    x = F(x_)
    if x != x:
        return x
    if x > SOFTPLUS_HI:
        return x
    if x < SOFTPLUS_LO:
        return exp_dd_f32(x, ZERO)
    eh, el = _exp_pair(-abs(x))
    d, dl = _fast_two_sum(ONE, eh)        # 1 + e == d + dl + el
    dl = dl + el
    lh, ll = log_dd_f32(d)
    r = lh + (ll + dl / d)
    if x > ZERO:
        return x + r
    return r


# --- trigonometric and hyperbolic functions --------------------------------------------------
# Argument reduction for sin/cos/tan is exact integer arithmetic (Payne-Hanek) on every
# |x| >= pi/4: x = M * 2**E (M a 24-bit integer), and x * 2/pi mod 4 is M times a 96-bit
# window of the bits of 2/pi, taken from a table of 32-bit words (int64 products < 2**56,
# no float64); the fraction becomes a double-float times pi/2. The polynomials are the
# Taylor series (coefficients computed here, rounded to float32) to a degree where the
# truncation is below 2**-27 relative on the reduced range; the leading terms are carried
# as double-floats so that only the last rounding is visible.
def _pi_times_2pow(n: int) -> int:
    """floor(pi * 2**n) (to within 1), by Machin's formula in integers."""
    prec = n + 32

    def acot(k):
        x = (1 << prec) // k
        total, i, sign, k2 = x, 1, -1, k * k
        while x:
            x //= k2
            i += 2
            total += sign * (x // i)
            sign = -sign
        return total

    return (4 * (4 * acot(5) - acot(239))) >> 32


def _two_over_pi_words(count: int = 200, n: int = 512) -> np.ndarray:
    """T[j] = floor(2/pi * 2**j) mod 2**32 for j < count (bits of 2/pi after the point)."""
    tpi = (1 << (2 * n + 1)) // _pi_times_2pow(n)     # 2/pi * 2**n
    return np.array([(tpi >> (n - j)) & 0xFFFFFFFF for j in range(count)], dtype=np.int64)


TWO_OVER_PI = _two_over_pi_words()
_PI64 = math.pi


def _hi_lo(v: float):
    hi = F(v)
    return hi, F(v - float(hi))


PIO2_HI, PIO2_LO = _hi_lo(_PI64 / 2)
PI_HI, PI_LO = _hi_lo(_PI64)
PIO4 = F(_PI64 / 4)             # below (rounded down or up: either is a valid switch point)
TINY = F(2.0 ** -12)            # below: sin, tan, asin, atan, sinh, asinh, atanh round to x
P2_12 = F(2.0 ** 12)
HYP_BIG = F(9.0)                # above: e**-2|x| < 2**-25, cosh/sinh = e**(|x| - ln 2)
ASIN_SPLIT = HALF


def _taylor(coefs):
    return tuple(F(c) for c in coefs)


# sin r = r + r * z * SIN(z), cos r = 1 - z/2 + z^2 * COS(z), z = r^2 (Horner tuples, low degree first)
SIN_C = _taylor((-1) ** (k + 1) / math.factorial(2 * k + 3) for k in range(6))
COS_C = _taylor((-1) ** k / math.factorial(2 * k + 4) for k in range(6))
# atan t = t - t * z * ATAN(z) on |t| <= 7/16
ATAN_C = _taylor((-1) ** k / (2 * k + 3) for k in range(12))
# asin w = w + w * z * ASIN(z) on |w| <= 1/2; asinh the same with alternating signs
_ASIN = [math.factorial(2 * n) / (4 ** n * math.factorial(n) ** 2 * (2 * n + 1)) for n in range(1, 14)]
ASIN_C = _taylor(_ASIN)
ASINH_C = _taylor((-1) ** (k + 1) * c for k, c in enumerate(_ASIN))
# atanh t = t + t * z * ATANH(z) on |t| <= 1/2; sinh x = x + x * z * SINH(z) on |x| < 1
ATANH_C = _taylor(1.0 / (2 * n + 1) for n in range(1, 14))
SINH_C = _taylor(1.0 / math.factorial(2 * n + 1) for n in range(1, 8))
# atan(c) for fdlibm's reduction points c = 1/2, 1, 3/2, inf, as float32 hi + lo
ATAN_HALF_HI, ATAN_HALF_LO = _hi_lo(math.atan(0.5))
ATAN_ONE_HI, ATAN_ONE_LO = _hi_lo(math.atan(1.0))
ATAN_3HALF_HI, ATAN_3HALF_LO = _hi_lo(math.atan(1.5))
A7_16, A11_16, A19_16, A39_16 = F(7 / 16), F(11 / 16), F(19 / 16), F(39 / 16)
ONE_HALF3 = F(1.5)


@njit(**_JIT)
def _horner(c, z):
    """c[0] + z * (c[1] + z * (c[2] + ...)) for a tuple of float32 coefficients."""
    acc = ZERO
    for j in range(len(c) - 1, -1, -1):
        acc = acc * z + c[j]
    return acc


@njit(**_JIT)
def _rem_pio2(a):
    """(q mod 4, rh, rl) with a == q * pi/2 + (rh + rl) and |rh + rl| <= pi/4, for finite
    a >= pi/4: exact integer reduction (see above), ~2**-40 relative error in rh + rl."""
    m, e = _reduce(a)
    big = m >= ONE
    M = np.int64(m * _sel(big, P2_23, P2_24))
    E = e - _sel(big, 23, 24)
    p0 = M * TWO_OVER_PI[E + 94]
    p1 = M * TWO_OVER_PI[E + 62] + (p0 >> 32)
    p2 = M * TWO_OVER_PI[E + 30] + (p1 >> 32)
    q = (p2 >> 30) & 3
    A = ((p2 & 0x3FFFFFFF) << 32) | (p1 & 0xFFFFFFFF)     # fraction, 62 bits
    if A >= (np.int64(1) << 61):                           # round to the nearest quadrant
        A -= np.int64(1) << 62
        q = (q + 1) & 3
    hi = F(A)
    lo = F(A - np.int64(hi)) + F(p0 & 0xFFFFFFFF) * P2M32  # fraction = (hi + lo) * 2**-62
    ph, pl = _two_prod(hi, PIO2_HI)
    pl = pl + (hi * PIO2_LO + lo * PIO2_HI)
    ph, pl = _fast_two_sum(ph, pl)
    s = P2M32 * F(2.0 ** -30)
    return q, ph * s, pl * s


@njit(**_JIT)
def _sin_dd(rh, rl):
    """sin(rh + rl) as a double-float, |rh| <= pi/4."""
    z = rh * rh
    return _fast_two_sum(rh, rl + rh * (z * _horner(SIN_C, z)))


@njit(**_JIT)
def _cos_dd(rh, rl):
    """cos(rh + rl) as a double-float, |rh| <= pi/4."""
    zh, zl = _two_prod(rh, rh)
    t, te = _fast_two_sum(ONE, -(HALF * zh))
    return _fast_two_sum(t, (te - (HALF * zl + rh * rl)) + (zh * zh) * _horner(COS_C, zh))


@njit(**_JIT)
def _div_dd(nh, nl, dh, dl):
    """(nh + nl) / (dh + dl), rounded once at the end."""
    y = nh / dh
    ph, pl = _two_prod(y, dh)
    return y + ((((nh - ph) - pl) + nl) - y * dl) / dh


@njit(**_JIT)
def _trig(x_, which):
    """which 0: sin, 1: cos, 2: tan."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a == INF:
        return NAN
    if which != 1 and a < TINY:
        return x
    if a <= PIO4:
        q, rh, rl = 0, a, ZERO
    else:
        q, rh, rl = _rem_pio2(a)
    sh, sl = _sin_dd(rh, rl)
    ch, cl = _cos_dd(rh, rl)
    if which == 2:
        y = _div_dd(sh, sl, ch, cl) if (q & 1) == 0 else -_div_dd(ch, cl, sh, sl)
        return math.copysign(ONE, x) * y
    q = (q + which) & 3                 # cos(a) = sin(a + pi/2)
    y = _sel((q & 1) == 0, sh + sl, ch + cl)
    if q >= 2:
        y = -y
    return _sel(which == 0, math.copysign(ONE, x) * y, y)


@njit(**_JIT)
def sin_f32(x):
    """Sine in float32 (exact argument reduction; sin(-0) = -0, sin(+-inf) = nan)."""
    return _trig(x, 0)


@njit(**_JIT)
def cos_f32(x):
    """Cosine in float32 (exact argument reduction; cos(+-inf) = nan)."""
    return _trig(x, 1)


@njit(**_JIT)
def tan_f32(x):
    """Tangent in float32: sin/cos as double-floats, one double-float division."""
    return _trig(x, 2)


@njit(**_JIT)
def atan_f32(x_):
    """Arctangent in float32 (fdlibm's reduction to |t| <= 7/16, Taylor series there)."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a < TINY:
        return x
    if a < A7_16:
        z = a * a
        return math.copysign(a - a * (z * _horner(ATAN_C, z)), x)
    if a < A11_16:
        t, hi, lo = (TWO * a - ONE) / (TWO + a), ATAN_HALF_HI, ATAN_HALF_LO
    elif a < A19_16:
        t, hi, lo = (a - ONE) / (a + ONE), ATAN_ONE_HI, ATAN_ONE_LO
    elif a < A39_16:
        t, hi, lo = (a - ONE_HALF3) / (ONE + ONE_HALF3 * a), ATAN_3HALF_HI, ATAN_3HALF_LO
    else:
        t, hi, lo = -ONE / a, PIO2_HI, PIO2_LO
    z = t * t
    return math.copysign(hi - (((t * (z * _horner(ATAN_C, z))) - lo) - t), x)


@njit(**_JIT)
def _half_sqrt_dd(t):
    """sqrt(t) as a double-float for t > 0 (the exact remainder folded into the low part)."""
    sh = math.sqrt(t)
    p, pe = _two_prod(sh, sh)
    return sh, ((t - p) - pe) / (TWO * sh)


@njit(**_JIT)
def _asin_small(sh, sl):
    """asin(sh + sl) - sh for |sh| <= 1/2 (the part added to sh)."""
    z = sh * sh
    return sh * (z * _horner(ASIN_C, z)) + sl


@njit(**_JIT)
def asin_f32(x_):
    """Arcsine in float32: Taylor series on |x| <= 1/2, else pi/2 - 2 asin(sqrt((1 - |x|)/2))."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a > ONE:
        return NAN
    if a < TINY:
        return x
    if a <= ASIN_SPLIT:
        return math.copysign(a + _asin_small(a, ZERO), x)
    if a == ONE:
        return math.copysign(PIO2_HI, x)
    sh, sl = _half_sqrt_dd((ONE - a) * HALF)
    w = _asin_small(sh, sl)
    s, e = _two_sum(PIO2_HI, -(TWO * sh))
    return math.copysign(s + (e + (PIO2_LO - TWO * w)), x)


@njit(**_JIT)
def acos_f32(x_):
    """Arccosine in float32: pi/2 - asin(x) on |x| <= 1/2, else 2 asin(sqrt((1 -+ x)/2))."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a > ONE:
        return NAN
    if a <= ASIN_SPLIT:
        return PIO2_HI - (x + (_asin_small(x, ZERO) - PIO2_LO))
    if x == ONE:
        return ZERO
    if x == -ONE:
        return PI_HI
    sh, sl = _half_sqrt_dd((ONE - a) * HALF)
    w = _asin_small(sh, sl)
    if x > ZERO:
        return TWO * (sh + w)
    s, e = _two_sum(PI_HI, -(TWO * sh))
    return s + (e + (PI_LO - TWO * w))


@njit(**_JIT)
def _sinh_cosh(x_, which):
    """which 0: sinh, 1: cosh. One e**a +- e**-a sum for both (g = +-1: g * nh and
    el + g * nl are exactly nh, -nh, el + nl, el - nl)."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a >= HYP_BIG:
        y = exp_dd_f32(a - LN2_HI, -LN2_LO)     # a - LN2_HI is exact
    elif a < TINY:
        return ONE if which == 1 else x
    elif which == 0 and a < ONE:
        z = a * a
        y = a + a * (z * _horner(SINH_C, z))
    else:
        g = _sel(which == 1, ONE, -ONE)
        eh, el = _exp_pair(a)
        nh, nl = _exp_pair(-a)
        s, e = _two_sum(eh, g * nh)
        y = (s + (e + (el + g * nl))) * HALF
    return _sel(which == 1, y, math.copysign(y, x))


@njit(**_JIT)
def sinh_f32(x):
    """Hyperbolic sine in float32 (Taylor below 1, double-float e**x - e**-x above)."""
    return _sinh_cosh(x, 0)


@njit(**_JIT)
def cosh_f32(x):
    """Hyperbolic cosine in float32 (double-float e**x + e**-x; e**(|x| - ln 2) above 9)."""
    return _sinh_cosh(x, 1)


@njit(**_JIT)
def _sqrt_dd(h, l):
    """sqrt(h + l) as (q, ql) for finite h > 0, |l| small: q = sqrt(h) rounded, and ql its
    first-order correction (h + l - q*q) / (2q), with q*q carried exactly."""
    q = math.sqrt(h)
    qq, qqe = _two_prod(q, q)
    return q, (((h - qq) - qqe) + l) / (TWO * q)


@njit(**_JIT)
def _log_dd_plus(yh, yl):
    """ln(yh + yl) for finite yh > 0, |yl| small: log_dd_f32(yh) plus yl / yh."""
    lh, ll = log_dd_f32(yh)
    return lh + (ll + yl / yh)


@njit(**_JIT)
def _log_arg(yh, yl, a, big, sign):
    """The one log_dd_f32 of asinh and acosh. big False: ln(yh + yl) for finite yh > 0,
    |yl| small (log_dd_f32(yh) plus yl / yh). big True: ln(2a) + sign / (4 a^2), asinh
    (sign +1) and acosh (-1) for a >= 2**12 (yh == a there). One inlined log instead of
    one per branch: numba's inliner copies the callee's IR at every call site."""
    lh, ll = log_dd_f32(yh)
    if big:
        s, e = _two_sum(lh, LN2_HI)
        return s + (e + ((ll + LN2_LO) + sign * (F(0.25) / (a * a))))
    return lh + (ll + yl / yh)


@njit(**_JIT)
def asinh_f32(x_):
    """Inverse hyperbolic sine in float32: Taylor below 1/2, else ln(|x| + sqrt(x^2 + 1))
    with the sum carried as a double-float into log_dd_f32."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a < TINY or a == INF:
        return x
    if a < HALF:
        z = a * a
        y = a + a * (z * _horner(ASINH_C, z))
    else:
        big = a >= P2_12
        yh = a
        yl = ZERO
        if not big:
            sh, sl = _two_prod(a, a)
            t, te = _two_sum(sh, ONE)
            te = te + sl
            q, ql = _sqrt_dd(t, te)
            yh, ye = _fast_two_sum(q, a)
            yl = ye + ql
        y = _log_arg(yh, yl, a, big, ONE)
    return math.copysign(y, x)


@njit(**_JIT)
def acosh_f32(x_):
    """Inverse hyperbolic cosine in float32: ln(x + sqrt(x^2 - 1)) with double-floats
    (log1p form near 1, where x - 1 is exact); nan below 1."""
    x = F(x_)
    if x != x:
        return x
    if x < ONE:
        return NAN
    if x == ONE:
        return ZERO
    if x == INF:
        return x
    big = x >= P2_12
    yh = x
    yl = ZERO
    if x < TWO:
        t = x - ONE
        t2h, t2l = _two_prod(t, t)
        uh, ue = _two_sum(TWO * t, t2h)
        ue = ue + t2l
        q, ql = _sqrt_dd(uh, ue)
        vh, ve = _two_sum(t, q)
        ve = ve + ql
        yh, ye = _two_sum(ONE, vh)
        yl = ye + ve
    elif not big:
        sh, sl = _two_prod(x, x)
        uh, ue = _fast_two_sum(sh, -ONE)
        ue = ue + sl
        q, ql = _sqrt_dd(uh, ue)
        yh, ye = _fast_two_sum(x, q)
        yl = ye + ql
    return _log_arg(yh, yl, x, big, -ONE)


@njit(**_JIT)
def atanh_f32(x_):
    """Inverse hyperbolic tangent in float32: Taylor below 1/2, else
    ln((1 + |x|) / (1 - |x|)) / 2 with 1 - |x| exact and the quotient a double-float."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a > ONE:
        return NAN
    if a == ONE:
        return math.copysign(INF, x)
    if a < TINY:
        return x
    if a < HALF:
        z = a * a
        y = a + a * (z * _horner(ATANH_C, z))
    else:
        d = ONE - a
        nh, nl = _two_sum(ONE, a)
        q = nh / d
        ph, pl = _two_prod(q, d)
        rem = (((nh - ph) - pl) + nl) / d
        y = HALF * _log_dd_plus(q, rem)
    return math.copysign(y, x)


# -- the table of portable unary functions: what the tests and bench/pmath_ulp.py sweep ----------
def _sigmoid64(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _erf64(x):
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


class Portable:
    """A portable float32 function with its float64 reference (rounded to float32 for
    the ULP distance), the input range where it varies, and its accuracy bound."""

    def __init__(self, fn, reference, domain, max_ulp=2):
        self.fn = fn
        self.reference = reference
        self.domain = domain
        self.max_ulp = max_ulp


UNARY = {
    "exp": Portable(exp_f32, np.exp, (-105.0, 90.0)),
    "log": Portable(log_f32, np.log, (0.0, np.inf)),
    "tanh": Portable(tanh_f32, np.tanh, (-12.0, 12.0)),
    "sigmoid": Portable(sigmoid_f32, _sigmoid64, (-110.0, 110.0)),
    "erf": Portable(erf_f32, _erf64, (-5.0, 5.0)),
    "sqrt": Portable(sqrt_f32, np.sqrt, (0.0, np.inf), max_ulp=0),
    "softplus": Portable(softplus_f32, lambda x: np.logaddexp(0.0, x), (-110.0, 40.0)),
    "sin": Portable(sin_f32, np.sin, (-3.4e38, 3.4e38)),
    "cos": Portable(cos_f32, np.cos, (-3.4e38, 3.4e38)),
    "tan": Portable(tan_f32, np.tan, (-3.4e38, 3.4e38)),
    "asin": Portable(asin_f32, np.arcsin, (-1.0, 1.0)),
    "acos": Portable(acos_f32, np.arccos, (-1.0, 1.0)),
    "atan": Portable(atan_f32, np.arctan, (-np.inf, np.inf)),
    "sinh": Portable(sinh_f32, np.sinh, (-90.0, 90.0)),
    "cosh": Portable(cosh_f32, np.cosh, (-90.0, 90.0)),
    "asinh": Portable(asinh_f32, np.arcsinh, (-np.inf, np.inf)),
    "acosh": Portable(acosh_f32, np.arccosh, (1.0, np.inf)),
    "atanh": Portable(atanh_f32, np.arctanh, (-1.0, 1.0)),
}

__all__ = ["exp_f32", "log_f32", "tanh_f32", "erf_f32", "sigmoid_f32", "pow_f32", "sqrt_f32", "softplus_f32",
           "exp_nonpos_f32", "erf_near_f32", "sigmoid_near_f32",
           "exp_dd_f32", "log_dd_f32", "sin_f32", "cos_f32", "tan_f32", "asin_f32", "acos_f32", "atan_f32",
           "sinh_f32", "cosh_f32", "asinh_f32", "acosh_f32", "atanh_f32", "UNARY", "Portable"]
