"""Elementwise breadth: the integer widths (int8/16, uint8..64) and float64 kinds, Mod,
BitShift, bitwise ops, rounding, Sign, Mean, Gelu and the one-line activations.
Each case runs on the CPU and on the CUDA simulator (bitwise equal, NaNs compared as
NaNs) and is checked against numpy or a float64 formula."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest

from test_kernels_elementwise import assert_same, run_both

SINT = ("int8", "int16", "int32", "int64")
UINT = ("uint8", "uint16", "uint32", "uint64")


def _ints(dt, n, seed):
    """Random values over the dtype's whole range, plus its extremes, 0 and +-1."""
    info = np.iinfo(dt)
    rng = np.random.default_rng(seed)
    v = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    edge = np.array([info.min, info.max, 0, 1, info.max - 1] + ([-1] if info.min < 0 else []), dtype=dt)
    return np.concatenate([edge, v])


# --- wrap-around arithmetic per width and signedness --------------------------------------
@pytest.mark.parametrize("dt", SINT + UINT)
@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                   ("Max", np.maximum), ("Min", np.minimum)])
def test_integer_arithmetic_wraps_like_numpy(dt, op, fn):
    a = _ints(dt, 40, 1)
    b = _ints(dt, 40, 2)[::-1].copy()
    with np.errstate(all="ignore"):
        assert_same(run_both(op, [a, b], opset=14), fn(a, b))


@pytest.mark.parametrize("dt", SINT + UINT)
def test_integer_div_truncates_and_compare(dt):
    a = _ints(dt, 40, 3)
    b = _ints(dt, 40, 4)
    b[b == 0] = 3
    q = run_both("Div", [a, b], opset=14)
    info = np.iinfo(dt)
    want = np.array([(int(x) // int(y) if (int(x) >= 0) == (int(y) > 0) else -(abs(int(x)) // abs(int(y))))
                     for x, y in zip(a, b)], dtype=object)
    want = np.array([w if w <= info.max else info.min for w in want]).astype(dt)   # INT_MIN / -1 wraps
    assert_same(q, want)
    assert_same(run_both("Less", [a, b], opset=13), a < b)
    assert_same(run_both("Equal", [a, a[::-1].copy()], opset=19), a == a[::-1])


# --- Mod ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", SINT + UINT)
@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod(dt, fmod):
    a = _ints(dt, 60, 5)
    b = _ints(dt, 60, 6)
    b[:3] = 0                      # x mod 0 = 0 (as numpy)
    got = run_both("Mod", [a, b], opset=13, fmod=fmod)
    with np.errstate(all="ignore"):
        want = (np.fmod if fmod else np.mod)(a, b)
    assert_same(got, want)


def test_integer_mod_sign_rules_and_broadcast():
    a = np.array([[-7, 7, -7, 7, -8, 0]], np.int32)
    b = np.array([[3], [-3]], np.int32)
    assert_same(run_both("Mod", [a, b], opset=13), np.mod(a, b))
    assert_same(run_both("Mod", [a, b], opset=13, fmod=1), np.fmod(a, b))
    m = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).min], np.int64)
    assert_same(run_both("Mod", [m, np.array([-1, 3], np.int64)], opset=13), np.mod(m, [-1, 3]))


def _floats(dt, n, seed):
    """Values over a wide range of exponents, signed zeros, infinities, NaN, subnormals."""
    rng = np.random.default_rng(seed)
    top = 38 if dt == np.float32 else 300
    v = (rng.standard_normal(n) * 10.0 ** rng.integers(-top, top, n)).astype(dt)
    fi = np.finfo(dt)
    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, fi.max, -fi.max, fi.smallest_subnormal,
                     -fi.smallest_subnormal, fi.tiny, 3.0, -3.0, 0.5, 7.5, -7.5], dtype=dt)
    return np.concatenate([edge, v])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("fmod", [0, 1])
