"""Compiled row loops of the ``ai.onnx.ml`` linear and SVM ops (CPU only; :mod:`.ml` calls
them from its run functions).

Each function computes, element by element, the float32 sequence the numpy code of
:mod:`.ml` documents: dot products from the intercept (or 0.0f) with ``acc = acc + a*b``
for the feature index ascending, the product rounded to float32 and then the sum (no fma:
these ops are not part of the fma contract, and onnxruntime's results are matched as
before), the SVM kernels' transforms with :mod:`.pmath`'s portable ``exp``, and the
one-vs-one decision values ``rho + sum coef * k`` over class i's vectors, then class j's,
ascending. Loops over rows and vectors replace numpy calls per feature and per vector
(thousands per run for an SVC), nothing else.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .pmath import exp_f32

_JIT = dict(cache=True, error_model="numpy", nogil=True)

#: SVM kernel codes (the ``kernel_type`` attribute)
KERNELS = {"LINEAR": 0, "POLY": 1, "RBF": 2, "SIGMOID": 3}


@njit(**_JIT)
def dot_rows(x, w, bias):
    """out[n, c] = bias[c] + sum_k x[n, k] * w[c, k], k ascending, each step two roundings."""
    n, nf = x.shape
    nc = w.shape[0]
    out = np.empty((n, nc), np.float32)
    for i in range(n):
        for c in range(nc):
            acc = np.float32(bias[c])
            for k in range(nf):
                acc = acc + x[i, k] * w[c, k]
            out[i, c] = acc
    return out


@njit(**_JIT)
def kernel_matrix(x, sv, kind, gamma, coef0, degree):
    """The SVM kernel of every row of ``x`` with every support vector (float32): RBF
    exp(-gamma * sum (x - sv)^2), LINEAR the dot product, POLY (gamma * dot + coef0)^degree
    (degree multiplications from 1.0f), SIGMOID tanh(gamma * dot + coef0) as (1 - e) / (1 + e)
    with e = exp(-2|t|)."""
    n, nf = x.shape
    ns = sv.shape[0]
    gamma = np.float32(gamma)
    coef0 = np.float32(coef0)
    out = np.empty((n, ns), np.float32)
    for i in range(n):
        for s in range(ns):
            acc = np.float32(0)
            if kind == 2:
                for k in range(nf):
                    d = x[i, k] - sv[s, k]
                    acc = acc + d * d
                out[i, s] = exp_f32(-gamma * acc)
                continue
            for k in range(nf):
                acc = acc + x[i, k] * sv[s, k]
            if kind == 0:
                out[i, s] = acc
                continue
            base = gamma * acc + coef0
            if kind == 1:
                v = np.float32(1)
                for _ in range(degree):
                    v = v * base
                out[i, s] = v
            else:
                e = exp_f32(np.float32(-2.0) * abs(base))
                t = (np.float32(1.0) - e) / (np.float32(1.0) + e)
                out[i, s] = t if base >= np.float32(0.0) else -t
    return out


@njit(**_JIT)
def svc_votes(kern, coefs, rho, start, vpc):
    """One-vs-one: for each class pair (i, j), i < j, in order, the decision value
    s = rho[e] + coefs[j-1, v] * k[v] over class i's vectors, then coefs[i, v] * k[v] over class
    j's, ascending; a vote for i when s > 0, else for j. Returns (scores: rows x pairs,
    votes: rows x classes)."""
    n = kern.shape[0]
    nc = vpc.shape[0]
    npairs = nc * (nc - 1) // 2
    scores = np.empty((n, npairs), np.float32)
    votes = np.zeros((n, nc), np.float32)
    for r in range(n):
        e = 0
        for i in range(nc):
            si, ci = start[i], vpc[i]
            for j in range(i + 1, nc):
                sj, cj = start[j], vpc[j]
                s = np.float32(rho[e])
                for v in range(ci):
                    s = s + coefs[j - 1, si + v] * kern[r, si + v]
                for v in range(cj):
                    s = s + coefs[i, sj + v] * kern[r, sj + v]
                scores[r, e] = s
                if s > 0:
                    votes[r, i] += np.float32(1.0)
                else:
                    votes[r, j] += np.float32(1.0)
                e += 1
    return scores, votes
