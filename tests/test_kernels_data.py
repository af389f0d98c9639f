"""Data-movement and shape kernels (kernels/data.py): vs numpy / onnx's reference
evaluator, and CPU vs CUDA-simulator bit equality."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from hetero_explore.ir.errors import ExecutionError
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.kernels.data import slice_params
from support.bits import bits_equal
from support.harness import reference as support_reference, run_both as support_run_both, make_context, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()

DTYPES = [np.float32, np.int64, np.int32, np.bool_]


def sample(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-100, 100, size=shape).astype(dtype)




def run_both(node, inputs, opset=17, const=(), out_shapes=None, out_dtypes=None, cuda=True):
    """Run on the CPU (and the CUDA simulator): outputs must be bitwise equal; returns CPU's."""
    return support_run_both(node, inputs, opset, const, cuda=cuda, out_shapes=out_shapes, out_dtypes=out_dtypes)


def reference(node, inputs, opset=17):
    return support_reference(node, inputs, opset)


def assert_same(got, want):
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want)


# --- copies ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES + [np.float16, np.float64, np.uint8])
@pytest.mark.parametrize("shape,target,allowzero", [
    ((2, 3, 4), [4, -1], 0), ((2, 3, 4), [0, -1], 0), ((2, 3, 4), [-1], 0), ((6,), [1, 2, 3], 0),
    ((1,), [], 0), ((0, 3), [3, 0], 1), ((4,), [2, 2], 1)])
def test_reshape(dtype, shape, target, allowzero):
    x = sample(shape, dtype)
    node = helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=allowzero)
    s = np.asarray(target, np.int64)
    got = run_both(node, [x, s], opset=14, const=(1,))[0]
    assert_same(got, reference(node, [x, s], 14)[0])


def test_reshape_never_aliases():
    x = sample((2, 3))
    ctx = make_context(helper.make_node("Reshape", ["x", "s"], ["y"]), [x, np.array([3, 2])],
                       const_inputs=(1,))
    for p in (CPU, GPU):
        k = p.get_kernel(ctx)
        assert k.may_alias_input is False
    xb = CPU.copy_from_host(x)
    yb = CPU.allocate((3, 2), np.float32)
    k = CPU.get_kernel(ctx)
    k.run([xb, None], [yb])
    assert not np.shares_memory(xb.data, yb.data)
    assert np.array_equal(yb.data, x.reshape(3, 2))
    CPU.free(xb)
    CPU.free(yb)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
@pytest.mark.parametrize("dtype", [np.float32, np.bool_])
def test_flatten(axis, dtype):
    x = sample((2, 3, 1, 4), dtype)
    node = helper.make_node("Flatten", ["x"], ["y"], axis=axis)
    assert_same(run_both(node, [x])[0], reference(node, [x])[0])


@pytest.mark.parametrize("axes", [None, [1], [-1], [1, -1]])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_squeeze(axes, dtype):
    x = sample((2, 1, 3, 1), dtype)
    ins = [x] if axes is None else [x, np.asarray(axes, np.int64)]
    node = helper.make_node("Squeeze", ["x"] + (["axes"] if axes is not None else []), ["y"])
    got = run_both(node, ins, opset=13, const=(1,) if axes is not None else ())[0]
    assert_same(got, np.squeeze(x, axis=None if axes is None else tuple(axes)))


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [3, 0], [-1, -4]])
def test_unsqueeze(axes):
    x = sample((2, 3), np.int32)
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["y"])
    ins = [x, np.asarray(axes, np.int64)]
    got = run_both(node, ins, opset=13, const=(1,))[0]
    assert_same(got, reference(node, ins, 13)[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3)])
def test_identity(dtype, shape):
    x = sample(shape, dtype)
    node = helper.make_node("Identity", ["x"], ["y"])
    assert_same(run_both(node, [x])[0], x)


