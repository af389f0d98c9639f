"""Shapes computed, not trusted (issue 11, part A): run-time output shapes, symbolic dims,
data-dependent ops, declared shapes that lie.

Oracles: onnxruntime (installed) for values, numpy where simpler; CPU vs the CUDA
simulator bitwise for what CUDA claims."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import hetero_explore as he
from hetero_explore import providers as P
from hetero_explore.ir.errors import HeteroExploreError, MemoryBudgetError, ShapeConflictError
from hetero_explore.runner.core import NodeExecutionError, RuntimeShapeError, ShapeMismatchError


def _model(nodes, ins, outs, inits=(), vi=(), opset=17):
    g = h.make_graph(nodes, "g", ins, outs, initializer=list(inits), value_info=list(vi))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, et, shape):
    return h.make_tensor_value_info(name, et, shape)


def _ort(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in m.graph.output], s.run(None, feeds)))


def _live(*provs):
    return [p.live_allocations for p in provs]


# -- the five wrong-answer and crash cases of the issue ------------------------------------
def _reshape_model(declared=(3, 2)):
    return _model([h.make_node("Reshape", ["x", "s"], ["y"])],
                  [_vi("x", T.FLOAT, [6]), _vi("s", T.INT64, [2])],
                  [_vi("y", T.FLOAT, list(declared) if declared else ["a", "b"])])


def test_reshape_by_a_run_time_shape_that_does_not_fit_is_a_typed_error():
    ex = he.explore(_reshape_model(), providers=["cpu"])
    feeds = {"x": np.arange(6, dtype=np.float32), "s": np.array([7, 7], np.int64)}
    with pytest.raises(RuntimeShapeError, match=r"Reshape.*cannot reshape 6 element\(s\).*\(7, 7\)") as e:
        ex.execute(inputs=feeds)
    assert e.value.node and e.value.op_type == "Reshape"


def test_reshape_by_a_run_time_shape_gives_the_run_time_shape():
    m = _reshape_model(declared=None)
    feeds = {"x": np.arange(6, dtype=np.float32), "s": np.array([2, 3], np.int64)}
    run = he.explore(m, providers=["cpu"]).execute(inputs=feeds)
    assert run["y"].shape == (2, 3) and np.array_equal(run["y"], _ort(m, feeds)["y"])
    # a declared shape that the run-time shape contradicts: the planned and the actual shape, named
    with pytest.raises(ShapeMismatchError, match=r"'y'.*float32 \(2, 3\).*float32 \(3, 2\)") as e:
        he.explore(_reshape_model(), providers=["cpu"]).execute(inputs=feeds)
    assert e.value.planned[0] == (3, 2) and e.value.actual[0] == (2, 3)


def _range_model(declared):
    return _model([h.make_node("Range", ["a", "b", "c"], ["y"])], [_vi(n, T.INT64, []) for n in "abc"],
                  [_vi("y", T.INT64, declared)])


def test_range_from_run_time_scalars():
    feeds = {"a": np.array(0, np.int64), "b": np.array(10, np.int64), "c": np.array(1, np.int64)}
    with pytest.raises(ShapeMismatchError, match=r"int64 \(10,\).*int64 \(5,\)"):
        he.explore(_range_model([5]), providers=["cpu"]).execute(inputs=feeds)
    m = _range_model(["n"])
    run = he.explore(m, providers=["cpu"]).execute(inputs=feeds)
    assert np.array_equal(run["y"], np.arange(10)) and np.array_equal(run["y"], _ort(m, feeds)["y"])
    assert run.value_shapes["y"][0] == (10,)


def _split_model(declared):
    return _model([h.make_node("Split", ["x", "s"], ["y1", "y2"])],
                  [_vi("x", T.FLOAT, [3]), _vi("s", T.INT64, [2])],
                  [_vi("y1", T.FLOAT, declared[0]), _vi("y2", T.FLOAT, declared[1])])


def test_split_by_run_time_sizes():
    feeds = {"x": np.arange(3, dtype=np.float32), "s": np.array([2, 1], np.int64)}
    with pytest.raises(ShapeMismatchError, match="'y1'"):
        he.explore(_split_model(([1], [2])), providers=["cpu"]).execute(inputs=feeds)
    m = _split_model((["p"], ["q"]))
    run = he.explore(m, providers=["cpu"]).execute(inputs=feeds)
    assert run["y1"].tolist() == [0, 1] and run["y2"].tolist() == [2]


def test_a_declared_output_larger_than_its_computation_is_rejected_at_load():
    m = _model([h.make_node("Relu", ["x"], ["y"])], [_vi("x", T.FLOAT, [4])], [_vi("y", T.FLOAT, [100000000])])
    with pytest.raises(ShapeConflictError, match=r"declared float\[100000000\].*float\[4\]"):
        he.load_model(m)


def test_a_declared_intermediate_dtype_that_lies_is_rejected_at_load():
    m = _model([h.make_node("Relu", ["x"], ["t"]), h.make_node("Neg", ["t"], ["y"])], [_vi("x", T.FLOAT, [4])],
               [_vi("y", T.FLOAT, [4])], vi=[_vi("t", T.INT64, [4])])
    with pytest.raises(ShapeConflictError, match=r"'t' is declared int64\[4\]"):
        he.load_model(m)


# -- symbolic dims: a model exported with dynamic axes ----------------------------------------
def dynamic_axes_model():
    """What torch's TorchScript exporter writes for ``x.relu().reshape(x.shape[0], -1) @ W + b``
    with a dynamic batch: Shape → Gather → Unsqueeze → Concat → Reshape."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((12, 5)).astype(np.float32), "W"),
             nh.from_array(rng.standard_normal(5).astype(np.float32), "B"),
             nh.from_array(np.array(0, np.int64), "i0"), nh.from_array(np.array([12], np.int64), "c12"),
             nh.from_array(np.array([0], np.int64), "ax")]
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Shape", ["r"], ["s"], name="shape"),
             h.make_node("Gather", ["s", "i0"], ["n"], axis=0, name="gather"),
             h.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="unsqueeze"),
             h.make_node("Concat", ["n1", "c12"], ["shp"], axis=0, name="concat"),
             h.make_node("Reshape", ["r", "shp"], ["f"], name="reshape"),
             h.make_node("MatMul", ["f", "W"], ["m"], name="matmul"),
             h.make_node("Add", ["m", "B"], ["a"], name="add"),
             h.make_node("Softmax", ["a"], ["y"], axis=-1, name="softmax")]
    return _model(nodes, [_vi("x", T.FLOAT, ["batch", 3, 4])], [_vi("y", T.FLOAT, ["batch", 5])], inits)


