"""Portable float32 math: exp, log, tanh, erf, sigmoid, pow, sqrt.

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
* powers of two are built by multiplying exact float32 powers of two
  (:func:`_pow2i`) rather than ``ldexp``; exponents are found by comparisons
  (:func:`_reduce`) rather than ``frexp``; rounding to an integer uses the
  ``(t + 1.5*2**23) - 1.5*2**23`` trick;
* extra precision, where needed (``pow``, ``erf``), uses Dekker's
  error-free transformations (TwoSum, Veltkamp split + TwoProduct) without FMA.

Polynomial coefficients were fitted for this module (float64 minimax fits by
Lawson iteration on Chebyshev nodes, then rounded to float32); the log series
uses the Taylor coefficients of atanh, which converge fast enough on the
reduced range.

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

Caching caveat: a caller compiled with ``cache=True`` keeps its inlined copy
of these functions; numba only checks the caller's own source file, so after
editing this module delete the ``*.nbi``/``*.nbc`` files of the kernels that
use it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

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
@njit(**_JIT)
def _pow2i(k):
    """2**k as float32, exactly, for integer -126 <= k <= 127.

    With u = k + 126 in [0, 253]: 2**k = (2**-126 or 2**2, by bit 7 of u) times the
    product of 2**(2**j) over the other set bits of u (that product is <= 2**127).
    Selects on the bits of a non-negative number, no sign-dependent branches: the
    CPU does not mispredict on random data."""
    u = k + 126
    f1 = P2_1 if u & 1 else ONE
    f2 = P2_2 if u & 2 else ONE
    f4 = P2_4 if u & 4 else ONE
    f8 = P2_8 if u & 8 else ONE
    f16 = P2_16 if u & 16 else ONE
    f32 = P2_32 if u & 32 else ONE
    f64 = P2_64 if u & 64 else ONE
    f128 = P2_2 if u & 128 else MIN_NORMAL
    return f128 * (((f1 * f2) * (f4 * f8)) * ((f16 * f32) * f64))


@njit(**_JIT)
def _scale(p, k):
    """p * 2**k with one rounding (p around 1, -152 <= k <= 128): exact unless the
    result is subnormal (then rounded once, by the last multiply) or overflows (inf).
    Both halves of k give normal powers of two and p * 2**k1 stays normal."""
    k1 = k >> 1
    return (p * _pow2i(k1)) * _pow2i(k - k1)


@njit(**_JIT)
def _reduce(x):
    """(m, e) with x == m * 2**e exactly and sqrt(2)/2 <= m < sqrt(2), for finite x > 0.

    x is first brought to [1, 2**128) (times 2**24 if subnormal, times 2**126 if
    below 1), then a binary search divides by 2**64, 2**32, ..., 2 while m is at
    least that power -- selects rather than branches, all exact."""
    sub = x < MIN_NORMAL
    m = x * (P2_24 if sub else ONE)
    e = -24 if sub else 0
    low = m < ONE
    m = m * (P2_126 if low else ONE)
    e -= 126 if low else 0
    c = m >= P2_64
    m = m * (P2M64 if c else ONE)
    e += 64 if c else 0
    c = m >= P2_32
    m = m * (P2M32 if c else ONE)
    e += 32 if c else 0
    c = m >= P2_16
    m = m * (P2M16 if c else ONE)
    e += 16 if c else 0
    c = m >= P2_8
    m = m * (P2M8 if c else ONE)
    e += 8 if c else 0
    c = m >= P2_4
    m = m * (P2M4 if c else ONE)
    e += 4 if c else 0
    c = m >= P2_2
    m = m * (P2M2 if c else ONE)
    e += 2 if c else 0
    c = m >= P2_1
    m = m * (P2M1 if c else ONE)
    e += 1 if c else 0
    c = m > SQRT2
    m = m * (HALF if c else ONE)
    e += 1 if c else 0
    return m, e


@njit(**_JIT)
def _rint_small(a):
    """Nearest integer (ties to even) of 0 <= a < 2**23."""
    return (a + P2_23) - P2_23


# --- exp ------------------------------------------------------------------------
@njit(**_JIT)
def _exp_core(h, l):
    """exp(h + l) == (p + plo) * 2**k for finite EXP_LO <= h <= EXP_HI, |l| <= ulp(h);
    p is the float32 result before scaling and plo the rounding error of its last add."""
    kf = (h * LOG2E + ROUND_MAGIC) - ROUND_MAGIC
    # h - kf*LN2_HI is exact (kf*LN2_HI is exact and close to h)
    r = ((h - kf * LN2_HI) - kf * LN2_LO) + l
    q = r * r * (E0 + r * (E1 + r * (E2 + r * (E3 + r * (E4 + r * E5)))))
    s = r + q
    p, plo = _fast_two_sum(ONE, s)
    return p, plo, int(kf)


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
def exp_f32(x):
    """e**x in float32 (<= 1 ULP measured)."""
    return exp_dd_f32(F(x), ZERO)


# --- log -------------------------------------------------------------------------
@njit(**_JIT)
def log_f32(x_):
    """Natural logarithm in float32; log(0) = -inf, log(x<0) = nan."""
    x = F(x_)
    if x != x:
        return x
    if x < ZERO:
        return NAN
    if x == ZERO:
        return -INF
    if x == INF:
        return x
    m, e = _reduce(x)
    f = m - ONE
    s = f / (TWO + f)
    z = s * s
    r = z * (L3 + z * (L5 + z * (L7 + z * (L9 + z * L11))))
    hfsq = HALF * f * f
    dk = F(e)
    # ln(1+f) = f - hfsq + s*(hfsq + r)  (fdlibm's arrangement of 2*atanh(s))
    return dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f)


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
    """Hyperbolic tangent in float32 (tanh(-0) = -0)."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a < TANH_SMALL:
        s = a * a
        y = a + a * (s * (T0 + s * (T1 + s * (T2 + s * (T3 + s * (T4 + s * T5))))))
    elif a < TANH_ONE:
        e = exp_dd_f32(-TWO * a, ZERO)     # e^(-2a) <= 0.29
        d, dl = _fast_two_sum(ONE, e)       # 1 + e exactly
        q = (TWO * e) / d
        q = q - q * (dl / d)                # 2e / (1 + e)
        y = ONE - q
    else:
        y = ONE
    return math.copysign(y, x)


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
    eh = _scale(p, k)
    el = _scale(plo, k)
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