def test_copies_preserve_nan_payloads():
    x = np.array([0x7FC00001, 0xFFC12345, 0x7F800001, 0x00000001], np.uint32).view(np.float32)
    for node, ins, const in [
        (helper.make_node("Identity", ["x"], ["y"]), [x], ()),
        (helper.make_node("Transpose", ["x"], ["y"]), [x.reshape(2, 2)], ()),
        (helper.make_node("Gather", ["x", "i"], ["y"]), [x, np.array([3, 2, 1, 0])], ()),
    ]:
        got = run_both(node, ins, const=const)[0]
        want = np.asarray(reference(node, ins)[0])
        assert bits_equal(got, want)


# --- Transpose, Expand, Concat, Split ------------------------------------------
@pytest.mark.parametrize("perm", [None] + [list(p) for p in itertools.permutations(range(3))])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_transpose(perm, dtype):
    x = sample((2, 3, 4), dtype)
    node = helper.make_node("Transpose", ["x"], ["y"], **({} if perm is None else {"perm": perm}))
    assert_same(run_both(node, [x])[0], np.transpose(x, perm))


@pytest.mark.parametrize("shape", [(), (5,), (0, 3), (1, 2, 1, 3)])
def test_transpose_ranks(shape):
    x = sample(shape)
    node = helper.make_node("Transpose", ["x"], ["y"])
    assert_same(run_both(node, [x])[0], np.transpose(x))


def test_transpose_bad_perm_declined():
    x = sample((2, 3))
    node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0])
    ctx = make_context(node, [x], out_shapes=[(2, 2)], out_dtypes=[np.float32])
    m = CPU.supports(ctx)
    assert not m.supported and "perm" in m.reason


@pytest.mark.parametrize("shape,target", [((3, 1), (2, 3, 4)), ((1,), ()), ((1,), (1,)),
                                          ((2, 1, 3), (2, 4, 3)), ((3,), (2, 1)),
                                          ((1, 1), (0, 5))])
@pytest.mark.parametrize("dtype", [np.float32, np.bool_])
def test_expand(shape, target, dtype):
    x = sample(shape, dtype)
    s = np.asarray(target, np.int64)
    node = helper.make_node("Expand", ["x", "s"], ["y"])
    got = run_both(node, [x, s], const=(1,))[0]
    assert_same(got, reference(node, [x, s])[0])


def test_expand_needs_no_constant_on_cuda():
    """Expand's shape input is reflected in the inferred output shape; CUDA runs it
    even when the shape is a run-time value."""
    x = sample((3, 1))
    s = np.array([2, 3, 4], np.int64)
    node = helper.make_node("Expand", ["x", "s"], ["y"])
    got = run_both(node, [x, s], out_shapes=[(2, 3, 4)], out_dtypes=[np.float32])[0]
    assert_same(got, np.broadcast_to(x, (2, 3, 4)))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_concat(axis, dtype):
    base = (2, 3, 4)
    parts = []
    for k, n in enumerate([1, 0, 2]):
        s = list(base)
        s[axis] = n
        parts.append(sample(tuple(s), dtype, seed=k))
    node = helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=axis)
    assert_same(run_both(node, parts)[0], np.concatenate(parts, axis=axis))


def test_concat_single_input_and_1d():
    x = sample((5,), np.int64)
    node = helper.make_node("Concat", ["a"], ["y"], axis=0)
    assert_same(run_both(node, [x])[0], x)
    node = helper.make_node("Concat", ["a", "b"], ["y"], axis=-1)
    y = sample((0,), np.int64)
    assert_same(run_both(node, [x, y])[0], x)


