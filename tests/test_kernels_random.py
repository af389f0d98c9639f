"""Random kernels (random.py): counter-based draws, bitwise equal on the CPU and the CUDA
simulator for the same seed; reproducible without a seed (the node-derived seed); and the
distributions (uniform range and moments, normal moments, Bernoulli frequencies and
extremes, Multinomial class frequencies against softmax)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from onnx import TensorProto, helper

from hetero_explore.ir.graph import Node
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.kernels.random import implicit_seed
from support.harness import run_both, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32


def both(node, ins, opset=22):
    return run_both(node, ins, opset)[0]


def gen(op, shape, **attrs):
    return helper.make_node(op, [], ["y"], name=f"{op}_n", shape=list(shape), **attrs)


@pytest.mark.parametrize("op", ["RandomUniform", "RandomNormal"])
def test_bitwise_and_seeded(op):
    a = both(gen(op, (4, 16), seed=3.0), [])
    b = both(gen(op, (4, 16), seed=3.0), [])
    c = both(gen(op, (4, 16), seed=4.0), [])
    assert a.dtype == np.float32 and a.shape == (4, 16)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert len(np.unique(a)) == a.size


def test_unseeded_is_reproducible_per_node():
    n1 = gen("RandomUniform", (64,))
    n2 = helper.make_node("RandomUniform", [], ["z"], name="other", shape=[64])
    a, b = both(n1, []), both(n1, [])
    assert np.array_equal(a, b)
    assert not np.array_equal(a, both(n2, []))
    assert implicit_seed(Node(0, n1, 22)) == implicit_seed(Node(0, n1, 22))


def test_uniform_distribution():
    y = run_node(CPU, gen("RandomUniform", (20000,), seed=1.0, low=-2.0, high=3.0), [])[0]
    assert y.min() >= -2.0 and y.max() < 3.0
    assert abs(y.mean() - 0.5) < 0.05 and abs(y.std() - 5 / np.sqrt(12)) < 0.03
    y64 = both(gen("RandomUniform", (32,), seed=1.0, dtype=TensorProto.DOUBLE), [])
    assert y64.dtype == np.float64 and 0 <= y64.min() and y64.max() < 1


def test_normal_distribution():
    y = run_node(CPU, gen("RandomNormal", (20000,), seed=2.0, mean=1.5, scale=2.0), [])[0]
    assert abs(y.mean() - 1.5) < 0.05 and abs(y.std() - 2.0) < 0.05
    z = (y - 1.5) / 2
    assert abs(np.mean(z ** 3)) < 0.1 and abs(np.mean(z ** 4) - 3) < 0.2


@pytest.mark.parametrize("op", ["RandomUniformLike", "RandomNormalLike"])
def test_like(op):
    x = np.zeros((3, 5), np.int64)
    node = helper.make_node(op, ["x"], ["y"], name="l", seed=0.0, dtype=TensorProto.FLOAT)
    y = both(node, [x])
    assert y.shape == (3, 5) and y.dtype == np.float32
    xf = np.zeros((2, 3), F)
    assert both(helper.make_node(op, ["x"], ["y"], name="l", seed=0.0), [xf]).dtype == np.float32


@pytest.mark.parametrize("dtype,np_dt", [(None, np.float32), (TensorProto.INT32, np.int32),
                                         (TensorProto.BOOL, np.bool_), (TensorProto.DOUBLE, np.float64)])
def test_bernoulli(dtype, np_dt):
    p = np.linspace(0, 1, 48).astype(F)
    p[:8], p[-8:] = 0, 1
    kw = {} if dtype is None else {"dtype": dtype}
    y = both(helper.make_node("Bernoulli", ["p"], ["y"], name="b", seed=5.0, **kw), [p], opset=15)
    assert y.dtype == np_dt
    assert not y[:8].any() and y[-8:].all()
    big = np.full(20000, 0.3, np.float64)
    freq = run_node(CPU, helper.make_node("Bernoulli", ["p"], ["y"], name="b", seed=1.0), [big], opset=22)[0].mean()
    assert abs(freq - 0.3) < 0.015


def test_multinomial():
    x = np.log(np.asarray([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], F))
    node = helper.make_node("Multinomial", ["x"], ["y"], name="m", seed=9.0, sample_size=8)
    y = both(node, [x], opset=7)
    assert y.shape == (2, 8) and y.dtype == np.int32 and y.min() >= 0 and y.max() <= 2
    node = helper.make_node("Multinomial", ["x"], ["y"], name="m", seed=9.0, sample_size=20000,
                            dtype=TensorProto.INT64)
    y = run_node(CPU, node, [x], opset=22)[0]
    assert y.dtype == np.int64
    for b, probs in enumerate(([0.1, 0.2, 0.7], [0.5, 0.25, 0.25])):
        freq = np.bincount(y[b], minlength=3) / y.shape[1]
        np.testing.assert_allclose(freq, probs, atol=0.015)


def test_declines():
    m = supports(CPU, gen("RandomNormal", (3,), dtype=TensorProto.DOUBLE), [], opset=22)
    assert not m.supported and "output dtype float64 not supported" in m.reason
