"""Focused tests of the ai.onnx.ml kernels (kernels/ml.py) against onnx's
reference evaluator and numpy: post transforms, tree node modes and missing
value tracks, aggregate functions, and the typed errors for bad attributes
and out-of-range indices."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import hetero_explore as he
from hetero_explore.ir.errors import ExecutionError, KernelError

ML = "ai.onnx.ml"


def _model(node, inputs, outputs, ml_opset=3):
    g = helper.make_graph([node], "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)])
    m.ir_version = 8 if ml_opset < 4 else 10
    return m


def _run(m, feeds):
    g = he.load_model(m, input_shapes={k: v.shape for k, v in feeds.items()})
    plan = he.plan(g, ["gpu", "cpu"])
    return he.execute(plan, feeds).outputs


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _i(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def _tree_classifier(post, modes=("BRANCH_LEQ",), miss=(0,), binary=False):
    """Two trees of one split each on feature 0 / 1 (threshold 0.5)."""
    n_modes = list(modes) + ["LEAF", "LEAF"]
    kw = dict(
        nodes_treeids=[0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 0, 1, 2],
        nodes_featureids=[0, 0, 0, 1, 0, 0], nodes_values=[0.5, 0, 0, 0.5, 0, 0],
        nodes_modes=n_modes + [modes[-1], "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 0, 1, 0, 0], nodes_falsenodeids=[2, 0, 0, 2, 0, 0],
        nodes_missing_value_tracks_true=[miss[0], 0, 0, miss[-1], 0, 0],
        post_transform=post,
    )
    if binary:
        kw.update(class_treeids=[0, 0, 1, 1], class_nodeids=[1, 2, 1, 2], class_ids=[0, 0, 0, 0],
                  class_weights=[0.3, -0.7, 1.1, 0.2], classlabels_int64s=[0, 1], base_values=[0.25])
    else:
        kw.update(class_treeids=[0, 0, 0, 1, 1, 1], class_nodeids=[1, 2, 2, 1, 2, 1],
                  class_ids=[0, 1, 2, 1, 2, 0], class_weights=[0.5, 0.25, 1.5, -0.75, 2.0, 0.125],
                  classlabels_int64s=[10, 20, 30], base_values=[0.1, -0.2, 0.3])
    nc = 2 if binary else 3
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain=ML, **kw)
    return _model(node, [_f("X", [None, 2])], [_i("label", [None]), _f("probabilities", [None, nc])])


X_TREE = np.array([[0.1, 0.9], [0.7, 0.2], [0.5, 0.5], [np.nan, 0.1], [0.9, np.nan], [-3, 4]], np.float32)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("binary", [False, True])
def test_tree_classifier_post_transforms(post, binary):
    m = _tree_classifier(post, binary=binary)
    x = X_TREE if post != "PROBIT" else np.clip(np.nan_to_num(X_TREE), 0, 1)
    if post == "PROBIT":
        # PROBIT needs scores inside (0, 1): scale the weights down
        for a in m.graph.node[0].attribute:
            if a.name == "class_weights":
                a.floats[:] = [w * 0.1 for w in a.floats]
            if a.name == "base_values":
                a.floats[:] = [0.3] * len(a.floats)
    out = _run(m, {"X": x})
    ref = ReferenceEvaluator(m).run(None, {"X": x})
    np.testing.assert_array_equal(out["label"], ref[0])
    np.testing.assert_allclose(out["probabilities"], ref[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"])
@pytest.mark.parametrize("miss", [0, 1])
def test_tree_modes_and_missing_tracks(mode, miss):
    m = _tree_classifier("NONE", modes=(mode,), miss=(miss,))
    out = _run(m, {"X": X_TREE})
    # by hand: x CMP 0.5 or (miss and isnan(x)) goes to node 1, else node 2
    cmp = {"BRANCH_LEQ": np.less_equal, "BRANCH_LT": np.less, "BRANCH_GTE": np.greater_equal,
           "BRANCH_GT": np.greater, "BRANCH_EQ": np.equal, "BRANCH_NEQ": np.not_equal}[mode]
    exp = np.tile(np.array([0.1, -0.2, 0.3], np.float32), (X_TREE.shape[0], 1))
    for r, row in enumerate(X_TREE):
        for tree, f, (wt, wf) in ((0, 0, ({0: 0.5}, {1: 0.25, 2: 1.5})), (1, 1, ({1: -0.75, 0: 0.125}, {2: 2.0}))):
            go = bool(cmp(row[f], np.float32(0.5))) or (miss and np.isnan(row[f]))
            for c, w in (wt if go else wf).items():
                exp[r, c] += np.float32(w)
    np.testing.assert_allclose(out["probabilities"], exp, rtol=1e-6)
    np.testing.assert_array_equal(out["label"], np.array([10, 20, 30])[np.argmax(exp, axis=1)])


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_regressor_aggregates(agg):
    node = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=2, aggregate_function=agg,
        nodes_treeids=[0, 0, 0, 1, 1, 1, 2], nodes_nodeids=[0, 1, 2, 0, 1, 2, 0],
        nodes_featureids=[0, 0, 0, 1, 0, 0, 0], nodes_values=[0.0, 0, 0, 1.0, 0, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LT", "LEAF", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 0, 1, 0, 0, 0], nodes_falsenodeids=[2, 0, 0, 2, 0, 0, 0],
        target_treeids=[0, 0, 0, 1, 1, 2, 2], target_nodeids=[1, 2, 2, 1, 2, 0, 0],
        target_ids=[0, 0, 1, 1, 0, 0, 1], target_weights=[1.0, -2.0, 3.0, 0.5, 4.0, 0.25, -1.5],
        base_values=[0.5, -0.5])
    m = _model(node, [_f("X", [None, 2])], [_f("Y", [None, 2])])
    x = np.array([[-1, 0], [1, 2], [0, 1], [3, -3]], np.float32)
    out = _run(m, {"X": x})
    ref = ReferenceEvaluator(m).run(None, {"X": x})[0]
    if agg in ("MIN", "MAX"):
        # the reference starts MIN/MAX at ±FLT_MAX for targets no leaf names; onnxruntime at 0
        ref = np.where(np.abs(ref) > 1e30, np.float32([0.5, -0.5]), ref)
    np.testing.assert_allclose(out["Y"], ref, rtol=1e-6)


def test_tree_bad_child_is_a_kernel_error():
    m = _tree_classifier("NONE")
    for a in m.graph.node[0].attribute:
        if a.name == "nodes_truenodeids":
            a.ints[0] = 7
    with pytest.raises((KernelError, ExecutionError), match="child"):
        _run(m, {"X": X_TREE})


def test_tree_feature_out_of_range_is_a_kernel_error():
    m = _tree_classifier("NONE")
    for a in m.graph.node[0].attribute:
        if a.name == "nodes_featureids":
            a.ints[0] = 5
    with pytest.raises((KernelError, ExecutionError), match="feature"):
        _run(m, {"X": X_TREE})


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("rows", [1, 3])
def test_linear_classifier(post, rows):
    rng = np.random.default_rng(rows)
    nc = 2 if rows == 1 else 3
    node = helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain=ML,
                            coefficients=rng.standard_normal(rows * 4).astype(np.float32).tolist(),
                            intercepts=rng.standard_normal(rows).astype(np.float32).tolist(),
                            classlabels_ints=list(range(5, 5 + nc)), post_transform=post)
    m = _model(node, [_f("X", [None, 4])], [_i("label", [None]), _f("scores", [None, nc])], ml_opset=1)
    x = rng.standard_normal((7, 4)).astype(np.float32)
    out = _run(m, {"X": x})
    ref = ReferenceEvaluator(m).run(None, {"X": x})
    np.testing.assert_array_equal(out["label"], ref[0])
    np.testing.assert_allclose(out["scores"], ref[1], rtol=1e-5, atol=1e-6)


def test_linear_regressor_accumulates_in_feature_order():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((2, 5)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain=ML, coefficients=w.ravel().tolist(),
                            intercepts=b.tolist(), targets=2)
    m = _model(node, [_f("X", [None, 5])], [_f("Y", [None, 2])], ml_opset=1)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    exp = np.empty((6, 2), np.float32)
    for r in range(6):
        for t in range(2):
            acc = b[t]
            for k in range(5):
                acc = np.float32(acc + np.float32(x[r, k] * w[t, k]))
            exp[r, t] = acc
    np.testing.assert_array_equal(_run(m, {"X": x})["Y"], exp)   # bitwise: the order is fixed


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer(norm):
    node = helper.make_node("Normalizer", ["X"], ["Y"], domain=ML, norm=norm)
    m = _model(node, [_f("X", [None, 3])], [_f("Y", [None, 3])], ml_opset=1)
    x = np.array([[1, -2, 3], [0.5, 0.25, 4], [2, 2, 2]], np.float32)
    np.testing.assert_allclose(_run(m, {"X": x})["Y"], ReferenceEvaluator(m).run(None, {"X": x})[0], rtol=1e-6)


def test_scaler_binarizer_imputer():
    x = np.array([[1, np.nan, 3], [np.nan, 5, -1]], np.float32)
    for node in (helper.make_node("Scaler", ["X"], ["Y"], domain=ML, offset=[1.0, 2.0, 3.0], scale=[2.0, 0.5, -1.0]),
                 helper.make_node("Binarizer", ["X"], ["Y"], domain=ML, threshold=1.5),
                 helper.make_node("Imputer", ["X"], ["Y"], domain=ML, imputed_value_floats=[9.0, 8.0, 7.0],
                                  replaced_value_float=float("nan"))):
        m = _model(node, [_f("X", [None, 3])], [_f("Y", [None, 3])], ml_opset=1)
        ours = _run(m, {"X": x})["Y"]
        ref = ReferenceEvaluator(m).run(None, {"X": x})[0]
        np.testing.assert_array_equal(ours, ref.astype(np.float32), err_msg=node.op_type)


def test_array_feature_extractor_out_of_range_is_an_execution_error():
    node = helper.make_node("ArrayFeatureExtractor", ["X", "I"], ["Y"], domain=ML)
    m = _model(node, [_f("X", [2, 4]), _i("I", [2])], [_f("Y", [2, 2])], ml_opset=1)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(_run(m, {"X": x, "I": np.array([3, 0])})["Y"], x[:, [3, 0]])
    with pytest.raises(ExecutionError, match="out of range"):
        _run(m, {"X": x, "I": np.array([1, 4])})
    m = _model(node, [_f("X", [2, 4]), _i("I", [1])], [_f("Y", [2, 1])], ml_opset=1)   # one index: its own path
    np.testing.assert_array_equal(_run(m, {"X": x, "I": np.array([2])})["Y"], x[:, [2]])
    for bad in (4, -1):
        with pytest.raises(ExecutionError, match="out of range"):
            _run(m, {"X": x, "I": np.array([bad])})


def test_label_encoder_numeric_and_one_hot():
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, keys_int64s=[3, 1, 7],
                            values_floats=[0.5, 1.5, 2.5], default_float=-1.0)
    m = _model(node, [_i("X", [5])], [_f("Y", [5])], ml_opset=2)
    x = np.array([1, 3, 7, 2, -5], np.int64)
    np.testing.assert_array_equal(_run(m, {"X": x})["Y"], np.float32([1.5, 0.5, 2.5, -1, -1]))
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_int64s=[2, 4, 6], zeros=0)
    m = _model(node, [_i("X", [1, 3])], [_f("Y", [1, 3, 3])], ml_opset=1)
    np.testing.assert_array_equal(_run(m, {"X": np.array([[4, 2, 6]])})["Y"], np.eye(3, dtype=np.float32)[[1, 0, 2]][None])
    with pytest.raises(ExecutionError, match="not one of the categories"):
        _run(m, {"X": np.array([[4, 5, 6]])})


def test_feature_vectorizer():
    node = helper.make_node("FeatureVectorizer", ["A", "B"], ["Y"], domain=ML, inputdimensions=[2, 3])
    m = _model(node, [_f("A", [2, 2]), _f("B", [2, 2])], [_f("Y", [2, 5])], ml_opset=1)
    a = np.float32([[1, 2], [3, 4]])
    b = np.float32([[5, 6], [7, 8]])
    np.testing.assert_array_equal(_run(m, {"A": a, "B": b})["Y"], np.float32([[1, 2, 5, 6, 0], [3, 4, 7, 8, 0]]))


# -- the compiled walks and row loops against the numpy code they replace -----------------------
def _random_forest(rng, n_trees=7, depth=4, n_feat=5, nt=3, dt=np.float32, modes=6, p_leaf=0.0, thresholds=None):
    """A forest of binary trees in ml._Forest's layout (internal nodes, then leaves, per tree),
    modes drawn from 0..modes-1 (every mode but BRANCH_MEMBER by default), some missing-value
    tracks, dense leaf rows (some targets unnamed). ``p_leaf``: the chance that an inner node
    (not a root) is a leaf instead, so that leaves lie at several depths; ``thresholds``: the
    values thresholds are drawn from (default normal)."""
    from hetero_explore.kernels import ml
    feat, thr, mode, tn, fn, miss, roots = [], [], [], [], [], [], []
    for _ in range(n_trees):
        base = len(feat)
        roots.append(base)
        n_in = 2 ** depth - 1
        for i in range(2 ** (depth + 1) - 1):
            leaf = i >= n_in or (i > 0 and rng.random() < p_leaf)
            feat.append(0 if leaf else int(rng.integers(0, n_feat)))
            t = float(rng.standard_normal()) if thresholds is None else float(rng.choice(thresholds))
            thr.append(0.0 if leaf else t)
            mode.append(ml.LEAF if leaf else int(rng.integers(0, modes)))
            tn.append(base + 2 * i + 1 if not leaf else 0)
            fn.append(base + 2 * i + 2 if not leaf else 0)
            miss.append(bool(rng.integers(0, 2)) and not leaf)
    n = len(feat)
    leafw = (rng.standard_normal((n, nt)) * (rng.random((n, nt)) > 0.3)).astype(dt)
    leafw[np.asarray(mode) != ml.LEAF] = 0
    leafhas = leafw != 0
    return ml._Forest(np.asarray(feat, np.int64), np.asarray(thr, dt), np.asarray(mode, np.int64),
                      np.asarray(tn, np.int64), np.asarray(fn, np.int64), np.asarray(miss), roots, leafw, leafhas)


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_compiled_tree_walk_is_bitwise_the_numpy_walk(agg, dt):
    rng = np.random.default_rng(3)
    forest = _random_forest(rng, dt=dt)
    x = rng.standard_normal((300, 5)).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    x[:, 2] = np.round(x[:, 2])          # ties for BRANCH_EQ / NEQ
    forest.thr[forest.feat == 2] = np.round(forest.thr[forest.feat == 2])
    base = np.asarray([0.5, -0.25, 0.125], dt)
    got = forest.aggregate(x, 3, agg, base)
    forest.members = {-1: None}           # any member set sends aggregate down the numpy walk
    want = forest.aggregate(x, 3, agg, base)
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))


#: thresholds and inputs that meet at the edges of <=, <, >=, >: ties, signed zeros, infinities,
#: NaN, the smallest subnormal
_EDGES = np.float32([0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.0])


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("miss", [True, False])
def test_packed_tree_walk_is_bitwise_the_numpy_walk(agg, dt, miss):
    """The packed walk (kernels.forest: <, >=, > rewritten as <= with the children swapped, leaves
    at several depths walked a tree's full depth) against the numpy walk, at the comparisons'
    edges; a repeated tree and a node shared by two parents are copied. Without missing-value
    tracks and with <= and < only (scikit-learn's trees), the walk has no NaN test."""
    rng = np.random.default_rng(11)
    forest = _random_forest(rng, n_trees=9, depth=5, dt=dt, modes=4 if miss else 2, p_leaf=0.25, thresholds=_EDGES)
    if not miss:
        forest.miss[:] = False
    forest.roots = forest.roots + [forest.roots[2]]
    r0 = forest.roots[0]
    forest.fnext[r0] = forest.tnext[r0]                         # both children the same subtree
    x = rng.choice(_EDGES, (400, 5)).astype(np.float32)
    x[::7] = rng.standard_normal((x[::7].shape[0], 5))
    base = np.asarray([0.5, -0.25, 0.125], dt)
    got = forest.aggregate(x, 3, agg, base)
    assert forest._flat().packed and forest._flat().has_miss == miss
    forest.members = {-1: None}           # any member set sends aggregate down the numpy walk
    want = forest.aggregate(x, 3, agg, base)
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))
    lv, bad = forest._flat_forest.leaves(x)
    assert bad == -1 and np.array_equal(lv, np.stack([forest.leaves(x, r) for r in forest.roots], axis=1))