@pytest.mark.parametrize("axis,split", [(0, [1, 1]), (1, [2, 0, 1]), (-1, [1, 3]), (1, None),
                                        (-2, None)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_split_opset13(axis, split, dtype):
    x = sample((2, 3, 4), dtype)
    nout = 2 if split is None else len(split)
    if split is None and x.shape[axis] % nout:
        nout = x.shape[axis]
    outs = [f"y{i}" for i in range(nout)]
    ins = [x] if split is None else [x, np.asarray(split, np.int64)]
    node = helper.make_node("Split", ["x"] + (["s"] if split is not None else []), outs, axis=axis)
    got = run_both(node, ins, opset=13, const=(1,) if split is not None else ())
    want = reference(node, ins, 13)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("n,axis", [(2, 0), (3, 1), (4, -1), (3, -1)])
def test_split_opset18_num_outputs(n, axis):
    x = sample((2, 5, 7), np.float32)
    outs = [f"y{i}" for i in range(n)]
    node = helper.make_node("Split", ["x"], outs, axis=axis, num_outputs=n)
    got = run_both(node, [x], opset=18)
    want = reference(node, [x], 18)
    for g, w in zip(got, want):
        assert_same(g, w)


# --- Slice -------------------------------------------------------------------
SLICES = [
    # starts, ends, axes, steps
    ([0, 1], [2, 3], [0, 1], [1, 1]),
    ([1], [-1], None, None),
    ([-1], [-1000], [1], [-1]),
    ([0, 10], [3, -100], [0, 2], [1, -2]),
    ([100], [200], [2], [1]),
    ([-100], [100], [-1], [3]),
    ([2, 0], [0, 4], [-3, -1], [-1, 2]),
    ([0], [9223372036854775807], [0], [1]),
    ([3], [-9223372036854775808], [2], [-1]),
]


def _slice_inputs(x, starts, ends, axes, steps, dtype=np.int64):
    ins = [x, np.asarray(starts, dtype), np.asarray(ends, dtype)]
    names = ["x", "starts", "ends"]
    if axes is not None or steps is not None:
        ins.append(None if axes is None else np.asarray(axes, dtype))
        names.append("axes" if axes is not None else "")
    if steps is not None:
        ins.append(np.asarray(steps, dtype))
        names.append("steps")
    return names, ins


def _np_slice(x, starts, ends, axes, steps):
    idx = [slice(None)] * x.ndim
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for s, e, a, st in zip(starts, ends, axes, steps):
        idx[a] = slice(s, e, st)
    return x[tuple(idx)]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_slice_constant(starts, ends, axes, steps, index_dtype):
    if index_dtype == np.int32 and any(abs(v) > 2**31 for v in starts + ends):
        return
    x = sample((4, 5, 6), np.float32)
    names, ins = _slice_inputs(x, starts, ends, axes, steps, index_dtype)
    node = helper.make_node("Slice", names, ["y"])
    const = tuple(range(1, len(ins)))
    got = run_both(node, ins, opset=13, const=const)[0]
    assert_same(got, _np_slice(x, starts, ends, axes, steps))
    assert_same(got, reference(node, ins, 13)[0])
    n = len(starts)
    assert_same(got, spec_slice(x, starts, ends, list(range(n)) if axes is None else axes,
                                [1] * n if steps is None else steps))


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice_runtime_params_cpu(starts, ends, axes, steps):
    """The CPU kernel reads non-constant starts/ends/axes/steps at run time."""
    x = sample((4, 5, 6), np.int64)
    names, ins = _slice_inputs(x, starts, ends, axes, steps)
    want = _np_slice(x, starts, ends, axes, steps)
    node = helper.make_node("Slice", names, ["y"])
    got = run_node(CPU, node, ins, opset=13, out_shapes=[want.shape], out_dtypes=[want.dtype])[0]
    assert_same(got, want)


def test_slice_cuda_declines_runtime_starts():
    x = sample((4, 5))
    names, ins = _slice_inputs(x, [1], [3], [0], [1])
    node = helper.make_node("Slice", names, ["y"])
    ctx = make_context(node, ins, 13, const_inputs=(2, 3, 4), out_shapes=[(2, 5)],
                       out_dtypes=[np.float32])
    m = GPU.supports(ctx)
    assert not m.supported and "Slice 'starts' must be a constant on cuda" in m.reason
    assert CPU.supports(ctx).supported
    ctx = make_context(node, ins, 13, const_inputs=(1, 3, 4), out_shapes=[(2, 5)],
                       out_dtypes=[np.float32])  # ends need not be constant
    assert GPU.supports(ctx).supported
    got = run_both(node, ins, opset=13, const=(1, 3, 4), out_shapes=[(2, 5)],
                   out_dtypes=[np.float32])[0]
    assert_same(got, x[1:3])


def test_slice_runtime_shape_mismatch_raises():
    x = sample((4, 5))
    names, ins = _slice_inputs(x, [1], [3], [0], [1])
    node = helper.make_node("Slice", names, ["y"])
    with pytest.raises(ExecutionError, match="planned"):
        run_node(CPU, node, ins, opset=13, out_shapes=[(3, 5)], out_dtypes=[np.float32])


def spec_slice(x, starts, ends, axes, steps):
    """Slice written from the ONNX spec text, one index at a time (independent of
    data.slice_params): starts clamped to [0, dim] (step > 0) or [0, dim-1] (step < 0),
    ends to [0, dim] or [-1, dim-1]."""
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = a + x.ndim if a < 0 else a
        dim = x.shape[a]
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        idx = []
        i = s
        while (st > 0 and i < e) or (st < 0 and i > e):
            idx.append(i)
            i += st
        x = np.take(x, np.asarray(idx, np.int64), axis=a)
    return x


def test_slice_negative_step_start_before_the_beginning():
    """starts=-2 on a length-1 axis with a negative step clamps to 0 (the spec, ONNX
    shape inference and onnxruntime agree; onnx's reference evaluator, which uses
    numpy slicing, returns an empty tensor)."""
    x = np.array([5.0], np.float32)
    node = helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])
    ins = [x, np.array([-2]), np.array([-2]), np.array([0]), np.array([-2])]
    got = run_both(node, ins, opset=13, const=(1, 2, 3, 4))[0]
    assert_same(got, x)
    assert_same(got, spec_slice(x, [-2], [-2], [0], [-2]))