@njit(**_JIT)
def erf_f32(x_):
    """Error function in float32 (erf(-0) = -0, erf(+-inf) = +-1)."""
    x = F(x_)
    if x != x:
        return x
    a = abs(x)
    if a < ERF_A:
        s = a * a
        y = a + a * (A0 + s * (A1 + s * (A2 + s * (A3 + s * (A4 + s * (A5 + s * A6))))))
    elif a < ERF_B:
        u = a - ONE
        y = ERX + (B0 + u * (B1 + u * (B2 + u * (B3 + u * (B4 + u * (B5 + u * (B6 + u * (B7 + u * B8))))))))
    elif a < ERF_C:
        t = ONE / a
        g = C0 + t * (C1 + t * (C2 + t * (C3 + t * (C4 + t * (C5 + t * C6)))))
        sh, sl = _two_prod(a, a)
        y = ONE - exp_dd_f32(-sh, -sl) * g
    else:
        y = ONE
    return math.copysign(y, x)


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
    p, plo, k = _exp_core(-abs(x), ZERO)
    eh = _scale(p, k)
    el = _scale(plo, k)
    d, dl = _fast_two_sum(ONE, eh)        # 1 + e == d + dl + el
    dl = dl + el
    lh, ll = log_dd_f32(d)
    r = lh + (ll + dl / d)
    if x > ZERO:
        return x + r
    return r


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
}

__all__ = ["exp_f32", "log_f32", "tanh_f32", "erf_f32", "sigmoid_f32", "pow_f32", "sqrt_f32", "softplus_f32",
           "exp_dd_f32", "log_dd_f32", "UNARY", "Portable"]
