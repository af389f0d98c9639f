"""String ops on the CPU provider (hetero_explore/kernels/strings.py), each
run as a whole model (load_model + run_graph, so string graph inputs and object
buffers go through the real path), against onnxruntime or onnx's reference
evaluator; hostile strings and patterns stay inert."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import time

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from hetero_explore.ir.errors import ExecutionError, InputValidationError
from hetero_explore.load.loader import load_model
from hetero_explore.ir.context import node_context
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.execution.runtime import run_graph

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
S = TensorProto.STRING
ML = "ai.onnx.ml"

#: strings that would break code that formats, evaluates, truncates or re-encodes them
HOSTILE = ["{0}{1}%s%n", "__import__('os').system('true')", "a\x00", "\x00", "", " \t\n ",
           "\u202eevil", "é" * 50, "😀x", "\\1$&"]


def _model(nodes, inputs, outputs, opset=20, ml=False, inits=()):
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(ML, 3)] if ml else [])
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=ops)
    m.ir_version = 9
    return m


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _strs(xs, shape=None):
    a = np.empty(len(xs), object)
    a[:] = xs
    return a.reshape(shape) if shape else a


def _run(model, feeds):
    return run_graph(load_model(model), CPU, feeds)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype or (got.dtype == object and want.dtype.kind in "OU"), (got.dtype, want.dtype)
    assert got.tolist() == want.tolist(), (got, want)


# -- StringNormalizer -------------------------------------------------------------------------
@pytest.mark.parametrize("action,sensitive", [("LOWER", 0), ("UPPER", 1), ("NONE", 0), ("NONE", 1)])
def test_string_normalizer_matches_onnxruntime(action, sensitive):
    x = _strs(["Monday", "tuesday", "MONDAY", "Wed", "monday"])
    kept = 3 if sensitive else 1
    n = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action=action,
                         is_case_sensitive=sensitive, stopwords=["monday", "Wed"],
                         locale="C.UTF-8")   # onnxruntime needs an installed locale; C.UTF-8 always is
    m = _model([n], [_vi("x", S, [5])], [_vi("y", S, [kept])], opset=10)
    want = _ort(m, {"x": x})[0]
    _same(_run(m, {"x": x})["y"], want)


def test_string_normalizer_2d_and_all_stopped():
    n = helper.make_node("StringNormalizer", ["x"], ["y"], stopwords=["a", "b"], locale="C.UTF-8")
    m = _model([n], [_vi("x", S, [1, 2])], [_vi("y", S, [1, 1])], opset=10)
    got = _run(m, {"x": _strs(["A", "b"], (1, 2))})["y"]
    _same(got, _ort(m, {"x": _strs(["A", "b"], (1, 2))})[0])
    assert got.tolist() == [[""]]


def test_string_normalizer_result_that_does_not_fit_is_an_error():
    n = helper.make_node("StringNormalizer", ["x"], ["y"], stopwords=["a"])
    m = _model([n], [_vi("x", S, [3])], [_vi("y", S, [2])], opset=10)
    # its output shape is computed from the data before the kernel runs (StringNormalizer's
    # run-time shape function): the declaration that does not hold is named there
    with pytest.raises(ExecutionError, match=r"as object \(3,\), but it was planned as object \(2,\)"):
        _run(m, {"x": _strs(["x", "y", "z"])})


# -- Equal on strings ---------------------------------------------------------------------------
def test_string_equal_broadcasts_and_compares_hostile_strings_exactly():
    x = _strs(HOSTILE, (2, 5))
    y = _strs(["a\x00", "\u202eevil"], (2, 1))
    n = helper.make_node("Equal", ["x", "y"], ["z"])
    m = _model([n], [_vi("x", S, [2, 5]), _vi("y", S, [2, 1])], [_vi("z", TensorProto.BOOL, [2, 5])], opset=19)
    got = _run(m, {"x": x, "y": y})["z"]
    _same(got, ReferenceEvaluator(m).run(None, {"x": x, "y": y})[0])
    assert got.tolist() == [[False, False, True, False, False], [False, True, False, False, False]]


def test_string_equal_rejects_a_non_string_element():
    n = helper.make_node("Equal", ["x", "y"], ["z"])
    m = _model([n], [_vi("x", S, [2]), _vi("y", S, [2])], [_vi("z", TensorProto.BOOL, [2])], opset=19)
    bad = np.array(["a", 3], dtype=object)
    with pytest.raises((ExecutionError, InputValidationError)):
        _run(m, {"x": bad, "y": _strs(["a", "b"])})


# -- StringConcat, StringSplit ----------------------------------------------------------------
def test_string_concat_broadcasts_and_keeps_hostile_strings():
    x = _strs(HOSTILE, (2, 5))
    y = _strs(["|", "\x00"], (2, 1))
    n = helper.make_node("StringConcat", ["x", "y"], ["z"])
    m = _model([n], [_vi("x", S, [2, 5]), _vi("y", S, [2, 1])], [_vi("z", S, [2, 5])])
    got = _run(m, {"x": x, "y": y})["z"]
    want = [[a + b for a in row] for row, b in zip(x.tolist(), ["|", "\x00"])]
    assert got.tolist() == want      # NULs kept (np.char would drop trailing ones)
    assert got[0, 2] == "a\x00|" and got[1, 1] == "\u202eevil\x00"


@pytest.mark.parametrize("delimiter,maxsplit", [(None, None), (",", None), (",", 1), (None, 1), ("ab", None)])
def test_string_split_matches_reference(delimiter, maxsplit):
    x = _strs(["a,b,,c", "  x  y ", "", "abcab,ab"])
    kw = {} if delimiter is None else {"delimiter": delimiter}
    if maxsplit is not None:
        kw["maxsplit"] = maxsplit
    n = helper.make_node("StringSplit", ["x"], ["y", "z"], **kw)
    want = ReferenceEvaluator(_model([n], [_vi("x", S, [4])], [_vi("y", S, None),
                                                              _vi("z", TensorProto.INT64, None)])).run(
        None, {"x": x})
    m = _model([n], [_vi("x", S, [4])], [_vi("y", S, list(want[0].shape)), _vi("z", TensorProto.INT64, [4])])
    got = _run(m, {"x": x})
    _same(got["y"], want[0].astype(object))
    _same(got["z"], want[1])


# -- RegexFullMatch (RE2) ---------------------------------------------------------------------
def test_regex_full_match_matches_onnxruntime():
    x = _strs(["www.google.com", "www.facebook.com", "www.bbc.co.uk", "google.com", "ab\x00"])
    n = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"www\.[\w.-]+\.\bcom\b")
    m = _model([n], [_vi("x", S, [5])], [_vi("y", TensorProto.BOOL, [5])])
    got = _run(m, {"x": x})["y"]
    _same(got, _ort(m, {"x": x})[0])
    assert got.tolist() == [True, True, False, False, False]


def test_regex_catastrophic_pattern_runs_in_linear_time():
    """(a+)+$ on 'a'*n + 'b' backtracks exponentially in Python's re; RE2 is linear."""
    x = _strs(["a" * 5000 + "b", "a" * 40])
    n = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(a+)+")
    m = _model([n], [_vi("x", S, [2])], [_vi("y", TensorProto.BOOL, [2])])
    t = time.perf_counter()
    got = _run(m, {"x": x})["y"]
    assert time.perf_counter() - t < 5
    assert got.tolist() == [False, True]


