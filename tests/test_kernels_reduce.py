"""ReduceSum / ReduceMean / ReduceMax kernels: vs onnx's reference evaluator,
and CPU vs CUDA-simulator bit equality."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from hetero_explore.ir.errors import KernelError
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from support.harness import reference as support_reference, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()

AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18, "ReduceProd": 18,
                    "ReduceL1": 18, "ReduceSumSquare": 18}


def make(op, x, axes, keepdims=1, noop=None, opset=18, const_axes=True):
    """Node proto, inputs and const indices for a reduction in ``opset``."""
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inputs = [x]
    names = ["x"]
    if opset >= AXES_INPUT_SINCE[op]:
        if axes is not None:
            names.append("axes")
            inputs.append(np.asarray(axes, dtype=np.int64))
    elif axes is not None:
        attrs["axes"] = list(axes)
    node = helper.make_node(op, names, ["y"], **attrs)
    const = (1,) if (const_axes and len(inputs) > 1) else ()
    return node, inputs, const


def reference(node, inputs, opset):
    return support_reference(node, inputs, opset)[0]


def bits_equal(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def check_ref(op, x, axes, keepdims=1, noop=None, opset=18, exact=False):
    node, inputs, const = make(op, x, axes, keepdims, noop, opset)
    got = run_node(CPU, node, inputs, opset=opset, const_inputs=const)[0]
    want = reference(node, inputs, opset)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    if exact or x.dtype != np.float32:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    g2 = run_node(GPU, node, inputs, opset=opset, const_inputs=const)[0]
    assert bits_equal(got, g2)
    return got


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
@pytest.mark.parametrize("axes", [None, [0], [1], [-1], [0, 2], [1, 2], [0, 1, 2]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_vs_reference(op, axes, keepdims):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    check_ref(op, x, axes, keepdims)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_reduce_old_opset_attribute_axes(op):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    opset = 13 if op != "ReduceSum" else 11
    check_ref(op, x, [1], 1, opset=opset)
    check_ref(op, x, [0, 2], 0, opset=opset)
    check_ref(op, x, None, 0, opset=opset)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_reduce_ints(op, dtype):
    x = RNG.integers(-1000, 1000, size=(3, 4, 2)).astype(dtype)
    for axes in ([1], [0, 2], [-1], None):
        check_ref(op, x, axes, 1)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_noop_with_empty_axes(op):
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    got = check_ref(op, x, None, 1, noop=1)
    assert bits_equal(got, x)


def test_reduce_size_one_dims_and_scalar():
    x = RNG.standard_normal((1, 3, 1, 4)).astype(np.float32)
    for axes in ([0], [1, 2], [2], [0, 3]):
        check_ref("ReduceSum", x, axes, 0)
    s = np.array(2.5, dtype=np.float32)
    check_ref("ReduceSum", s, None, 1)


def test_reduce_max_nan_propagates():
    x = np.array([[1, np.nan, 3], [4, 5, 6]], dtype=np.float32)
    node, inputs, const = make("ReduceMax", x, [1], 0)
    got = run_node(CPU, node, inputs, opset=18, const_inputs=const)[0]
    assert np.isnan(got[0]) and got[1] == 6
    assert bits_equal(got, run_node(GPU, node, inputs, opset=18, const_inputs=const)[0])


def test_reduce_max_nan_propagates_row_path():
    # innermost dim kept: the CPU's row-of-accumulators path
    x = np.array([[1, 2], [np.nan, 0], [5, 1]], dtype=np.float32)
    node, inputs, const = make("ReduceMax", x, [0], 0)
    got = run_node(CPU, node, inputs, opset=18, const_inputs=const)[0]
    assert np.isnan(got[0]) and got[1] == 2
    assert bits_equal(got, run_node(GPU, node, inputs, opset=18, const_inputs=const)[0])
    x[0, 0] = np.nan
    x[1, 0] = 7
    got = run_node(CPU, node, inputs, opset=18, const_inputs=const)[0]
    assert np.isnan(got[0])


def test_reduce_sum_order_is_ascending():
    # 1e8 + 1 + 1 ... in ascending order loses each 1: the result shows the order.
    x = np.array([1e8, 1, 1, 1, 1, -1e8], dtype=np.float32)
    node, inputs, const = make("ReduceSum", x, [0], 0)
    got = run_node(CPU, node, inputs, opset=18, const_inputs=const)[0]
    acc = np.float32(0)
    for v in x:
        acc = np.float32(acc + v)
    assert got == acc


def test_reduce_mean_is_sum_over_count():
    x = RNG.standard_normal((7, 3)).astype(np.float32)
    node, inputs, const = make("ReduceMean", x, [0], 0)
    got = run_node(CPU, node, inputs, opset=18, const_inputs=const)[0]
    want = np.empty(3, np.float32)
    for j in range(3):
        acc = np.float32(0)
        for i in range(7):
            acc = np.float32(acc + x[i, j])
        want[j] = acc / np.float32(7)
    assert bits_equal(got, want)


def test_cuda_declines_runtime_axes_cpu_reads_them():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    node, inputs, _ = make("ReduceSum", x, [1], 1, opset=18, const_axes=False)
    m = supports(GPU, node, inputs, opset=18)
    assert not m.supported and "axes" in m.reason
    assert supports(CPU, node, inputs, opset=18).supported
    # shape inference cannot see a non-constant axes input: give the output shape
    got = run_node(CPU, node, inputs, opset=18, out_shapes=[(2, 1, 4)], out_dtypes=[np.float32])[0]
    np.testing.assert_allclose(got, x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    with pytest.raises(KernelError):
        run_node(GPU, node, inputs, opset=18, out_shapes=[(2, 1, 4)], out_dtypes=[np.float32])


def test_reduce_mean_declines_int():
    x = np.ones((2, 2), np.int64)
    node, inputs, const = make("ReduceMean", x, [0], 1)
    assert not supports(CPU, node, inputs, opset=18, const_inputs=const).supported


@st.composite
def reduce_case(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axes = draw(st.none() | st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                                     unique_by=lambda a: a % rank))
    keepdims = draw(st.integers(0, 1))
    op = draw(st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax"]))
    seed = draw(st.integers(0, 2**16))
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * np.float32(100)
    return op, x, axes, keepdims


@settings(max_examples=12, deadline=None)
@given(reduce_case())
def test_reduce_cpu_cuda_bitwise(case):
    op, x, axes, keepdims = case
    node, inputs, const = make(op, x, axes, keepdims)
    a = run_node(CPU, node, inputs, opset=18, const_inputs=const)[0]
    b = run_node(GPU, node, inputs, opset=18, const_inputs=const)[0]
    assert bits_equal(a, b)
    want = reference(node, inputs, 18)
    np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4)


_SEQ64 = {  # the documented per-element step, in float64, ascending order
    "ReduceSum": (0.0, lambda a, v: a + v),
    "ReduceProd": (1.0, lambda a, v: a * v), "ReduceL1": (0.0, lambda a, v: a + abs(v)),
    "ReduceSumSquare": (0.0, lambda a, v: a + v * v),
    "ReduceMax": (-np.inf, lambda a, v: v if (v > a or v != v) else a),
    "ReduceMin": (np.inf, lambda a, v: v if (v < a or v != v) else a),
}


@pytest.mark.parametrize("op", sorted(_SEQ64))
@pytest.mark.parametrize("axes", [[1], [0, 2], None])
def test_reduce_float64_is_the_sequential_float64_fold_on_both_targets(op, axes):
    x = RNG.standard_normal((3, 5, 4)) * 1e3
    x[1, 2, 3] = 1e17                                   # a large term: the order shows in the sum
    node, inputs, const = make(op, x, axes, keepdims=0)
    got = run_node(CPU, node, inputs, opset=18, const_inputs=const)[0]
    assert bits_equal(got, run_node(GPU, node, inputs, opset=18, const_inputs=const)[0])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, reference(node, inputs, 18), rtol=1e-12)   # numpy sums pairwise
    ax = tuple(range(3)) if axes is None else tuple(axes)
    moved = np.moveaxis(x, ax, tuple(range(3 - len(ax), 3))).reshape(-1, int(np.prod([x.shape[a] for a in ax])))
    init, step = _SEQ64[op]
    want = []
    for row in moved:
        acc = np.float64(init)
        for v in row:
            acc = np.float64(step(acc, v))
        want.append(acc)
    assert bits_equal(got.reshape(-1), np.array(want, np.float64))
