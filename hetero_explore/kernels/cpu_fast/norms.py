"""The two kernels of :mod:`..norm`'s normalisations on the CPU (InstanceNormalization,
GroupNormalization, MeanVarianceNormalization, RMSNormalization, LpNormalization).

* statistics (``norm_stats``): one group's sums in ascending flat order, as ``_stats_item``;
  a group whose elements are contiguous (the reduced axes trailing) runs as a slice, and
  four such groups run side by side (their chains interleaved, each its own sequence), in
  parallel blocks of groups when there are many;
* apply (``norm_apply``): ``_apply_item``'s per-element sequence, but the group, scale and
  bias offsets are computed once per *run* (the trailing dims along which all three are
  constant: the spatial dims of InstanceNormalization) instead of three broadcast-offset
  walks per element, so the run's loop vectorises; blocks of runs in parallel above
  :data:`_PAR_ELEMS` elements.

Each element and each group gets exactly the generated kernel's float32 operations
(``tests/test_fastpaths.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..common import bcast_offset, cpu_kernel
from ..nn import _div
from ..norm import _APPLY, _STATS, _den, _stats_item
from ..overrides import override
from .base import JIT, PAR
from .llvm import num_threads, parallel_chunks, shares

#: elements from which the apply kernel runs blocks of runs in parallel
_PAR_ELEMS = 1 << 16
#: groups from which the statistics run blocks of four groups in parallel
_PAR_GROUPS = 64
_bcast_offset_cpu = bcast_offset.cpu
_stats_item_cpu = _stats_item.cpu


@njit(**JIT)
def _run_len(vshape, gstr, sstr, bstr):
    """The length of the trailing dims along which the group, scale and bias offsets are constant."""
    R = 1
    for d in range(vshape.shape[0] - 1, -1, -1):
        if gstr[d] != 0 or sstr[d] != 0 or bstr[d] != 0:
            break
        R *= vshape[d]
    return R


@njit(**JIT)
def _apply_runs(r0, r1, R, x, out, mean, den, vshape, gstr, sstr, bstr, scale, bias, has_scale, has_bias,
                zero_if_zero):
    for r in range(r0, r1):
        b = r * R
        g = _bcast_offset_cpu(b, vshape, gstr)
        m = mean[g]
        d = den[g]
        sc = scale[_bcast_offset_cpu(b, vshape, sstr)] if has_scale else np.float32(0)
        bi = bias[_bcast_offset_cpu(b, vshape, bstr)] if has_bias else np.float32(0)
        xs = x[b:b + R]
        os_ = out[b:b + R]
        if zero_if_zero and d == np.float32(0):
            for j in range(R):
                y = np.float32(0)
                if has_scale:
                    y = y * sc
                if has_bias:
                    y = y + bi
                os_[j] = y
        elif has_scale and has_bias:
            for j in range(R):
                os_[j] = ((xs[j] - m) / d) * sc + bi
        elif has_scale:
            for j in range(R):
                os_[j] = ((xs[j] - m) / d) * sc
        elif has_bias:
            for j in range(R):
                os_[j] = ((xs[j] - m) / d) + bi
        else:
            for j in range(R):
                os_[j] = (xs[j] - m) / d


@njit(**PAR)
def _apply_par(nr, R, x, out, mean, den, vshape, gstr, sstr, bstr, scale, bias, has_scale, has_bias, zero_if_zero):
    per = max(1, _PAR_ELEMS // (4 * R))
    nb = (nr + per - 1) // per
    prev = parallel_chunks(shares(nb))   # see llvm.parallel_chunks
    for bu in prange(nb):
        b = np.int64(bu)
        _apply_runs(b * per, min(nr, (b + 1) * per), R, x, out, mean, den, vshape, gstr, sstr, bstr, scale, bias,
                    has_scale, has_bias, zero_if_zero)
    parallel_chunks(prev)


@cpu_kernel
def _norm_apply_cpu(x, out, mean, den, vshape, gstr, sstr, bstr, scale, bias, has_scale, has_bias, zero_if_zero):
    n = out.shape[0]
    R = _run_len(vshape, gstr, sstr, bstr)   # sstr/bstr are zeros without scale/bias
    if R <= 0 or n <= 0:
        return
    nr = n // R
    if n >= _PAR_ELEMS and nr > 1 and num_threads() > 1:
        _apply_par(nr, R, x, out, mean, den, vshape, gstr, sstr, bstr, scale, bias, has_scale, has_bias,
                   zero_if_zero)
    else:
        _apply_runs(0, nr, R, x, out, mean, den, vshape, gstr, sstr, bstr, scale, bias, has_scale, has_bias,
                    zero_if_zero)


@njit(**JIT)
def _sums4(x, o0, o1, o2, o3, L, mode, cnt, eps, mean_out, den_out, g0):
    """Groups g0 .. g0+3, contiguous (group k's L elements at ok): _stats_item's sums, the four
    chains interleaved (each its own ascending sequence)."""
    m0 = m1 = m2 = m3 = np.float32(0)
    if mode <= 1:
        s0 = s1 = s2 = s3 = np.float32(0)
        for j in range(L):
            s0 += x[o0 + j]
            s1 += x[o1 + j]
            s2 += x[o2 + j]
            s3 += x[o3 + j]
        m0 = np.float32(_div(s0, cnt))
        m1 = np.float32(_div(s1, cnt))
        m2 = np.float32(_div(s2, cnt))
        m3 = np.float32(_div(s3, cnt))
    q0 = q1 = q2 = q3 = np.float32(0)
    for j in range(L):
        v0, v1, v2, v3 = x[o0 + j], x[o1 + j], x[o2 + j], x[o3 + j]
        if mode <= 1:
            d0, d1, d2, d3 = v0 - m0, v1 - m1, v2 - m2, v3 - m3
            q0 += d0 * d0
            q1 += d1 * d1
            q2 += d2 * d2
            q3 += d3 * d3
        elif mode == 3:
            q0 += abs(v0)
            q1 += abs(v1)
            q2 += abs(v2)
            q3 += abs(v3)
        else:
            q0 += v0 * v0
            q1 += v1 * v1
            q2 += v2 * v2
            q3 += v3 * v3
    mean_out[g0] = m0
    mean_out[g0 + 1] = m1
    mean_out[g0 + 2] = m2
    mean_out[g0 + 3] = m3
    den_out[g0] = np.float32(_den(mode, q0, cnt, eps))
    den_out[g0 + 1] = np.float32(_den(mode, q1, cnt, eps))
    den_out[g0 + 2] = np.float32(_den(mode, q2, cnt, eps))
    den_out[g0 + 3] = np.float32(_den(mode, q3, cnt, eps))


@njit(**JIT)
def _stats_block(q0, q1, contig, x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt, eps,
                 mean, den):
    """Groups q0 .. q1-1: in fours when contiguous, else (and for the rest) _stats_item."""
    g = q0
    if contig:
        while g + 4 <= q1:
            _sums4(x, _bcast_offset_cpu(g, kshape, kstrides), _bcast_offset_cpu(g + 1, kshape, kstrides),
                   _bcast_offset_cpu(g + 2, kshape, kstrides), _bcast_offset_cpu(g + 3, kshape, kstrides),
                   inner_n, mode, cnt, eps, mean, den, g)
            g += 4
    while g < q1:
        _stats_item_cpu(g, x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt, eps, mean,
                        den)
        g += 1


@njit(**PAR)
def _stats_par(G, contig, x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt, eps, mean,
               den):
    nb = (G + 15) // 16
    prev = parallel_chunks(shares(nb))   # see llvm.parallel_chunks
    for bu in prange(nb):
        b = np.int64(bu)
        _stats_block(b * 16, min(G, (b + 1) * 16), contig, x, mode, kshape, kstrides, rshape, rstrides, n_outer,
                     inner_n, inner_s, cnt, eps, mean, den)
    parallel_chunks(prev)


@cpu_kernel
def _norm_stats_cpu(x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt, eps, mean, den):
    G = mean.shape[0]
    contig = n_outer == 1 and inner_s == 1
    if G >= _PAR_GROUPS and num_threads() > 1:
        _stats_par(G, contig, x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt, eps,
                   mean, den)
    else:
        _stats_block(0, G, contig, x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt,
                     eps, mean, den)


def register() -> None:
    override(_STATS, target="cpu", run=_norm_stats_cpu)
    override(_APPLY, target="cpu", run=_norm_apply_cpu)
