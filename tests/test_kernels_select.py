"""TopK, Hardmax, OneHot, ReverseSequence and Scatter (``kernels/select.py``): each case
runs on the CPU and on the CUDA simulator (bitwise equal) and is compared with
onnxruntime or numpy; bad lengths raise a typed error naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from hetero_explore.ir.errors import ExecutionError
from support.harness import supports
from test_kernels_movement import CPU, GPU, both, check_vs_ort, rnd

F = np.float32


def topk_ref(x, k, axis, largest):
    """numpy: stable sort on (value, index); NaN ranks highest."""
    xm = np.moveaxis(x, axis, -1)
    key = xm.astype(np.float64)
    key = np.where(np.isnan(key), np.inf, key)
    # lexicographic: primary value (descending when largest), secondary index ascending
    order = np.argsort(-key if largest else key, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(xm, order, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(order.astype(np.int64), -1, axis)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_topk_matches_ort_and_numpy(axis, largest):
    x = rnd(3, 5, 4, seed=axis + 3)
    x[0, :2, 0] = 0.5                                   # ties: the lower index comes first
    k = np.array([2], np.int64)
    n = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    v, i = check_vs_ort(n, [x, k], 11, const_inputs=(1,))
    rv, ri = topk_ref(x, 2, axis, largest)
    assert np.array_equal(v, rv) and np.array_equal(i, ri)


def test_topk_old_versions_and_ties():
    x = np.array([[1, 3, 3, 2, 3], [0, 0, 0, 0, 0]], F)
    n1 = helper.make_node("TopK", ["x"], ["v", "i"], k=3)           # TopK-1: k attribute
    v, i = both(n1, [x], 9)
    assert np.array_equal(i, [[1, 2, 4], [0, 1, 2]]) and np.array_equal(v, [[3, 3, 3], [0, 0, 0]])
    n10 = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    v10, i10 = both(n10, [x, np.array([3], np.int64)], 10, const_inputs=(1,))
    assert np.array_equal(i10, i) and np.array_equal(v10, v)


def test_topk_nan_ranks_highest_and_int_input():
    x = np.array([[1.0, np.nan, 5.0, np.nan]], F)
    n = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
    v, i = both(n, [x, np.array([3], np.int64)], 11, const_inputs=(1,))
    assert np.array_equal(i, [[1, 3, 2]])
    xi = np.array([[4, -2, 7, 7]], np.int32)
    n0 = helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=0)
    v, i = check_vs_ort(n0, [xi, np.array([4], np.int64)], 11, const_inputs=(1,))
    assert np.array_equal(i, [[1, 0, 2, 3]])


def test_topk_with_runtime_k():
    # a computed k: this module's TopK declines it (on CUDA nothing else claims it); on the
    # CPU the run-time-shape TopK (kernels/dynamic.py, k read when the node runs) takes it
    x = rnd(2, 3)
    n = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    s = supports(GPU, n, [x, np.array([2], np.int64)], 11)
    assert not s and "not a constant" in s.reason
    assert supports(CPU, n, [x, np.array([2], np.int64)], 11)
    assert supports(GPU, n, [x, np.array([2], np.int64)], 11, const_inputs=(1,))


@pytest.mark.parametrize("opset,axis,shape", [(11, 1, (2, 3, 4)), (11, 0, (2, 3)), (13, -1, (2, 3, 4)),
                                              (13, 1, (2, 3, 4))])
def test_hardmax_matches_ort(opset, axis, shape):
    x = rnd(*shape, seed=opset + axis)
    x.reshape(-1)[:2] = 3.0                                      # a tie: the first one wins
    check_vs_ort(helper.make_node("Hardmax", ["x"], ["y"], axis=axis), [x], opset)


def test_hardmax_old_coerces_to_2d():
    x = rnd(2, 3, 4, seed=9)
    (y,) = both(helper.make_node("Hardmax", ["x"], ["y"]), [x], 11)          # axis=1: rows of 12
    rows = x.reshape(2, 12)
    want = np.zeros_like(rows)
    want[np.arange(2), rows.argmax(1)] = 1
    assert np.array_equal(y, want.reshape(x.shape))
    xn = np.array([[1.0, np.nan, 7.0]], F)
    (yn,) = both(helper.make_node("Hardmax", ["x"], ["y"]), [xn], 13)
    assert np.array_equal(yn, [[0, 1, 0]])                                   # np.argmax: NaN wins


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onehot_matches_ort(axis):
    idx = np.array([[0, 3, -1], [-5, 2, 4]], np.int64)          # 4 and -5 (of depth 4): all off
    vals = np.array([-2.5, 7.0], F)
    n = helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=axis)
    (y,) = check_vs_ort(n, [idx, np.array([4], np.int64), vals], 11, const_inputs=(1,))
    assert (y == 7.0).sum() == 4


def test_onehot_float_indices_and_int_values():
    idx = np.array([0.7, 2.2, -1.5], F)                           # truncated: 0, 2, -1
    n = helper.make_node("OneHot", ["i", "d", "v"], ["y"])
    (y,) = both(n, [idx, np.array([3.0], F), np.array([0, 9], np.int32)], 11, const_inputs=(1,))
    assert np.array_equal(y, [[9, 0, 0], [0, 0, 9], [0, 0, 9]])


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence_matches_ort(batch_axis, time_axis):
    x = rnd(4, 3, 2, seed=batch_axis)
    # time_axis 0: T=4, B=3; time_axis 1: B=4, T=3 (lengths 0 and T included)
    lens = np.array([4, 1, 0], np.int64) if time_axis == 0 else np.array([3, 1, 2, 0], np.int64)
    n = helper.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=batch_axis, time_axis=time_axis)
    check_vs_ort(n, [x, lens], 10)


@pytest.mark.parametrize("prov", [CPU, GPU], ids=["cpu", "cuda"])
def test_reverse_sequence_bad_length_is_a_typed_error(prov):
    from support.harness import run_node
    x = rnd(3, 2)
    n = helper.make_node("ReverseSequence", ["x", "l"], ["y"], name="rev", batch_axis=1, time_axis=0)
    with pytest.raises(ExecutionError, match=r"rev.*sequence_lens \[4\]"):
        run_node(prov, n, [x, np.array([1, 4], np.int64)], opset=10)


def test_scatter_alias_of_scatter_elements():
    data = np.zeros((3, 3), F)
    idx = np.array([[1, 0, 2], [0, 2, 1]], np.int64)
    upd = rnd(2, 3, seed=4)
    n = helper.make_node("Scatter", ["d", "i", "u"], ["y"], axis=0)
    check_vs_ort(n, [data, idx, upd], 9)
    from support.harness import run_node
    bad = helper.make_node("Scatter", ["d", "i", "u"], ["y"], name="sc", axis=0)
    with pytest.raises(ExecutionError, match="sc"):
        run_node(CPU, bad, [data, np.array([[3, 0, 0], [0, 0, 0]], np.int64), upd], opset=9)


def test_all_claim_opsets_from_schema_history():
    from hetero_explore.kernels import select
    ops = {d.op_type for d in select.OPS}
    assert ops == {"TopK", "Hardmax", "OneHot", "ReverseSequence", "Scatter"}
    topk = [d for d in select.OPS if d.op_type == "TopK"]
    assert any(d.claims(24) for d in topk) and any(d.claims(1) for d in topk)
    assert not any(d.claims(25) and "bfloat16" in d.dtypes for d in topk)