def test_symbolic_batch_runs_on_two_batch_sizes_heterogeneously_byte_identical():
    m = dynamic_axes_model()
    g = he.load_model(m)
    assert "x" in g.symbolic_values
    plan = he.plan(g, ["gpu", "cpu"])
    assert not plan.execution_blockers
    assert len(plan.partitions) > 1 and plan.transfers      # Shape runs on the CPU: a real boundary
    sym = [t for t in plan.transfers if t.value == "r"]
    assert sym and plan.transfers_df().set_index("value").loc["r", "bytes"] is None or \
        np.isnan(plan.transfers_df().set_index("value").loc["r", "bytes"])
    ex = he.explore(m, providers=["gpu", "cpu"])
    for n in (2, 5):
        x = np.random.default_rng(n).standard_normal((n, 3, 4)).astype(np.float32)
        run = he.execute(plan, {"x": x})
        ref = he.execute_reference(g, "cpu", {"x": x})
        assert run["y"].shape == (n, 5)
        assert bool(he.compare(run, ref)["byte_identical"].all())
        np.testing.assert_allclose(run["y"], _ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)
        assert run.value_shapes["r"][0] == (n, 3, 4)
        moved = run.timings_df().query("event == 'transfer' and value == 'r'")["bytes"].tolist()
        assert moved == [n * 12 * 4]       # known after the run
        assert ex.execute(inputs={"x": x})["y"].shape == (n, 5)


