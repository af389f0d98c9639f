"""String tensors as host values: through every op that only moves or selects data, through
onnxruntime's Tokenizer, and through the classic-ML pipelines that carry them (a TF-IDF text
classifier and a ColumnTransformer one-hot encoding a string column, both converted by
skl2onnx), against onnxruntime; planned on the CPU provider with the reason on the others."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

import hetero_explore as he  # noqa: E402
from hetero_explore.execution.runtime import run_graph  # noqa: E402
from hetero_explore.load.loader import load_model  # noqa: E402
from hetero_explore.providers.cpu import NumbaCPUProvider  # noqa: E402

CPU = NumbaCPUProvider()
S = TensorProto.STRING
R = np.random.default_rng(3)


def words(*shape):
    pool = np.array(["alpha", "beta", "", "gamma δ", "e", "zeta eta", "θ"], object)
    return pool[R.integers(0, len(pool), shape)].astype(object)


def one_node(op, inputs, out_types, attrs=None, const=(), opset=21, domain=None, extra_outputs=0):
    names = [n for n, _ in inputs]
    outs = [f"y{k}" for k in range(len(out_types))]
    node = helper.make_node(op, names, outs, domain=domain, **(attrs or {}))
    gin, inits = [], []
    for n, a in inputs:
        a = np.asarray(a)
        if n in const:
            inits.append(numpy_helper.from_array(a, n))
        else:
            et = S if a.dtype == object else helper.np_dtype_to_tensor_dtype(a.dtype)
            gin.append(helper.make_tensor_value_info(n, et, a.shape))
    gout = [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types)]
    g = helper.make_graph([node], "t", gin, gout, initializer=inits)
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 9
    return m


def both(m, feeds):
    g = load_model(m, check=False, fold_constants=False, optimize=False)
    ours = run_graph(g, CPU, feeds)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = sess.run(None, feeds)
    return [ours[o.name] for o in m.graph.output], theirs, g


I64 = lambda *v: np.array(v, np.int64)  # noqa: E731

CASES = {
    "Identity": ([("x", words(2, 3))], {}, ()),
    "Reshape": ([("x", words(2, 3)), ("s", I64(3, -1))], {}, ("s",)),
    "Flatten": ([("x", words(2, 3, 2))], {"axis": 2}, ()),
    "Squeeze": ([("x", words(2, 1, 3)), ("a", I64(1))], {}, ("a",)),
    "Unsqueeze": ([("x", words(2, 3)), ("a", I64(0, 3))], {}, ("a",)),
    "Transpose": ([("x", words(2, 3, 4))], {"perm": [2, 0, 1]}, ()),
    "Expand": ([("x", words(3, 1)), ("s", I64(2, 3, 4))], {}, ("s",)),
    "Tile": ([("x", words(2, 3)), ("r", I64(2, 2))], {}, ("r",)),
    "Concat": ([("x", words(2, 3)), ("z", words(2, 2))], {"axis": 1}, ()),
    "Slice": ([("x", words(4, 5)), ("st", I64(3, 1)), ("en", I64(-5, 5)), ("ax", I64(0, 1)), ("sp", I64(-2, 2))],
              {}, ("st", "en", "ax", "sp")),
    "Gather": ([("x", words(5, 3)), ("i", np.array([[4, -1], [0, 2]], np.int64))], {"axis": 0}, ()),
    "GatherElements": ([("x", words(3, 4)), ("i", np.array([[0, 3], [2, -1], [1, 1]], np.int64))], {"axis": 1}, ()),
    "GatherND": ([("x", words(3, 4, 2)), ("i", np.array([[0, 1], [2, 3]], np.int64))], {}, ()),
    "Where": ([("c", R.random((3, 4)) > 0.5), ("x", words(3, 4)), ("z", words(1, 4))], {}, ()),
    "Compress": ([("x", words(4, 3)), ("c", np.array([True, False, True, True]))], {"axis": 0}, ()),
    "ScatterND": ([("x", words(4, 3)), ("i", np.array([[1], [3]], np.int64)), ("u", words(2, 3))], {}, ()),
    "ScatterElements": ([("x", words(3, 3)), ("i", np.array([[1, 0, 2]], np.int64)), ("u", words(1, 3))],
                        {"axis": 0}, ()),
    "ReverseSequence": ([("x", words(4, 2, 3)), ("l", np.array([4, 2], np.int64))],
                        {"batch_axis": 1, "time_axis": 0}, ()),
}


@pytest.mark.parametrize("op", list(CASES))
def test_string_tensor_through_movement_op(op):
    inputs, attrs, const = CASES[op]
    m = one_node(op, inputs, [S], attrs, const)
    feeds = {n: a for n, a in inputs if n not in const}
    ours, theirs, g = both(m, feeds)
    if op == "Gather":
        # onnxruntime 1.32's string Gather along axis 0 of a 2-D tensor keeps only the first string
        # of each gathered row (the others come back empty): the spec's result is numpy's take
        theirs = [np.take(feeds["x"], feeds["i"], axis=0)]
    assert ours[0].dtype == object and ours[0].shape == theirs[0].shape
    assert ours[0].tolist() == theirs[0].tolist()


def test_split_strings():
    x = words(2, 5)
    m = one_node("Split", [("x", x), ("s", I64(2, 3))], [S, S], {"axis": 1}, const=("s",))
    ours, theirs, _ = both(m, {"x": x})
    assert [o.tolist() for o in ours] == [t.tolist() for t in theirs]


def test_strings_planned_on_cpu_with_the_reason_elsewhere():
    x = words(2, 3)
    g = load_model(one_node("Transpose", [("x", x)], [S], {"perm": [1, 0]}), check=False)
    plan = he.plan(g, ["gpu", "cpu"])
    row = plan.placement_df().iloc[0]
    assert row.provider == "cpu"
    assert "string tensor" in row.declined_by["gpu"] and "CPU provider" in row.declined_by["gpu"]


def test_out_of_range_gather_on_strings_names_the_node():
    x = words(3, 2)
    g = load_model(one_node("Gather", [("x", x), ("i", I64(5))], [S]), check=False)
    with pytest.raises(Exception, match="Gather"):
        run_graph(g, CPU, {"x": x, "i": I64(5)})


# -- Tokenizer (com.microsoft) ------------------------------------------------------------------
TEXTS = np.array([["Hello, world! A b", "one-two  three"], ["x", ""]], object)


@pytest.mark.parametrize("attrs", [
    {"mark": 0, "pad_value": "#", "mincharnum": 1, "tokenexp": "[a-zA-Z0-9_]+"},
    {"mark": 1, "pad_value": "_", "mincharnum": 2, "tokenexp": "[a-z]+"},
    {"mark": 0, "pad_value": "", "mincharnum": 1, "separators": [" ", ",", "-"]},
    {"mark": 1, "pad_value": "P", "mincharnum": 2, "separators": ["[ ,!]+"]},
    {"mark": 0, "pad_value": "#", "mincharnum": 1, "separators": [""]},
], ids=["tokenexp", "tokenexp-mark-min2", "separators", "regex-separator-mark", "chars"])
def test_tokenizer_matches_onnxruntime(attrs):
    pytest.importorskip("re2")
    m = one_node("Tokenizer", [("x", TEXTS)], [S], attrs, domain="com.microsoft")
    ours, theirs, _ = both(m, {"x": TEXTS})
    assert ours[0].shape == theirs[0].shape
    assert ours[0].tolist() == theirs[0].tolist()


# -- pipelines ----------------------------------------------------------------------------------
def _skl():
    pytest.importorskip("sklearn")
    pytest.importorskip("skl2onnx")


def _run_pipeline(m, feeds):
    import onnx
    for n in m.graph.node:   # onnxruntime's StringNormalizer wants a locale this machine has
        if n.op_type == "StringNormalizer" and not any(a.name == "locale" for a in n.attribute):
            n.attribute.append(helper.make_attribute("locale", "C.UTF-8"))
    onnx.checker.check_model(m)
    g = load_model(m, input_shapes={k: v.shape for k, v in feeds.items()})
    plan = he.plan(g, ["gpu", "cpu"])
    df = plan.placement_df()
    assert "unplaced" not in set(df.provider)
    run = he.execute(plan, feeds)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return run.outputs, dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds))), df


@pytest.mark.parametrize("n", [1, 2, 17])
def test_tfidf_text_classifier(n):
    _skl()
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    texts = np.array(["the cat sat", "a dog ran", "the dog sat", "a cat ran fast", "cats and dogs", "the end",
                      "dogs ran fast", "the cat and the dog"])
    y = np.array([0, 1, 1, 0, 1, 0, 1, 0])
    p = make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(texts, y)
    m = to_onnx(p, initial_types=[("text", StringTensorType([None, 1]))], target_opset={"": 17, "ai.onnx.ml": 3},
                options={id(p.steps[-1][1]): {"zipmap": False}})
    x = np.array([[t] for t in (list(texts) * 3)[:n]], object)
    ours, theirs, df = _run_pipeline(m, {"text": x})
    assert ours["label"].shape == theirs["label"].shape == (n,)
    np.testing.assert_array_equal(ours["label"], theirs["label"])
    np.testing.assert_allclose(ours["probabilities"], theirs["probabilities"], atol=1e-6)
    np.testing.assert_array_equal(ours["label"], p.predict(x.ravel()))


@pytest.mark.parametrize("n", [1, 2, 17])
def test_column_transformer_one_hot_string_column(n):
    _skl()
    pd = pytest.importorskip("pandas")
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    X = pd.DataFrame({"color": ["red", "green", "blue", "red", "green", "blue"], "size": [1.0, 2, 3, 4, 5, 6]})
    y = np.array([0, 1, 1, 0, 1, 0])
    ct = ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), ["color"]),
                            ("sc", StandardScaler(), ["size"])])
    p = make_pipeline(ct, LogisticRegression()).fit(X, y)
    m = to_onnx(p, initial_types=[("color", StringTensorType([None, 1])), ("size", FloatTensorType([None, 1]))],
                target_opset={"": 17, "ai.onnx.ml": 3}, options={id(p.steps[-1][1]): {"zipmap": False}})
    colors = np.array([["red"], ["blue"], ["pink"], ["green"]] * 5, object)[:n]
    sizes = np.linspace(0, 7, n, dtype=np.float32).reshape(n, 1)
    ours, theirs, df = _run_pipeline(m, {"color": colors, "size": sizes})
    assert set(df[df.op_type == "OneHotEncoder"].provider) == {"cpu"}
    assert ours["label"].shape == theirs["label"].shape == (n,)
    np.testing.assert_array_equal(ours["label"], theirs["label"])
    np.testing.assert_allclose(ours["probabilities"], theirs["probabilities"], atol=1e-6)
