"""Classic-ML outputs for batches of 1, 2 and 17, against onnxruntime: every ai.onnx.ml op, in
the pipelines skl2onnx and onnxmltools (LightGBM, XGBoost) write and CatBoost exports itself --
labels (int64 and string), probabilities, regression values and ZipMap's dicts.

A classifier's labels are checked wherever they are produced: one per row, whatever the batch
(onnxmltools declares LightGBM's ``label`` output ``[1]`` for any batch; onnxruntime ignores
that declaration, and so does the loader now, see :func:`test_lightgbm_label_for_a_batch_of_ten`).
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

import hetero_explore as he  # noqa: E402

from sklearn import datasets  # noqa: E402

BATCHES = (1, 2, 17)
OPSETS = {"": 17, "ai.onnx.ml": 3}


def _iris():
    X, y = datasets.load_iris(return_X_y=True)
    return X.astype(np.float32), y


def _cancer():
    X, y = datasets.load_breast_cancer(return_X_y=True)
    return X[:, :8].astype(np.float32), y


def _ort(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {o.name: v for o, v in zip(s.get_outputs(), s.run(None, feeds))}


def _same(name, a, b, atol):
    if isinstance(b, list):      # ZipMap: one dict per row
        assert isinstance(a, list) and len(a) == len(b), name
        for ra, rb in zip(a, b):
            assert list(ra.keys()) == list(rb.keys()), name
            np.testing.assert_allclose([float(v) for v in ra.values()], list(rb.values()), atol=atol, err_msg=name)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{name}: shape {a.shape} vs onnxruntime's {b.shape}"
    if b.dtype == object or b.dtype.kind in "iub" or a.dtype == object:
        assert a.tolist() == b.tolist(), name
    else:
        np.testing.assert_allclose(a, b, atol=atol, rtol=1e-5, err_msg=name)


def check_batches(m, X, input_name="X", atol=1e-5, extra=None):
    """The model on the first 1, 2 and 17 rows of X, bound and planned on [gpu, cpu]."""
    for n in BATCHES:
        feeds = {input_name: X[:n]}
        if extra:
            feeds.update({k: v[:n] for k, v in extra.items()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = he.load_model(m, input_shapes={k: v.shape for k, v in feeds.items()})
        plan = he.plan(g, ["gpu", "cpu"])
        assert "unplaced" not in set(plan.placement_df().provider), plan.placement_df().to_string()
        ours = he.execute(plan, feeds).outputs
        theirs = _ort(m, feeds)
        for k, v in theirs.items():
            _same(f"{k} (batch {n})", ours[k], v, atol)
            if isinstance(v, np.ndarray) and k in ("label", "output_label", "variable"):
                assert v.shape[0] == n


def _skl(model, X, *, zipmap, target_opset=OPSETS):
    from skl2onnx import to_onnx
    last = model.steps[-1][1] if hasattr(model, "steps") else model
    opts = {id(last): {"zipmap": zipmap}} if hasattr(last, "predict_proba") else None
    return to_onnx(model, X[:1], options=opts, target_opset=target_opset)


def _classifiers():
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, LinearSVC
    from sklearn.tree import DecisionTreeClassifier
    return {
        "logreg_multiclass": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), _iris),
        "logreg_binary": (LogisticRegression(max_iter=2000), _cancer),
        "linear_svc": (LinearSVC(max_iter=5000), _iris),
        "svc_ovo": (SVC(), _iris),
        "tree": (DecisionTreeClassifier(max_depth=4, random_state=0), _iris),
        "forest": (RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0), _cancer),
        "gbm": (GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0), _iris),
    }


@pytest.mark.parametrize("zipmap", [False, True], ids=["tensors", "zipmap"])
@pytest.mark.parametrize("name", list(_classifiers()))
def test_sklearn_classifier(name, zipmap):
    model, data = _classifiers()[name]
    X, y = data()
    model.fit(X, y)
    check_batches(_skl(model, X, zipmap=zipmap), X[::7] if len(X) > 100 else X)


def test_sklearn_classifier_with_string_labels():
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier
    X, y = _iris()
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    for model in (LogisticRegression(max_iter=500), DecisionTreeClassifier(max_depth=3, random_state=0)):
        model.fit(X, names)
        for zipmap in (False, True):
            check_batches(_skl(model, X, zipmap=zipmap), X[::7])


def _regressors():
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import LinearRegression
    from sklearn.svm import SVR
    from sklearn.tree import DecisionTreeRegressor
    return {"linear": LinearRegression(), "svr": SVR(), "tree": DecisionTreeRegressor(max_depth=4, random_state=0),
            "forest": RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0)}


@pytest.mark.parametrize("name", list(_regressors()))
def test_sklearn_regressor(name):
    X, y = datasets.load_diabetes(return_X_y=True)
    X = X.astype(np.float32)
    model = _regressors()[name].fit(X, y)
    check_batches(_skl(model, X, zipmap=False), X[::5], atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble_ml_opset_5(dtype):
    """TreeEnsemble (ai.onnx.ml 5; skl2onnx 1.20 still writes TreeEnsembleRegressor): two trees,
    two targets, onnx's own example of the op."""
    T = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", n_targets=2, aggregate_function=1, post_transform=0,
        tree_roots=[0, 2], nodes_modes=helper.make_tensor("m", TensorProto.UINT8, (3,), [0, 0, 0]),
        nodes_featureids=[0, 0, 0], nodes_splits=helper.make_tensor("s", T, (3,), [3.14, 1.2, 4.2]),
        nodes_truenodeids=[1, 0, 1], nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[2, 2, 3],
        nodes_falseleafs=[0, 1, 1], leaf_targetids=[0, 1, 0, 1],
        leaf_weights=helper.make_tensor("w", T, (4,), [5.23, 12.12, -12.23, 7.21]))
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("X", T, [None, 2])],
                          [helper.make_tensor_value_info("Y", T, [None, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
    X = (np.random.default_rng(1).random((17, 2)) * 6).astype(dtype)
    check_batches(m, X)


@pytest.mark.parametrize("name", ["scaler", "normalizer", "binarizer", "imputer", "onehot_int", "minmax"])
def test_sklearn_transformers(name):
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import Binarizer, MinMaxScaler, Normalizer, OneHotEncoder, StandardScaler
    X, _ = _iris()
    if name == "imputer":
        X = X.copy()
        X[::3, 1] = np.nan
    if name == "onehot_int":
        X = (X[:, :2] * 2).astype(np.int64).astype(np.float32)
    model = {"scaler": StandardScaler(), "normalizer": Normalizer(), "binarizer": Binarizer(threshold=2.0),
             "imputer": SimpleImputer(), "onehot_int": OneHotEncoder(handle_unknown="ignore"),
             "minmax": MinMaxScaler()}[name].fit(X)
    from skl2onnx import to_onnx
    m = to_onnx(model, X[:1], target_opset=OPSETS)
    check_batches(m, X[::7])


def test_column_transformer_array_feature_extractor():
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    X, y = _iris()
    p = make_pipeline(ColumnTransformer([("a", StandardScaler(), [0, 2])]), LogisticRegression(max_iter=500)).fit(X, y)
    m = _skl(p, X, zipmap=True)
    assert any(n.op_type == "ArrayFeatureExtractor" for n in m.graph.node)
    check_batches(m, X[::7])


def test_label_encoder_strings():
    from sklearn.preprocessing import LabelEncoder
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    le = LabelEncoder().fit(["paris", "tokyo", "amsterdam", "lima"])
    m = to_onnx(le, initial_types=[("X", StringTensorType([None]))], target_opset=OPSETS)
    check_batches(m, np.array(["tokyo", "lima", "paris", "amsterdam"] * 5, object))


def test_hand_built_map_and_category_ops():
    # DictVectorizer / CastMap take one map (batch 1 by their types); CategoryMapper and
    # FeatureVectorizer batches of strings / columns
    ml = helper.make_opsetid("ai.onnx.ml", 3)
    nodes = [helper.make_node("CategoryMapper", ["s"], ["c"], domain="ai.onnx.ml", cats_strings=["a", "b", "c"],
                              cats_int64s=[5, 7, 9], default_int64=-1),
             helper.make_node("Cast", ["c"], ["cf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["cf", "ax"], ["cf2"]),
             helper.make_node("FeatureVectorizer", ["cf2", "x"], ["fv"], domain="ai.onnx.ml", inputdimensions=[1, 3])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("s", TensorProto.STRING, [None]),
                                       helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
                          [helper.make_tensor_value_info("fv", TensorProto.FLOAT, [None, 4])],
                          initializer=[onnx.numpy_helper.from_array(np.array([1], np.int64), "ax")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), ml])
    s = np.array(["a", "zz", "c", "b"] * 5, object)
    x = np.arange(60, dtype=np.float32).reshape(20, 3)
    check_batches(m, s, input_name="s", extra={"x": x})


# -- onnxmltools: LightGBM, XGBoost; CatBoost's own export -------------------------------------
def _lgb(cls, X, y, zipmap=True):
    lgb = pytest.importorskip("lightgbm")
    pytest.importorskip("onnxmltools")
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType
    model = getattr(lgb, cls)(n_estimators=5, num_leaves=4, verbose=-1).fit(X, y)
    kw = {"zipmap": zipmap} if cls == "LGBMClassifier" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return convert_lightgbm(model, initial_types=[("X", FloatTensorType([None, X.shape[1]]))], target_opset=15,
                                **kw)


def test_lightgbm_label_for_a_batch_of_ten():
    """onnxmltools declares the label [1]; a batch of 10 must give 10 labels (it gave 1), bound or not."""
    X, y = _cancer()
    m = _lgb("LGBMClassifier", X, y)
    assert [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim] == [1]
    X10 = X[::50][:10]
    theirs = _ort(m, {"X": X10})
    for shapes in ({"X": X10.shape}, None):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            g = he.load_model(m, input_shapes=shapes)
        ours = he.execute_reference(g, "cpu", {"X": X10}).outputs
        assert ours["label"].shape == (10,)
        if shapes:   # bound: the wrong declaration is named
            assert any("declared with shape (1,)" in str(w.message) for w in seen)
        np.testing.assert_array_equal(ours["label"], theirs["label"])
        _same("probabilities", ours["probabilities"], theirs["probabilities"], 1e-6)


@pytest.mark.parametrize("kind", ["binary", "multiclass", "regressor"])
def test_lightgbm(kind):
    X, y = _cancer() if kind == "binary" else _iris()
    if kind == "regressor":
        X, y = datasets.load_diabetes(return_X_y=True)
        X = X.astype(np.float32)
    m = _lgb("LGBMRegressor" if kind == "regressor" else "LGBMClassifier", X, y)
    check_batches(m, X[::7], atol=1e-4)


@pytest.mark.parametrize("kind", ["binary", "multiclass", "regressor"])
def test_xgboost(kind):
    xgb = pytest.importorskip("xgboost")
    pytest.importorskip("onnxmltools")
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType
    X, y = _cancer() if kind == "binary" else _iris()
    if kind == "regressor":
        X, y = datasets.load_diabetes(return_X_y=True)
        X = X.astype(np.float32)
        model = xgb.XGBRegressor(n_estimators=5, max_depth=3).fit(X, y)
    else:
        model = xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = convert_xgboost(model, initial_types=[("X", FloatTensorType([None, X.shape[1]]))], target_opset=15)
    check_batches(m, X[::7], atol=1e-4)


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_catboost(kind, tmp_path):
    cb = pytest.importorskip("catboost")
    X, y = _iris()
    if kind == "regressor":
        X, y = datasets.load_diabetes(return_X_y=True)
        X = X.astype(np.float32)
        model = cb.CatBoostRegressor(iterations=5, depth=3, verbose=False, random_seed=0,
                                     train_dir=str(tmp_path)).fit(X, y)
    else:
        model = cb.CatBoostClassifier(iterations=5, depth=3, verbose=False, random_seed=0,
                                      train_dir=str(tmp_path)).fit(X, y)
    p = tmp_path / "cb.onnx"
    model.save_model(str(p), format="onnx")
    m = onnx.load(str(p))
    check_batches(m, X[::7], input_name=m.graph.input[0].name, atol=1e-4)


# -- LinearClassifier as onnxruntime reads it --------------------------------------------------
def _linear_classifier(xshape, coefficients, intercepts, labels=(0, 1, 2)):
    node = helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml",
                            coefficients=list(coefficients), intercepts=list(intercepts),
                            classlabels_ints=list(labels), post_transform="SOFTMAX", multi_class=0)
    g = helper.make_graph([node], "logreg", [helper.make_tensor_value_info("X", TensorProto.FLOAT, xshape)],
                          [helper.make_tensor_value_info("label", TensorProto.INT64, None),
                           helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9), helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 7
    return m


@pytest.mark.parametrize("case", ["one_d_input", "more_coefficients_than_rows_by_features"])
def test_linear_classifier_read_as_onnxruntime_does(case):
    """A logreg_iris-style model: the class count is the intercepts', the feature count X's, and
    the coefficients are read as that many rows of that many (onnxruntime's reading)."""
    rng = np.random.default_rng(0)
    coef = rng.standard_normal(12).astype(np.float32)
    if case == "one_d_input":
        m, x = _linear_classifier([4], coef, [0.1, -0.2, 0.3]), rng.standard_normal(4).astype(np.float32)
    else:
        m, x = _linear_classifier([None, 3], coef, [0.1, -0.2, 0.3]), rng.standard_normal((5, 3)).astype(np.float32)
    theirs = _ort(m, {"X": x})
    g = he.load_model(m, input_shapes={"X": x.shape}, check=False)
    ours = he.execute_reference(g, "cpu", {"X": x}).outputs
    _same("label", ours["label"], theirs["label"], 0)
    _same("scores", ours["scores"], theirs["scores"], 1e-6)
