"""Number formats as bit patterns: exact conversions between every numeric dtype.

numba's CPU target has no float16 and no type at all for bfloat16, the float8,
float6 and float4 formats or the 4- and 2-bit integers (numpy holds them through
``ml_dtypes``). Casts between them therefore work on the **bit patterns**: every
array is viewed as unsigned integers of its width (:func:`.common.bits`) and
one integer-only scalar function (:func:`cast_bits`) decodes a value into
``(kind, sign, magnitude, exponent)`` -- the value is exactly ``(-1)**sign *
magnitude * 2**exponent`` -- and encodes it into the target format with one
round-to-nearest-even. Integer arithmetic only, so the CPU and CUDA kernels give
the same bits, and no double rounding (int64 -> bfloat16 rounds once).

A format is five integers (:data:`FORMATS`): its class, exponent bits,
mantissa bits, exponent bias and storage width in bits.

Classes and their special values (ONNX's Cast tables; ``ml_dtypes`` where ONNX
leaves the choice open):

* ``IEEE`` (float64, float32, float16, bfloat16, float8e5m2): inf at the
  all-ones exponent, NaN there with a non-zero mantissa; overflow gives inf,
  or (``saturate``, float8 only) the largest finite value.
* ``FN`` (float8e4m3fn): no inf; NaN is S.1111.111; overflow and inf give NaN
  (sign kept) or, saturating, the largest finite value.
* ``FNUZ`` (float8e4m3fnuz, float8e5m2fnuz): no inf, no -0; NaN is 0x80;
  overflow and inf give NaN or, saturating, the largest finite value; -0 -> +0.
* ``NOSPECIAL`` (float4e2m1, float6e2m3, float6e3m2): no inf, no NaN; overflow
  and inf clamp to the largest finite value; NaN gives a zero of the opposite
  sign (what ``ml_dtypes``, ONNX's reference, gives).
* ``E8M0`` (float8e8m0): an exponent only; converted from the float32 value by
  ONNX's reference algorithm (``onnx.numpy_helper.to_float8e8m0``: rounding
  ``up`` / ``nearest`` / ``down`` on the float32 exponent, ``saturate`` stops
  at 0xFE, inf and NaN give 0xFF).
* ``SINT`` / ``UINT`` (int2 ... int64, uint2 ... uint64) and ``BOOL``.

Conversions to integers: a float is truncated toward zero; NaN, +-inf and values
outside the target's range are undefined in ONNX: int32/int64 give INT_MIN (as
x86, numpy and ORT on x86), uint64 gives 2**63 (as numpy on x86), the other
integer types the int64 conversion (INT64_MIN for NaN/inf) with its high bits
discarded -- in range of int64 that is the exact value wrapped, as ``ml_dtypes``
does for int4. Integer to integer wraps (two's complement); to bool is ``!= 0``,
from bool 0/1; float to bool is ``x != 0`` (NaN -> True).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_JIT = dict(cache=True, error_model="numpy")

# format classes
SINT, UINT, BOOL, IEEE, FN, FNUZ, NOSPECIAL, E8M0 = range(8)

#: dtype name -> (class, exponent bits, mantissa bits, bias, width in bits)
FORMATS = {
    "float64": (IEEE, 11, 52, 1023, 64),
    "float32": (IEEE, 8, 23, 127, 32),
    "float16": (IEEE, 5, 10, 15, 16),
    "bfloat16": (IEEE, 8, 7, 127, 16),
    "float8_e4m3fn": (FN, 4, 3, 7, 8),
    "float8_e4m3fnuz": (FNUZ, 4, 3, 8, 8),
    "float8_e5m2": (IEEE, 5, 2, 15, 8),
    "float8_e5m2fnuz": (FNUZ, 5, 2, 16, 8),
    "float8_e8m0fnu": (E8M0, 8, 0, 127, 8),
    "float4_e2m1fn": (NOSPECIAL, 2, 1, 1, 4),
    "float6_e2m3fn": (NOSPECIAL, 2, 3, 1, 6),
    "float6_e3m2fn": (NOSPECIAL, 3, 2, 3, 6),
    "int64": (SINT, 0, 0, 0, 64),
    "int32": (SINT, 0, 0, 0, 32),
    "int16": (SINT, 0, 0, 0, 16),
    "int8": (SINT, 0, 0, 0, 8),
    "int4": (SINT, 0, 0, 0, 4),
    "int2": (SINT, 0, 0, 0, 2),
    "uint64": (UINT, 0, 0, 0, 64),
    "uint32": (UINT, 0, 0, 0, 32),
    "uint16": (UINT, 0, 0, 0, 16),
    "uint8": (UINT, 0, 0, 0, 8),
    "uint4": (UINT, 0, 0, 0, 4),
    "uint2": (UINT, 0, 0, 0, 2),
    "bool": (BOOL, 0, 0, 0, 1),
}
FLOAT_CLASSES = (IEEE, FN, FNUZ, NOSPECIAL, E8M0)

#: the float32 format (E8M0 conversions go through float32, as ONNX's reference does)
_F32 = FORMATS["float32"]

# round modes (Cast-24 round_mode, used for float8e8m0 only)
ROUND_UP, ROUND_NEAREST, ROUND_DOWN = range(3)
ROUND_MODES = {"up": ROUND_UP, "nearest": ROUND_NEAREST, "down": ROUND_DOWN}

# value kinds
FINITE, INF, NAN = range(3)

U0 = np.uint64(0)
U1 = np.uint64(1)
U63 = np.uint64(63)
U64MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
U2P63 = np.uint64(1 << 63)


def fmt(dtype) -> tuple:
    """The format tuple of a dtype (KeyError for dtypes without one: strings, complex)."""
    return FORMATS[np.dtype(dtype).name]


@njit(**_JIT)
def _ones(n):
    """2**n - 1 as uint64, for 0 <= n <= 64."""
    if n >= 64:
        return U64MAX
    return (U1 << np.uint64(n)) - U1


@njit(**_JIT)
def _bitlen(m):
    """Number of significant bits of the uint64 ``m`` (0 for 0)."""
    n = 0
    while m != U0:
        m = m >> U1
        n += 1
    return n


@njit(**_JIT)
def decode(b, cls, ne, nm, bias, width):
    """(kind, sign, magnitude, exponent) of the bit pattern ``b`` (uint64) in the format:
    the value is ``(-1)**sign * magnitude * 2**exponent`` (integers: exponent 0)."""
    b = np.uint64(b) & _ones(width)
    if cls == BOOL:
        return FINITE, 0, (U1 if b != U0 else U0), 0
    if cls == UINT:
        return FINITE, 0, b, 0
    if cls == SINT:
        if (b >> np.uint64(width - 1)) & U1:
            # two's complement magnitude of a negative value (exact for INT_MIN too)
            return FINITE, 1, ((~b) + U1) & _ones(width), 0
        return FINITE, 0, b, 0
    if cls == E8M0:
        if b == np.uint64(255):
            return NAN, 0, U0, 0
        return FINITE, 0, U1, np.int64(b) - 127
    s = np.int64((b >> np.uint64(ne + nm)) & U1)
    e = np.int64((b >> np.uint64(nm)) & _ones(ne))
    m = b & _ones(nm)
    emax = (1 << ne) - 1
    if cls == IEEE and e == emax:
        return (INF if m == U0 else NAN), s, U0, 0
    if cls == FN and e == emax and m == _ones(nm):
        return NAN, s, U0, 0
    if cls == FNUZ and s == 1 and e == 0 and m == U0:
        return NAN, 1, U0, 0            # 0x80: the sign bit's pattern (ml_dtypes keeps it)
    if e == 0:
        return FINITE, s, m, 1 - bias - nm
    return FINITE, s, m | (U1 << np.uint64(nm)), e - bias - nm


@njit(**_JIT)
def _max_finite(cls, ne, nm):
    """(biased exponent, mantissa) of the largest finite value."""
    emax = (1 << ne) - 1
    if cls == IEEE:
        return emax - 1, _ones(nm)
    if cls == FN:
        return emax, _ones(nm) - U1
    return emax, _ones(nm)          # FNUZ, NOSPECIAL


@njit(**_JIT)
def encode_float(kind, s, mag, ex, cls, ne, nm, bias, saturate):
    """Bits of ``(-1)**s * mag * 2**ex`` (or inf/NaN) in a float format, rounded to
    nearest even, with the format's overflow rules (see the module docs)."""
    sbit = np.uint64(s) << np.uint64(ne + nm)
    emax = (1 << ne) - 1
    if kind == NAN:
        if cls == IEEE:
            return sbit | (_ones(ne) << np.uint64(nm)) | (U1 << np.uint64(nm - 1))
        if cls == FN:
            return sbit | _ones(ne + nm)
        if cls == FNUZ:
            return U1 << np.uint64(ne + nm)
        return (np.uint64(1 - s)) << np.uint64(ne + nm)   # NOSPECIAL: zero of the other sign
    overflow = kind == INF
    e = 0
    r = U0
    if not overflow:
        if mag == U0:
            return U0 if cls == FNUZ else sbit
        L = _bitlen(mag)
        ue = ex + L - 1                       # unbiased exponent of the leading bit
        q = ue - nm                           # weight of the result's last bit ...
        if q < 1 - bias - nm:
            q = 1 - bias - nm                 # ... or the subnormal one
        shift = q - ex
        if shift <= 0:
            r = mag << np.uint64(-shift)
        elif shift > 64:
            r = U0
        else:
            if shift == 64:
                r = U0
                rem = mag
            else:
                r = mag >> np.uint64(shift)
                rem = mag & _ones(shift)
            half = U1 << np.uint64(shift - 1)
            if rem > half or (rem == half and (r & U1) != U0):
                r = r + U1
        if r == U0:
            return U0 if cls == FNUZ else sbit
        if r >> np.uint64(nm + 1) != U0:      # rounding carried into a new bit
            r = r >> U1
            q += 1
        if r >> np.uint64(nm) != U0:
            e = q + nm + bias
        else:
            e = 0
        me, mm = _max_finite(cls, ne, nm)
        if e > me or (e == me and (r & _ones(nm)) > mm):
            overflow = True
    if overflow:
        if saturate or cls == NOSPECIAL:
            me, mm = _max_finite(cls, ne, nm)
            return sbit | (np.uint64(me) << np.uint64(nm)) | mm
        if cls == IEEE:
            return sbit | (_ones(ne) << np.uint64(nm))
        if cls == FN:
            return sbit | _ones(ne + nm)
        return U1 << np.uint64(ne + nm)       # FNUZ NaN
    return sbit | (np.uint64(e) << np.uint64(nm)) | (r & _ones(nm))


