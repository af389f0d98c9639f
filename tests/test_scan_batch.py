"""Scan batching (hetero_explore.load.scan_batch): a Scan with independent iterations runs as one
pass over its stacked scan inputs, bitwise the Scan on the CPU and the CUDA simulator; Scans
that carry state or hold other ops stay as they are."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import pytest  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.execution.executor import execute_reference  # noqa: E402
from hetero_explore.load.optimize import node_notes  # noqa: E402
from hetero_explore.providers import cpu, cuda  # noqa: E402

F = TensorProto.FLOAT


def _vi(name, shape, et=F):
    return helper.make_tensor_value_info(name, et, shape)


def _scan_model(body_nodes, *, opset=17, state_shape=(6, 5), rows=(40, 5), body_inits=(), scan_attrs=None,
                body_out_extra=(), state_out=None, d_rank=2, row_shape=None):
    """X (state, passed through) and R (rows scanned) -> Scan -> (final state, stacked ``d``)."""
    body_in = [_vi("s_in", list(state_shape)), _vi("row", list(row_shape or rows[1:]))]
    body_out = [_vi(state_out or "s_out", list(state_shape)), _vi("d", None)] + list(body_out_extra)
    body = helper.make_graph(body_nodes, "body", body_in, body_out, list(body_inits))
    attrs = dict(num_scan_inputs=1, **(scan_attrs or {}))
    scan = helper.make_node("Scan", ["X", "R"], ["X_final", "D"], name="the_scan", body=body, **attrs)
    g = helper.make_graph([scan], "g", [_vi("X", list(state_shape)), _vi("R", list(rows))],
                          [_vi("X_final", list(state_shape)), _vi("D", [f"d{i}" for i in range(d_rank)])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _feeds(m, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for vi in m.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = (rng.standard_normal(shape) * 3).astype(np.float32)
    return out


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8)


def _check(m, batched: bool, providers=("cpu", "cuda")):
    """Load with and without the rewrite; the rewrite applied iff ``batched``; the outputs
    bitwise equal to the unrewritten graph's on every provider."""
    g = he.load_model(m)
    g0 = he.load_model(m, optimize=False)
    rules = [r["rule"] for r in g.optimizations]
    assert ("scan_batch" in rules) == batched, g.optimizations
    assert any(n.op_type == "Scan" for n in g.nodes) != batched
    feeds = _feeds(m)
    for prov in providers:
        p = cpu() if prov == "cpu" else cuda()
        got = execute_reference(g, p, feeds).outputs
        want = execute_reference(g0, p, feeds).outputs
        assert set(got) == set(want)
        for k in want:
            assert got[k].shape == want[k].shape and got[k].dtype == want[k].dtype, k
            assert np.array_equal(_bits(got[k]), _bits(want[k])), (prov, k)
    return g


def _distance_body(opset=17):
    """skl2onnx's kNN body: s_out = Identity(s_in); d = ReduceSumSquare(s_in - row, axes [1])."""
    red = (helper.make_node("ReduceSumSquare", ["diff", "ax"], ["d"], keepdims=0) if opset >= 18 else
           helper.make_node("ReduceSumSquare", ["diff"], ["d"], axes=[1], keepdims=0))
    return [helper.make_node("Identity", ["s_in"], ["s_out"]), helper.make_node("Sub", ["s_in", "row"], ["diff"]),
            red]


@pytest.mark.parametrize("opset", [11, 17, 18])
def test_distance_scan_is_batched_and_bitwise(opset):
    inits = [numpy_helper.from_array(np.array([1], np.int64), "ax")] if opset >= 18 else []
    g = _check(_scan_model(_distance_body(opset), opset=opset, body_inits=inits), batched=True)
    ops = [n.op_type for n in g.nodes]
    assert ops.count("Sub") == 1 and ops.count("ReduceSumSquare") == 1, ops
    rec = next(r for r in g.optimizations if r["rule"] == "scan_batch")
    assert rec["removed"] == ["the_scan"] and "40 iterations" in rec["detail"]
    notes = node_notes(g.optimizations)
    assert any(v == "batched from Scan the_scan" for v in notes.values())


def test_elementwise_chain_hoisted_nodes_and_body_constants():
    # rank alignment both ways (a rank-1 slice against a rank-2 state, a rank-0 constant), a node
    # that reads only the state (hoisted: computed once), Where/Abs/Max, a reduction over all axes
    c = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    body = [
        helper.make_node("Identity", ["s_in"], ["s_out"]),
        helper.make_node("Mul", ["s_in", "half"], ["hs"]),            # state only: hoisted
        helper.make_node("Sub", ["row", "hs"], ["a"]),
        helper.make_node("Abs", ["a"], ["b"]),
        helper.make_node("Max", ["b", "half", "hs"], ["mx"]),
        helper.make_node("Greater", ["mx", "s_in"], ["gt"]),
        helper.make_node("Where", ["gt", "mx", "row"], ["w"]),
        helper.make_node("ReduceMean", ["w"], ["d"], keepdims=1, axes=[0, 1]),
    ]
    _check(_scan_model(body, opset=13, body_inits=[c], d_rank=3), batched=True)


