"""API misuse and hostile feeds: a typed error that says what is wrong, or the right answer.

Typed API-misuse errors subclass both HeteroExploreError and the builtin
TypeError / ValueError, so callers' existing except clauses keep working."""

from __future__ import annotations

import numpy as np
import pytest

import hetero_explore as he
from hetero_explore.data import models
from hetero_explore.ir.errors import (ArgumentTypeError, ArgumentValueError, HeteroExploreError,
                                   InputValidationError, MemoryBudgetError, OutputWriteError,
                                   UnknownProviderError)
from hetero_explore.execution.inputs import random_inputs, validate_inputs


@pytest.fixture(scope="module")
def mlp():
    g = he.load_model(models.mlp("tiny"))
    p = he.plan(g, ["gpu", "cpu"])
    x = g.inputs[0]
    feed = random_inputs(g, seed=3)[x]
    return g, p, x, feed, he.execute(p, {x: feed}).outputs


# -- API misuse ---------------------------------------------------------------------------------
@pytest.mark.parametrize("call, cls, builtin, needle", [
    (lambda g, p: he.execute(g, {}), ArgumentTypeError, TypeError, "expected a Plan"),
    (lambda g, p: he.plan(g, []), ArgumentValueError, ValueError, "provider list is empty"),
    (lambda g, p: he.plan(g, None), ArgumentValueError, ValueError, "at least one provider"),
    (lambda g, p: he.plan(g, ["gpu", "gpu"]), ArgumentValueError, ValueError, "two providers are named 'gpu'"),
    (lambda g, p: he.plan(g, ["tpu"]), UnknownProviderError, ValueError, "unknown provider name 'tpu'"),
    (lambda g, p: he.plan(g, [42]), ArgumentTypeError, TypeError, "expected a provider or a provider name"),
    (lambda g, p: he.plan(g, 7), ArgumentTypeError, TypeError, "priority order"),
    (lambda g, p: he.execute_reference(g, "npu", {}), UnknownProviderError, ValueError, "known names"),
    (lambda g, p: he.compare({}, "ref"), ArgumentTypeError, TypeError, "reference must be a RunResult"),
    (lambda g, p: he.compare({"a": np.zeros(1)}, {"b": np.zeros(1)}), ArgumentValueError, ValueError,
     "different outputs"),
    (lambda g, p: he.compare({"y": np.zeros(1)}, {"y": np.ones(1)}, blame=True), ArgumentTypeError, TypeError, "blame needs two RunResults"),
    (lambda g, p: random_inputs(g, seed="abc"), ArgumentTypeError, TypeError, "seed must be"),
    (lambda g, p: random_inputs(g, seed=-1), ArgumentValueError, ValueError, "non-negative"),
    (lambda g, p: random_inputs(g, seed=1.5), ArgumentTypeError, TypeError, "seed must be"),
    (lambda g, p: random_inputs(g, scale="big"), ArgumentTypeError, TypeError, "scale must be a number"),
    (lambda g, p: random_inputs(g, scale=float("nan")), ArgumentValueError, ValueError, "finite"),
    (lambda g, p: he.explore(g, providers=[]), ArgumentValueError, ValueError, "at least one provider"),
])
def test_api_misuse_is_typed_and_still_a_builtin(mlp, call, cls, builtin, needle):
    g, p = mlp[0], mlp[1]
    with pytest.raises(cls, match=needle) as e:
        call(g, p)
    assert isinstance(e.value, HeteroExploreError) and isinstance(e.value, builtin)


def _relu(shape):
    from onnx import TensorProto, helper
    gr = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "r",
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])


def test_random_inputs_checks_the_budget_before_allocating():
    g = he.load_model(_relu([10 ** 11, 4]))   # under the loader's shape bound, over any memory budget
    with pytest.raises(MemoryBudgetError, match=r"random inputs would take .*over the memory budget") as e:
        random_inputs(g)
    assert isinstance(e.value, MemoryError) and "'x'" in str(e.value)
    small = he.load_model(models.mlp("tiny"))
    with pytest.raises(MemoryBudgetError, match="max_bytes"):
        random_inputs(small, max_bytes=8)
    assert random_inputs(small, max_bytes=64)["x"].nbytes == 64


def test_memory_budget_from_the_environment(monkeypatch):
    from hetero_explore.execution.inputs import memory_budget
    monkeypatch.setenv("HETERO_EXPLORE_MEMORY_BUDGET", "2G")
    assert memory_budget() == 2 << 30
    monkeypatch.setenv("HETERO_EXPLORE_MEMORY_BUDGET", "lots")
    with pytest.raises(ArgumentValueError, match="is not a size"):
        memory_budget()
    monkeypatch.setenv("HETERO_EXPLORE_MEMORY_BUDGET", "-1")
    with pytest.raises(ArgumentValueError, match="positive"):
        memory_budget()