def test_packed_walk_declines_what_it_does_not_hold():
    """EQ/NEQ nodes, and a cycle, keep the generic walk (which reports the cycle when a row meets it)."""
    from hetero_explore.kernels.forest import FlatForest
    rng = np.random.default_rng(4)

    def flat(f):
        return FlatForest(f.feat, f.thr, f.mode, f.tnext, f.fnext, f.miss, f.roots, f.leafw)

    f = _random_forest(rng, modes=4)
    assert flat(f).packed
    f.mode[f.roots[1]] = 4
    assert not flat(f).packed
    f = _random_forest(rng, modes=4)
    f.tnext[f.roots[0] + 1] = f.roots[0]
    assert not flat(f).packed


def test_compiled_tree_walk_reports_a_cycle():
    from hetero_explore.kernels import ml
    f = ml._Forest(np.zeros(2, np.int64), np.zeros(2, np.float32), np.zeros(2, np.int64), np.array([1, 0]),
                   np.array([1, 0]), np.zeros(2, bool), [0], np.zeros((2, 1), np.float32), np.zeros((2, 1), bool))
    with pytest.raises(ExecutionError, match="cycle"):
        f.aggregate(np.zeros((3, 1), np.float32), 1, "SUM", None)


@pytest.mark.parametrize("kind,gamma", [("LINEAR", 0), ("POLY", 0), ("RBF", 0), ("RBF", -0.01), ("SIGMOID", 0)])
def test_compiled_svm_rows_are_bitwise_the_numpy_formulas(kind, gamma):
    """kernels.mlrows against the numpy code ml.py ran before: sums over ascending features in
    float32 numpy arrays (one rounding per elementwise op), pmath's exp, one-vs-one votes."""
    from hetero_explore.kernels import mlrows
    from hetero_explore.kernels.pmath import exp_f32
    rng = np.random.default_rng(5)
    x = rng.standard_normal((150, 6)).astype(np.float32)
    sv = rng.standard_normal((11, 6)).astype(np.float32)
    g, c0, deg = np.float32(0.3), np.float32(0.5), 3
    if kind == "RBF" and gamma < 0:   # exp of positive arguments: exp_f32, not exp_nonpos_f32
        g = np.float32(gamma)
    acc = np.zeros((150, 11), np.float32)
    if kind == "RBF":
        for k in range(6):
            d = x[:, k:k + 1] - sv[None, :, k]
            acc += d * d
        want = np.vectorize(exp_f32, otypes=[np.float32])(-g * acc)
    else:
        for k in range(6):
            acc += x[:, k:k + 1] * sv[None, :, k]
        base = g * acc + c0
        if kind == "LINEAR":
            want = acc
        elif kind == "POLY":
            want = np.ones_like(base)
            for _ in range(deg):
                want = want * base
        else:
            e = np.vectorize(exp_f32, otypes=[np.float32])(np.float32(-2.0) * np.abs(base))
            t = (np.float32(1.0) - e) / (np.float32(1.0) + e)
            want = np.where(base >= 0, t, -t).astype(np.float32)
    kern = mlrows.kernel_matrix(x, sv, mlrows.KERNELS[kind], g, c0, deg)
    assert np.array_equal(kern.view(np.uint32), want.view(np.uint32))
    vpc = np.array([4, 3, 4], np.int64)
    start = np.array([0, 4, 7], np.int64)
    coefs = rng.standard_normal((2, 11)).astype(np.float32)
    rho = rng.standard_normal(3).astype(np.float32)
    scores, votes = mlrows.svc_rows(x, sv, mlrows.KERNELS[kind], g, c0, deg, coefs, rho, start, vpc)
    svr = mlrows.svr_rows(x, sv, mlrows.KERNELS[kind], g, c0, deg, coefs[0], rho[0])
    s = np.full(150, rho[0], np.float32)
    for v in range(11):
        s = s + coefs[0, v] * kern[:, v]
    assert np.array_equal(svr.view(np.uint32), s.view(np.uint32))
    e = 0
    for i in range(3):
        for j in range(i + 1, 3):
            s = np.full(150, rho[e], np.float32)
            for v in range(vpc[i]):
                s = s + coefs[j - 1, start[i] + v] * kern[:, start[i] + v]
            for v in range(vpc[j]):
                s = s + coefs[i, start[j] + v] * kern[:, start[j] + v]
            assert np.array_equal(scores[:, e].view(np.uint32), s.view(np.uint32))
            assert np.array_equal(votes[:, i] + votes[:, j] >= 0, np.ones(150, bool))
            e += 1
    assert np.array_equal(votes.sum(axis=1), np.full(150, 3.0, np.float32))
