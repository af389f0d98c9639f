"""QuantizeLinear / DequantizeLinear for float8, float4, float6, int4/uint4, int2/uint2 and
float16/bfloat16 scales, inputs and outputs; QLinearMatMul with float16/bfloat16 scales;
the bfloat16 movement ops (OneHot, ReverseSequence, Compress, Unique) and half Einsum; the
loader's schema defaults (STFT ``onesided``, MeanVarianceNormalization ``axes``).

Oracles: onnx's ReferenceEvaluator (the formulas of onnx's Q/DQ reference, ml_dtypes' casts),
numpy; CPU vs CUDA simulator bitwise on every kernel run."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from support.harness import reference as support_reference, run_both, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32
OPSET = 25

FLOAT8 = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"]
FLOAT_Q = FLOAT8 + ["float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"]
SUB_INT = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}
ONNX_TYPE = {"float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
             "float8_e5m2": TensorProto.FLOAT8E5M2, "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
             "float4_e2m1fn": TensorProto.FLOAT4E2M1, "float6_e2m3fn": TensorProto.FLOAT6E2M3,
             "float6_e3m2fn": TensorProto.FLOAT6E3M2, "int4": TensorProto.INT4, "uint4": TensorProto.UINT4,
             "int2": TensorProto.INT2, "uint2": TensorProto.UINT2}
WIDTH = {"float4_e2m1fn": 4, "float6_e2m3fn": 6, "float6_e3m2fn": 6, "int4": 4, "uint4": 4, "int2": 2,
         "uint2": 2}


def dt(name):
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def mk(op, names, outs=("y",), **attrs):
    return helper.make_node(op, list(names), list(outs), name=f"{op}_n", **attrs)


def bitview(a):
    a = np.ascontiguousarray(a).reshape(-1)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def both(node, ins, opset=OPSET, const_inputs=()):
    return run_both(node, ins, opset, const_inputs)


def reference(node, ins, opset=OPSET):
    return support_reference(node, ins, opset)


def same_values(got, want):
    """Equal values, NaN where NaN (payloads aside), and the same sign of zero."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype, got.shape, want.shape)
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), (got, want)
    ok = ~np.isnan(g)
    assert np.array_equal(g[ok], w[ok]), (got, want)
    assert np.array_equal(np.signbit(g[ok]), np.signbit(w[ok])), (got, want)


def all_patterns(name):
    """Every bit pattern of a quantised format, as an array of that dtype."""
    width = WIDTH.get(name, 8)
    return np.arange(2 ** width, dtype=np.uint8).view(dt(name))


FINITE = st.floats(-1e6, 1e6, width=32, allow_nan=False)
ANY = st.one_of(FINITE, st.sampled_from([np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, -3e38, 1e-40, 448.0,
                                         464.0, 57344.0, 6.0, 7.0, 0.25, 0.75]))


# --- QuantizeLinear to float formats: exact against the reference (ml_dtypes' casts) ------------
@pytest.mark.parametrize("qdt", FLOAT_Q)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(xs=st.lists(ANY, min_size=1, max_size=12), scale=st.sampled_from([1.0, 0.5, 3.0, 1e-3, 256.0]),
       sat=st.sampled_from([0, 1]))
def test_quantize_float_formats(qdt, xs, scale, sat):
    x = np.asarray(xs, F)
    zp = np.zeros((), dt(qdt))
    attrs = {"saturate": sat} if qdt in FLOAT8 else {}
    node = mk("QuantizeLinear", ["x", "s", "z"], **attrs)
    ins = [x, np.asarray(scale, F), zp]
    (got,) = both(node, ins)
    (want,) = reference(node, ins)
    same_values(got, want)


@pytest.mark.parametrize("qdt", list(SUB_INT))
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(xs=st.lists(FINITE, min_size=1, max_size=12), scale=st.sampled_from([1.0, 0.5, 3.0, 1e-3]),
       zpi=st.integers(0, 3))
def test_quantize_sub_byte_ints(qdt, xs, scale, zpi):
    """Finite values against the reference (rint, + zp, clip); ties to even included."""
    lo, hi = SUB_INT[qdt]
    x = np.asarray(xs + [0.5, 1.5, 2.5, -0.5, -1.5, -2.5], F)
    zp = np.asarray(lo + zpi % (hi - lo + 1), np.int8).astype(dt(qdt))
    node = mk("QuantizeLinear", ["x", "s", "z"])
    ins = [x, np.asarray(scale, F), zp]
    (got,) = both(node, ins)
    (want,) = reference(node, ins)
    assert got.dtype == want.dtype
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), (x, got, want)


