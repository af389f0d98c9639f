"""ReduceMin/Prod/L1/L2/SumSquare/LogSum/LogSumExp, the old-opset reductions, ArgMax/ArgMin
and CumSum/CumProd: against onnx's reference evaluator or numpy, against the documented
accumulation order, and CPU vs CUDA-simulator bit equality."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from onnx import helper

from hetero_explore.ir.errors import ExecutionError
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from support.harness import reference as support_reference, run_both, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32
RNG = np.random.default_rng(7)

NEW = ["ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def make(op, x, axes, keepdims=1, noop=None, opset=18):
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    names, inputs, const = ["x"], [x], ()
    axes_input = opset >= (13 if op == "ReduceSum" else 18)
    if axes_input and axes is not None:
        names.append("axes")
        inputs.append(np.asarray(axes, dtype=np.int64))
        const = (1,)
    elif axes is not None:
        attrs["axes"] = list(axes)
    return helper.make_node(op, names, ["y"], name=f"{op}_n", **attrs), inputs, const


def reference(node, inputs, opset):
    return support_reference(node, inputs, opset)[0]


def canon(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.array(np.nan, a.dtype), a).astype(a.dtype)
    return a.view(np.uint8)


def both(node, inputs, opset, const=()):
    """CPU and CUDA-simulator results, asserted bitwise equal."""
    return run_both(node, inputs, opset, const)[0]


def data_for(op, shape, dtype=np.float32):
    x = RNG.standard_normal(shape).astype(dtype)
    if op == "ReduceLogSum":
        x = np.abs(x) + F(0.1)
    if op == "ReduceProd":
        x = (F(0.5) + np.abs(x)).astype(dtype)
    return x


@pytest.mark.parametrize("op", NEW)
@pytest.mark.parametrize("axes", [None, [0], [-1], [0, 2], [1, 2]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_new_reductions_vs_reference(op, axes, keepdims):
    x = data_for(op, (3, 4, 5))
    node, inputs, const = make(op, x, axes, keepdims)
    got = both(node, inputs, 18, const)
    want = reference(node, inputs, 18)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-6 if op != "ReduceProd" else 1e-5, atol=1e-6)


def _sequential(op, x, axis):
    """The documented order, spelled out in float32 scalar steps along one axis."""
    x = np.moveaxis(x, axis, -1)
    out = np.empty(x.shape[:-1], x.dtype)
    for idx in np.ndindex(out.shape):
        row = x[idx]
        acc = x.dtype.type(1 if op == "ReduceProd" else 0)
        for v in row:
            if op == "ReduceProd":
                acc = acc * v
            elif op == "ReduceL1":
                acc = acc + abs(v)
            else:
                acc = acc + v * v
        out[idx] = acc
    return out


@pytest.mark.parametrize("op", ["ReduceProd", "ReduceL1", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_fold_order_is_ascending_and_exact(op, dtype):
    if dtype == np.float32:
        x = (RNG.standard_normal((3, 7)) * 3).astype(dtype)
    else:
        x = RNG.integers(-50, 50, (3, 7)).astype(dtype)
    node, inputs, const = make(op, x, [1], keepdims=0)
    with np.errstate(over="ignore"):
        want = _sequential(op, x, 1)
    got = both(node, inputs, 18, const)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_integer_wraparound_is_two_complement():
    x = np.array([[2 ** 20 + 1, 2 ** 15 + 3, 3]], dtype=np.int32)
    node, inputs, const = make("ReduceProd", x, [1], keepdims=0)
    got = both(node, inputs, 18, const)
    want = np.array([(2 ** 20 + 1) * (2 ** 15 + 3) * 3], np.int64).astype(np.int32)   # the low 32 bits
    assert got.tolist() == want.tolist() and got.tolist() != [0]


@pytest.mark.parametrize("op,want", [("ReduceMin", np.inf), ("ReduceProd", 1.0), ("ReduceL1", 0.0),
                                     ("ReduceL2", 0.0), ("ReduceSumSquare", 0.0), ("ReduceLogSum", -np.inf),
                                     ("ReduceLogSumExp", -np.inf)])
def test_empty_set(op, want):
    x = np.zeros((2, 0, 4), np.float32)
    node, inputs, const = make(op, x, [1], keepdims=1)
    got = both(node, inputs, 18, const)
    assert got.shape == (2, 1, 4)
    assert np.all(got == F(want))


def test_min_propagates_nan_and_lse_special_values():
    x = np.array([[1, np.nan, -3], [2, -np.inf, 5], [-np.inf, -np.inf, -np.inf], [np.inf, 1, 2]], np.float32)
    node, inputs, const = make("ReduceMin", x, [1], keepdims=0)
    got = both(node, inputs, 18, const)
    assert np.isnan(got[0]) and got[1] == -np.inf and got[2] == -np.inf and got[3] == 1
    node, inputs, const = make("ReduceLogSumExp", x, [1], keepdims=0)
    got = both(node, inputs, 18, const)
    assert np.isnan(got[0]) and got[2] == -np.inf and got[3] == np.inf
    np.testing.assert_allclose(got[1], np.log(np.exp(2.0) + np.exp(5.0)), rtol=1e-6)


def test_lse_does_not_overflow():
    x = np.array([[100.0, 100.0, 99.0]], np.float32)
    node, inputs, const = make("ReduceLogSumExp", x, [1], keepdims=0)
    got = both(node, inputs, 18, const)
    np.testing.assert_allclose(got, [100 + np.log(2 + np.exp(-1.0))], rtol=1e-6)


def test_lse_float64_is_cpu_only():
    x = RNG.standard_normal((3, 4))
    node, inputs, const = make("ReduceLogSumExp", x, [1], keepdims=0)
    got = run_node(CPU, node, inputs, opset=18, const_inputs=const)[0]
    m = x.max(axis=1)
    np.testing.assert_allclose(got, np.log(np.exp(x - m[:, None]).sum(axis=1)) + m, rtol=1e-14)
    m = supports(GPU, node, inputs, opset=18, const_inputs=const)
    assert not m.supported and "float64" in m.reason


@pytest.mark.parametrize("op", ["ReduceMin", "ReduceMax"])
def test_bool_min_max(op):
    x = np.array([[True, False, True], [True, True, True], [False, False, False]])
    node, inputs, const = make(op, x, [1], keepdims=0, opset=20)
    got = both(node, inputs, 20, const)
    want = x.min(axis=1) if op == "ReduceMin" else x.max(axis=1)
    assert got.dtype == np.bool_ and got.tolist() == want.tolist()


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"])
@pytest.mark.parametrize("opset", [1, 11, 13])
def test_old_opsets_axes_attribute(op, opset):
    if op == "ReduceSum" and opset == 13:
        opset = 11
    x = data_for(op, (2, 3, 4))
    axes = [1] if opset == 1 else [-1, 0]
    node, inputs, const = make(op, x, axes, keepdims=0, opset=opset)
    got = both(node, inputs, opset, const)
    want = reference(node, inputs, max(opset, 11))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_noop_identity_and_declines():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    node = helper.make_node("ReduceMin", ["x"], ["y"], noop_with_empty_axes=1)
    got = both(node, [x], 18)
    assert np.array_equal(got, x)
    node = helper.make_node("ReduceL2", ["x"], ["y"], noop_with_empty_axes=1)
    m = supports(CPU, node, [x], opset=18)
    assert not m.supported and "noop_with_empty_axes" in m.reason
    # a non-constant axes input: declined on CUDA, read at run time (and checked) on the CPU
    node, inputs, _ = make("ReduceProd", x, [1], keepdims=0)
    m = supports(GPU, node, inputs, opset=18)
    assert not m.supported and "not a constant" in m.reason
    f32 = [np.dtype(np.float32)]
    got = run_node(CPU, node, inputs, opset=18, out_shapes=[(2,)], out_dtypes=f32)[0]   # read at run time
    np.testing.assert_allclose(got, np.prod(x, axis=1), rtol=1e-6)
    with pytest.raises(ExecutionError, match="out of range|axis must be in"):
        run_node(CPU, node, [x, np.array([5], np.int64)], opset=18, out_shapes=[(2,)], out_dtypes=f32)


# --- ArgMax / ArgMin -------------------------------------------------------------------------


def _np_arg(op, x, axis, keepdims, last):
    f = np.argmin if op == "ArgMin" else np.argmax
    if last:
        n = x.shape[axis]
        r = n - 1 - f(np.flip(x, axis), axis=axis)
    else:
        r = f(x, axis=axis)
    return np.expand_dims(r, axis) if keepdims else r


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_vs_numpy(op, axis, keepdims, last):
    x = RNG.integers(-3, 3, (3, 4, 5)).astype(np.float32)   # many ties
    x[0, 1, 2] = np.nan
    x[2, 3, 0] = np.nan
    x[2, 3, 4] = np.nan
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
    got = both(node, [x], 13)
    want = _np_arg(op, x, axis, keepdims, last)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    if not np.isnan(x).any(axis=axis).any():
        np.testing.assert_array_equal(got, reference(node, [x], 13))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_arg_integers_vs_reference(dtype):
    x = RNG.integers(-5, 5, (4, 6)).astype(dtype)
    for op in ("ArgMax", "ArgMin"):
        node = helper.make_node(op, ["x"], ["y"], axis=1, keepdims=1, select_last_index=1)
        np.testing.assert_array_equal(both(node, [x], 13), reference(node, [x], 13))


def test_arg_declines_empty_axis():
    x = np.zeros((2, 0), np.float32)
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=1)
    m = supports(CPU, node, [x], opset=13)
    assert not m.supported and "empty" in m.reason


# --- CumSum / CumProd ------------------------------------------------------------------------


def _np_cum(op, x, axis, exclusive, reverse):
    f = np.cumprod if op == "CumProd" else np.cumsum
    y = np.flip(x, axis) if reverse else x
    r = f(y, axis=axis, dtype=x.dtype)
    if exclusive:
        init = np.ones_like if op == "CumProd" else np.zeros_like
        first = init(np.take(r, [0], axis=axis))
        r = np.concatenate([first, np.delete(r, -1, axis=axis)], axis=axis)
    return np.flip(r, axis) if reverse else r


@pytest.mark.parametrize("op,opset", [("CumSum", 14), ("CumSum", 11), ("CumProd", 26)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cum_vs_numpy(op, opset, dtype, axis, exclusive, reverse):
    if dtype == np.float32 or dtype == np.float64:
        x = (RNG.standard_normal((3, 4, 2)) + 0.5).astype(dtype)
    else:
        x = RNG.integers(-4, 5, (3, 4, 2)).astype(dtype)
    node = helper.make_node(op, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    inputs = [x, np.array(axis, np.int64)]
    got = both(node, inputs, opset, const=(1,))
    want = _np_cum(op, x, axis, exclusive, reverse)
    assert got.dtype == want.dtype
    # numpy's cumsum/cumprod accumulate sequentially along the axis too: exact
    np.testing.assert_array_equal(got, want)


def test_cum_axis_checks():
    x = np.ones((2, 3), np.float32)
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    m = supports(CPU, node, [x, np.array(2, np.int64)], opset=14, const_inputs=(1,))
    assert not m.supported and "out of range" in m.reason
    m = supports(GPU, node, [x, np.array(1, np.int64)], opset=14)
    assert not m.supported and "not a constant" in m.reason
    got = run_node(CPU, node, [x, np.array(1, np.int32)], opset=14)[0]    # read at run time
    np.testing.assert_array_equal(got, np.cumsum(x, axis=1))
    with pytest.raises(ExecutionError, match="out of range"):
        run_node(CPU, node, [x, np.array(-3, np.int64)], opset=14)