def test_slice_params_zero_step_rejected():
    with pytest.raises(ValueError):
        slice_params((3,), [0], [3], [0], [0])


# --- Gather family -----------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("idx", [[0], [-1, 0, 2], [[1, -2], [0, 0]], 1, -3, []])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_gather(axis, idx, idx_dtype):
    x = sample((3, 4, 3), np.float32)
    i = np.asarray(idx, idx_dtype).reshape(np.shape(idx))
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)
    got = run_both(node, [x, i])[0]
    assert_same(got, np.take(x, i.astype(np.int64), axis=axis))


@pytest.mark.parametrize("dtype", [np.int64, np.bool_, np.int32])
def test_gather_dtypes(dtype):
    x = sample((5, 2), dtype)
    i = np.array([4, -5, 2], np.int32)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    assert_same(run_both(node, [x, i])[0], np.take(x, i, axis=0))


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
def test_gather_out_of_range_raises(provider):
    """Every target raises the same typed error (CUDA checks in the kernel, issue 13)."""
    x = sample((3, 4))
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    for bad, v in (([0, 3], 3), ([-4, 0], -4), ([2 ** 62], 2 ** 62)):
        with pytest.raises(ExecutionError, match=f"Gather.*index {v} is out of range"):
            run_node(provider, node, [x, np.array(bad)])


def test_gather_float_indices_declined():
    x = sample((3, 2))
    assert not supports(CPU, helper.make_node("Gather", ["x", "i"], ["y"]),
                        [x, np.array([0.0], np.float32)]).supported


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_gather_elements(axis, idx_dtype):
    x = sample((3, 4), np.int64)
    rng = np.random.default_rng(1)
    n = x.shape[axis]
    ishape = (2, 4) if axis in (0, -2) else (3, 5)
    i = rng.integers(-n, n, size=ishape).astype(idx_dtype)
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)
    got = run_both(node, [x, i])[0]
    assert_same(got, np.take_along_axis(x, np.where(i < 0, i + n, i).astype(np.int64), axis=axis))


