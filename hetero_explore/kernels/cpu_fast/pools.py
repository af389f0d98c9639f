"""MaxPool/AveragePool and the global pools on the CPU.

MaxPool: rows of taps folded by selects, the generated kernel's ``if v > acc: acc = v`` from
-inf per tap in order (the same selection, so the same bits); AveragePool: rows of
accumulators, each element's sum in the generated tap order; global pools: rows of planes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..common import cpu_kernel
from ..nn import _div
from ..pool import _GPOOL, _POOL, _gpool_item, _pool_at, _pool_pos
from ..overrides import override
from ..pmath import _sel
from .base import JIT
from .rows import sums8

# --- MaxPool: rows of taps folded by selects --------------------------------------------
_NINF = np.float32(-np.inf)


@njit(**JIT)
def _mp_hspan(x, xo, xr, sw, dw, g, n, rows, dst, do, dr):
    """dst[do + r*dr + j] for r < rows, j < n: a MaxPool row's first group of g (1-3)
    consecutive taps folded from acc = -inf by the generated kernel's step
    ``if v > acc: acc = v`` (a select), for v = x[xo + r*xr + j*sw + t*dw], t = 0 .. g-1 in
    order. A group of fewer than three taps repeats its last tap, which changes nothing (a
    second ``v > acc`` is false). Literal strides for the common cases (dw 1, sw 1/2), so that
    LLVM vectorises the loads; no accumulator is read (an invariant flag choosing -inf or a
    loaded value kept the loops scalar)."""
    for r in range(rows):
        xb = xo + r * xr
        db = do + r * dr
        if dw == 1 and g == 3 and sw == 2:
            for j in range(n):
                b = np.uint64(xb + 2 * j)
                a = _NINF
                v = x[b]
                a = _sel(v > a, v, a)
                v = x[b + np.uint64(1)]
                a = _sel(v > a, v, a)
                v = x[b + np.uint64(2)]
                a = _sel(v > a, v, a)
                dst[np.uint64(db + j)] = a
        elif dw == 1 and g == 3 and sw == 1:
            for j in range(n):
                b = np.uint64(xb + j)
                a = _NINF
                v = x[b]
                a = _sel(v > a, v, a)
                v = x[b + np.uint64(1)]
                a = _sel(v > a, v, a)
                v = x[b + np.uint64(2)]
                a = _sel(v > a, v, a)
                dst[np.uint64(db + j)] = a
        elif dw == 1 and g == 2 and sw == 2:
            for j in range(n):
                b = np.uint64(xb + 2 * j)
                a = _NINF
                v = x[b]
                a = _sel(v > a, v, a)
                v = x[b + np.uint64(1)]
                a = _sel(v > a, v, a)
                dst[np.uint64(db + j)] = a
        else:
            t1 = np.uint64(dw * min(1, g - 1))
            t2 = np.uint64(dw * (g - 1))
            for j in range(n):
                b = np.uint64(xb + j * sw)
                a = _NINF
                v = x[b]
                a = _sel(v > a, v, a)
                v = x[b + t1]
                a = _sel(v > a, v, a)
                v = x[b + t2]
                a = _sel(v > a, v, a)
                dst[np.uint64(db + j)] = a


@njit(**JIT)
def _mp_hspan_acc(x, xo, xr, sw, dw, g, n, rows, prev, dst, do, dr):
    """:func:`_mp_hspan` for a later group of taps (a row of more than three), any strides,
    continuing from acc = prev[do + r*dr + j]; dst is not prev (a select stored back where it
    was read becomes a slow masked store)."""
    t1 = np.uint64(dw * min(1, g - 1))
    t2 = np.uint64(dw * (g - 1))
    for r in range(rows):
        xb = xo + r * xr
        db = do + r * dr
        for j in range(n):
            a = prev[np.uint64(db + j)]
            b = np.uint64(xb + j * sw)
            v = x[b]
            a = _sel(v > a, v, a)
            v = x[b + t1]
            a = _sel(v > a, v, a)
            v = x[b + t2]
            a = _sel(v > a, v, a)
            dst[np.uint64(db + j)] = a


@njit(**JIT)
def _mp_vspan(h, r0, r1, r2, n, dst, do):
    """dst[do + j] = -inf folded with h[r0 + j], h[r1 + j], h[r2 + j] in that order (the row
    maxima of an output row's first three rows; a repeated row changes nothing), j < n."""
    for j in range(n):
        a = _NINF
        v = h[np.uint64(r0 + j)]
        a = _sel(v > a, v, a)
        v = h[np.uint64(r1 + j)]
        a = _sel(v > a, v, a)
        v = h[np.uint64(r2 + j)]
        a = _sel(v > a, v, a)
        dst[np.uint64(do + j)] = a


@njit(**JIT)
def _mp_vspan_acc(h, r0, r1, r2, n, prev, dst, do):
    """:func:`_mp_vspan` continuing from acc = prev[j] (later rows of a window of more than
    three; dst is not prev)."""
    for j in range(n):
        a = prev[j]
        v = h[np.uint64(r0 + j)]
        a = _sel(v > a, v, a)
        v = h[np.uint64(r1 + j)]
        a = _sel(v > a, v, a)
        v = h[np.uint64(r2 + j)]
        a = _sel(v > a, v, a)
        dst[np.uint64(do + j)] = a


@njit(**JIT)
def _mp_hfold(x, xo, xr, sw, dw, KW, n, rows, bufs, do, dr):
    """All KW taps of ``rows`` spans of n row maxima (x span r from xo + r*xr, into
    bufs[*][do + r*dr:][:n]): groups of three taps, the later ones chained through the other
    buffer; returns the index of the buffer holding them."""
    _mp_hspan(x, xo, xr, sw, dw, min(3, KW), n, rows, bufs[0], do, dr)
    cur = 0
    for g0 in range(3, KW, 3):
        _mp_hspan_acc(x, xo + g0 * dw, xr, sw, dw, min(3, KW - g0), n, rows, bufs[cur], bufs[1 - cur], do, dr)
        cur = 1 - cur
    return cur


@njit(**JIT)
def _mp_edges(W, OW, KW, sw, dw, pl, jlo, jhi):
    """MaxPool's edge columns (j < jlo, jhi <= j < OW: a tap outside the row) as rows of
    (j, number of in-row taps, x column of the first one); the in-row taps are consecutive."""
    ne = jlo + OW - jhi
    e = np.zeros((ne, 3), np.int64)
    for q in range(ne):
        j = q if q < jlo else jhi + q - jlo
        k0 = 0
        while k0 < KW and j * sw - pl + k0 * dw < 0:
            k0 += 1
        k1 = k0
        while k1 < KW and j * sw - pl + k1 * dw < W:
            k1 += 1
        e[q, 0] = j
        e[q, 1] = k1 - k0
        e[q, 2] = j * sw - pl + k0 * dw
    return e


@njit(**JIT)
def _mp_vplane(h, vrows, OH, OW, out, ob, vb):
    """One output plane from its row maxima h: output row oh folds the rows of h listed in
    vrows[oh] (count, then offsets; kh ascending) from -inf, three at a time (the later
    groups of a window of more than three rows chained through the buffers vb)."""
    for oh in range(OH):
        o = ob + oh * OW
        m = vrows[oh, 0]
        if m == 0:
            for j in range(OW):
                out[o + j] = _NINF
        elif m <= 3:
            r0, r1, r2 = vrows[oh, 1], vrows[oh, 1 + min(1, m - 1)], vrows[oh, m]
            h0 = h[r0:r0 + OW]
            h1 = h[r1:r1 + OW]
            h2 = h[r2:r2 + OW]
            d = out[o:o + OW]
            for j in range(OW):
                a = _NINF
                v = h0[j]
                a = _sel(v > a, v, a)
                v = h1[j]
                a = _sel(v > a, v, a)
                v = h2[j]
                a = _sel(v > a, v, a)
                d[j] = a
        else:
            _mp_vspan(h, vrows[oh, 1], vrows[oh, 2], vrows[oh, 3], OW, vb[0], 0)
            cur = 0
            for g0 in range(3, m, 3):
                g = min(3, m - g0)
                r0, r1, r2 = vrows[oh, 1 + g0], vrows[oh, 1 + g0 + min(1, g - 1)], vrows[oh, g0 + g]
                if g0 + 3 >= m:
                    _mp_vspan_acc(h, r0, r1, r2, OW, vb[cur], out, o)
                else:
                    _mp_vspan_acc(h, r0, r1, r2, OW, vb[cur], vb[1 - cur], 0)
                    cur = 1 - cur


@njit(**JIT)
def _maxpool_cpu(x, p, out):
    """2-D (and 1-D) float32 MaxPool. The generated kernel (_pool_at) folds the in-input taps
    of each output, (kh, kw) ascending, from acc = -inf with ``if v > acc: acc = v``: the
    result is the first tap (in that order) whose value is the largest of the non-NaN taps
    (-inf if there is none); only +0 and -0 tie with different bits, and NaN never wins.

    That fold splits exactly at row boundaries: folding row kh's taps from -inf gives that
    row's first maximal tap m_kh (never NaN), and ``if m > acc: acc = m`` over m_0, m_1, ...
    from acc = -inf keeps the earlier of equal values -- the first maximal tap of the whole
    window in the same (kh, kw) order, with the same bits. So the row maxima of every input
    row (h: per output column) are computed once and shared by the output rows whose windows
    hold that row (about KH/sh of them), and each output row folds its rows of h. Both passes
    are loops of selects over contiguous spans. When W is a multiple of sw (W = hw * sw) the
    row maxima of a whole plane are one span (h row r, column j reads x row r from column
    j*sw - pl on), the edge columns (a tap outside the row) recomputed after; otherwise one
    span per row. Taps outside the input are skipped, as in _pool_at."""
    H, W, OH, OW, KH, KW, sh, sw, dh, dw = p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]
    pt, pl = p[12], p[13]
    if out.shape[0] == 0:
        return
    NC = out.shape[0] // (OH * OW)
    # the columns whose KW taps all lie inside the row: j in [jlo, jhi)
    jlo = min((pl + sw - 1) // sw, OW)
    jhi = min(max((W - 1 + pl - (KW - 1) * dw) // sw + 1, jlo), OW)
    flat = W % sw == 0 and OW <= W // sw
    hw = W // sw if flat else OW
    bufs = (np.empty(H * hw, np.float32), np.empty(H * hw, np.float32))
    vb = (np.empty(OW, np.float32), np.empty(OW, np.float32))
    edges = _mp_edges(W, OW, KW, sw, dw, pl, jlo, jhi)
    # per output row: the number of its in-input rows and their offsets in h, kh ascending
    vrows = np.zeros((OH, KH + 1), np.int64)
    for oh in range(OH):
        for kh in range(KH):
            ih = oh * sh - pt + kh * dh
            if ih >= 0 and ih < H:
                vrows[oh, 0] += 1
                vrows[oh, vrows[oh, 0]] = ih * hw
    for nc in range(NC):
        xb = nc * H * W
        hc = 0
        if jhi > jlo:
            if flat:
                hc = _mp_hfold(x, xb + jlo * sw - pl, 0, sw, dw, KW, (H - 1) * hw + jhi - jlo, 1, bufs, jlo, 0)
            else:
                hc = _mp_hfold(x, xb + jlo * sw - pl, W, sw, dw, KW, jhi - jlo, H, bufs, jlo, hw)
        h = bufs[hc]
        # the edge columns (in a flat span also computed, wrongly, as if each row went on
        # into the next): their in-row taps, kw ascending (up to three as straight-line
        # selects, a repeated last tap changing nothing)
        for q in range(edges.shape[0]):
            j, nk, c0 = edges[q, 0], edges[q, 1], edges[q, 2]
            if nk > 0 and nk <= 3:
                t1 = np.uint64(dw * min(1, nk - 1))
                t2 = np.uint64(dw * (nk - 1))
                for r in range(H):
                    b = np.uint64(xb + r * W + c0)
                    a = _NINF
                    v = x[b]
                    a = _sel(v > a, v, a)
                    v = x[b + t1]
                    a = _sel(v > a, v, a)
                    v = x[b + t2]
                    a = _sel(v > a, v, a)
                    h[np.uint64(r * hw + j)] = a
            else:
                for r in range(H):
                    xr = xb + r * W + c0
                    a = _NINF
                    for t in range(nk):
                        v = x[xr + t * dw]
                        a = _sel(v > a, v, a)
                    h[r * hw + j] = a
        _mp_vplane(h, vrows, OH, OW, out, nc * OH * OW, vb)


@njit(**JIT)
def _avgpool_row_cpu(x, xb, oh, p, acc, wcnt, wpad, dst):
    """CPU only: one output row of AveragePool with a row of accumulators, taps (kh, kw)
    ascending: each element sees the same sequence of adds as _pool_at, then its division."""
    H, W, OW, KH, KW, sh, sw, dh = p[2], p[3], p[5], p[6], p[7], p[8], p[9], p[10]
    dw, pt, pl, pb, include = p[11], p[12], p[13], p[14], p[16]
    h0 = oh * sh - pt
    a = acc[:OW]
    a[:] = np.float32(0)
    nh = 0
    nhp = 0
    for kh in range(KH):
        ih = h0 + kh * dh
        if ih >= -pt and ih < H + pb:
            nhp += 1
        if ih < 0 or ih >= H:
            continue
        nh += 1
        xr = xb + ih * W
        for kw in range(KW):
            c = pl - kw * dw  # iw = ow*sw - c
            lo = -((-c) // sw)
            if lo < 0:
                lo = 0
            hi = (W - 1 + c) // sw + 1
            if hi > OW:
                hi = OW
            if hi <= lo:
                continue
            seg = a[lo:hi]
            st = xr + lo * sw - c
            xs = x[st:st + (hi - lo - 1) * sw + 1:sw]
            for j in range(hi - lo):
                seg[j] = seg[j] + xs[j]
    for ow in range(OW):
        cnt = nh * wcnt[ow]
        if include:
            cnt = nhp * wpad[ow]
        dst[ow] = _div(a[ow], np.float32(cnt))


@cpu_kernel
def _pool_cpu(x, p, is_max, out):
    """MaxPool/AveragePool: 3-D and depth-padded pools per element (_pool_at); 1-D/2-D
    MaxPool by row maxima (_maxpool_cpu); 1-D/2-D AveragePool by rows of accumulators."""
    if p[17] != 1 or p[18] != 1 or p[19] != 1 or p[22] != 0 or p[23] != 0:
        for i in range(out.shape[0]):
            nc, od, oh, ow = _pool_pos(i, p)
            out[i] = _pool_at(x, nc, od, oh, ow, p, is_max)
        return
    if is_max:
        _maxpool_cpu(x, p, out)
        return
    H, W, OH, OW, KW, sw, dw, pl = p[2], p[3], p[4], p[5], p[7], p[9], p[11], p[13]
    pr = p[15]
    NC = out.shape[0] // (OH * OW) if OH * OW > 0 else 0
    acc = np.empty(max(OW, 1), dtype=np.float32)
    # per output column: taps inside the input, and inside input + explicit pads
    wcnt = np.zeros(max(OW, 1), dtype=np.int64)
    wpad = np.zeros(max(OW, 1), dtype=np.int64)
    for ow in range(OW):
        for kw in range(KW):
            iw = ow * sw - pl + kw * dw
            if iw >= 0 and iw < W:
                wcnt[ow] += 1
            if iw >= -pl and iw < W + pr:
                wpad[ow] += 1
    for nc in range(NC):
        for oh in range(OH):
            o = (nc * OH + oh) * OW
            _avgpool_row_cpu(x, nc * H * W, oh, p, acc, wcnt, wpad, out[o:o + OW])


#: rows of a GlobalAveragePool summed side by side (_gpool_cpu): independent add chains
_GP_ROWS = 8


@cpu_kernel
def _gpool_cpu(x, S, is_max, count, out):
    """CPU only: GlobalAveragePool as _gpool_item (sum = 0.0f, += x in ascending spatial order,
    then / count), _GP_ROWS rows side by side so that their add chains overlap (one row's sum
    is a chain of dependent adds: its latency, not the loads, bounds a row at a time). Each
    row's sequence is unchanged. GlobalMaxPool and the last rows: one row at a time."""
    R = out.shape[0]
    r = 0
    if not is_max:
        while r + _GP_ROWS <= R:
            s0, s1, s2, s3, s4, s5, s6, s7 = sums8(x, r * S, _GP_ROWS, S)
            out[r] = _div(s0, count)
            out[r + 1] = _div(s1, count)
            out[r + 2] = _div(s2, count)
            out[r + 3] = _div(s3, count)
            out[r + 4] = _div(s4, count)
            out[r + 5] = _div(s5, count)
            out[r + 6] = _div(s6, count)
            out[r + 7] = _div(s7, count)
            r += _GP_ROWS
    for q in range(r, R):
        out[q] = _gpool_item(q, x, S, is_max, count)


def register() -> None:
    override(_POOL, target="cpu", run=_pool_cpu)
    override(_GPOOL, target="cpu", run=_gpool_cpu)
