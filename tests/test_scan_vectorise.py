"""Scan bodies run once over the stacked steps (kernels/host/scan_vectorise.py) give bit for bit
what the same Scan gives step by step (``control.VECTORISE_SCANS = False``): on the kNN shape
skl2onnx exports (a state passed through, Sub, ReduceSumSquare, Identity), in one run and in
chunks of steps, with other scan axes; on random small bodies of elementwise ops, reductions
(axes as attributes and as inputs, kept or not, negative, "all"), ArgMax/ArgMin, Cast, Clip and
per-scan values (states, outer-scope values, body constants); and Scans that must be declined
(a carried state, MatMul or Reshape on a step's slice, a reverse direction) run step by step
and say why."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.execution.executor import HeterogeneousExecutor
from hetero_explore.kernels.host import control

F = np.float32
FT = TensorProto.FLOAT


def _run(m, feeds, vectorise, monkeypatch, max_bytes=None):
    """(outputs, the Scan kernel's stats, its vectorise_declined) of one executor run."""
    monkeypatch.setattr(control, "VECTORISE_SCANS", vectorise)
    if max_bytes is not None:
        monkeypatch.setattr(control, "VECTORISE_MAX_BYTES", max_bytes)
    g = he.load_model(m)
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        out = ex.run(feeds).outputs
        out2 = ex.run(feeds).outputs        # a second run reuses the specialisations
        k = next(st.kernel for r in ex.parts for st in r.steps if st.node.op_type == "Scan")
        for name in out:
            assert _bits(out[name]) == _bits(out2[name]), name
        return out, k.stats, k.vectorise_declined


def _bits(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.array(np.nan, a.dtype), a)
    return (a.dtype.str, a.shape, a.tobytes())


def both(m, feeds, monkeypatch, max_bytes=None):
    """Run vectorised and step by step; assert the same bits; return (outputs, stats, declined)."""
    got, stats, declined = _run(m, feeds, True, monkeypatch, max_bytes)
    ref, ref_stats, _ = _run(m, feeds, False, monkeypatch)
    assert ref_stats.stacked_runs == 0
    assert set(got) == set(ref)
    for name in ref:
        assert _bits(got[name]) == _bits(ref[name]), name
    return got, stats, declined


def knn_model(n_train=40, rows=6, feats=5, axes=None, out_axes=None):
    """skl2onnx's cdist Scan: state X passed through, scan over the training rows."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["next_in"], ["next_out"]),
         helper.make_node("Sub", ["next_in", "next"], ["diff"]),
         helper.make_node("ReduceSumSquare", ["diff"], ["reduced"], axes=[1], keepdims=0),
         helper.make_node("Identity", ["reduced"], ["scan_out"])],
        "body", [helper.make_tensor_value_info("next_in", FT, [None, feats]),
                 helper.make_tensor_value_info("next", FT, [None])],
        [helper.make_tensor_value_info("next_out", FT, [None, feats]),
         helper.make_tensor_value_info("scan_out", FT, [None])])
    ys = (feats, n_train) if axes == [1] else (n_train, feats)
    at = dict(num_scan_inputs=1, body=body)
    if axes is not None:
        at["scan_input_axes"] = axes
    if out_axes is not None:
        at["scan_output_axes"] = out_axes
    scan = helper.make_node("Scan", ["X", "Y"], ["Xo", "D"], name="cdist", **at)
    dshape = [rows, n_train] if out_axes == [1] else [n_train, rows]
    g = helper.make_graph([scan], "knn", [helper.make_tensor_value_info("X", FT, [rows, feats])],
                          [helper.make_tensor_value_info("Xo", FT, [rows, feats]),
                           helper.make_tensor_value_info("D", FT, dshape)],
                          [numpy_helper.from_array(np.random.default_rng(1).standard_normal(ys).astype(F), "Y")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_knn_scan_vectorised_is_bitwise_the_iterated_scan(monkeypatch):
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(F)
    got, stats, declined = both(knn_model(), {"X": x}, monkeypatch)
    assert declined is None
    assert stats.stacked_runs == 2 and stats.iterations == 80   # two runs, one stacked run each
    import onnxruntime as ort
    s = ort.InferenceSession(knn_model().SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got["D"], s.run(None, {"X": x})[1], rtol=1e-5, atol=1e-5)
    assert np.array_equal(got["Xo"], x)


@pytest.mark.parametrize("max_bytes", [1, 700, 3000])
def test_knn_scan_in_chunks_of_steps(monkeypatch, max_bytes):
    """Chunks of 1 step, of several with a shorter last one: the same bits."""
    x = np.random.default_rng(2).standard_normal((6, 5)).astype(F)
    _, stats, _ = both(knn_model(n_train=41), {"X": x}, monkeypatch, max_bytes=max_bytes)
    assert stats.stacked_runs > 2


@pytest.mark.parametrize("axes,out_axes", [([1], None), (None, [1]), ([1], [1]), ([-1], [-1])])
def test_knn_scan_other_axes(monkeypatch, axes, out_axes):
    x = np.random.default_rng(3).standard_normal((6, 5)).astype(F)
    m = knn_model(axes=[1] if axes == [-1] else axes, out_axes=[1] if out_axes == [-1] else out_axes)
    if axes == [-1]:
        for n in m.graph.node:
            for a in n.attribute:
                if a.name in ("scan_input_axes", "scan_output_axes"):
                    a.ints[:] = [-1]
    _, stats, declined = both(m, {"X": x}, monkeypatch)
    assert declined is None and stats.stacked_runs == 2


def test_the_placement_table_says_the_scan_is_vectorised(monkeypatch):
    plan = he.plan(he.load_model(knn_model()), ["cpu"])
    df = plan.placement_df()
    row = df[df["name"] == "cdist"].iloc[0]
    assert "vectorised" in row["optimised"]
    assert "Scan body run over all its steps at once: cdist" in plan.summary()
    monkeypatch.setattr(control, "VECTORISE_SCANS", False)
    df = plan.placement_df()
    assert not df[df["name"] == "cdist"].iloc[0]["optimised"]
    assert "steps at once" not in plan.summary()
    # a Scan with a carried state says nothing
    monkeypatch.setattr(control, "VECTORISE_SCANS", True)
    p2 = he.plan(he.load_model(cm_scan_cumsum()), ["cpu"])
    assert "steps at once" not in p2.summary()
    assert not p2.placement_df()["optimised"].any()


def cm_scan_cumsum():
    import control_models as cm
    return cm.scan_cumsum()


# -- random bodies ---------------------------------------------------------------------------
_BIN = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sum", "Mean"]
_UN = ["Abs", "Neg", "Tanh", "Sigmoid", "Relu", "Floor", "Exp", "Erf", "Sqrt", "Softplus", "Identity", "LeakyRelu"]
_RED = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceSumSquare", "ReduceLogSumExp"]


def _bcast(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def random_scan(seed: int, opset: int = 17):
    """A Scan whose body mixes a state (3, 4), an outer-scope value, a body constant and 1-2
    scan inputs through random batchable ops; scan outputs are stacked values and a per-scan
    one. Returns (model, feeds, steps)."""
    rng = np.random.default_rng(seed)
    steps = int(rng.integers(2, 7))
    nodes, inits = [], []
    vals = {"s": (3, 4), "o": [(4,), (3, 1), (1, 4), ()][int(rng.integers(0, 4))], "k": (1, 4)}
    batched = set()
    x_shapes = [[(4,), (3, 4), (1, 4), (3, 1), ()][int(rng.integers(0, 5))] for _ in range(int(rng.integers(1, 3)))]
    x_axes = [int(rng.integers(0, len(sh) + 1)) for sh in x_shapes]
    for j, sh in enumerate(x_shapes):
        vals[f"x{j}"] = sh
        batched.add(f"x{j}")
    inits.append(numpy_helper.from_array(rng.standard_normal((1, 4)).astype(F), "k"))
    count = 0

    def new():
        nonlocal count
        count += 1
        return f"v{count}"

    for _ in range(int(rng.integers(3, 9))):
        kind = rng.choice(["bin", "un", "red", "arg", "clip", "cast", "where"], p=[.3, .2, .2, .07, .08, .08, .07])
        names = list(vals)
        pick = lambda: names[int(rng.integers(0, len(names)))]   # noqa: E731
        if kind in ("bin", "where"):
            ins = [pick() for _ in range(3 if kind == "where" else (2 if rng.random() < .8 else 3))]
            shape = _bcast(*[vals[i] for i in ins])
            if shape is None:
                continue
            out = new()
            if kind == "where":
                c = new()
                nodes.append(helper.make_node("Less", [ins[0], ins[1]], [c]))
                nodes.append(helper.make_node("Where", [c, ins[1], ins[2]], [out]))
                if any(i in batched for i in ins):
                    batched.update((c, out))
            else:
                op = _BIN[int(rng.integers(0, len(_BIN)))]
                if op not in ("Sum", "Mean", "Max", "Min"):
                    ins = ins[:2]
                    shape = _bcast(*[vals[i] for i in ins])
                if op == "Pow":   # a positive base
                    a = new()
                    nodes.append(helper.make_node("Abs", [ins[0]], [a]))
                    if ins[0] in batched:
                        batched.add(a)
                    vals[a] = vals[ins[0]]
                    ins = [a, ins[1]]
                nodes.append(helper.make_node(op, ins, [out]))
                if any(i in batched for i in ins):
                    batched.add(out)
            vals[out] = shape
        elif kind in ("un", "cast", "clip"):
            x = pick()
            out = new()
            if kind == "un":
                op = _UN[int(rng.integers(0, len(_UN)))]
                nodes.append(helper.make_node(op, [x], [out]))
            elif kind == "cast":
                mid = new()
                nodes.append(helper.make_node("Cast", [x], [mid], to=TensorProto.FLOAT16))
                nodes.append(helper.make_node("Cast", [mid], [out], to=FT))
                if x in batched:
                    batched.add(mid)
            else:
                lo = f"lo{count}"
                inits.append(numpy_helper.from_array(np.array(-0.5, F), lo))
                nodes.append(helper.make_node("Clip", [x, lo, "k_hi"], [out]))
            if x in batched:
                batched.add(out)
            vals[out] = vals[x]
        elif kind in ("red", "arg"):
            cand = [n for n in names if len(vals[n]) >= 1]
            if rng.random() < .8:   # mostly a step's value: the reduction then runs stacked
                cand = [n for n in cand if n in batched] or cand
            if not cand:
                continue
            x = cand[int(rng.integers(0, len(cand)))]
            r = len(vals[x])
            out = new()
            if kind == "arg":
                ax = int(rng.integers(-r, r))
                mid = new()
                nodes.append(helper.make_node(["ArgMax", "ArgMin"][int(rng.integers(0, 2))], [x], [mid], axis=ax,
                                              keepdims=1))
                nodes.append(helper.make_node("Cast", [mid], [out], to=FT))
                shape = tuple(1 if a == ax % r else d for a, d in enumerate(vals[x]))
                if x in batched:
                    batched.update((mid, out))
            else:
                op = _RED[int(rng.integers(0, len(_RED)))]
                every = rng.random() < 0.25
                axes = [] if every else sorted(set(int(a) for a in rng.integers(-r, r, int(rng.integers(1, r + 1)))))
                if len({a % r for a in axes}) != len(axes):
                    axes = sorted({a % r for a in axes})
                keep = 1
                src = x
                if op in ("ReduceProd", "ReduceLogSumExp"):   # keep the values moderate
                    src = new()
                    nodes.append(helper.make_node("Tanh", [x], [src]))
                    if x in batched:
                        batched.add(src)
                from_input = opset >= (13 if op == "ReduceSum" else 18)
                if from_input:
                    an = f"axes{count}"
                    inits.append(numpy_helper.from_array(np.array(axes, np.int64), an))
                    nodes.append(helper.make_node(op, [src] + ([an] if axes or rng.random() < .5 else []), [out],
                                                  keepdims=keep))
                else:
                    nodes.append(helper.make_node(op, [src], [out], keepdims=keep, **({"axes": axes} if axes else {})))
                red = {a % r for a in axes} if axes else set(range(r))
                shape = tuple(1 if a in red else d for a, d in enumerate(vals[x]))
                if x in batched:
                    batched.add(out)
            vals[out] = shape
    inits.append(numpy_helper.from_array(np.array(0.75, F), "k_hi"))
    stacked = [n for n in vals if n in batched and n.startswith("v")]
    if not stacked:
        stacked = [f"x{0}"]
    outs = [stacked[-1]] + ([stacked[0]] if len(stacked) > 1 and rng.random() < .5 else [])
    per_scan = [n for n in vals if n.startswith("v") and n not in batched]
    if per_scan and rng.random() < .7:
        outs.append(per_scan[-1])
    outs = list(dict.fromkeys(outs))
    body_outs = ["s_out"] + [f"y{i}" for i in range(len(outs))]
    nodes.append(helper.make_node("Identity", ["s"], ["s_out"]))
    for i, o in enumerate(outs):
        nodes.append(helper.make_node("Identity", [o], [f"y{i}"]))
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("s", FT, [3, 4])] +
        [helper.make_tensor_value_info(f"x{j}", FT, list(sh)) for j, sh in enumerate(x_shapes)],
        [helper.make_tensor_value_info(n, FT, None) for n in body_outs], initializer=inits)
    ins = ["s0"] + [f"X{j}" for j in range(len(x_shapes))]
    scan = helper.make_node("Scan", ins, ["sN"] + [f"Y{i}" for i in range(len(outs))], body=body,
                            num_scan_inputs=len(x_shapes), scan_input_axes=x_axes, name="scan")
    feeds = {"s0": rng.standard_normal((3, 4)).astype(F), "o": rng.standard_normal(vals["o"]).astype(F)}
    for j, (sh, ax) in enumerate(zip(x_shapes, x_axes)):
        full = list(sh)
        full.insert(ax, steps)
        feeds[f"X{j}"] = rng.standard_normal(full).astype(F)
    g = helper.make_graph(
        [scan], "g", [helper.make_tensor_value_info(n, FT, list(a.shape)) for n, a in feeds.items()],
        [helper.make_tensor_value_info("sN", FT, [3, 4])] +
        [helper.make_tensor_value_info(f"Y{i}", FT, [steps] + list(vals[o])) for i, o in enumerate(outs)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), feeds, steps


@pytest.mark.parametrize("seed", range(40))
def test_random_scan_bodies_vectorised_are_bitwise_iterated(monkeypatch, seed):
    m, feeds, steps = random_scan(seed, opset=17 if seed % 2 else 18)
    _, stats, declined = both(m, feeds, monkeypatch)
    assert declined is None, declined
    assert stats.stacked_runs == 2 and stats.iterations == 2 * steps


# -- declined ---------------------------------------------------------------------------------
def _body_scan(nodes, state_out="s_out", x_shape=(4,), extra_inits=(), y_shape=(3, 4), **attrs):
    body = helper.make_graph(
        nodes, "body", [helper.make_tensor_value_info("s", FT, [3, 4]),
                        helper.make_tensor_value_info("x", FT, list(x_shape))],
        [helper.make_tensor_value_info(state_out, FT, None), helper.make_tensor_value_info("y", FT, None)],
        initializer=list(extra_inits))
    scan = helper.make_node("Scan", ["s0", "X"], ["sN", "Y"], body=body, num_scan_inputs=1, name="scan", **attrs)
    g = helper.make_graph([scan], "g", [helper.make_tensor_value_info("s0", FT, [3, 4]),
                                        helper.make_tensor_value_info("X", FT, [5] + list(x_shape))],
                          [helper.make_tensor_value_info("sN", FT, [3, 4]),
                           helper.make_tensor_value_info("Y", FT, [5] + list(y_shape))])
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.standard_normal((3, 4)).astype(F), "X": rng.standard_normal([5] + list(x_shape)).astype(F)}
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), feeds


@pytest.mark.parametrize("case,why", [
    ("carried", "carried from one step to the next"),
    ("matmul", "MatMul"),
    ("reshape", "Reshape"),
    ("reverse_in", "reverse"),
    ("reverse_out", "reverse"),
])
def test_declined_scans_run_step_by_step(monkeypatch, case, why):
    ident = helper.make_node("Identity", ["s"], ["s_out"])
    if case == "carried":      # a running sum: the state really changes
        m, feeds = _body_scan([helper.make_node("Add", ["s", "x"], ["s_out"]),
                               helper.make_node("Identity", ["s_out"], ["y"])])
    elif case == "matmul":
        m, feeds = _body_scan([ident, helper.make_node("MatMul", ["s", "x"], ["y"])], x_shape=(4, 2), y_shape=(3, 2))
    elif case == "reshape":
        shp = numpy_helper.from_array(np.array([2, 2], np.int64), "shp")
        m, feeds = _body_scan([ident, helper.make_node("Reshape", ["x", "shp"], ["y"])], extra_inits=[shp],
                              y_shape=(2, 2))
    else:
        key = "scan_input_directions" if case == "reverse_in" else "scan_output_directions"
        m, feeds = _body_scan([ident, helper.make_node("Mul", ["s", "x"], ["y"])], **{key: [1]})
    got, stats, declined = both(m, feeds, monkeypatch)
    assert stats.stacked_runs == 0 and stats.iterations == 10
    assert declined is not None and why in declined, declined
    import onnxruntime as ort
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for a, b in zip([got["sN"], got["Y"]], s.run(None, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_specialisation_without_known_ranks_is_declined_at_run_time(monkeypatch):
    """A body whose step needs no Scan-level refusal but whose stacked run cannot be built for
    the inputs (here: a reduction's axes read from the outer scope, not a constant) runs step
    by step, with the same results."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["s_out"]),
         helper.make_node("Mul", ["s", "x"], ["p"]),
         helper.make_node("ReduceSum", ["p", "ax"], ["y"], keepdims=0)],
        "body", [helper.make_tensor_value_info("s", FT, [3, 4]), helper.make_tensor_value_info("x", FT, [4])],
        [helper.make_tensor_value_info("s_out", FT, None), helper.make_tensor_value_info("y", FT, None)])
    scan = helper.make_node("Scan", ["s0", "X"], ["sN", "Y"], body=body, num_scan_inputs=1, name="scan")
    g = helper.make_graph([scan], "g", [helper.make_tensor_value_info("s0", FT, [3, 4]),
                                        helper.make_tensor_value_info("X", FT, [5, 4]),
                                        helper.make_tensor_value_info("ax", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("sN", FT, [3, 4]),
                           helper.make_tensor_value_info("Y", FT, [5, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.standard_normal((3, 4)).astype(F), "X": rng.standard_normal((5, 4)).astype(F),
             "ax": np.array([1], np.int64)}
    _, stats, declined = both(m, feeds, monkeypatch)
    assert declined is None and stats.stacked_runs == 0 and stats.iterations == 10


@pytest.mark.parametrize("deny", [[], ["ReduceSumSquare"], ["Scan"]])
def test_heterogeneous_runs_of_the_vectorised_scan_are_byte_identical(monkeypatch, deny):
    """The Scan on the (simulated) GPU with its stacked body there, split between the GPU and the
    CPU, or on the CPU beside a GPU: byte-identical to the CPU's iterated run, nothing leaked."""
    from hetero_explore.providers import resolve
    from hetero_explore.providers.virtual import mask, unmask
    m = knn_model(n_train=9, rows=3, feats=4)
    g = he.load_model(m)
    x = {"X": np.random.default_rng(5).standard_normal((3, 4)).astype(F)}
    monkeypatch.setattr(control, "VECTORISE_SCANS", False)
    ref = he.execute_reference(g, "cpu", x)
    monkeypatch.setattr(control, "VECTORISE_SCANS", True)
    gpu, cpu = resolve("gpu"), resolve("cpu")
    provs = [mask(gpu, deny=deny), cpu]
    p = he.plan(g, provs)
    assert p.executable, p.execution_blockers
    before = {unmask(q).name: unmask(q).live_allocations for q in provs}
    run = he.execute(p, x)
    assert he.compare(run, ref)["byte_identical"].all()
    assert {unmask(q).name: unmask(q).live_allocations for q in provs} == before


def test_knn_classifier_from_skl2onnx_vectorised_is_bitwise_and_agrees_with_sklearn(monkeypatch):
    """A real exported model (symbolic batch): skl2onnx's KNeighborsClassifier trained on
    scikit-learn's wine data; the vectorised run is bitwise the iterated one, and its labels are
    scikit-learn's."""
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.datasets import load_wine
    from sklearn.neighbors import KNeighborsClassifier
    from skl2onnx.common.data_types import FloatTensorType

    X, y = load_wine(return_X_y=True)
    X = X.astype(F)
    clf = KNeighborsClassifier(n_neighbors=5).fit(X[:150], y[:150])
    m = skl2onnx.convert_sklearn(clf, initial_types=[("X", FloatTensorType([None, X.shape[1]]))],
                                 options={id(clf): {"zipmap": False}}, target_opset=17)
    got, stats, declined = both(m, {"X": X[150:]}, monkeypatch)
    assert stats.stacked_runs >= 1 and not declined
    np.testing.assert_array_equal(got["label"], clf.predict(X[150:]))