def test_float_mod_is_exact_and_matches_numpy(dt, fmod):
    a = _floats(dt, 150, 7)
    b = _floats(dt, 150, 8)
    # every pair of the edge values, and random pairs over the whole exponent range
    ea, eb = np.meshgrid(a[:17], b[:17])
    a = np.concatenate([ea.ravel(), a, a[::-1] * dt(0.5)])
    b = np.concatenate([eb.ravel(), b, b])
    got = run_both("Mod", [a, b], opset=28, fmod=fmod)
    with np.errstate(all="ignore"):
        want = (np.fmod if fmod else np.mod)(a, b)
    assert_same(got, want)    # bitwise, signed zeros included


# --- BitShift and bitwise ops ---------------------------------------------------------------
def _shift_ref(x, y, left):
    bits = np.iinfo(x.dtype).bits
    out = []
    for a, s in zip(x.tolist(), y.tolist()):
        if s < 0 or s >= bits:
            out.append(-1 if (not left and a < 0) else 0)
        elif left:
            v = (a << s) & ((1 << bits) - 1)
            out.append(v - (1 << bits) if (x.dtype.kind == "i" and v >= 1 << (bits - 1)) else v)
        else:
            out.append(a >> s)
    return np.array(out, dtype=object).astype(x.dtype)


@pytest.mark.parametrize("dt", SINT + UINT)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_every_width(dt, direction):
    x = _ints(dt, 50, 9)
    bits = np.iinfo(dt).bits
    lo = -3 if np.dtype(dt).kind == "i" else 0
    y = np.random.default_rng(10).integers(lo, bits + 3, x.shape[0]).astype(dt)
    got = run_both("BitShift", [x, y], opset=28, direction=direction)
    assert_same(got, _shift_ref(x, y, direction == "LEFT"))


def test_bitshift_rejects_bad_direction():
    from hetero_explore.ir.errors import KernelError
    with pytest.raises(KernelError, match="direction"):
        run_both("BitShift", [np.ones(3, np.uint8), np.ones(3, np.uint8)], opset=28, direction="UP")


@pytest.mark.parametrize("dt", SINT + UINT)
def test_bitwise_ops(dt):
    a, b = _ints(dt, 30, 11), _ints(dt, 30, 12)
    assert_same(run_both("BitwiseAnd", [a, b], opset=18), a & b)
    assert_same(run_both("BitwiseOr", [a, b], opset=18), a | b)
    assert_same(run_both("BitwiseXor", [a, b[:1].copy()], opset=18), a ^ b[:1])
    assert_same(run_both("BitwiseNot", [a], opset=18), ~a)


# --- unary: rounding, Sign, Neg/Abs, float64 ---------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_floor_ceil_round_exact(dt):
    rng = np.random.default_rng(13)
    big = 2.0 ** (23 if dt == np.float32 else 52)
    x = np.concatenate([_floats(dt, 60, 14),
                        (rng.integers(-40, 40, 60) / 2.0).astype(dt),          # halves: ties to even
                        np.array([big - 0.5, -(big - 0.5), big, big + 1, -0.4, -0.6, 0.49999997], dt),
                        (rng.standard_normal(60) * 1e6).astype(dt)])
    assert_same(run_both("Floor", [x], opset=13), np.floor(x))
    assert_same(run_both("Ceil", [x], opset=13), np.ceil(x))
    assert_same(run_both("Round", [x], opset=22), np.round(x))


@pytest.mark.parametrize("dt", ("float32", "float64") + SINT + UINT)
def test_sign_abs(dt):
    x = _floats(dt, 40, 15) if dt.startswith("float") else _ints(dt, 40, 15)
    with np.errstate(all="ignore"):
        assert_same(run_both("Sign", [x], opset=13), np.sign(x))
        assert_same(run_both("Abs", [x], opset=13), np.abs(x))
        if not dt.startswith("uint"):
            assert_same(run_both("Neg", [x], opset=13), np.negative(x))