def test_symbolic_batch_cpu_and_cuda_simulator_bitwise():
    m = dynamic_axes_model()
    g = he.load_model(m)
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    cpu = he.execute_reference(g, "cpu", {"x": x})
    cuda = P.cuda()
    if not cuda.available()[0]:
        pytest.skip(f"no CUDA target: {cuda.available()[1]}")
    plan = he.plan(g, [cuda, "cpu"])
    run = he.execute(plan, {"x": x})
    assert any(p.provider == cuda.name for p in plan.partitions)
    assert run["y"].tobytes() == cpu["y"].tobytes()


def test_symbolic_input_with_the_wrong_rank_or_fixed_dim_is_refused():
    g = he.load_model(dynamic_axes_model())
    with pytest.raises(HeteroExploreError, match="'x'"):
        he.execute_reference(g, "cpu", {"x": np.zeros((2, 3, 5), np.float32)})


# -- computed operands: Reshape, Expand, ConstantOfShape, TopK from values computed in the graph --
def test_expand_constant_of_shape_and_topk_from_computed_operands():
    # k = Size(x)//4 (computed), shape = Shape(x) (computed)
    inits = [nh.from_array(np.array(4, np.int64), "four"), nh.from_array(np.array([1], np.int64), "one")]
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("ConstantOfShape", ["s"], ["z"], value=nh.from_array(np.array([2.0], np.float32))),
             h.make_node("Expand", ["b", "s"], ["e"]),
             h.make_node("Add", ["z", "e"], ["ze"]),
             h.make_node("Size", ["x"], ["n"]),
             h.make_node("Div", ["n", "four"], ["k0"]),
             h.make_node("Reshape", ["k0", "one"], ["k"]),
             h.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)]
    m = _model(nodes, [_vi("x", T.FLOAT, ["r", "c"]), _vi("b", T.FLOAT, [1, "c"])],
               [_vi("ze", T.FLOAT, ["r", "c"]), _vi("v", T.FLOAT, ["r", "k"]), _vi("i", T.INT64, ["r", "k"])], inits)
    g = he.load_model(m, fold_constants=False)
    for shape in ((2, 4), (3, 8)):
        rng = np.random.default_rng(sum(shape))
        feeds = {"x": rng.integers(0, 4, shape).astype(np.float32),      # many ties
                 "b": rng.standard_normal((1, shape[1])).astype(np.float32)}
        got = he.execute_reference(g, "cpu", feeds)
        want = _ort(m, feeds)
        for k in ("ze", "v", "i"):
            assert got[k].shape == want[k].shape and np.array_equal(got[k], want[k]), k


# -- data-dependent ops vs onnxruntime --------------------------------------------------------
def _single(op, ins, out_names, out_types, out_ranks, feeds, **attrs):
    node = h.make_node(op, [n for n, _, _ in ins], out_names, **attrs)
    outs = [_vi(n, t, [f"{n}{d}" for d in range(r)]) for n, t, r in zip(out_names, out_types, out_ranks)]
    return _model([node], [_vi(n, t, s) for n, t, s in ins], outs)


def _same_as_ort(m, feeds):
    g = he.load_model(m)
    got = he.execute_reference(g, "cpu", feeds)
    want = _ort(m, feeds)
    for name, w in want.items():
        assert got[name].dtype == w.dtype and got[name].shape == w.shape, name
        assert np.array_equal(got[name], w, equal_nan=True), name
    return got


@pytest.mark.parametrize("shape, dtype", [((2, 3), np.float32), ((7,), np.int64), ((2, 2, 3), np.int32),
                                          ((3, 4), np.bool_), ((0, 3), np.float32)])
def test_nonzero_matches_onnxruntime(shape, dtype):
    rng = np.random.default_rng(1)
    x = (rng.integers(0, 3, shape) * (rng.random(shape) < 0.5)).astype(dtype)
    et = h.np_dtype_to_tensor_dtype(np.dtype(dtype))
    got = _same_as_ort(_single("NonZero", [("x", et, list(shape))], ["y"], [T.INT64], [2], {}), {"x": x})
    assert np.array_equal(got["y"], np.stack(np.nonzero(x)))


