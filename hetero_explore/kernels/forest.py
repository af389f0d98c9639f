"""Compiled tree walks for the ``ai.onnx.ml`` tree ensembles (CPU only; :mod:`.ml` builds
the forests and calls these from its run functions).

A forest is flat arrays over one node index space (internal nodes and leaves together, as
:class:`.ml._Forest` holds them): per node its feature, threshold, mode, true and false
child and the missing-value flag; the trees' roots in evaluation order; a dense row of leaf
weights per node. :class:`FlatForest` repacks them once, when the node is built, into what
a walk reads per step (32-bit indices, one byte of mode with the missing-value flag folded
in: a node's whole record is a few cache lines for a typical tree), as onnxruntime's tree
ensemble keeps its nodes.

The walk is one compiled loop per row and tree, rows outermost: row r takes every tree in
ascending order, and each target's sum is ``acc = acc + w`` in that order (the leaf's dense
row, so a target a leaf does not name adds 0): exactly the float sequence of the numpy
aggregation it replaces, hence the same bits. Rows are independent: above
:data:`PAR_ROWS_WORK` node visits and with more than one numba thread, blocks of rows run in
parallel (the same bits for any thread count). A walk that takes more steps than the
forest has nodes (a cycle) stops and is reported.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .target import launch_threads

launch_threads()   # before this module's parallel kernels can load from the cache (see there)

#: the leaf mode of :mod:`.ml` (BRANCH_LEQ 0, LT 1, GTE 2, GT 3, EQ 4, NEQ 5, MEMBER 6, LEAF 7)
LEAF = 7
#: mode flag of a node whose missing values (NaN) go to the true child
MISS = 8
#: rows x trees from which the rows run in parallel (with more than one numba thread)
PAR_ROWS_WORK = 1 << 14
_ROW_BLOCK = 16

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT)
def _leaf(x, r, feat, thr, mode, tnext, fnext, root, limit):
    """The leaf row ``r`` of ``x`` reaches from ``root``, or -1 after ``limit`` steps."""
    nd = root
    steps = 0
    while True:
        m = mode[nd]
        k = m & 7
        if k == LEAF:
            return nd
        v = x[r, feat[nd]]
        t = thr[nd]
        if k == 0:
            c = v <= t
        elif k == 1:
            c = v < t
        elif k == 2:
            c = v >= t
        elif k == 3:
            c = v > t
        elif k == 4:
            c = v == t
        else:
            c = v != t
        if (m & MISS) != 0 and v != v:
            c = True
        nd = tnext[nd] if c else fnext[nd]
        steps += 1
        if steps > limit:
            return -1


@njit(**_JIT)
def _sum_rows(r0, r1, x, feat, thr, mode, tnext, fnext, roots, leafw, out):
    """out[r, :] = 0, then + leafw[leaf of tree t] for t in order, for r0 <= r < r1; the first
    row whose walk does not end (a cycle), or -1."""
    limit = mode.shape[0]
    nt = out.shape[1]
    for r in range(r0, r1):
        for j in range(nt):
            out[r, j] = 0
        for t in range(roots.shape[0]):
            lf = _leaf(x, r, feat, thr, mode, tnext, fnext, roots[t], limit)
            if lf < 0:
                return r
            for j in range(nt):
                out[r, j] = out[r, j] + leafw[lf, j]
    return -1


@njit(**_JIT)
def _leaves_rows(r0, r1, x, feat, thr, mode, tnext, fnext, roots, out):
    """out[r, t] = the leaf of tree t for row r, r0 <= r < r1; the first row with a cycle, or -1."""
    limit = mode.shape[0]
    for r in range(r0, r1):
        for t in range(roots.shape[0]):
            lf = _leaf(x, r, feat, thr, mode, tnext, fnext, roots[t], limit)
            if lf < 0:
                return r
            out[r, t] = lf
    return -1


@njit(parallel=True, **_JIT)
def _sum_par(x, feat, thr, mode, tnext, fnext, roots, leafw, out):
    n = x.shape[0]
    nb = (n + _ROW_BLOCK - 1) // _ROW_BLOCK
    bad = np.full(nb, -1, np.int64)
    for bu in prange(nb):
        b = np.int64(bu)
        bad[b] = _sum_rows(b * _ROW_BLOCK, min(n, (b + 1) * _ROW_BLOCK), x, feat, thr, mode, tnext, fnext, roots,
                           leafw, out)
    for b in range(nb):
        if bad[b] >= 0:
            return bad[b]
    return -1


@njit(parallel=True, **_JIT)
def _leaves_par(x, feat, thr, mode, tnext, fnext, roots, out):
    n = x.shape[0]
    nb = (n + _ROW_BLOCK - 1) // _ROW_BLOCK
    bad = np.full(nb, -1, np.int64)
    for bu in prange(nb):
        b = np.int64(bu)
        bad[b] = _leaves_rows(b * _ROW_BLOCK, min(n, (b + 1) * _ROW_BLOCK), x, feat, thr, mode, tnext, fnext,
                              roots, out)
    for b in range(nb):
        if bad[b] >= 0:
            return bad[b]
    return -1


class FlatForest:
    """A forest's nodes repacked for :func:`_leaf` (see the module docs); built once per node.

    ``feat``, ``mode`` (BRANCH_* code | MISS), ``tnext``, ``fnext``, ``roots``: int32/int8
    arrays; ``thr`` and ``leafw`` keep the forest's dtype (float32, or float64 for double
    thresholds/weights); x is converted to ``thr``'s dtype before a walk, as the numpy walk
    compared ``x.astype(thr.dtype)``."""

    def __init__(self, feat, thr, mode, tnext, fnext, miss, roots, leafw):
        self.feat = np.ascontiguousarray(feat, np.int32)
        self.thr = np.ascontiguousarray(thr)
        self.mode = np.ascontiguousarray(np.asarray(mode, np.int8) | np.where(miss, MISS, 0).astype(np.int8))
        self.tnext = np.ascontiguousarray(tnext, np.int32)
        self.fnext = np.ascontiguousarray(fnext, np.int32)
        self.roots = np.ascontiguousarray(roots, np.int32)
        self.leafw = np.ascontiguousarray(leafw)

    def _x(self, x):
        return np.ascontiguousarray(x, dtype=self.thr.dtype)

    def _parallel(self, n: int) -> bool:
        import numba
        return n > _ROW_BLOCK and n * self.roots.shape[0] >= PAR_ROWS_WORK and numba.get_num_threads() > 1

    def sum(self, x) -> tuple[np.ndarray, int]:
        """(per row, the sum over the trees in order of the leaves' weight rows; the first row
        whose walk did not end, or -1)."""
        x = self._x(x)
        out = np.empty((x.shape[0], self.leafw.shape[1]), self.leafw.dtype)
        args = (x, self.feat, self.thr, self.mode, self.tnext, self.fnext, self.roots, self.leafw, out)
        if self._parallel(x.shape[0]):
            bad = _sum_par(*args)
        else:
            bad = _sum_rows(0, x.shape[0], *args)
        return out, int(bad)

    def leaves(self, x) -> tuple[np.ndarray, int]:
        """(leaf index per row and tree, rows x trees; the first row with a cycle, or -1)."""
        x = self._x(x)
        out = np.empty((x.shape[0], self.roots.shape[0]), np.int64)
        args = (x, self.feat, self.thr, self.mode, self.tnext, self.fnext, self.roots, out)
        if self._parallel(x.shape[0]):
            bad = _leaves_par(*args)
        else:
            bad = _leaves_rows(0, x.shape[0], *args)
        return out, int(bad)
