"""Detection post-processing over equal scores: NonMaxSuppression and TopK follow the spec's tie
rules -- among equal scores the lower index comes first (TopK's order; NMS's visiting order, so
the lower box index is kept when two equal-score boxes overlap) -- and so select what
onnxruntime selects, on all-equal and mostly-equal scores (random-weight detectors give many
exactly equal scores). ArgMax/ArgMin ties (first index, or the last with
``select_last_index``) too. TopK's CUDA kernel makes the same choices as the CPU's, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

from hetero_explore.execution.runtime import run_graph  # noqa: E402
from hetero_explore.load.loader import load_model  # noqa: E402
from hetero_explore.providers.cpu import NumbaCPUProvider  # noqa: E402
from support.harness import run_both  # noqa: E402

CPU = NumbaCPUProvider()
R = np.random.default_rng(11)


def _both(m, feeds):
    g = load_model(m, check=False)
    ours = run_graph(g, CPU, feeds)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return [ours[o.name] for o in m.graph.output], s.run(None, feeds)


def _boxes(B, N, center=False):
    xy = R.integers(0, 8, (B, N, 2)).astype(np.float32)
    wh = R.integers(1, 5, (B, N, 2)).astype(np.float32)
    if center:
        return np.concatenate([xy + wh / 2, wh], -1)
    return np.concatenate([xy, xy + wh], -1)[..., [1, 0, 3, 2]]   # y1, x1, y2, x2


def _nms(center, max_out, iou, sth):
    ins = ["boxes", "scores", "max", "iou"] + (["sth"] if sth is not None else [])
    inits = [numpy_helper.from_array(np.array([max_out], np.int64), "max"),
             numpy_helper.from_array(np.array([iou], np.float32), "iou")]
    if sth is not None:
        inits.append(numpy_helper.from_array(np.array([sth], np.float32), "sth"))
    n = helper.make_node("NonMaxSuppression", ins, ["sel"], center_point_box=center)
    g = helper.make_graph([n], "nms", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [None, None, 4]),
                                       helper.make_tensor_value_info("scores", TensorProto.FLOAT, [None, None, None])],
                          [helper.make_tensor_value_info("sel", TensorProto.INT64, [None, 3])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


SCORES = {
    "all_equal": lambda shape: np.full(shape, 0.5, np.float32),
    "mostly_equal": lambda shape: R.choice(np.array([0.5, 0.5, 0.5, 0.25, 0.75], np.float32), shape),
    "two_levels": lambda shape: R.choice(np.array([0.3, 0.9], np.float32), shape),
}


@pytest.mark.parametrize("scores", list(SCORES))
@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("limits", [(100, 0.5, None), (3, 0.4, 0.25), (50, 0.0, 0.5)],
                         ids=["loose", "max3-thr", "iou0-thr-equal-score"])
def test_nms_on_equal_scores_keeps_what_onnxruntime_keeps(scores, center, limits):
    B, C, N = 2, 3, 40
    boxes = _boxes(B, N, center=bool(center))
    s = SCORES[scores]((B, C, N))
    ours, theirs = _both(_nms(center, *limits), {"boxes": boxes, "scores": s})
    np.testing.assert_array_equal(ours[0], theirs[0])


def test_nms_tie_keeps_the_lower_box_index():
    boxes = np.array([[[0, 0, 2, 2], [0, 0, 2, 2], [0, 0, 2, 2.1]]], np.float32)
    s = np.full((1, 1, 3), 0.7, np.float32)
    ours, theirs = _both(_nms(0, 10, 0.5, None), {"boxes": boxes, "scores": s})
    assert ours[0].tolist() == theirs[0].tolist() == [[0, 0, 0]]


def _topk(shape, k, axis, largest, srt):
    n = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest, sorted=srt)
    g = helper.make_graph([n], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                          initializer=[numpy_helper.from_array(np.array([k], np.int64), "k")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("scores", list(SCORES))
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [-1, 0])
def test_topk_on_equal_values(scores, largest, axis):
    x = SCORES[scores]((6, 9))
    k = 4
    # sorted: the order itself (greater first, ties by the lower index) is onnxruntime's
    ours, theirs = _both(_topk(x.shape, k, axis, largest, 1), {"x": x})
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])
    # unsorted: the order is the implementation's, the selected elements are the same
    ours, theirs = _both(_topk(x.shape, k, axis, largest, 0), {"x": x})
    np.testing.assert_array_equal(np.sort(ours[1], axis=axis), np.sort(theirs[1], axis=axis))


@pytest.mark.parametrize("scores", ["all_equal", "mostly_equal"])
def test_topk_cuda_matches_cpu_on_ties(scores):
    x = SCORES[scores]((3, 8))
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=1, sorted=1)
    v, i = run_both(node, [x, np.array([5], np.int64)], opset=13, const_inputs=(1,))
    for r in range(3):   # ties: ascending indices within equal values
        for a in range(4):
            if v[r, a] == v[r, a + 1]:
                assert i[r, a] < i[r, a + 1]


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_argmin_ties(op, last):
    x = SCORES["mostly_equal"]((5, 7, 4))
    n = helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0, select_last_index=last)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    ours, theirs = _both(m, {"x": x})
    np.testing.assert_array_equal(ours[0], theirs[0])