def test_gather_elements_smaller_indices_and_declines():
    x = sample((3, 4), np.float32)
    i = np.array([[2, -1], [0, 1]])
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)
    assert_same(run_both(node, [x, i])[0], np.take_along_axis(x[:, :2], i % 3, axis=0))
    ctx = make_context(node, [x, np.zeros((2, 5), np.int64)], out_shapes=[(2, 5)],
                       out_dtypes=[np.float32])
    m = CPU.supports(ctx)
    assert not m.supported and "exceed" in m.reason


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
def test_gather_elements_out_of_range_raises(provider):
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)
    for bad, v in (([[0, 2], [1, 0]], 2), ([[0, 1], [-3, 0]], -3)):
        with pytest.raises(ExecutionError, match=f"index {v} is out of range"):
            run_node(provider, node, [sample((2, 2)), np.array(bad)])


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
def test_gathernd_out_of_range_raises(provider):
    node = helper.make_node("GatherND", ["x", "i"], ["y"])
    x = sample((3, 4))
    for bad, v in (([[2, 9]], 9), ([[0, 1], [3, 0]], 3), ([[-4, 0]], -4)):
        with pytest.raises(ExecutionError, match=f"index {v} is out of range"):
            run_node(provider, node, [x, np.array(bad)])


@pytest.mark.parametrize("dshape,ishape,b", [((2, 2), (2, 2), 0), ((2, 2), (2, 1), 0),
                                             ((2, 2, 2), (2, 2), 1), ((2, 3, 4), (2, 5, 2), 1),
                                             ((3, 4, 2), (3, 4, 1), 2), ((3, 4), (5, 0), 0),
                                             ((2, 3, 4), (3,), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_gathernd(dshape, ishape, b, dtype):
    x = sample(dshape, dtype)
    rng = np.random.default_rng(2)
    m = ishape[-1]
    i = np.zeros(ishape, np.int64)
    for j in range(m):
        n = dshape[b + j]
        i[..., j] = rng.integers(-n, n, size=ishape[:-1])
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=b)
    got = run_both(node, [x, i])[0]
    assert_same(got, np_gathernd(x, i, b))
    if i.size:  # (onnx's reference cannot do an empty index tuple)
        assert_same(got, reference(node, [x, i])[0])


def np_gathernd(x, i, b):
    m = i.shape[-1]
    out = np.empty(i.shape[:-1] + x.shape[b + m:], x.dtype)
    for pos in np.ndindex(*i.shape[:-1]):
        out[pos] = x[pos[:b] + tuple(int(v) for v in i[pos])]
    return out


# --- host-only shape ops -----------------------------------------------------
@pytest.mark.parametrize("start,end", [(None, None), (1, None), (None, -1), (-2, 3), (-10, 10),
                                       (2, 1)])
def test_shape(start, end):
    x = sample((2, 3, 4), np.bool_)
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    node = helper.make_node("Shape", ["x"], ["y"], **attrs)
    got = run_node(CPU, node, [x], opset=15)[0]
    assert_same(got, reference(node, [x], 15)[0])
    assert not supports(GPU, node, [x], opset=15).supported


@pytest.mark.parametrize("shape", [(), (0, 3), (2, 3, 4)])
def test_size(shape):
    x = sample(shape, np.int32)
    node = helper.make_node("Size", ["x"], ["y"])
    assert_same(run_node(CPU, node, [x])[0], np.array(x.size, np.int64))
    assert not supports(GPU, node, [x]).supported


@pytest.mark.parametrize("value", [None, np.array([7], np.int64), np.array([1.5], np.float32),
                                   np.array([True])])
@pytest.mark.parametrize("shape", [[2, 3], [0], []])
def test_constant_of_shape(value, shape):
    s = np.asarray(shape, np.int64)
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], **attrs)
    got = run_node(CPU, node, [s], const_inputs=(0,))[0]
    assert_same(got, reference(node, [s])[0])
    ctx = make_context(node, [s], const_inputs=(0,))
    assert not GPU.supports(ctx).supported


@pytest.mark.parametrize("attrs", [
    {"value": numpy_helper.from_array(np.arange(6, dtype=np.int32).reshape(2, 3))},
    {"value_float": 2.5}, {"value_floats": [1.0, -2.0]}, {"value_int": -3}, {"value_ints": [4, 5]},
    {"value": numpy_helper.from_array(np.array([True, False]))}])