def test_scan_output_of_the_slice_itself_and_two_scan_outputs():
    body = [helper.make_node("Identity", ["s_in"], ["s_out"]),
            helper.make_node("Add", ["row", "s_in"], ["d"]),
            helper.make_node("Sigmoid", ["d"], ["e"])]
    m = _scan_model(body, body_out_extra=[_vi("e", None)], d_rank=3)
    scan = m.graph.node[0]
    scan.output.append("E")
    m.graph.output.append(_vi("E", ["e0", "e1", "e2"]))
    _check(m, batched=True)


@pytest.mark.parametrize("case", ["state_changes", "matmul", "reverse", "axis1", "slice_unused"])
def test_declined_scans_run_as_they_are(case):
    attrs = None
    body = _distance_body()
    state_out = None
    if case == "state_changes":     # a running sum: iteration i needs iteration i-1
        body = [helper.make_node("Add", ["s_in", "row"], ["s_out"]),
                helper.make_node("ReduceSum", ["s_out"], ["d"], keepdims=0)]
    elif case == "matmul":
        body = [helper.make_node("Identity", ["s_in"], ["s_out"]),
                helper.make_node("Unsqueeze", ["row", "ax0"], ["r2"]),
                helper.make_node("MatMul", ["r2", "s_in"], ["d"], )]
    elif case == "reverse":
        attrs = dict(scan_input_directions=[1])
    elif case == "axis1":
        attrs = dict(scan_input_axes=[1])
    elif case == "slice_unused":    # the scan output does not depend on the slice
        body = [helper.make_node("Identity", ["s_in"], ["s_out"]),
                helper.make_node("ReduceSumSquare", ["s_in"], ["d"], axes=[1], keepdims=0)]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "ax0")] if case == "matmul" else []
    rows = (5, 40) if case == "axis1" else (40, 5)     # axis 1: slices of 5 (the state is 6 x 5)
    state = (5, 6) if case == "matmul" else (6, 5)     # matmul: row (5,) -> (1, 5) @ (5, 6)
    d_rank = {"state_changes": 1, "matmul": 3}.get(case, 2)
    m = _scan_model(body, scan_attrs=attrs, body_inits=inits, rows=rows, state_shape=state, state_out=state_out,
                    d_rank=d_rank, row_shape=(5,))
    _check(m, batched=False, providers=("cpu",))


def test_knn_classifier_from_skl2onnx_is_batched_and_bitwise():
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.datasets import load_wine
    from sklearn.neighbors import KNeighborsClassifier
    from skl2onnx.common.data_types import FloatTensorType

    X, y = load_wine(return_X_y=True)
    X = X.astype(np.float32)
    clf = KNeighborsClassifier(n_neighbors=5).fit(X[:150], y[:150])
    m = skl2onnx.convert_sklearn(clf, initial_types=[("X", FloatTensorType([None, X.shape[1]]))],
                                 options={id(clf): {"zipmap": False}}, target_opset=17)
    g = he.load_model(m)
    g0 = he.load_model(m, optimize=False)
    assert "scan_batch" in [r["rule"] for r in g.optimizations]
    assert any(n.op_type == "Scan" for n in g0.nodes) and not any(n.op_type == "Scan" for n in g.nodes)
    feeds = {"X": X[150:]}
    for p in (cpu(),):     # the CUDA provider has no ArrayFeatureExtractor (the batched body: above)
        got = execute_reference(g, p, feeds).outputs
        want = execute_reference(g0, p, feeds).outputs
        for k in want:
            assert np.array_equal(_bits(got[k]), _bits(want[k])), k
    # and the labels are scikit-learn's
    np.testing.assert_array_equal(got["label"], clf.predict(X[150:]))


def test_batched_values_over_the_size_bound_are_declined(monkeypatch):
    from hetero_explore.load import scan_batch
    monkeypatch.setattr(scan_batch, "MAX_BATCHED_BYTES", 1000)   # the (40, 6, 5) float32 difference is 4,800 B
    _check(_scan_model(_distance_body()), batched=False, providers=("cpu",))


def test_model_file_is_untouched():
    m = _scan_model(_distance_body())
    before = m.SerializeToString()
    he.load_model(m)
    assert m.SerializeToString() == before
    onnx.checker.check_model(m)
