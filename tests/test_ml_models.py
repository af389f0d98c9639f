"""Real scikit-learn pipelines through the ai.onnx.ml kernels.

Each pipeline is trained on a data set bundled with scikit-learn (iris, wine,
breast_cancer, diabetes), converted with skl2onnx (ZipMap off, so classifier
outputs are tensors), loaded with ``hetero_explore.load_model``, planned on
``["gpu", "cpu"]`` (the ml ops fall back to the CPU) and executed. Outputs are
compared with onnxruntime and with scikit-learn's own predictions: labels
exactly, probabilities / regression values within a tolerance stated per case
(float32 arithmetic in a different order than onnxruntime's GEMM / tree
batching, and float64 in scikit-learn).
"""

from __future__ import annotations

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")
ort = pytest.importorskip("onnxruntime")

from sklearn import datasets  # noqa: E402
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor  # noqa: E402,E501
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import Binarizer, Normalizer, OneHotEncoder, StandardScaler  # noqa: E402
from sklearn.svm import SVC, SVR  # noqa: E402
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor  # noqa: E402

import hetero_explore as he  # noqa: E402

OPSETS = {"": 17, "ai.onnx.ml": 3}


def _data(name):
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return X.astype(np.float32), y


def _convert(model, X):
    from skl2onnx import to_onnx
    opts = {id(model): {"zipmap": False}} if hasattr(model, "predict_proba") or hasattr(model, "classes_") else None
    if hasattr(model, "steps"):
        last = model.steps[-1][1]
        opts = {id(last): {"zipmap": False}} if hasattr(last, "classes_") else None
    m = to_onnx(model, X[:1], options=opts, target_opset=OPSETS)
    import onnx
    onnx.checker.check_model(m, full_check=True)
    return m


def _run_all(m, X):
    g = he.load_model(m, input_shapes={"X": X.shape})
    plan = he.plan(g, ["gpu", "cpu"])
    ml_nodes = [n for n in g.nodes if n.domain == "ai.onnx.ml"]
    assert ml_nodes, "the converted model has no ai.onnx.ml node"
    df = plan.placement_df()
    assert set(df[df.domain == "ai.onnx.ml"].provider) == {"cpu"}
    ours = he.execute(plan, {"X": X})
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    theirs = dict(zip(names, ref.run(None, {"X": X})))
    return ours, theirs


def _ours(run, name):
    return np.asarray(run.outputs[name])


CLASSIFIERS = [
    ("scaler_logreg_iris", "iris", lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), 1e-5),
    ("scaler_logreg_breast", "breast_cancer",
     lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), 1e-5),
    ("random_forest_wine", "wine", lambda: RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0), 1e-5),
    ("random_forest_breast", "breast_cancer",
     lambda: RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0), 1e-5),
    ("decision_tree_iris", "iris", lambda: DecisionTreeClassifier(max_depth=4, random_state=0), 1e-6),
    ("gradient_boosting_iris", "iris",
     lambda: GradientBoostingClassifier(n_estimators=15, max_depth=2, random_state=0), 1e-5),
    ("gradient_boosting_breast", "breast_cancer",
     lambda: GradientBoostingClassifier(n_estimators=15, max_depth=2, random_state=0), 1e-5),
    ("svc_rbf_iris", "iris", lambda: make_pipeline(StandardScaler(), SVC(kernel="rbf")), 1e-4),
    ("svc_linear_wine", "wine", lambda: make_pipeline(StandardScaler(), SVC(kernel="linear")), 1e-4),
    ("svc_rbf_breast", "breast_cancer", lambda: make_pipeline(StandardScaler(), SVC(kernel="rbf")), 1e-4),
]


@pytest.mark.parametrize("case", CLASSIFIERS, ids=[c[0] for c in CLASSIFIERS])
def test_classifier_pipelines(case):
    _, data, make, tol = case
    X, y = _data(data)
    clf = make().fit(X, y)
    m = _convert(clf, X)
    ours, theirs = _run_all(m, X)
    lab, sc = _ours(ours, "label"), _ours(ours, "probabilities")
    np.testing.assert_array_equal(lab, theirs["label"])
    np.testing.assert_allclose(sc, theirs["probabilities"], rtol=tol, atol=tol)
    # scikit-learn's own labels: the same except where float32 flips a near-tie
    agree = np.mean(lab == clf.predict(X))
    assert agree >= 0.99, f"only {agree:.3f} of the labels agree with scikit-learn"
    if hasattr(clf, "predict_proba") and not isinstance(clf[-1] if hasattr(clf, "steps") else clf, SVC):
        np.testing.assert_allclose(sc, clf.predict_proba(X), atol=1e-4)


REGRESSORS = [
    ("gradient_boosting_diabetes", lambda: GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0), 1e-4),
    ("random_forest_diabetes", lambda: RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0), 1e-4),
    ("decision_tree_diabetes", lambda: DecisionTreeRegressor(max_depth=5, random_state=0), 1e-5),
    ("normalizer_linreg_diabetes", lambda: make_pipeline(Normalizer(), LinearRegression()), 1e-4),
    ("svr_rbf_diabetes", lambda: make_pipeline(StandardScaler(), SVR(kernel="rbf", C=50.0)), 1e-4),
    ("svr_linear_diabetes", lambda: make_pipeline(StandardScaler(), SVR(kernel="linear")), 1e-4),
]


@pytest.mark.parametrize("case", REGRESSORS, ids=[c[0] for c in REGRESSORS])
def test_regressor_pipelines(case):
    _, make, tol = case
    X, y = _data("diabetes")
    reg = make().fit(X, y)
    m = _convert(reg, X)
    ours, theirs = _run_all(m, X)
    out = _ours(ours, "variable")
    np.testing.assert_allclose(out, theirs["variable"], rtol=tol, atol=tol * np.abs(y).max())
    np.testing.assert_allclose(out.ravel(), reg.predict(X), rtol=1e-3, atol=1e-3 * np.abs(y).max())


def test_binarizer_imputer_pipeline():
    X, y = _data("wine")
    X = X.copy()
    X[::7, 3] = np.nan
    X[::5, 0] = np.nan
    pipe = make_pipeline(SimpleImputer(strategy="mean"), Binarizer(threshold=2.0)).fit(X)
    m = _convert(pipe, X)
    ours, theirs = _run_all(m, X)
    name = next(iter(theirs))
    np.testing.assert_array_equal(_ours(ours, name), theirs[name])
    np.testing.assert_array_equal(_ours(ours, name), pipe.transform(X))


def test_imputer_scaler_logreg_with_missing_values():
    X, y = _data("breast_cancer")
    X = X.copy()
    X[::3, 2] = np.nan
    pipe = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(),
                         LogisticRegression(max_iter=1000)).fit(X, y)
    m = _convert(pipe, X)
    ours, theirs = _run_all(m, X)
    np.testing.assert_array_equal(_ours(ours, "label"), theirs["label"])
    np.testing.assert_allclose(_ours(ours, "probabilities"), theirs["probabilities"], atol=1e-5)


def test_one_hot_encoder():
    X, _ = _data("iris")
    cats = np.floor(X[:, :2]).astype(np.int64)   # small integer categories per column
    enc = OneHotEncoder(handle_unknown="ignore").fit(cats)
    from skl2onnx import to_onnx
    m = to_onnx(enc, cats[:1], target_opset=OPSETS)
    ours, theirs = _run_all(m, cats)
    name = next(iter(theirs))
    np.testing.assert_array_equal(_ours(ours, name), theirs[name])
    np.testing.assert_array_equal(_ours(ours, name), enc.transform(cats).toarray())