def test_constant(attrs):
    node = helper.make_node("Constant", [], ["y"], **attrs)
    got = run_node(CPU, node, [])[0]
    assert_same(got, reference(node, [])[0])


def test_constant_string_declined():
    node = helper.make_node("Constant", [], ["y"], value_string="hi")
    ctx = make_context(node, [], out_shapes=[()], out_dtypes=[np.dtype(object)])
    m = CPU.supports(ctx)
    assert not m.supported and "string" in m.reason


@pytest.mark.parametrize("start,limit,delta,dtype", [(0, 5, 1, np.int64), (10, 4, -2, np.int32),
                                                     (3, 3, 1, np.int64), (1.0, 2.0, 0.3, np.float32),
                                                     (5.0, -1.0, -1.5, np.float32),
                                                     (0.5, 0.5, 1.0, np.float64)])
def test_range(start, limit, delta, dtype):
    ins = [np.array(start, dtype), np.array(limit, dtype), np.array(delta, dtype)]
    node = helper.make_node("Range", ["a", "b", "c"], ["y"])
    got = run_node(CPU, node, ins, const_inputs=(0, 1, 2))[0]
    want = reference(node, ins)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
    ctx = make_context(node, ins, const_inputs=(0, 1, 2))
    assert not GPU.supports(ctx).supported


def test_cuda_op_table():
    cuda_ops = GPU.supported_op_types()
    for op in ("Transpose", "Concat", "Split", "Slice", "Gather", "Reshape", "Squeeze", "Unsqueeze",
               "Flatten", "Identity", "Expand", "GatherElements", "GatherND"):
        assert op in cuda_ops
    for op in ("Shape", "Size", "ConstantOfShape", "Range", "Constant"):
        assert op not in cuda_ops and op in CPU.supported_op_types()


def test_opset_range():
    x = sample((2, 3))
    node = helper.make_node("Transpose", ["x"], ["y"])
    assert supports(CPU, node, [x], opset=13).supported
    assert supports(CPU, node, [x], opset=21).supported
    assert supports(CPU, node, [x], opset=1).supported   # Transpose-1: the same semantics
    # Concat-1's axis defaults to 1 (from 4 it is required): not claimed
    concat = helper.make_node("Concat", ["x", "z"], ["y"], axis=0)
    assert supports(CPU, concat, [x, x], opset=4).supported
    assert not supports(CPU, concat, [x, x], opset=3).supported


# --- CPU vs CUDA simulator: bitwise, random tiny shapes ----------------------
shapes = st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple)


def _random_bits(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32).view(np.float32)