@pytest.mark.parametrize("sort", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_unique_matches_onnxruntime(sort, axis):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 3, (6, 2)).astype(np.float32)
    kw = {"sorted": sort} if axis is None else {"sorted": sort, "axis": axis}
    rank_y = 1 if axis is None else 2
    m = _single("Unique", [("x", T.FLOAT, [6, 2])], ["y", "idx", "inv", "cnt"], [T.FLOAT, T.INT64, T.INT64, T.INT64],
                [rank_y, 1, 1, 1], {}, **kw)
    _same_as_ort(m, {"x": x})


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_matches_onnxruntime(axis):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    cond = np.array([True, False, True])
    kw = {} if axis is None else {"axis": axis}
    rank = 1 if axis is None else 2
    m = _single("Compress", [("x", T.FLOAT, [3, 4]), ("c", T.BOOL, [3])], ["y"], [T.FLOAT], [rank], {}, **kw)
    _same_as_ort(m, {"x": x, "c": cond})


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression_matches_onnxruntime(center):
    rng = np.random.default_rng(4)
    xy = rng.uniform(0, 4, (2, 12, 2)).astype(np.float32)
    wh = rng.uniform(0.5, 2, (2, 12, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=2) if center == 0 else np.concatenate([xy, wh], axis=2)
    scores = rng.integers(0, 6, (2, 3, 12)).astype(np.float32) / 5    # ties
    ins = [("b", T.FLOAT, [2, 12, 4]), ("s", T.FLOAT, [2, 3, 12]), ("m", T.INT64, [1]), ("io", T.FLOAT, [1]),
           ("st", T.FLOAT, [1])]
    m = _single("NonMaxSuppression", ins, ["y"], [T.INT64], [2], {}, center_point_box=center)
    feeds = {"b": boxes, "s": scores, "m": np.array([4], np.int64), "io": np.array([0.3], np.float32),
             "st": np.array([0.1], np.float32)}
    got = _same_as_ort(m, feeds)
    assert got["y"].shape[0] > 0


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_ties_and_nan_match_onnxruntime(largest):
    x = np.array([[1, 3, 3, 2, 3], [5, 5, 5, 5, 5], [0, -1, 7, 7, -1]], np.float32)
    m = _single("TopK", [("x", T.FLOAT, [3, 5]), ("k", T.INT64, [1])], ["v", "i"], [T.FLOAT, T.INT64], [2, 2], {},
                axis=1, largest=largest)
    _same_as_ort(m, {"x": x, "k": np.array([3], np.int64)})


def test_data_dependent_output_crosses_a_partition_boundary():
    """NonZero on the CPU (host only), its consumer on the GPU: a transfer of a size known only at
    run time, byte-identical to the CPU reference."""
    nodes = [h.make_node("NonZero", ["x"], ["nz"]), h.make_node("Transpose", ["nz"], ["t"]),
             h.make_node("Cast", ["t"], ["y"], to=T.FLOAT)]
    m = _model(nodes, [_vi("x", T.FLOAT, [3, 4])], [_vi("y", T.FLOAT, ["n", 2])])
    g = he.load_model(m)
    plan = he.plan(g, ["gpu", "cpu"])
    assert [p.provider for p in plan.partitions] == ["cpu", "gpu"]
    gpu, cpu = plan.providers[0], plan.providers[1]
    before = _live(gpu, cpu)
    for density in (0.2, 0.7):
        x = (np.random.default_rng(5).random((3, 4)) < density).astype(np.float32)
        run = he.execute(plan, {"x": x})
        ref = he.execute_reference(g, "cpu", {"x": x})
        assert bool(he.compare(run, ref)["byte_identical"].all())
        assert np.array_equal(run["y"], np.argwhere(x).astype(np.float32))
        assert run.timings_df().query("event == 'transfer'")["bytes"].tolist() == [int(x.sum()) * 2 * 8]
    assert _live(gpu, cpu) == before


# -- memory and leaks --------------------------------------------------------------------------
def test_a_dynamic_allocation_over_the_budget_is_refused_before_allocating(monkeypatch):
    m = _model([h.make_node("ConstantOfShape", ["s"], ["y"])], [_vi("s", T.INT64, [2])], [_vi("y", T.FLOAT, ["a", "b"])])
    g = he.load_model(m)
    cpu = P.cpu()
    monkeypatch.setenv("HETERO_EXPLORE_MEMORY_BUDGET", "1M")
    before = cpu.live_allocations
    with pytest.raises(MemoryBudgetError, match=r"ConstantOfShape.*\(1000, 1000\).*over the memory budget"):
        he.execute_reference(g, cpu, {"s": np.array([1000, 1000], np.int64)})
    assert cpu.live_allocations == before
    run = he.execute_reference(g, cpu, {"s": np.array([10, 10], np.int64)})
    assert run["y"].shape == (10, 10) and (run["y"] == 0).all()


def test_failures_in_dynamic_nodes_leave_no_allocation_behind():
    g = he.load_model(_reshape_model())
    cpu = P.cpu()
    before = cpu.live_allocations
    for bad in ([7, 7], [-2, 3], [2, 4]):
        with pytest.raises(NodeExecutionError):
            he.execute_reference(g, cpu, {"x": np.arange(6, dtype=np.float32), "s": np.array(bad, np.int64)})
        assert cpu.live_allocations == before


def test_dynamic_kernels_are_cached_per_signature():
    from hetero_explore.runner.core import Ledger, NodeRunner, memory_owners
    g = he.load_model(_reshape_model(declared=None))
    cpu = P.cpu()
    runner = NodeRunner.for_graph(g, cpu)
    assert runner.dynamic_nodes == [g.nodes[0].name]
    kernels = []
    for s in ([2, 3], [3, 2], [2, 3]):
        with Ledger(memory_owners([cpu])) as ledger:
            env = {"x": ledger.allocate(cpu, (6,), np.float32), "s": ledger.allocate(cpu, (2,), np.int64)}
            cpu.copy_from_host(np.arange(6, dtype=np.float32), env["x"])
            cpu.copy_from_host(np.array(s, np.int64), env["s"])
            out = runner.run(env, ledger, program=runner.bind(None, record=False))   # no arena: one node
            assert out["y"].shape == tuple(s)
            kernels.append(runner.kernels[0])
    assert kernels[0] is kernels[2] and kernels[0] is not kernels[1]


# -- declared shapes that disagree with the computation (hypothesis) ---------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_UNARY = ("Relu", "Neg", "Abs", "Floor")   # exact in every runtime: results compare bit for bit


@st.composite
def lying_graphs(draw):
    """A small chain (unary ops, Transpose, Reshape by a run-time shape input) whose declared
    intermediate/output types are sometimes wrong (shape, rank or dtype)."""
    a, b = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    shape = (a, b)
    nodes, ins, feeds, true_shapes = [], [_vi("x", T.FLOAT, list(shape))], {}, {}
    x = np.random.default_rng(a * 7 + b).standard_normal(shape).astype(np.float32)
    feeds["x"] = x
    cur = "x"
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(_UNARY + ("Transpose", "Reshape")))
        out = f"v{i}"
        if kind == "Transpose":
            nodes.append(h.make_node("Transpose", [cur], [out]))
            shape = shape[::-1]
        elif kind == "Reshape":
            n = int(np.prod(shape))
            target = draw(st.sampled_from([(n,), (1, n), (n, 1), (n + 1,), (2, n), (-1,), (0, n)]))
            s = f"s{i}"
            ins.append(_vi(s, T.INT64, [len(target)]))
            feeds[s] = np.array(target, np.int64)
            nodes.append(h.make_node("Reshape", [cur, s], [out]))
            shape = tuple(n if d == -1 else d for d in target) if target != (0, n) else (shape[0], n)
        else:
            nodes.append(h.make_node(kind, [cur], [out]))
        true_shapes[out] = shape
        cur = out
    names = list(true_shapes)
    lies = draw(st.lists(st.tuples(st.sampled_from(names),
                                   st.lists(st.integers(1, 6), min_size=0, max_size=3),
                                   st.sampled_from([T.FLOAT, T.FLOAT, T.INT64])), max_size=3))
    declared = {}
    for name, dims, et in lies:
        declared[name] = (et, dims)
    outs = [_vi(cur, *declared.pop(cur)) if cur in declared else _vi(cur, T.FLOAT, None)]
    vi = [_vi(n, et, dims) for n, (et, dims) in declared.items()]
    truth = _model(nodes, ins, [h.make_tensor_value_info(cur, T.FLOAT, None)])
    lying = _model(nodes, ins, outs, vi=vi)
    return truth, lying, feeds, cur


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lying_graphs())
def test_declared_shapes_that_disagree_never_crash_nor_give_a_wrong_buffer(case):
    truth, lying, feeds, out = case
    try:
        want = _ort(truth, feeds)[out]
    except Exception:  # an invalid run-time shape: ours must fail typed, checked below
        want = None
    cpu = P.cpu()
    before = cpu.live_allocations
    try:
        got = he.execute_reference(he.load_model(lying, check=False), cpu, feeds)[out]
    except HeteroExploreError:
        got = None
    assert cpu.live_allocations == before
    if got is not None:
        assert want is not None, "a run that onnxruntime refuses gave an answer"
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_the_run_shows_the_shapes_and_bytes_the_plan_could_not_know():
    g = he.load_model(dynamic_axes_model())
    plan = he.plan(g, ["cpu"])
    run = he.execute(plan, {"x": np.ones((3, 3, 4), np.float32)})
    df = run.value_shapes_df().set_index("value")
    assert df.loc["f", "shape"] == (3, 12) and df.loc["f", "bytes"] == 3 * 12 * 4
    assert df.loc["f", "planned_shape"] == ("batch", 12)


