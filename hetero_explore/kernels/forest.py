"""Compiled tree walks for the ``ai.onnx.ml`` tree ensembles (CPU only; :mod:`.ml` builds
the forests and calls these from its run functions).

A forest is flat arrays over one node index space (internal nodes and leaves together, as
:class:`.ml._Forest` holds them): per node its feature, threshold, mode, true and false
child and the missing-value flag; the trees' roots in evaluation order; a dense row of leaf
weights per node. :class:`FlatForest` repacks them once, when the node is built.

**Accumulation** (both walks): per row, the trees in ascending order, each target's sum
``acc = acc + w`` in that order from +0: exactly the float sequence of the numpy aggregation
it replaces, hence the same bits. The packed walk skips a leaf's weights that are 0 (the numpy
code adds the leaf's dense row): ``acc + 0`` is ``acc`` bit for bit, since a sum that starts at
+0 is never -0.

**The packed walk** takes every forest whose nodes compare with <=, <, >= or > (scikit-learn's,
LightGBM's, XGBoost's) and whose trees reach no node twice on one path (a cycle keeps the
generic walk; a node that two parents share is copied). Each node becomes
``v <= t | (miss & isnan v)`` (:func:`_as_leq`: <, >=, > rewritten with the float below the
threshold and the children swapped, the same walk bit for bit) in one 16-byte record
[feature with the missing flag in its top bit, threshold, true child, false child], each tree's
records contiguous in depth-first order (onnxruntime's ``TreeNodeElement`` also keeps a node's
test and child in one record). A leaf is a record whose children are itself and which names its
node. A block of up to :data:`_PBLOCK` rows goes through one tree at a time, so the tree stays
in cache across the block, and all the block's rows step together for the tree's depth: a row
that reached a leaf stays there, so the loop has no branch on the data and the rows' walks
overlap (onnxruntime walks one row at a time, branching per node). Without missing-value flags
the NaN test is compiled out.

Threads (packed walk): from :data:`PAR_STEPS` rows x steps (the trees' depths summed) and with
more than one numba thread, the rows are split among the threads (:data:`PAR_MIN_ROWS` rows
per thread or more), or else the trees: each thread writes its trees' leaves per row, then each
row sums its leaves over the trees in order. Either way every row's sum is the same float
sequence, so the bits do not depend on the thread count (onnxruntime's tree-parallel sums merge
per-thread partials, whose order does).

**The generic walk** (EQ and NEQ nodes, cycles): one compiled loop per row and tree, rows
outermost, a branch per node mode; above :data:`PAR_ROWS_WORK` rows x trees blocks of rows run
in parallel. A walk that takes more steps than the forest has nodes (a cycle) stops and is
reported.
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
#: rows x trees from which the generic walk's rows run in parallel (with more than one numba thread)
PAR_ROWS_WORK = 1 << 14
_ROW_BLOCK = 16
#: rows x steps (the trees' depths summed) from which a packed walk runs in parallel
PAR_STEPS = 1 << 15
#: rows per thread from which a packed walk splits the rows among the threads (else the trees)
PAR_MIN_ROWS = 16
#: rows a packed walk takes together through each tree
_PBLOCK = 128

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


# --------------------------------------------------------------------------------------------
# the packed walk: proper trees whose nodes all compare with <=, <, >= or >
# --------------------------------------------------------------------------------------------
#: FEAT's top bit: the node's missing values (NaN) go to the true child
_MISS_BIT = np.int32(-2 ** 31)
_FEAT_MASK = np.uint32(2 ** 31 - 1)
_U1, _U3, _U4, _U31 = np.uint64(1), np.uint64(3), np.uint64(4), np.uint32(31)


@njit(**_JIT)
def _relayout(feat, thr, mode, tnext, fnext, miss, roots, cap):
    """Each tree copied from its root in depth-first order into packed records (see
    :class:`FlatForest`; every node already ``v <= t`` with its missing-value flag, mode 0).
    Returns (rec, thr, root and depth per tree, records used, has a missing flag, status):
    status 0, or 1 for a node of another mode (EQ, NEQ), 2 for a walk longer than the forest
    has nodes (a cycle), 3 for more than ``cap`` records (nodes shared by many paths)."""
    nn = feat.shape[0]
    nt = roots.shape[0]
    rec = np.zeros((cap, 4), np.int32)
    thr_out = np.zeros(cap, thr.dtype)
    troot = np.zeros(nt, np.int32)
    tdepth = np.zeros(nt, np.int32)
    st_src = np.empty(2 * nn + 2, np.int64)
    st_par = np.empty(2 * nn + 2, np.int64)
    st_slot = np.empty(2 * nn + 2, np.int64)
    st_d = np.empty(2 * nn + 2, np.int64)
    n = 0
    any_miss = False
    for t in range(nt):
        sp = 0
        st_src[0] = roots[t]
        st_par[0] = -1
        st_slot[0] = 0
        st_d[0] = 0
        sp = 1
        depth = 0
        while sp > 0:
            sp -= 1
            src, par, slot, d = st_src[sp], st_par[sp], st_slot[sp], st_d[sp]
            if d > nn:
                return rec, thr_out, troot, tdepth, n, any_miss, 2
            if n >= cap:
                return rec, thr_out, troot, tdepth, n, any_miss, 3
            nd = n
            n += 1
            if par < 0:
                troot[t] = nd
            else:
                rec[par, slot] = nd
            m = mode[src]
            if m == LEAF:
                rec[nd, 0] = 0
                rec[nd, 1] = src
                rec[nd, 2] = nd
                rec[nd, 3] = nd
                depth = max(depth, d)
                continue
            if m != 0:
                return rec, thr_out, troot, tdepth, n, any_miss, 1
            rec[nd, 0] = feat[src] | (_MISS_BIT if miss[src] else np.int32(0))
            thr_out[nd] = thr[src]
            any_miss = any_miss or miss[src]
            tchild, fchild = tnext[src], fnext[src]
            st_src[sp] = fchild
            st_par[sp] = nd
            st_slot[sp] = 3
            st_d[sp] = d + 1
            st_src[sp + 1] = tchild
            st_par[sp + 1] = nd
            st_slot[sp + 1] = 2
            st_d[sp + 1] = d + 1
            sp += 2
        tdepth[t] = depth
    return rec, thr_out, troot, tdepth, n, any_miss, 0


@njit(**_JIT)
def _walk(x, nf, r0, nb, rec, thr, shr, to, root, depth, has_miss, idx):
    """idx[i] = the leaf record (its offset in ``rec``) row r0 + i of ``x`` (flat, ``nf``
    features a row) reaches from ``root``: ``depth`` steps for every row (a leaf's children are
    itself), the rows interleaved, no branch on the data. The threshold of the record at o is
    thr[(o >> shr) + to]. Indices are unsigned (no negative-index wrap-around)."""
    root = np.uint32(root)
    for i in range(nb):
        idx[i] = root
    nfu = np.uint64(nf)
    base = np.uint64(r0) * nfu
    shru, tou = np.uint64(shr), np.uint64(to)
    if has_miss:
        for _ in range(depth):
            xo = base
            for i in range(np.uint64(nb)):
                o = np.uint64(idx[i])
                f = rec[o]
                v = x[xo + np.uint64(f & _FEAT_MASK)]
                c = (v <= thr[(o >> shru) + tou]) | ((f >> _U31) & (v != v))
                idx[i] = rec[o + _U3 - np.uint64(c)]
                xo += nfu
    else:
        for _ in range(depth):
            xo = base
            for i in range(np.uint64(nb)):
                o = np.uint64(idx[i])
                c = x[xo + np.uint64(rec[o])] <= thr[(o >> shru) + tou]
                idx[i] = rec[o + _U3 - np.uint64(c)]
                xo += nfu


@njit(**_JIT)
def _psum_rows(r0, r1, x, nf, rec, thr, shr, to, troot, tdepth, has_miss, ws, wt, wv, out):
    """out[r, :] = 0, then + each leaf's weights for the trees in order, r0 <= r < r1 (blocks of
    _PBLOCK rows through each tree)."""
    idx = np.empty(min(_PBLOCK, max(r1 - r0, 0)), np.uint32)
    for r in range(r0, r1):
        for j in range(out.shape[1]):
            out[r, j] = 0
    for b0 in range(r0, r1, _PBLOCK):
        nb = min(_PBLOCK, r1 - b0)
        for t in range(troot.shape[0]):
            _walk(x, nf, b0, nb, rec, thr, shr, to, troot[t], tdepth[t], has_miss, idx)
            for i in range(nb):
                lf = rec[np.uint64(idx[i]) + _U1]
                for p in range(ws[lf], ws[lf + 1]):
                    out[b0 + i, wt[p]] = out[b0 + i, wt[p]] + wv[p]


@njit(**_JIT)
def _pleaves_rows(r0, r1, t0, t1, x, nf, rec, thr, shr, to, troot, tdepth, has_miss, out):
    """out[r, t] = the leaf (the forest's node index) of tree t for row r, r0 <= r < r1, t0 <= t < t1."""
    idx = np.empty(min(_PBLOCK, max(r1 - r0, 0)), np.uint32)
    for b0 in range(r0, r1, _PBLOCK):
        nb = min(_PBLOCK, r1 - b0)
        for t in range(t0, t1):
            _walk(x, nf, b0, nb, rec, thr, shr, to, troot[t], tdepth[t], has_miss, idx)
            for i in range(nb):
                out[b0 + i, t] = rec[np.uint64(idx[i]) + _U1]


@njit(parallel=True, **_JIT)
def _psum_par(nblk, x, nf, rec, thr, shr, to, troot, tdepth, has_miss, ws, wt, wv, out):
    """_psum_rows over ``nblk`` blocks of rows in parallel."""
    n = out.shape[0]
    for b in prange(nblk):
        _psum_rows(n * b // nblk, n * (b + 1) // nblk, x, nf, rec, thr, shr, to, troot, tdepth, has_miss, ws, wt, wv,
                   out)


@njit(parallel=True, **_JIT)
def _pleaves_par(nblk, by_trees, x, nf, rec, thr, shr, to, troot, tdepth, has_miss, out):
    """_pleaves_rows over ``nblk`` blocks of rows (or of trees, ``by_trees``) in parallel."""
    n, nt = out.shape
    for b in prange(nblk):
        if by_trees:
            _pleaves_rows(0, n, nt * b // nblk, nt * (b + 1) // nblk, x, nf, rec, thr, shr, to, troot, tdepth,
                          has_miss, out)
        else:
            _pleaves_rows(n * b // nblk, n * (b + 1) // nblk, 0, nt, x, nf, rec, thr, shr, to, troot, tdepth,
                          has_miss, out)


@njit(**_JIT)
def _sum_leaves(leaves, ws, wt, wv, out):
    """out[r, :] = 0, then + the weights of leaves[r, t] for t in order."""
    for r in range(leaves.shape[0]):
        for j in range(out.shape[1]):
            out[r, j] = 0
        for t in range(leaves.shape[1]):
            lf = leaves[r, t]
            for p in range(ws[lf], ws[lf + 1]):
                out[r, wt[p]] = out[r, wt[p]] + wv[p]


def _as_leq(thr, mode, tnext, fnext, miss):
    """Every <, >=, > node as ``v <= t2 | (miss2 & isnan v)``, the same walk bit for bit: v < t
    is v <= the float below t (t = -inf: never, t2 NaN); v > t is not(v <= t) and v >= t not(v < t)
    on numbers, so those swap their children and send NaN the other way (miss2 = not miss); a
    NaN threshold is false for every number, so after the swap it is +inf (always true)."""
    dt = thr.dtype.type
    lt_ge = (mode == 1) | (mode == 2)
    swap = (mode == 2) | (mode == 3)
    with np.errstate(over="ignore"):
        down = np.nextafter(thr, dt(-np.inf))
    thr2 = np.where(lt_ge, np.where(thr == -np.inf, dt(np.nan), down), thr)
    thr2 = np.where(swap & np.isnan(thr), dt(np.inf), thr2).astype(thr.dtype)
    mode2 = np.where(lt_ge | swap, 0, mode)
    return (thr2, mode2, np.where(swap, fnext, tnext), np.where(swap, tnext, fnext), np.where(swap, ~miss, miss))


class FlatForest:
    """A forest's nodes repacked for the compiled walks (see the module docs); built once per node.

    The packed walk (``packed``: trees whose nodes compare with <=, <, >=, >, no cycle):
    ``rec``, flat uint32, four per record [feature | top bit when NaN goes to the true child,
    threshold bits (float32 thresholds) or a leaf's node index, true child, false child], the
    children and ``troot`` (per tree) as offsets into ``rec``, every tree's records contiguous
    in depth-first order, a leaf's children itself; ``pthr[(offset >> shr) + to]`` a record's
    threshold (``rec`` itself as float32, or the float64 thresholds by record); ``tdepth`` per
    tree; the leaves' non-zero weights by node (``ws`` offsets, ``wt`` targets, ``wv`` values).
    The generic walk's arrays (:func:`_leaf`) are kept for the others: ``feat``, ``mode``
    (BRANCH_* code | MISS), ``tnext``, ``fnext``, ``roots``, dense ``leafw``. Thresholds and
    weights keep the forest's dtype (float32, or float64 for double thresholds/weights); x is
    converted to the thresholds' dtype before a walk, as the numpy walk compared
    ``x.astype(thr.dtype)``."""

    def __init__(self, feat, thr, mode, tnext, fnext, miss, roots, leafw):
        self.feat = np.ascontiguousarray(feat, np.int32)
        self.thr = np.ascontiguousarray(thr)
        self.mode = np.ascontiguousarray(np.asarray(mode, np.int8) | np.where(miss, MISS, 0).astype(np.int8))
        self.tnext = np.ascontiguousarray(tnext, np.int32)
        self.fnext = np.ascontiguousarray(fnext, np.int32)
        self.roots = np.ascontiguousarray(roots, np.int32)
        self.leafw = np.ascontiguousarray(leafw)
        self.packed = self._pack(np.asarray(mode, np.int64), np.asarray(miss, bool))

    def _pack(self, mode, miss) -> bool:
        """Build the packed walk's arrays; False where the forest keeps the generic walk."""
        nn, nt = self.feat.shape[0], self.roots.shape[0]
        cap = 2 * nn + 4 * nt         # room for nodes that several parents share, copied
        if nn == 0 or nt == 0 or cap >= 2 ** 30:   # record offsets are uint32
            return False
        thr2, mode2, tn, fn, miss2 = _as_leq(self.thr, mode, self.tnext, self.fnext, miss)
        rec, thr, troot, tdepth, n, has_miss, status = _relayout(
            self.feat, thr2, mode2, tn.astype(np.int32), fn.astype(np.int32), miss2, self.roots.astype(np.int64), cap)
        if status != 0:
            return False
        rec, thr = rec[:n].view(np.uint32), thr[:n].copy()
        if thr.dtype == np.float32:   # the threshold in the record: one 16-byte record a step
            inner = rec[:, 2] != np.arange(n)
            rec[inner, 1] = thr[inner].view(np.uint32)
        rec[:, 2:] *= np.uint32(4)    # children (and roots) as offsets into the flat records
        self.rec = np.ascontiguousarray(rec).reshape(-1)
        if thr.dtype == np.float32:
            self.pthr, self.shr, self.to = self.rec.view(np.float32), 0, 1
        else:
            self.pthr, self.shr, self.to = thr, 2, 0
        self.troot = troot.astype(np.uint32) * np.uint32(4)
        self.tdepth, self.has_miss = tdepth, bool(has_miss)
        self.steps = int(tdepth.astype(np.int64).sum())
        nz = self.leafw != 0          # + 0 leaves a sum as it is (see the module docs)
        rows, cols = np.nonzero(nz)
        self.ws = np.concatenate([[0], np.cumsum(nz.sum(axis=1))]).astype(np.int64)
        self.wt = cols.astype(np.int32)
        self.wv = np.ascontiguousarray(self.leafw[rows, cols])
        return True

    def _x(self, x):
        return np.ascontiguousarray(x, dtype=self.thr.dtype)

    def _parallel(self, n: int) -> bool:
        import numba
        return n > _ROW_BLOCK and n * self.roots.shape[0] >= PAR_ROWS_WORK and numba.get_num_threads() > 1

    def _plan(self, n: int) -> tuple[int, bool]:
        """(blocks, by trees) of a packed walk: 0 blocks runs it on this thread."""
        import numba
        nthr = numba.get_num_threads()
        if nthr < 2 or n * self.steps < PAR_STEPS:
            return 0, False
        if n >= PAR_MIN_ROWS * nthr:   # two blocks a thread where they hold 2 * PAR_MIN_ROWS rows
            # (a thread that starts late, on a busy core, leaves more of the work to the others;
            # fewer rows a block interleave fewer walks: 16 instead of 64 cost 5-30% more)
            return max(nthr, min(2 * nthr, n // (2 * PAR_MIN_ROWS)), -(-n // _PBLOCK)), False
        return min(nthr, self.troot.shape[0]), True

    def _pargs(self, x):
        return (x.reshape(-1), x.shape[1], self.rec, self.pthr, self.shr, self.to, self.troot, self.tdepth,
                self.has_miss)

    def sum(self, x) -> tuple[np.ndarray, int]:
        """(per row, the sum over the trees in order of the leaves' weight rows; the first row
        whose walk did not end, or -1)."""
        x = self._x(x)
        n = x.shape[0]
        out = np.empty((n, self.leafw.shape[1]), self.leafw.dtype)
        if self.packed:
            nblk, by_trees = self._plan(n)
            pa = self._pargs(x)
            if nblk == 0:
                _psum_rows(0, n, *pa, self.ws, self.wt, self.wv, out)
            elif not by_trees:
                _psum_par(nblk, *pa, self.ws, self.wt, self.wv, out)
            else:
                lv = np.empty((n, self.troot.shape[0]), np.uint32)
                _pleaves_par(nblk, True, *pa, lv)
                _sum_leaves(lv, self.ws, self.wt, self.wv, out)
            return out, -1
        args = (x, self.feat, self.thr, self.mode, self.tnext, self.fnext, self.roots, self.leafw, out)
        if self._parallel(n):
            bad = _sum_par(*args)
        else:
            bad = _sum_rows(0, n, *args)
        return out, int(bad)

    def leaves(self, x) -> tuple[np.ndarray, int]:
        """(leaf index per row and tree, rows x trees; the first row with a cycle, or -1)."""
        x = self._x(x)
        n = x.shape[0]
        if self.packed:
            out = np.empty((n, self.troot.shape[0]), np.uint32)
            nblk, by_trees = self._plan(n)
            if nblk == 0:
                _pleaves_rows(0, n, 0, self.troot.shape[0], *self._pargs(x), out)
            else:
                _pleaves_par(nblk, by_trees, *self._pargs(x), out)
            return out.astype(np.int64), -1
        out = np.empty((n, self.roots.shape[0]), np.int64)
        args = (x, self.feat, self.thr, self.mode, self.tnext, self.fnext, self.roots, out)
        if self._parallel(n):
            bad = _leaves_par(*args)
        else:
            bad = _leaves_rows(0, n, *args)
        return out, int(bad)