@settings(max_examples=15, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), data=st.data())
def test_cpu_cuda_bitwise_movement(shape, seed, data):
    x = _random_bits(shape, seed)  # arbitrary bit patterns, NaN payloads included
    rank = len(shape)
    op = data.draw(st.sampled_from(["Transpose", "Slice", "Concat", "Split", "Expand", "Gather",
                                    "GatherElements", "Flatten"]))
    const = ()
    if op == "Transpose":
        perm = data.draw(st.permutations(range(rank)))
        node, ins = helper.make_node("Transpose", ["x"], ["y"], perm=list(perm)), [x]
    elif op == "Slice":
        a = data.draw(st.integers(-rank, rank - 1))
        s, e = data.draw(st.integers(-4, 4)), data.draw(st.integers(-5, 5))
        step = data.draw(st.sampled_from([-2, -1, 1, 2]))
        node = helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])
        ins = [x, np.array([s]), np.array([e]), np.array([a]), np.array([step])]
        const = (1, 2, 3, 4)
    elif op == "Concat":
        a = data.draw(st.integers(-rank, rank - 1))
        other = list(shape)
        other[a] = data.draw(st.integers(0, 2))
        node = helper.make_node("Concat", ["x", "z"], ["y"], axis=a)
        ins = [x, _random_bits(tuple(other), seed + 1)]
    elif op == "Split":
        a = data.draw(st.integers(-rank, rank - 1))
        n = shape[a]
        cut = data.draw(st.integers(0, n))
        node = helper.make_node("Split", ["x", "sp"], ["y0", "y1"], axis=a)
        ins, const = [x, np.array([cut, n - cut])], (1,)
    elif op == "Expand":
        small = tuple(1 if data.draw(st.booleans()) else d for d in shape)
        lead = data.draw(st.integers(0, 2))
        node = helper.make_node("Expand", ["x", "s"], ["y"])
        ins = [_random_bits(small, seed), np.array((2,) * lead + shape)]
        const = (1,)
    elif op == "Gather":
        a = data.draw(st.integers(-rank, rank - 1))
        n = shape[a]
        if n == 0:
            return
        idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), max_size=4)), np.int64)
        node, ins = helper.make_node("Gather", ["x", "i"], ["y"], axis=a), [x, idx]
    elif op == "GatherElements":
        a = data.draw(st.integers(-rank, rank - 1))
        n = shape[a]
        if n == 0:
            return
        rng = np.random.default_rng(seed)
        idx = rng.integers(-n, n, size=shape).astype(np.int32)
        node, ins = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=a), [x, idx]
    else:
        a = data.draw(st.integers(-rank, rank))
        node, ins = helper.make_node("Flatten", ["x"], ["y"], axis=a), [x]
    cpu = run_both(node, ins, opset=17, const=const)  # asserts CPU/CUDA bit equality
    if op == "Flatten":  # (onnx's reference cannot flatten (0,) at axis 1)
        a = a + rank if a < 0 else a
        want = [x.reshape(int(np.prod(shape[:a])), int(np.prod(shape[a:])))]
    elif op == "Slice":  # (onnx's reference clamps negative-step starts like numpy, not the spec)
        want = [spec_slice(x, [s], [e], [a], [step])]
    else:
        want = reference(node, ins, 17)
    for g, w in zip(cpu, want):  # (the reference's Expand multiplies by 1: compare values)
        w = np.asarray(w)
        assert g.shape == w.shape and np.array_equal(g, w, equal_nan=True)


# --- TensorScatter ---------------------------------------------------------------------
def _tensor_scatter_spec(past, update, widx, axis, circular):
    """The schema's pseudocode, verbatim."""
    present = past.copy()
    L, S = past.shape[axis], update.shape[axis]
    for prefix in np.ndindex(past.shape[:axis]):
        for s in range(S):
            c = (0 if widx is None else int(widx[prefix[0]])) + s
            c = c % L if circular else c
            present[prefix + (c,)] = update[prefix + (s,)]
    return present


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 6), st.integers(0, 6), st.integers(1, 3),
       st.booleans(), st.booleans(), st.integers(0, 2 ** 31))
def test_tensor_scatter_matches_the_schema_pseudocode(B, H, L, S, D, circular, with_w, seed):
    S = min(S, L)
    rng = np.random.default_rng(seed)
    past, update = sample((B, H, L, D), seed=seed), sample((B, H, S, D), seed=seed + 1)
    hi = (3 * L) if circular else (L - S)
    widx = rng.integers(0, hi + 1, size=B).astype(np.int64) if with_w else None
    node = helper.make_node("TensorScatter", ["p", "u"] + (["w"] if with_w else []), ["y"],
                            mode="circular" if circular else "linear")
    ins = [past, update] + ([widx] if with_w else [])
    want = _tensor_scatter_spec(past, update, widx, 2, circular)
    got_c, = run_node(CPU, node, ins, opset=24)
    got_g, = run_node(GPU, node, ins, opset=24)
    assert bits_equal(got_c, want) and bits_equal(got_g, want)


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
@pytest.mark.parametrize("widx", [[2, 0], [0, -1]])
def test_tensor_scatter_write_index_that_does_not_fit_raises(provider, widx):
    node = helper.make_node("TensorScatter", ["p", "u", "w"], ["y"], axis=1)
    with pytest.raises(ExecutionError, match=r"write_indices .* do not fit"):
        run_node(provider, node, [sample((2, 4, 3)), sample((2, 3, 3)), np.array(widx, np.int64)], opset=24)