# -- movement ops on a value whose shape (not even its rank) is known only at run time (issue 10/11)
def _scan_then_reshape(shape=(0, -1), then=None):
    """A Scan whose scan output ``y`` has no shape the plan can know (its body unsqueezes by an axis
    carried as a state, so onnx's inference cannot tell even its rank), then Reshape(y, shape)
    (and ``then``: extra (op, attrs) movement nodes on the Reshape's output)."""
    body = h.make_graph([h.make_node("Add", ["s_in", "x_t"], ["s_out"]),
                         h.make_node("Identity", ["a_in"], ["a_out"]),
                         h.make_node("Unsqueeze", ["s_out", "a_in"], ["y_t"])], "body",
                        [_vi("s_in", T.FLOAT, [2, 3]), _vi("a_in", T.INT64, [1]), _vi("x_t", T.FLOAT, [2, 3])],
                        [_vi("s_out", T.FLOAT, [2, 3]), _vi("a_out", T.INT64, [1]), _vi("y_t", T.FLOAT, None)])
    nodes = [h.make_node("Scan", ["s0", "ax", "x"], ["s", "a", "y"], body=body, num_scan_inputs=1, name="scan"),
             h.make_node("Reshape", ["y", "shape"], ["z"], name="reshape")]
    last = "z"
    for k, (op, attrs) in enumerate(then or ()):
        nodes.append(h.make_node(op, [last], [f"t{k}"], name=f"{op.lower()}{k}", **attrs))
        last = f"t{k}"
    return _model(nodes, [_vi("s0", T.FLOAT, [2, 3]), _vi("ax", T.INT64, [1]), _vi("x", T.FLOAT, [4, 2, 3])],
                  [_vi(last, T.FLOAT, ["p", "q"] if then else [f"d{i}" for i in range(len(shape))])],
                  inits=[nh.from_array(np.array(shape, np.int64), "shape")])