@njit(**_JIT)
def encode_e8m0(f, saturate, rmode):
    """float8e8m0 bits from float32 bits ``f`` (ONNX's reference algorithm)."""
    f = np.uint64(f)
    e = (f >> np.uint64(23)) & np.uint64(255)
    if e == np.uint64(255):
        return np.uint64(255)
    if rmode == ROUND_NEAREST:
        g = (f & np.uint64(0x400000)) != U0
        rr = (f & np.uint64(0x200000)) != U0
        st = (f & np.uint64(0x1FFFFF)) != U0
        up = g and (rr or st or e > U0)
    elif rmode == ROUND_UP:
        up = (f & np.uint64(0x7FFFFF)) != U0
    else:
        up = False
    if up and not (saturate and e == np.uint64(254)):
        e = e + U1
    return e & np.uint64(255)


@njit(**_JIT)
def encode_int(kind, s, mag, ex, cls, width):
    """Bits of an integer format from a decoded value (see the module docs)."""
    if cls == BOOL:
        return U1 if (kind != FINITE or mag != U0) else U0
    wmask = _ones(width)
    if kind != FINITE:
        if cls == UINT and width == 64:
            return U2P63
        if width >= 32 and cls == SINT:
            return (U1 << np.uint64(width - 1)) & wmask
        return U0                                  # INT64_MIN with its high bits discarded
    # truncate toward zero
    if ex >= 0:
        if mag != U0 and _bitlen(mag) + ex > 64:
            v = U0
            oor = True
        else:
            v = mag << np.uint64(ex)
            oor = False
    else:
        v = U0 if -ex >= 64 else mag >> np.uint64(-ex)
        oor = False
    if ex != 0:                                   # a float source: out-of-range rules
        if cls == UINT and width == 64:
            if oor or (s == 1 and v > U2P63):
                return U2P63
        elif width >= 32 and cls == SINT:
            lim = U1 << np.uint64(width - 1)
            if oor or (s == 0 and v >= lim) or (s == 1 and v > lim):
                return lim & wmask
        elif oor or (s == 0 and v >= U2P63) or (s == 1 and v > U2P63):
            return U0                              # INT64_MIN with its high bits discarded
    if s == 1:
        v = (~v) + U1
    return v & wmask


@njit(**_JIT)
def cast_bits(b, sc, se, sm, sb, sw, dc, de, dm, db, dw, saturate, rmode):
    """The bits of ``b`` (format ``sc, se, sm, sb, sw``) cast to the format ``dc ...``."""
    kind, s, mag, ex = decode(b, sc, se, sm, sb, sw)
    if dc == SINT or dc == UINT or dc == BOOL:
        return encode_int(kind, s, mag, ex, dc, dw)
    if dc == E8M0:
        f = encode_float(kind, s, mag, ex, IEEE, 8, 23, 127, False)
        return encode_e8m0(f, saturate, rmode)
    return encode_float(kind, s, mag, ex, dc, de, dm, db, saturate)
