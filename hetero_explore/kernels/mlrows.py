"""Compiled row loops of the ``ai.onnx.ml`` linear and SVM ops (CPU only; :mod:`.ml` calls
them from its run functions).

Each function computes, element by element, the float32 sequence the numpy code of
:mod:`.ml` documents: dot products from the intercept (or 0.0f) with ``acc = acc + a*b``
for the feature index ascending, the product rounded to float32 and then the sum (no fma:
these ops are not part of the fma contract, and onnxruntime's results are matched as
before), the SVM kernels' transforms with :mod:`.pmath`'s portable ``exp``, and the
one-vs-one decision values ``rho + sum coef * k`` over class i's vectors, then class j's,
ascending. Loops over rows and vectors replace numpy calls per feature and per vector
(thousands per run for an SVC), nothing else. The SVM loops take blocks of rows with the
rows innermost (x transposed, the kernel block vectors x rows), so that LLVM vectorises
them across rows: each row's sums are still their own sequences, hence the same bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .pmath import exp_f32, exp_nonpos_f32
from .target import launch_threads

launch_threads()   # before this module's parallel kernels can load from the cache (see there)

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
def _kernel_block(xt, r0, nb, sv, kind, gamma, coef0, degree, kt):
    """kt[s, i] = the SVM kernel of row r0 + i (column r0 + i of ``xt``, x transposed) with
    support vector s, i < nb (float32): RBF exp(-gamma * sum (x - sv)^2), LINEAR the dot product,
    POLY (gamma * dot + coef0)^degree (degree multiplications from 1.0f), SIGMOID
    tanh(gamma * dot + coef0) as (1 - e) / (1 + e) with e = exp(-2|t|). Each sum runs over the
    features ascending from 0.0f; the rows are the inner loop (vectorised: each row's sum is
    still its own sequence). exp of an argument <= 0 (every one but RBF's with gamma < 0) is
    :func:`.pmath.exp_nonpos_f32`, exp_f32's bits in a loop that vectorises."""
    nf = xt.shape[0]
    ns = sv.shape[0]
    gamma = np.float32(gamma)
    coef0 = np.float32(coef0)
    for s in range(ns):
        ks = kt[s, :nb]
        for i in range(nb):
            ks[i] = np.float32(0)
        if kind == 2:
            for k in range(nf):
                xk = xt[k, r0:r0 + nb]
                svk = sv[s, k]
                for i in range(nb):
                    d = xk[i] - svk
                    ks[i] = ks[i] + d * d
            ng = -gamma
            if gamma >= np.float32(0):
                for i in range(nb):
                    ks[i] = exp_nonpos_f32(ng * ks[i])
            else:
                for i in range(nb):
                    ks[i] = exp_f32(ng * ks[i])
            continue
        for k in range(nf):
            xk = xt[k, r0:r0 + nb]
            svk = sv[s, k]
            for i in range(nb):
                ks[i] = ks[i] + xk[i] * svk
        if kind == 0:
            continue
        if kind == 1:
            for i in range(nb):
                base = gamma * ks[i] + coef0
                v = np.float32(1)
                for _ in range(degree):
                    v = v * base
                ks[i] = v
        else:
            for i in range(nb):
                base = gamma * ks[i] + coef0
                e = exp_nonpos_f32(np.float32(-2.0) * abs(base))
                t = (np.float32(1.0) - e) / (np.float32(1.0) + e)
                ks[i] = t if base >= np.float32(0.0) else -t


#: rows an SVM kernel takes together (its kernel block is support vectors x _BLOCK floats)
_BLOCK = 128


@njit(**_JIT)
def kernel_matrix(x, sv, kind, gamma, coef0, degree):
    """The SVM kernel of every row of ``x`` with every support vector (float32, rows x vectors;
    see :func:`_kernel_block`)."""
    n = x.shape[0]
    ns = sv.shape[0]
    xt = np.ascontiguousarray(x.T)
    out = np.empty((n, ns), np.float32)
    kt = np.empty((ns, _BLOCK), np.float32)
    for r0 in range(0, n, _BLOCK):
        nb = min(_BLOCK, n - r0)
        _kernel_block(xt, r0, nb, sv, kind, gamma, coef0, degree, kt)
        for i in range(nb):
            for s in range(ns):
                out[r0 + i, s] = kt[s, i]
    return out


@njit(**_JIT)
def _svc_block(xt, r0, nb, sv, kind, gamma, coef0, degree, coefs, rho, start, vpc, kt, acc, scores, votes):
    """:func:`svc_rows` for rows r0 .. r0 + nb - 1 (kt: vectors x _BLOCK, acc: _BLOCK floats)."""
    _kernel_block(xt, r0, nb, sv, kind, gamma, coef0, degree, kt)
    nc = vpc.shape[0]
    for r in range(nb):
        for c in range(nc):
            votes[r0 + r, c] = np.float32(0)
    e = 0
    for i in range(nc):
        si, ci = start[i], vpc[i]
        for j in range(i + 1, nc):
            sj, cj = start[j], vpc[j]
            a = acc[:nb]
            for r in range(nb):
                a[r] = np.float32(rho[e])
            for v in range(si, si + ci):
                cf = coefs[j - 1, v]
                kv = kt[v, :nb]
                for r in range(nb):
                    a[r] = a[r] + cf * kv[r]
            for v in range(sj, sj + cj):
                cf = coefs[i, v]
                kv = kt[v, :nb]
                for r in range(nb):
                    a[r] = a[r] + cf * kv[r]
            for r in range(nb):
                scores[r0 + r, e] = a[r]
                if a[r] > 0:
                    votes[r0 + r, i] += np.float32(1.0)
                else:
                    votes[r0 + r, j] += np.float32(1.0)
            e += 1


@njit(**_JIT)
def svc_rows(x, sv, kind, gamma, coef0, degree, coefs, rho, start, vpc):
    """One-vs-one SVC: for each class pair (i, j), i < j, in order, the decision value
    s = rho[e] + coefs[j-1, v] * k[v] over class i's vectors, then coefs[i, v] * k[v] over class
    j's, ascending (k: :func:`_kernel_block`); a vote for i when s > 0, else for j. Returns
    (scores: rows x pairs, votes: rows x classes). Blocks of _BLOCK rows, the rows the inner
    loop (each row's sum still its own sequence)."""
    n = x.shape[0]
    nc = vpc.shape[0]
    xt = np.ascontiguousarray(x.T)
    scores = np.empty((n, nc * (nc - 1) // 2), np.float32)
    votes = np.empty((n, nc), np.float32)
    kt = np.empty((sv.shape[0], _BLOCK), np.float32)
    acc = np.empty(_BLOCK, np.float32)
    for r0 in range(0, n, _BLOCK):
        _svc_block(xt, r0, min(_BLOCK, n - r0), sv, kind, gamma, coef0, degree, coefs, rho, start, vpc, kt, acc,
                   scores, votes)
    return scores, votes


@njit(parallel=True, **_JIT)
def svc_rows_par(x, sv, kind, gamma, coef0, degree, coefs, rho, start, vpc):
    """:func:`svc_rows` with its blocks of rows in parallel (the same bits: the rows are independent)."""
    n = x.shape[0]
    nc = vpc.shape[0]
    xt = np.ascontiguousarray(x.T)
    scores = np.empty((n, nc * (nc - 1) // 2), np.float32)
    votes = np.empty((n, nc), np.float32)
    for b in prange((n + _BLOCK - 1) // _BLOCK):
        r0 = b * _BLOCK
        kt = np.empty((sv.shape[0], _BLOCK), np.float32)
        acc = np.empty(_BLOCK, np.float32)
        _svc_block(xt, r0, min(_BLOCK, n - r0), sv, kind, gamma, coef0, degree, coefs, rho, start, vpc, kt, acc,
                   scores, votes)
    return scores, votes


@njit(**_JIT)
def _svr_block(xt, r0, nb, sv, kind, gamma, coef0, degree, coef, rho, kt, out):
    _kernel_block(xt, r0, nb, sv, kind, gamma, coef0, degree, kt)
    a = out[r0:r0 + nb]
    for r in range(nb):
        a[r] = np.float32(rho)
    for v in range(sv.shape[0]):
        cf = coef[v]
        kv = kt[v, :nb]
        for r in range(nb):
            a[r] = a[r] + cf * kv[r]


@njit(**_JIT)
def svr_rows(x, sv, kind, gamma, coef0, degree, coef, rho):
    """SVR: rho + sum_j coef[j] * k[j] over the vectors j ascending (k: :func:`_kernel_block`),
    one value per row (float32)."""
    n = x.shape[0]
    xt = np.ascontiguousarray(x.T)
    out = np.empty(n, np.float32)
    kt = np.empty((sv.shape[0], _BLOCK), np.float32)
    for r0 in range(0, n, _BLOCK):
        _svr_block(xt, r0, min(_BLOCK, n - r0), sv, kind, gamma, coef0, degree, coef, rho, kt, out)
    return out


@njit(parallel=True, **_JIT)
def svr_rows_par(x, sv, kind, gamma, coef0, degree, coef, rho):
    """:func:`svr_rows` with its blocks of rows in parallel (the same bits)."""
    n = x.shape[0]
    xt = np.ascontiguousarray(x.T)
    out = np.empty(n, np.float32)
    for b in prange((n + _BLOCK - 1) // _BLOCK):
        r0 = b * _BLOCK
        kt = np.empty((sv.shape[0], _BLOCK), np.float32)
        _svr_block(xt, r0, min(_BLOCK, n - r0), sv, kind, gamma, coef0, degree, coef, rho, kt, out)
    return out


def svm_parallel(n: int) -> bool:
    """Run an SVM's blocks of rows in parallel: two blocks or more, and more than one numba thread."""
    import numba
    return n > _BLOCK and numba.get_num_threads() > 1
