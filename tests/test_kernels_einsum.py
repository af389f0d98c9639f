"""Einsum (``kernels/einsum.py``): against numpy (one fixed summation order, so float64
inputs match ``np.einsum`` to rounding and integer inputs exactly), CPU == CUDA
simulator bitwise, and the declines."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from support.harness import supports
from test_kernels_movement import CPU, both

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("i,i", [(5,), (5,)]),
    ("ij->i", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ii", [(4, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...j,...j->...", [(2, 1, 3), (1, 4, 3)]),       # broadcasting ellipsis
    ("ba,ca", [(2, 3), (4, 3)]),                        # implicit output: 'bc'
    ("ij,ij->ij", [(2, 3), (2, 3)]),
]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_numpy(eq, shapes):
    rng = np.random.default_rng(len(eq))
    xs = [rng.integers(-5, 6, s).astype(np.int64) for s in shapes]
    n = helper.make_node("Einsum", [f"x{k}" for k in range(len(xs))], ["y"], equation=eq)
    (y,) = both(n, xs, 12)
    assert np.array_equal(y, np.einsum(eq, *xs)), (y, np.einsum(eq, *xs))
    fs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    (yf,) = both(n, fs, 12)
    np.testing.assert_allclose(yf, np.einsum(eq, *[f.astype(np.float64) for f in fs]), rtol=1e-5, atol=1e-5)


def test_einsum_fixed_order_is_sequential():
    # a contraction is one left-to-right sum: bitwise equal to an explicit float32 loop
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 50)).astype(np.float32)
    b = rng.standard_normal((50, 2)).astype(np.float32)
    (y,) = both(helper.make_node("Einsum", ["a", "b"], ["y"], equation="ik,kj->ij"), [a, b], 12)
    want = np.zeros((3, 2), np.float32)
    for i in range(3):
        for j in range(2):
            acc = np.float32(0)
            for k in range(50):
                acc = np.float32(acc + a[i, k] * b[k, j])
            want[i, j] = acc
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))


def test_einsum_declines_what_it_cannot_do():
    x = np.ones((2, 2), np.float32)
    three = helper.make_node("Einsum", ["a", "b", "c"], ["y"], equation="ij,jk,kl->il")
    s = supports(CPU, three, [x, x, x], 12)
    assert not s and "3 operands" in s.reason