@pytest.mark.parametrize("qdt", list(SUB_INT))
def test_quantize_sub_byte_specials(qdt):
    """inf saturates, NaN quantises to the zero point (as the native int types here; the
    reference's float-to-int cast of inf/NaN is undefined)."""
    lo, hi = SUB_INT[qdt]
    x = np.asarray([np.inf, -np.inf, np.nan, 1e30, -1e30], F)
    zp = np.asarray(1, np.int8).astype(dt(qdt))
    (got,) = both(mk("QuantizeLinear", ["x", "s", "z"]), [x, np.asarray(1.0, F), zp])
    assert got.astype(np.int64).tolist() == [hi, lo, 1, hi, lo]


def test_quantize_per_axis_and_blocked_sub_byte():
    x = (np.arange(24, dtype=F).reshape(2, 3, 4) - 11) * F(0.7)
    s = np.asarray([0.5, 1.0, 2.0], F)
    zp = np.asarray([0, 1, -1], np.int8).astype(ml_dtypes.int4)
    node = mk("QuantizeLinear", ["x", "s", "z"], axis=1)
    (got,) = both(node, [x, s, zp])
    (want,) = reference(node, [x, s, zp])
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
    sb = np.asarray([[0.5, 2.0], [1.0, 4.0]], F)
    xb = (np.arange(8, dtype=F).reshape(2, 4) - 3) * F(1.3)
    node = mk("QuantizeLinear", ["x", "s"], axis=1, block_size=2, output_dtype=TensorProto.UINT4)
    (got,) = both(node, [xb, sb])
    (want,) = reference(node, [xb, sb])
    assert got.dtype == want.dtype and np.array_equal(got.astype(np.int64), want.astype(np.int64))


@pytest.mark.parametrize("qdt", ["float8_e4m3fn", "int4", "uint8"])
@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_quantize_half_x_and_scale(qdt, half):
    """float16/bfloat16 x and scale: the division is rounded to the half type first (numpy's
    half arithmetic in the reference), then quantised."""
    h = dt(half)
    x = (np.arange(-20, 20, dtype=F) * F(0.37)).astype(h)
    s = np.asarray(0.3, h)
    zp = np.zeros((), dt(qdt))
    node = mk("QuantizeLinear", ["x", "s", "z"])
    (got,) = both(node, [x, s, zp])
    (want,) = reference(node, [x, s, zp])
    same_values(got, want)


def test_quantize_precision_attribute():
    x = np.linspace(-5, 5, 41).astype(F)
    s = np.asarray(0.3, F)
    node = mk("QuantizeLinear", ["x", "s"], output_dtype=TensorProto.INT8, precision=TensorProto.FLOAT16)
    (got,) = both(node, [x, s])
    want = np.clip(np.rint(x.astype(np.float16) / s.astype(np.float16)), -128, 127).astype(np.int8)
    assert np.array_equal(got, want)
    bad = mk("QuantizeLinear", ["x", "s"], output_dtype=TensorProto.INT8, precision=TensorProto.DOUBLE)
    m = supports(CPU, bad, [x, s], opset=OPSET)
    assert not m.supported and "precision=11 not supported" in m.reason


def test_quantize_float4_adds_zero_point():
    """float4/float6: the zero point is added (onnx's reference); float8: it is not."""
    x = np.asarray([-0.0, 0.0, 1.0, -3.0, 100.0], F)
    for qdt in ("float4_e2m1fn", "float8_e4m3fn"):
        zp = np.asarray(0.0, dt(qdt))
        node = mk("QuantizeLinear", ["x", "s", "z"])
        (got,) = both(node, [x, np.asarray(1.0, F), zp])
        (want,) = reference(node, [x, np.asarray(1.0, F), zp])
        same_values(got, want)
    # -0 + 0 is +0 for float4 (added), -0 for float8 (not added)
    assert not np.signbit(both(mk("QuantizeLinear", ["x", "s", "z"]),
                               [x[:1], np.asarray(1.0, F), np.asarray(0.0, dt("float4_e2m1fn"))])[0][0])


# --- DequantizeLinear: every bit pattern ------------------------------------------------------
@pytest.mark.parametrize("xdt", FLOAT_Q + list(SUB_INT))
@pytest.mark.parametrize("sdt", ["float32", "float16", "bfloat16"])
def test_dequantize_every_pattern(xdt, sdt):
    x = all_patterns(xdt)
    s = np.asarray(0.75, dt(sdt))
    node = mk("DequantizeLinear", ["x", "s"], axis=0)
    (got,) = both(node, [x, s])
    (want,) = reference(node, [x, s])
    same_values(got, want)