def test_regex_pattern_outside_re2_is_declined():
    n = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"(a)\1")   # a backreference: not RE2
    g = load_model(_model([n], [_vi("x", S, [1])], [_vi("y", TensorProto.BOOL, [1])]))
    m = CPU.supports(node_context(g, g.nodes[0]))
    assert not m.supported and "not valid RE2" in m.reason


# -- ai.onnx.ml CategoryMapper, LabelEncoder ----------------------------------------------------
def test_category_mapper_both_directions_match_onnxruntime():
    cats = dict(cats_strings=["cat", "dog", "\x00"], cats_int64s=[1, 2, 3])
    n1 = helper.make_node("CategoryMapper", ["x"], ["y"], domain=ML, default_int64=-7, **cats)
    m1 = _model([n1], [_vi("x", S, [2, 2])], [_vi("y", TensorProto.INT64, [2, 2])], opset=17, ml=True)
    x = _strs(["dog", "cow", "\x00", "cat"], (2, 2))
    got = _run(m1, {"x": x})["y"]
    _same(got, _ort(m1, {"x": x})[0])
    assert got.tolist() == [[2, -7], [3, 1]]
    n2 = helper.make_node("CategoryMapper", ["x"], ["y"], domain=ML, default_string="?", **cats)
    m2 = _model([n2], [_vi("x", TensorProto.INT64, [3])], [_vi("y", S, [3])], opset=17, ml=True)
    xi = np.array([3, 9, 1], np.int64)
    got = _run(m2, {"x": xi})["y"]
    _same(got, _ort(m2, {"x": xi})[0])