# -- hostile feeds: a typed error or the right answer --------------------------------------------
def _unaligned(a):
    u = np.zeros(a.nbytes + 1, np.uint8)[1:].view(a.dtype).reshape(a.shape)
    u[...] = a
    assert not u.flags.aligned
    return u


def _right_answers(feed, tmp_path):
    ro = feed.copy()
    ro.flags.writeable = False
    mm = np.memmap(tmp_path / "mm.bin", dtype=feed.dtype, mode="w+", shape=feed.shape)
    mm[:] = feed
    mm.flush()
    wide = np.zeros((feed.shape[0], feed.shape[1] * 2), feed.dtype)
    wide[:, ::2] = feed
    return {"non-contiguous": wide[:, ::2], "read-only": ro, "memmap": mm,
            "memmap-readonly": np.memmap(tmp_path / "mm.bin", dtype=feed.dtype, mode="r", shape=feed.shape),
            "fortran-order": np.asfortranarray(feed), "reversed-strides": feed[::-1, ::-1].copy()[::-1, ::-1],
            "subclass": feed.view(np.matrix) if feed.ndim == 2 else feed, "unaligned": _unaligned(feed),
            "masked-without-mask": np.ma.masked_array(feed, mask=False)}


@pytest.mark.parametrize("kind", ["non-contiguous", "read-only", "memmap", "memmap-readonly", "fortran-order",
                                  "reversed-strides", "subclass", "unaligned", "masked-without-mask"])
def test_odd_but_valid_feeds_give_the_right_answer(mlp, tmp_path, kind):
    g, p, x, feed, ref = mlp
    a = _right_answers(feed, tmp_path)[kind]
    assert np.array_equal(np.asarray(a), feed)
    out = he.execute(p, {x: a}).outputs
    assert all(np.array_equal(out[k], ref[k]) for k in ref)
    assert np.array_equal(np.asarray(a), feed)  # the feed itself is not modified


def _wrong_feeds(feed):
    masked = np.ma.masked_array(feed, mask=np.zeros(feed.shape, bool))
    masked[0, 0] = np.ma.masked
    return {
        "float64": (feed.astype(np.float64), "wrong dtype"),
        "big-endian": (feed.astype(">f4"), "non-native byte order"),
        "int with NaN source": (np.full(feed.shape, np.nan), "wrong dtype"),
        "python list": (feed.tolist(), "float64"),
        "ragged list": ([[1.0], [1.0, 2.0]], "cannot be read as an array"),
        "object array": (feed.astype(object), "dtype object"),
        "string": ("abc", "dtype <U3"),
        "None": (None, "got None"),
        "0-d": (np.float32(1), "wrong shape"),
        "wrong shape": (feed[:, :-1], "wrong shape"),
        "transposed": (feed.T.copy(), "wrong shape"),
        "extra dim": (feed[None], "wrong shape"),
        "masked elements": (masked, "masked"),
        "datetime": (np.zeros(feed.shape, "datetime64[s]"), "datetime64"),
        "structured": (np.zeros(feed.shape, [("a", "f4")]), "kernels take numeric"),
        "complex": (feed.astype(np.complex64), "wrong dtype"),
    }


@pytest.mark.parametrize("kind", list(_wrong_feeds(np.zeros((2, 8), np.float32))))
def test_wrong_feeds_are_typed_errors_naming_the_input(mlp, kind):
    g, p, x, feed, _ = mlp
    a, needle = _wrong_feeds(feed)[kind]
    with pytest.raises(InputValidationError) as e:
        he.execute(p, {x: a})
    assert f"input {x!r}" in str(e.value) and needle in str(e.value), str(e.value)


@pytest.mark.parametrize("inputs, needle", [
    ({}, "missing input(s): 'x'"),
    ({"x": np.zeros((2, 8), np.float32), "zzz": 1}, "unexpected input(s): 'zzz'"),
    ({0: np.zeros((2, 8), np.float32)}, "unexpected input(s): 0"),
    ([], "0 positional input(s)"),
    ("x", "inputs must be a dict"),
    (np.zeros((2, 8), np.float32), "inputs must be a dict"),
])
def test_malformed_input_containers(mlp, inputs, needle):
    g = mlp[0]
    with pytest.raises(InputValidationError) as e:
        validate_inputs(g, inputs)
    assert needle in str(e.value)


# -- results that cannot be written are kept ------------------------------------------------------
def test_export_to_a_folder_keeps_the_report(tmp_path):
    ex = he.explore(models.mlp("tiny"), providers=["cpu"])
    with pytest.raises(OutputWriteError, match="it is a folder") as e:
        ex.export_html(tmp_path)
    kept = e.value.fallback_path
    try:
        assert kept and open(kept, encoding="utf-8").read().startswith("<!DOCTYPE html>")
    finally:
        import os
        os.unlink(kept)
    assert isinstance(e.value, OSError)