def test_float64_arithmetic_and_reciprocal_exact():
    a, b = _floats(np.float64, 50, 16), _floats(np.float64, 50, 17)
    with np.errstate(all="ignore"):
        for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)):
            assert_same(run_both(op, [a, b], opset=14), fn(a, b))
        assert_same(run_both("Reciprocal", [a], opset=13), 1.0 / a)
    assert_same(run_both("IsNaN", [a], opset=20), np.isnan(a))
    assert_same(run_both("IsInf", [a], opset=20), np.isinf(a))


def test_where_and_clip_more_dtypes():
    c = np.array([True, False, True, False])
    for dt in ("uint8", "int16", "uint64", "float64"):
        x, y = np.arange(4).astype(dt), (np.arange(4) + 10).astype(dt)
        assert_same(run_both("Where", [c, x, y], opset=16), np.where(c, x, y))
    x = _ints("int8", 20, 18)
    assert_same(run_both("Clip", [x, np.array(-5, np.int8), np.array(7, np.int8)], opset=13, const_inputs=(1, 2)),
                np.clip(x, -5, 7))
    assert_same(run_both("Clip", [x], opset=13), x)


# --- Mean, PRelu ---------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_mean_folds_left_to_right_then_divides(dt):
    rng = np.random.default_rng(19)
    xs = [rng.standard_normal(s).astype(dt) for s in [(2, 3), (3,), (1, 1)]]
    want = ((xs[0] + xs[1]) + xs[2]) / dt(3)
    assert_same(run_both("Mean", xs, opset=13), want)
    assert_same(run_both("Mean", xs[:1], opset=13), xs[0])


def test_prelu_broadcasts_slope():
    x = np.random.default_rng(20).standard_normal((2, 3, 4)).astype(np.float32)
    slope = np.array([0.1, -0.2, 0.3, 2.0], np.float32)
    assert_same(run_both("PRelu", [x, slope], opset=16), np.where(x < 0, x * slope, x))


# --- activations (float32, pmath) --------------------------------------------------------------
def _erf64(x):
    import math
    return np.array([math.erf(v) for v in x])


_X = np.concatenate([np.linspace(-12, 12, 241), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 80.0, -80.0]])

ACTIVATIONS = [
    ("Elu", {"alpha": 0.7}, lambda x: np.where(x >= 0, x, 0.7 * np.expm1(x)), 22),
    ("Selu", {}, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)), 22),
    ("Celu", {"alpha": 2.0}, lambda x: np.maximum(0, x) + np.minimum(0, 2.0 * np.expm1(x / 2.0)), 12),
    ("ThresholdedRelu", {"alpha": 0.5}, lambda x: np.where(x > 0.5, x, 0.0), 22),
    ("Shrink", {"lambd": 1.5, "bias": 0.25}, lambda x: np.where(x < -1.5, x + 0.25, np.where(x > 1.5, x - 0.25, 0.0)), 9),
    ("Mish", {}, lambda x: x * np.tanh(np.logaddexp(0, x)), 22),
    ("Swish", {"alpha": 1.5}, lambda x: x / (1 + np.exp(-1.5 * x)), 24),
    ("Gelu", {}, lambda x: 0.5 * x * (1 + _erf64(x / np.sqrt(2))), 20),
    ("Gelu", {"approximate": "tanh"},
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), 20),
]


@pytest.mark.parametrize("op,attrs,ref,opset", ACTIVATIONS, ids=[f"{a[0]}-{i}" for i, a in enumerate(ACTIVATIONS)])
def test_activations_close_to_float64_and_portable(op, attrs, ref, opset):
    x = _X.astype(np.float32)
    got = run_both(op, [x], opset=opset, **attrs)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    assert got.dtype == np.float32
    assert np.array_equal(np.isnan(got), np.isnan(want)), (x[np.isnan(got) != np.isnan(want)])
    m = ~np.isnan(want)
    np.testing.assert_allclose(got[m], want[m], rtol=1e-5, atol=1e-6, err_msg=op)


def test_gelu_rejects_unknown_approximation():
    from hetero_explore.ir.errors import KernelError
    with pytest.raises(KernelError, match="approximate"):
        run_both("Gelu", [np.ones(2, np.float32)], opset=20, approximate="fast")