def _scan_feeds(axis=1):
    return {"s0": np.ones((2, 3), np.float32), "ax": np.array([axis], np.int64),
            "x": np.arange(24, dtype=np.float32).reshape(4, 2, 3)}


def _reference(m, feeds):
    # onnxruntime refuses this graph ("Subgraph must have the shape set for all outputs"):
    # onnx's ReferenceEvaluator is the oracle, numpy the second one
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(m).run(None, feeds)[0]


@pytest.mark.parametrize("shape, axis, want", [((0, -1), 1, (4, 6)), ((-1,), 0, (24,)),
                                               ((2, 0, -1), 2, (2, 2, 6)), ((4, 3, 2), 1, (4, 3, 2))])
def test_reshape_of_a_value_shaped_only_at_run_time(shape, axis, want):
    m = _scan_then_reshape(shape)
    g = he.load_model(m)
    assert g.values["y"].shape is None   # the plan knows neither its shape nor its rank
    feeds = _scan_feeds(axis)
    run = he.execute(he.plan(g, ["cpu"]), feeds)
    ref = _reference(m, feeds)
    np_ref = np.cumsum(feeds["x"], axis=0) + 1
    assert run["z"].shape == want == ref.shape
    assert np.array_equal(run["z"], ref) and np.array_equal(run["z"], np_ref.reshape(want))
    df = run.value_shapes_df().set_index("value")   # the run shows what the plan could not know
    assert df.loc["y", "planned_shape"] is None and df.loc["y", "shape"] == np.expand_dims(np_ref, axis + 1).shape
    assert df.loc["z", "shape"] == want