@pytest.mark.parametrize("keys,vals,xtype,x", [
    ({"keys_strings": ["a", "b", "{0}"]}, {"values_int64s": [5, 6, 7]}, S, ["b", "{0}", "zz"]),
    ({"keys_int64s": [1, 2]}, {"values_strings": ["one", "two"]}, TensorProto.INT64, [2, 3, 1]),
    ({"keys_strings": ["x"]}, {"values_strings": ["y\x00"]}, S, ["x", "x ", ""]),
    ({"keys_strings": ["x", "y"]}, {"values_floats": [0.5, -1.0]}, S, ["y", "q", "x"]),
])
def test_label_encoder_string_paths_match_onnxruntime(keys, vals, xtype, x):
    n = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, **keys, **vals)
    ytype = S if "values_strings" in vals else (TensorProto.INT64 if "values_int64s" in vals else TensorProto.FLOAT)
    m = _model([n], [_vi("x", xtype, [3])], [_vi("y", ytype, [3])], opset=17, ml=True)
    feed = _strs(x) if xtype == S else np.array(x, np.int64)
    _same(_run(m, {"x": feed})["y"], _ort(m, {"x": feed})[0])


# -- TfIdfVectorizer -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("strings", [False, True])
def test_tfidf_matches_onnxruntime(mode, strings):
    pool = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]     # unigrams 2 3 5 4; bigrams (5,6) (7,8) (6,7)
    x = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int64)
    kw = dict(min_gram_length=1, max_gram_length=2, max_skip_count=2, mode=mode, ngram_counts=[0, 4],
              ngram_indexes=list(range(7)), weights=[1.5, 0.5, 2.0, 1.0, 3.0, 0.25, 1.0])
    if strings:
        kw["pool_strings"] = [f"t{v}" for v in pool]
        feed = _strs([f"t{v}" for v in x.ravel()], x.shape)
        xtype = S
    else:
        kw["pool_int64s"] = pool
        feed, xtype = x, TensorProto.INT64
    n = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **kw)
    m = _model([n], [_vi("x", xtype, [2, 6])], [_vi("y", TensorProto.FLOAT, [2, 7])], opset=9)
    got = _run(m, {"x": feed})["y"]
    want = _ort(m, {"x": feed})[0]
    assert got.dtype == np.float32 and np.array_equal(got, want), (got, want)


# -- the plumbing --------------------------------------------------------------------------------
def test_string_inputs_are_validated():
    n = helper.make_node("StringConcat", ["x", "x"], ["z"])
    m = _model([n], [_vi("x", S, [2])], [_vi("z", S, [2])])
    g = load_model(m)
    assert run_graph(g, CPU, {"x": np.array(["a", "b"])})["z"].tolist() == ["aa", "bb"]   # <U is accepted
    with pytest.raises(InputValidationError, match="string tensor takes an array of Python str"):
        run_graph(g, CPU, {"x": _strs(["a", b"b"])})
    with pytest.raises(InputValidationError, match="string tensor"):
        run_graph(g, CPU, {"x": np.array([1.0, 2.0], np.float32)})
    assert CPU.live_allocations == 0


def test_string_ops_are_cpu_only():
    n = helper.make_node("StringConcat", ["x", "x"], ["z"])
    g = load_model(_model([n], [_vi("x", S, [2])], [_vi("z", S, [2])]))
    m = GPU.supports(node_context(g, g.nodes[0]))
    assert not m.supported