@pytest.mark.parametrize("xdt", list(SUB_INT) + ["float6_e2m3fn"])
def test_dequantize_zero_point_and_output_dtype(xdt):
    x = all_patterns(xdt)
    zp = np.asarray(1.0 if xdt.startswith("float") else 1, dt(xdt) if xdt.startswith("float") else np.int8)
    zp = zp.astype(dt(xdt))
    node = mk("DequantizeLinear", ["x", "s", "z"], output_dtype=TensorProto.FLOAT16)
    ins = [x, np.asarray(1.5, F), zp]
    (got,) = both(node, ins)
    (want,) = reference(node, ins)
    same_values(got, want)


def test_dequantize_per_axis_int4_and_e8m0_scale():
    x = np.arange(-8, 8, dtype=np.int8).reshape(4, 4).astype(ml_dtypes.int4)
    s = np.asarray([0.5, 1.0, 2.0, 4.0], F)
    zp = np.asarray([0, 1, -1, 7], np.int8).astype(ml_dtypes.int4)
    node = mk("DequantizeLinear", ["x", "s", "z"], axis=1)
    (got,) = both(node, [x, s, zp])
    (want,) = reference(node, [x, s, zp])
    same_values(got, want)
    se = np.asarray([0.25, 1.0, 8.0, 0.5], F).astype(ml_dtypes.float8_e8m0fnu)
    got = both(mk("DequantizeLinear", ["x", "s"], axis=1, output_dtype=TensorProto.FLOAT), [x, se])[0]
    assert np.array_equal(got, x.astype(F) * se.astype(F))


def test_scalar_scale_with_one_element_zero_point():
    x = np.asarray([-1.0, 0.0, 2.5, 100.0], F)
    node = mk("QuantizeLinear", ["x", "s", "z"])
    ins = [x, np.asarray(0.5, F), np.asarray([3], np.uint8)]
    (got,) = both(node, ins)
    assert got.tolist() == [1, 3, 8, 203]


def test_declines():
    x = np.ones(4, F)
    m = supports(CPU, mk("QuantizeLinear", ["x", "s"]), [x, np.asarray(1, np.int32)], opset=OPSET)
    assert not m.supported and "scale dtype int32 not supported" in m.reason
    node = mk("QuantizeLinear", ["x", "s", "z"], axis=0)
    m = supports(CPU, node, [x, np.ones(3, F), np.zeros(3, np.int8).astype(ml_dtypes.int4)], opset=OPSET)
    assert not m.supported and "per-axis scale must have shape (4,)" in m.reason
    m = supports(CPU, mk("QuantizeLinear", ["x", "s", "z"]),
                 [np.ones(4, np.int32), np.asarray(1.0, F), np.zeros((), ml_dtypes.float8_e4m3fn)], opset=OPSET)
    assert not m.supported and "int32 x to float8_e4m3fn not supported" in m.reason


# --- QLinearMatMul with half scales ------------------------------------------------------------
@pytest.mark.parametrize("half", ["float16", "bfloat16"])
@pytest.mark.parametrize("qdt", [np.uint8, np.int8])
def test_qlinearmatmul_half_scales(half, qdt):
    h = dt(half)
    rng = np.random.default_rng(3)
    info = np.iinfo(qdt)
    a = rng.integers(info.min, info.max, (2, 3, 5)).astype(qdt)
    b = rng.integers(info.min, info.max, (2, 5, 4)).astype(qdt)
    az, bz, yz = (np.asarray([v], qdt) for v in ((7, 3, 9) if qdt == np.uint8 else (-3, 2, 1)))
    asc, bsc, ysc = (np.asarray([v], h) for v in (0.0123, 0.0271, 0.0313))
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], name="q")
    ins = [a, asc, az, b, bsc, bz, ysc, yz]
    (got,) = both(node, ins, opset=21)
    # the documented formula: multiplier rounded to the half type after each step, float32 product
    mult = (np.asarray(asc.astype(F) * bsc.astype(F)).astype(h).astype(F) / ysc.astype(F)).astype(h).astype(F)
    acc = np.matmul(a.astype(np.int64) - az.astype(np.int64), b.astype(np.int64) - bz.astype(np.int64))
    want = np.clip(np.rint(acc.astype(F) * mult) + yz.astype(np.int64), info.min, info.max).astype(qdt)
    assert np.array_equal(got, want)
    (ref,) = reference(node, ins, opset=21)
    assert np.abs(got.astype(np.int64) - ref.astype(np.int64)).max() <= 1


# --- bfloat16 movement ops and half Einsum -----------------------------------------------------
BF = ml_dtypes.bfloat16