def test_movement_ops_after_a_run_time_shaped_value():
    then = [("Transpose", {}), ("Flatten", {"axis": 1}), ("Identity", {})]
    m = _scan_then_reshape((0, -1), then)
    feeds = _scan_feeds(2)
    got = he.execute_reference(he.load_model(m), "cpu", feeds)["t2"]
    ref = _reference(m, feeds)
    assert got.shape == ref.shape == (6, 4) and np.array_equal(got, ref)


@pytest.mark.parametrize("shape", [(5, -1), (5, 5), (0, 7)])
def test_reshape_of_a_run_time_shaped_value_that_does_not_fit_is_a_typed_error(shape):
    g = he.load_model(_scan_then_reshape(shape))
    with pytest.raises(RuntimeShapeError, match=r"(?s)'reshape' \(Reshape\).*(incompatible|cannot reshape 24)") as e:
        he.execute_reference(g, "cpu", _scan_feeds(1))
    assert e.value.op_type == "Reshape"


@pytest.mark.parametrize("op, extra, attrs, rank", [
    ("Transpose", None, {}, 4), ("Transpose", None, {"perm": [1, 0, 3, 2]}, 4), ("Flatten", None, {"axis": 2}, 2),
    ("Squeeze", [2], {}, 3), ("Unsqueeze", [0, -1], {}, 6)])
def test_movement_ops_on_a_value_shaped_only_at_run_time(op, extra, attrs, rank):
    # (Identity is not among them: the loader removes it, so its kernel never sees such a value)
    m = _scan_then_reshape((-1,))
    g = m.graph
    del g.node[1:]
    ins = ["y"] + (["axes"] if extra is not None else [])
    g.node.append(h.make_node(op, ins, ["w"], name="mover", **attrs))
    if extra is not None:
        g.initializer.append(nh.from_array(np.array(extra, np.int64), "axes"))
    del g.output[:]
    g.output.append(_vi("w", T.FLOAT, [f"d{i}" for i in range(rank)]))
    feeds = _scan_feeds(1)   # y is (4, 2, 1, 3) at run time
    ld = he.load_model(m)
    assert ld.values["y"].shape is None
    got = he.execute_reference(ld, "cpu", feeds)["w"]
    ref = _reference(m, feeds)
    assert got.shape == ref.shape and len(got.shape) == rank and np.array_equal(got, ref)


def test_transpose_of_a_run_time_shaped_value_with_a_bad_perm_is_a_typed_error():
    m = _scan_then_reshape((-1,))
    del m.graph.node[1:]
    m.graph.node.append(h.make_node("Transpose", ["y"], ["w"], name="mover", perm=[0, 1, 2]))
    del m.graph.output[:]
    m.graph.output.append(_vi("w", T.FLOAT, ["a", "b", "c"]))
    with pytest.raises(HeteroExploreError, match=r"'mover' \(Transpose.*perm=\[0, 1, 2\] is not a permutation of 0\.\.3"):
        he.execute_reference(he.load_model(m), "cpu", _scan_feeds(1))
