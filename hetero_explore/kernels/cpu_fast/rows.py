"""Row-wise and per-channel ops on the CPU: BatchNormalization, Softmax/LogSoftmax and
LayerNormalization.

Each runs the generated kernel's per-element (or per-row) sequence, with several rows
interleaved (their sums chained side by side, never reassociated).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..common import cpu_kernel
from ..activation import _SOFTMAX
from ..nn import _div
from ..norm import _BN, _LN, _bn_apply, _bn_factor, _ln_apply, _ln_inv, _ln_row
from ..overrides import override
from ..pmath import _sel, exp_f32, exp_nonpos_f32, log_f32
from .base import JIT, PAR
from .llvm import num_threads, parallel_chunks, shares


@cpu_kernel
def _bn_cpu(x, scale, bias, mean, var, eps, C, S, out):
    nblocks = out.shape[0] // (C * S) if C * S > 0 else 0
    for nb in range(nblocks):
        for c in range(C):
            f = _bn_factor(scale[c], var[c], eps)
            mc = mean[c]
            bc = bias[c]
            o = (nb * C + c) * S
            for j in range(S):
                out[o + j] = _bn_apply(x[o + j], mc, f, bc)


#: Softmax over the last axis: rows per parallel block (fixed: each row is computed alone, so
#: the results do not depend on the blocking or the thread count anyway) and the elements from
#: which it goes parallel (a region costs ~1 us at one thread, ~10 us at two on the bench
#: machine; numba.get_num_threads() in a kernel would make it uncacheable)
_SM_ROWS = 16
_SM_PAR = 1 << 13
#: njit options of small helpers that take or make array slices: inlined into the caller, so
#: that numba prunes the slices' reference counting (as calls returning them, their atomic
#: increments and decrements cost ~20% of a 148 x 37 Softmax)
_JITI = dict(JIT, inline="always")


@njit(**_JITI)
def _rows4_at(b, nr, S):
    """Offsets of four rows S apart from b: rows 0 .. nr-1 (1 <= nr <= 4), then row nr-1 again
    (a short group's missing rows repeat its last row; they are only read)."""
    t = nr - 1
    return b, b + min(1, t) * S, b + min(2, t) * S, b + min(3, t) * S


@njit(**_JITI)
def _maxes4(a, b, nr, S, L):
    """Per row of _rows4_at(b, nr, S) (L elements): m = first element, then m = v where
    v > m, ascending (_softmax_row's max); four chains in flight, each in its own order."""
    o0, o1, o2, o3 = _rows4_at(b, nr, S)
    x0 = a[o0:o0 + L]
    x1 = a[o1:o1 + L]
    x2 = a[o2:o2 + L]
    x3 = a[o3:o3 + L]
    m0 = x0[0]
    m1 = x1[0]
    m2 = x2[0]
    m3 = x3[0]
    for j in range(1, L):
        v = x0[j]
        m0 = _sel(v > m0, v, m0)
        v = x1[j]
        m1 = _sel(v > m1, v, m1)
        v = x2[j]
        m2 = _sel(v > m2, v, m2)
        v = x3[j]
        m3 = _sel(v > m3, v, m3)
    return m0, m1, m2, m3


@njit(**_JITI)
def _sums4(a, b, nr, S, L):
    """Per row of _rows4_at(b, nr, S) (L elements): s = 0.0f, s = s + v ascending; four
    chains in flight, each in its own order."""
    o0, o1, o2, o3 = _rows4_at(b, nr, S)
    x0 = a[o0:o0 + L]
    x1 = a[o1:o1 + L]
    x2 = a[o2:o2 + L]
    x3 = a[o3:o3 + L]
    s0 = np.float32(0)
    s1 = np.float32(0)
    s2 = np.float32(0)
    s3 = np.float32(0)
    for j in range(L):
        s0 += x0[j]
        s1 += x1[j]
        s2 += x2[j]
        s3 += x3[j]
    return s0, s1, s2, s3


@njit(**JIT)
def _softmax_last1(x, out, b, A, is_log):
    """One row of A elements at flat offset b (inner == 1): the max, then e = exp(v - m) into
    the output, then s = s + e ascending, then e / s (LogSoftmax: the exps are only summed;
    y = (v - m) - log(s)) -- _softmax_row's sequence, in passes over contiguous slices. The
    exps are exp_nonpos_f32: exp_f32's bits for v - m <= 0 or NaN, which v - m always is."""
    xr = x[b:b + A]
    orow = out[b:b + A]
    m = xr[0]
    for a in range(1, A):
        v = xr[a]
        if v > m:
            m = v
    for a in range(A):
        orow[a] = exp_nonpos_f32(xr[a] - m)
    s = np.float32(0)
    for a in range(A):
        s += orow[a]
    _softmax_finish(xr, orow, m, s, A, is_log)


@njit(**JIT)
def _softmax_finish(xr, orow, m, s, A, is_log):
    """A row's output from its max m and the sum s of its exps (held in orow): orow / s, or
    (x - m) - log(s) for LogSoftmax."""
    if is_log:
        ls = np.float32(log_f32(s))
        for a in range(A):
            orow[a] = (xr[a] - m) - ls
    else:
        for a in range(A):
            orow[a] = orow[a] / s


@njit(**JIT)
def _softmax_last4(x, out, b, A, is_log):
    """Four consecutive rows from flat offset b, each with _softmax_last1's sequence: the
    max and the ascending sum of the four rows are interleaved (four independent chains in
    flight instead of one, each still in its own order); exp and the final pass go row by
    row (vectorized; whole vectors when A is a multiple of 8, which is when this runs)."""
    x0 = x[b:b + A]
    x1 = x[b + A:b + 2 * A]
    x2 = x[b + 2 * A:b + 3 * A]
    x3 = x[b + 3 * A:b + 4 * A]
    y0 = out[b:b + A]
    y1 = out[b + A:b + 2 * A]
    y2 = out[b + 2 * A:b + 3 * A]
    y3 = out[b + 3 * A:b + 4 * A]
    m0 = x0[0]
    m1 = x1[0]
    m2 = x2[0]
    m3 = x3[0]
    for a in range(1, A):
        v0 = x0[a]
        v1 = x1[a]
        v2 = x2[a]
        v3 = x3[a]
        m0 = v0 if v0 > m0 else m0
        m1 = v1 if v1 > m1 else m1
        m2 = v2 if v2 > m2 else m2
        m3 = v3 if v3 > m3 else m3
    for a in range(A):
        y0[a] = exp_nonpos_f32(x0[a] - m0)
    for a in range(A):
        y1[a] = exp_nonpos_f32(x1[a] - m1)
    for a in range(A):
        y2[a] = exp_nonpos_f32(x2[a] - m2)
    for a in range(A):
        y3[a] = exp_nonpos_f32(x3[a] - m3)
    s0 = np.float32(0)
    s1 = np.float32(0)
    s2 = np.float32(0)
    s3 = np.float32(0)
    for a in range(A):
        s0 += y0[a]
        s1 += y1[a]
        s2 += y2[a]
        s3 += y3[a]
    _softmax_finish(x0, y0, m0, s0, A, is_log)
    _softmax_finish(x1, y1, m1, s1, A, is_log)
    _softmax_finish(x2, y2, m2, s2, A, is_log)
    _softmax_finish(x3, y3, m3, s3, A, is_log)


@njit(**JIT)
def _softmax_padded4(x, out, r0, nr, A, is_log, e):
    """Rows r0 .. r0+nr-1 (1 <= nr <= 4) of a Softmax over the last axis whose length A is
    not a multiple of 8, each with _softmax_last1's sequence; the exps go to ``e``, rows of
    A8 = A rounded up to 8, and each row's exp loop runs A8 elements (on into the next row
    of x, except for the array's last row), so that it is whole vectors with no scalar
    remainder (~5 scalar exps a row of 37 cost a third of the node); the extra lanes are
    thrown away. The rows' max and sum chains run interleaved (_maxes4, _sums4)."""
    b = r0 * A
    A8 = (A + 7) // 8 * 8
    m = _maxes4(x, b, nr, A, A)
    for k in range(nr):
        o = b + k * A
        L = A8 if o + A8 <= x.shape[0] else A
        xr = x[o:o + L]
        er = e[k * A8:k * A8 + L]
        mk = m[k]
        for a in range(L):
            er[a] = exp_nonpos_f32(xr[a] - mk)
    s = _sums4(e, 0, nr, A8, A)
    for k in range(nr):
        o = b + k * A
        xr = x[o:o + A]
        er = e[k * A8:k * A8 + A]
        orow = out[o:o + A]
        mk = m[k]
        sk = s[k]
        if is_log:
            ls = np.float32(log_f32(sk))
            for a in range(A):
                orow[a] = (xr[a] - mk) - ls
        else:
            for a in range(A):
                orow[a] = er[a] / sk


@njit(**JIT)
def _softmax_last_rows(x, out, r0, r1, A, is_log):
    """Rows r0 <= r < r1 of a Softmax over the last axis: four at a time, then one by one
    (A a multiple of 8), or four at a time through padded exp rows (otherwise)."""
    r = r0
    if A % 8 == 0:
        while r + 4 <= r1:
            _softmax_last4(x, out, r * A, A, is_log)
            r += 4
        while r < r1:
            _softmax_last1(x, out, r * A, A, is_log)
            r += 1
    elif is_log:
        _softmax_padded_rows(x, out, r0, r1, A, True)
    else:
        _softmax_padded_rows(x, out, r0, r1, A, False)


@njit(**JIT)
def _softmax_padded_rows(x, out, r0, r1, A, is_log):
    """Rows r0 <= r < r1 through _softmax_padded4, four at a time. is_log comes in as a
    literal (numba compiles one variant per value, without the other's branch: the runtime
    flag cost ~20% of a 148 x 37 Softmax here; the other paths did not notice it, and a
    variant of each for both values doubled the Softmax compile time)."""
    e = np.empty(4 * ((A + 7) // 8 * 8), dtype=np.float32)
    for r in range(r0, r1, 4):
        _softmax_padded4(x, out, r, min(4, r1 - r), A, is_log, e)


@njit(**PAR)
def _softmax_last_par(x, out, outer, A, is_log, nblk):
    """_softmax_last_rows over blocks of _SM_ROWS rows in parallel."""
    prev = parallel_chunks(shares(nblk))   # see llvm.parallel_chunks
    for iu in prange(nblk):
        it = np.int64(iu)
        r0 = it * _SM_ROWS
        _softmax_last_rows(x, out, r0, min(outer, r0 + _SM_ROWS), A, is_log)
    parallel_chunks(prev)


@cpu_kernel
def _softmax_cpu(x, out, rows, A, inner, is_log):
    """CPU only: the same per-element sequence as _softmax_row, in passes over
    contiguous slices. inner == 1: per row, the max, then e = exp(v - m), then
    s = s + e ascending, then e / s (LogSoftmax: the exps are only summed; y = (v - m) -
    log(s)), four rows at a time (_softmax_last4, _softmax_padded4). inner > 1: the reduction index a runs
    outside and j (the inner index) inside, with a max and a sum per j."""
    if A <= 0 or rows <= 0:
        return
    outer = rows // inner
    if inner == 1:
        nblk = (outer + _SM_ROWS - 1) // _SM_ROWS
        if nblk > 1 and outer * A >= _SM_PAR and num_threads() > 1:
            _softmax_last_par(x, out, outer, A, is_log, nblk)
        else:
            _softmax_last_rows(x, out, 0, outer, A, is_log)
        return
    mx = np.empty(inner, dtype=np.float32)
    sm = np.empty(inner, dtype=np.float32)
    for o in range(outer):
        b = o * A * inner
        mx[:] = x[b:b + inner]
        for a in range(1, A):
            st = b + a * inner
            xr = x[st:st + inner]
            for j in range(inner):
                v = xr[j]
                if v > mx[j]:
                    mx[j] = v
        sm[:] = np.float32(0)
        for a in range(A):
            st = b + a * inner
            xr = x[st:st + inner]
            orow = out[st:st + inner]
            if is_log:
                for j in range(inner):
                    sm[j] = sm[j] + exp_f32(xr[j] - mx[j])
            else:
                for j in range(inner):
                    e = exp_f32(xr[j] - mx[j])
                    orow[j] = e
                    sm[j] = sm[j] + e
        if is_log:
            for j in range(inner):
                sm[j] = log_f32(sm[j])
            for a in range(A):
                st = b + a * inner
                xr = x[st:st + inner]
                orow = out[st:st + inner]
                for j in range(inner):
                    orow[j] = (xr[j] - mx[j]) - sm[j]
        else:
            for a in range(A):
                st = b + a * inner
                orow = out[st:st + inner]
                for j in range(inner):
                    orow[j] = orow[j] / sm[j]


#: LayerNormalization: rows whose sum and sum-of-squares chains run interleaved (a row's
#: chain is one float add after another; eight in flight measured faster than four here)
_LN_G = 8


@njit(**_JITI)
def _rows8_at(b, nr, S):
    """Offsets of eight rows S apart from b: rows 0 .. nr-1 (1 <= nr <= 8), then row nr-1
    again (only read)."""
    t = nr - 1
    return (b, b + min(1, t) * S, b + min(2, t) * S, b + min(3, t) * S, b + min(4, t) * S,
            b + min(5, t) * S, b + min(6, t) * S, b + min(7, t) * S)


@njit(**_JITI)
def sums8(x, b, nr, D):
    """Per row of _rows8_at(b, nr, D): s = 0.0f, s = s + x ascending (_ln_row's sum, and
    _gpool_item's), eight independent add chains side by side."""
    o0, o1, o2, o3, o4, o5, o6, o7 = _rows8_at(b, nr, D)
    x0 = x[o0:o0 + D]
    x1 = x[o1:o1 + D]
    x2 = x[o2:o2 + D]
    x3 = x[o3:o3 + D]
    x4 = x[o4:o4 + D]
    x5 = x[o5:o5 + D]
    x6 = x[o6:o6 + D]
    x7 = x[o7:o7 + D]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = np.float32(0)
    for j in range(D):
        s0 += x0[j]
        s1 += x1[j]
        s2 += x2[j]
        s3 += x3[j]
        s4 += x4[j]
        s5 += x5[j]
        s6 += x6[j]
        s7 += x7[j]
    return s0, s1, s2, s3, s4, s5, s6, s7


@njit(**_JITI)
def _ln_sqdev8(x, b, nr, D, m):
    """Per row of _rows8_at(b, nr, D) with its mean m[k]: q = 0.0f, d = x - mean, q = q + d*d
    ascending (_ln_row's second pass)."""
    o0, o1, o2, o3, o4, o5, o6, o7 = _rows8_at(b, nr, D)
    m0, m1, m2, m3, m4, m5, m6, m7 = m
    x0 = x[o0:o0 + D]
    x1 = x[o1:o1 + D]
    x2 = x[o2:o2 + D]
    x3 = x[o3:o3 + D]
    x4 = x[o4:o4 + D]
    x5 = x[o5:o5 + D]
    x6 = x[o6:o6 + D]
    x7 = x[o7:o7 + D]
    q0 = q1 = q2 = q3 = q4 = q5 = q6 = q7 = np.float32(0)
    for j in range(D):
        d = x0[j] - m0
        q0 += d * d
        d = x1[j] - m1
        q1 += d * d
        d = x2[j] - m2
        q2 += d * d
        d = x3[j] - m3
        q3 += d * d
        d = x4[j] - m4
        q4 += d * d
        d = x5[j] - m5
        q5 += d * d
        d = x6[j] - m6
        q6 += d * d
        d = x7[j] - m7
        q7 += d * d
    return q0, q1, q2, q3, q4, q5, q6, q7


@njit(**JIT)
def _ln_group_cpu(r0, nr, x, out, scale, bias, has_b, D, Df, eps, mean_out, inv_out, want_stats):
    """CPU only: rows r0 .. r0+nr-1 (1 <= nr <= _LN_G) of _ln_row for full-size scale/bias:
    each row's sum, mean = s / D, sum of squared deviations and inv = 1 / sqrt(q / D + eps)
    in _ln_row's order, the rows' chains interleaved (one row's chain is latency-bound);
    then ((x - mean) * inv) * scale (+ bias) row by row, on slices (vectorised)."""
    b = r0 * D
    s = sums8(x, b, nr, D)
    m = (np.float32(_div(s[0], Df)), np.float32(_div(s[1], Df)), np.float32(_div(s[2], Df)),
         np.float32(_div(s[3], Df)), np.float32(_div(s[4], Df)), np.float32(_div(s[5], Df)),
         np.float32(_div(s[6], Df)), np.float32(_div(s[7], Df)))
    q = _ln_sqdev8(x, b, nr, D, m)
    sc = scale[:D]
    bb = bias[:D]
    for k in range(nr):
        mean = m[k]
        inv = np.float32(_ln_inv(q[k], Df, eps))
        o = b + k * D
        xr = x[o:o + D]
        yr = out[o:o + D]
        if has_b:
            for j in range(D):
                yr[j] = _ln_apply(xr[j], mean, inv, sc[j]) + bb[j]
        else:
            for j in range(D):
                yr[j] = _ln_apply(xr[j], mean, inv, sc[j])
        if want_stats:
            mean_out[r0 + k] = mean
            inv_out[r0 + k] = inv


#: LayerNormalization rows per parallel block (fixed, a multiple of _LN_G: each row is computed
#: alone anyway) and the elements from which the blocks run in parallel (~25 us on one thread)
_LN_ROWS = 8 * _LN_G
_LN_PAR = 1 << 15


@njit(**JIT)
def _ln_groups_cpu(x, out, scale, bias, has_b, r0, r1, D, Df, eps, mean_out, inv_out, want_stats):
    """CPU only: rows r0 <= r < r1 through _ln_group_cpu, _LN_G at a time."""
    for r in range(r0, r1, _LN_G):
        _ln_group_cpu(r, min(_LN_G, r1 - r), x, out, scale, bias, has_b, D, Df, eps, mean_out, inv_out,
                      want_stats)


@njit(**PAR)
def _ln_groups_par(x, out, scale, bias, has_b, rows, D, Df, eps, mean_out, inv_out, want_stats, nb):
    """_ln_groups_cpu over blocks of _LN_ROWS rows in parallel."""
    prev = parallel_chunks(shares(nb))   # see llvm.parallel_chunks
    for bu in prange(nb):
        b = np.int64(bu)
        _ln_groups_cpu(x, out, scale, bias, has_b, b * _LN_ROWS, min(rows, (b + 1) * _LN_ROWS), D, Df, eps,
                       mean_out, inv_out, want_stats)
    parallel_chunks(prev)


@njit(**JIT)
def _ln_groups(x, out, scale, bias, has_b, rows, D, Df, eps, mean_out, inv_out, want_stats):
    """Every row through _ln_group_cpu: blocks of rows in parallel from _LN_PAR elements."""
    nb = (rows + _LN_ROWS - 1) // _LN_ROWS
    if rows * D >= _LN_PAR and nb > 1 and num_threads() > 1:
        _ln_groups_par(x, out, scale, bias, has_b, rows, D, Df, eps, mean_out, inv_out, want_stats, nb)
    else:
        _ln_groups_cpu(x, out, scale, bias, has_b, 0, rows, D, Df, eps, mean_out, inv_out, want_stats)


@cpu_kernel
def _ln_cpu(x, out, scale, bias, has_b, rows, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out, inv_out,
            want_stats):
    """CPU only: _ln_row per row; with full-size scale and bias, _LN_G rows at a time
    (_ln_group_cpu), blocks of rows in parallel when large (_ln_groups). The models' case (a
    bias, no Mean/InvStdDev outputs) passes its flags as literals: numba compiles that variant
    without the other branches (~10% of a 64 x 128 node); every other case shares one variant
    with runtime flags."""
    if sfull and (bfull or not has_b):
        if D > 0:
            if has_b and not want_stats:
                _ln_groups(x, out, scale, bias, True, rows, D, Df, eps, mean_out, inv_out, False)
            else:
                _ln_groups(x, out, scale, bias, has_b, rows, D, Df, eps, mean_out, inv_out, want_stats)
            return
    for r in range(rows):
        _ln_row(r, x, out, scale, bias, has_b, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out,
                inv_out, want_stats)


def register() -> None:
    override(_BN, target="cpu", run=_bn_cpu)
    override(_SOFTMAX, target="cpu", run=_softmax_cpu)
    override(_LN, target="cpu", run=_ln_cpu)