def test_bfloat16_onehot_reversesequence():
    idx = np.asarray([0, 2, -1, 1], np.int64)
    vals = np.asarray([-0.0, 3.5], BF)
    node = mk("OneHot", ["i", "d", "v"])
    (got,) = both(node, [idx, np.asarray(3, np.int64), vals], opset=11, const_inputs=(1,))
    hot = (idx % 3)[:, None] == np.arange(3)[None, :]
    want = np.where(hot, bitview(vals)[1], bitview(vals)[0]).astype(np.uint16)   # the values' bits, -0 kept
    assert got.dtype == BF and np.array_equal(bitview(got), want.reshape(-1))
    x = (np.arange(12, dtype=F).reshape(4, 3) * F(1.1)).astype(BF)
    node = mk("ReverseSequence", ["x", "l"], batch_axis=1, time_axis=0)
    ins = [x, np.asarray([4, 2, 1], np.int64)]
    (got,) = both(node, ins, opset=10)
    (want,) = reference(node, ins, opset=10)
    assert np.array_equal(bitview(got), bitview(want))


def _run_model(node, ins, outs, opset):
    """Load a one-node model (data-dependent output shapes: the runner computes them) and run it."""
    from hetero_explore.load.loader import load_model
    from hetero_explore.execution.runtime import run_graph
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
          for n, a in zip(node.input, ins)]
    ovi = [helper.make_tensor_value_info(o, t, s) for o, t, s in outs]
    m = helper.make_model(helper.make_graph([node], "g", vi, ovi), opset_imports=[helper.make_opsetid("", opset)])
    got = run_graph(load_model(m), CPU, dict(zip(node.input, ins)))
    return [got[o] for o, _, _ in outs], ReferenceEvaluator(m).run(None, dict(zip(node.input, ins)))


def test_bfloat16_compress_unique():
    x = np.asarray([[1.5, -0.0], [2.0, 1.5], [-3.0, 2.0]], BF)
    node = mk("Compress", ["x", "c"], axis=0)
    (got,), _ = _run_model(node, [x, np.asarray([True, False, True])], [("y", TensorProto.BFLOAT16, ["k", 2])], 28)
    assert got.dtype == BF and np.array_equal(bitview(got), bitview(x[[0, 2]]))
    node = helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], name="u", sorted=1)
    got, want = _run_model(node, [x.reshape(-1)], [("y", TensorProto.BFLOAT16, ["k"]), ("i", TensorProto.INT64, ["k"]),
                                                  ("inv", TensorProto.INT64, [6]), ("c", TensorProto.INT64, ["k"])], 28)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g.astype(np.float64), w.astype(np.float64)), (g, w)


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
@pytest.mark.parametrize("eq", ["bij,bjk->bik", "ij->i", "ij->ji"])
def test_half_einsum(half, eq):
    h = dt(half)
    rng = np.random.default_rng(5)
    shapes = {"bij,bjk->bik": [(2, 3, 4), (2, 4, 2)], "ij->i": [(3, 5)], "ij->ji": [(3, 5)]}[eq]
    ins = [rng.standard_normal(s).astype(F).astype(h) for s in shapes]
    names = [f"x{k}" for k in range(len(ins))]
    (got,) = both(mk("Einsum", names, equation=eq), ins, opset=12)
    want = np.einsum(eq, *[a.astype(F) for a in ins]).astype(h)
    assert got.dtype == h
    # one rounding of the float32 sum (the fixed order can differ from numpy's in the float32 sum)
    np.testing.assert_allclose(got.astype(F), want.astype(F), rtol=1e-2 if half == "bfloat16" else 1e-3,
                               atol=1e-2)


# --- loader: the schema defaults onnx's inference misses --------------------------------------
def _graph_model(node, inputs, outputs, opset):
    g = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_loader_stft_default_onesided():
    from hetero_explore.load.loader import load_model
    from hetero_explore.execution.runtime import run_graph
    node = helper.make_node("STFT", ["x", "step", "", "len"], ["y"], name="stft")
    m = _graph_model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 1])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7, 9, 2])], 17)
    m.graph.initializer.extend([helper.make_tensor("step", TensorProto.INT64, [], [8]),
                                helper.make_tensor("len", TensorProto.INT64, [], [16])])
    g = load_model(m)   # the declared 9 bins agree with the schema's onesided=1 default
    x = np.random.default_rng(0).standard_normal((1, 64, 1)).astype(F)
    y = run_graph(g, CPU, {"x": x})["y"]
    frames = np.stack([x[0, f * 8:f * 8 + 16, 0] for f in range(7)]).astype(np.float64)
    want = np.fft.rfft(frames, axis=-1)
    np.testing.assert_allclose(y[0, ..., 0], want.real, atol=1e-4)
    np.testing.assert_allclose(y[0, ..., 1], want.imag, atol=1e-4)


def test_loader_mvn_default_axes():
    from hetero_explore.load.loader import load_model
    from hetero_explore.execution.runtime import run_graph
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn")
    m = _graph_model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2, 2])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 2, 2])], 13)
    g = load_model(m)
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 2)).astype(F)
    y = run_graph(g, CPU, {"x": x})["y"]
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
