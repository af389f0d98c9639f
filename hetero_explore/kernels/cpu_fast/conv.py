"""Conv and ConvTranspose on the CPU: the path a geometry takes (:func:`_conv_kind`), the
unpacked paths (im2col + GEMM, the direct grouped walk, the wide indirect GEMM on stride
phases, a GEMV for small maps), the dispatcher, and the "conv" prepare rule that packs a
constant weight for the packed paths of :mod:`.conv_packed`.

Every output element gets the generated kernel's sequence (``nn._CONV``): acc = 0.0f; acc =
fma(w, x, acc) per tap (c, kh, kw) ascending, the exact product plus acc rounded once to
float32 (:func:`..fmadd.fma`; a padding tap multiplies 0.0f); then acc + bias. Paths differ only in which elements they compute
when.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..common import cpu_kernel, flat, replayable
from ..fmadd import fma
from ..nn import _CONV, _CONVT, _conv_item, _convt_item
from ..overrides import override
from .base import JIT, PAR, PAR_WORK
from .conv_packed import (_PW_R, _PX_R, _PX_W, _conv_dw8, _conv_gemvt, _conv_pw, _conv_px,  # noqa: F401
                          _dw8_pack)
from .gemm import _GEMM_TILE, _MK_R, _MK_W, _gemm_rows_cpu, _gemm_scratch, emit_tile_rows
from .llvm import micro_kernel, num_threads, parallel_chunks, shares

#: a grouped Conv with at most this many output channels per group runs the direct path
_DIRECT_MG = 4


@njit(**JIT)
def _im2col_cpu(x, xb, Cg, H, W, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl, n0, nt, col):
    """Columns n0 .. n0+nt-1 of the im2col matrix (column oh*OW + ow):
    col[((c*KH + kh)*KW + kw) * nt + j] = the x tap of column n0 + j, or 0.0f in
    the padding (a pure copy)."""
    if nt <= 0:
        return
    oh0 = n0 // OW
    oh1 = (n0 + nt - 1) // OW
    for c in range(Cg):
        for kh in range(KH):
            for kw in range(KW):
                r = ((c * KH + kh) * KW + kw) * nt
                a = pl - kw * dw  # iw = ow*sw - a; valid for ow in [vlo, vhi)
                vlo = -((-a) // sw)
                if vlo < 0:
                    vlo = 0
                if vlo > OW:
                    vlo = OW
                vhi = (W - 1 + a) // sw + 1
                if vhi > OW:
                    vhi = OW
                for oh in range(oh0, oh1 + 1):
                    d = r + oh * OW - n0  # col index of (oh, ow) is d + ow
                    s0 = n0 - oh * OW
                    if s0 < 0:
                        s0 = 0
                    e0 = n0 + nt - oh * OW
                    if e0 > OW:
                        e0 = OW
                    ih = oh * sh - pt + kh * dh
                    if ih < 0 or ih >= H:
                        col[d + s0:d + e0] = np.float32(0)
                        continue
                    lo = vlo if vlo > s0 else s0
                    if lo > e0:
                        lo = e0
                    hi = vhi if vhi < e0 else e0
                    if hi < lo:
                        hi = lo
                    col[d + s0:d + lo] = np.float32(0)
                    col[d + hi:d + e0] = np.float32(0)
                    if hi > lo:
                        st = xb + (c * H + ih) * W + lo * sw - a
                        if sw == 1:  # an explicit loop over two slices: ~2x faster than the slice copy
                            dseg = col[d + lo:d + hi]
                            src = x[st:st + hi - lo]
                            for j in range(hi - lo):
                                dseg[j] = src[j]
                        else:
                            col[d + lo:d + hi] = x[st:st + (hi - lo - 1) * sw + 1:sw]


@njit(**JIT)
def _plane_out(out, q, OH, OW, acc, ast, has_b, bias, m):
    """Output plane q (OH x OW, channel m) from accumulator rows ``ast`` floats apart, then
    + bias[m] when there is one: the generated kernel's epilogue."""
    for oh in range(OH):
        o = (q * OH + oh) * OW
        dst = out[o:o + OW]
        a = acc[oh * ast:oh * ast + OW]
        if has_b:
            bv = bias[m]
            for j in range(OW):
                dst[j] = a[j] + bv
        else:
            for j in range(OW):
                dst[j] = a[j]


@njit(**JIT)
def _conv_direct_plane(q, x, w, bias, has_b, p, out):
    """One output plane (n, m) of _conv_direct_cpu."""
    N, C, H, W, M, KH, KW, OH = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    OW, sh, sw, dh, dw, pt, pl, G = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    Cg = C // G
    Mg = M // G
    zero = np.float32(0)
    Hp = (OH - 1) * sh + (KH - 1) * dh + 1
    Wp = (OW - 1) * sw + (KW - 1) * dw + 1
    Hq = (Hp + sh - 1) // sh
    Wq = (Wp + sw - 1) // sw
    PQ = Hq * Wq
    na = OH * Wq
    n = q // M
    m = q - n * M
    g = m // Mg
    xq = np.zeros(sh * sw * PQ + Wq, dtype=np.float32)
    acc = np.zeros(na, dtype=np.float32)
    for c in range(Cg):
        xb = (n * C + g * Cg + c) * H * W
        for ph in range(sh):
            for pw in range(sw):
                pb = (ph * sw + pw) * PQ
                for rq in range(Hq):
                    ih = rq * sh + ph - pt
                    row = xq[pb + rq * Wq:pb + (rq + 1) * Wq]
                    if ih < 0 or ih >= H:
                        row[:] = zero
                        continue
                    src = x[xb + ih * W:xb + (ih + 1) * W]
                    for cq in range(Wq):
                        iw = cq * sw + pw - pl
                        row[cq] = src[iw] if iw >= 0 and iw < W else zero
        wb = (m * Cg + c) * KH * KW
        for kh in range(KH):
            r0 = kh * dh
            for kw in range(KW):
                c0 = kw * dw
                wv = w[wb + kh * KW + kw]
                off = ((r0 % sh) * sw + c0 % sw) * PQ + (r0 // sh) * Wq + c0 // sw
                src = xq[off:off + na]
                for j in range(na):
                    acc[j] = fma(wv, src[j], acc[j])
    _plane_out(out, q, OH, OW, acc, Wq, has_b, bias, m)


@njit(**PAR)
def _conv_direct_par(x, w, bias, has_b, p, out, planes):
    prev = parallel_chunks(shares(planes))   # see llvm.parallel_chunks
    for qu in prange(planes):
        _conv_direct_plane(np.int64(qu), x, w, bias, has_b, p, out)
    parallel_chunks(prev)


@njit(**JIT)
def _conv_direct_cpu(x, w, bias, has_b, p, out):
    """CPU only: Conv tap by tap over whole output planes, for depthwise and grouped Conv with
    few output channels per group (where im2col + GEMM has one or two rows). Output planes
    (n, m) run in parallel when the Conv is large (PAR_WORK). Each input plane is first copied into zero-padded scratch, split
    into sh x sw phases (row r, column c of the padded plane go to phase (r % sh, c % sw) at
    (r // sh, c // sw)), so that every tap reads one phase contiguously; a tap in the padding
    multiplies 0.0f as _conv_item's ``xv`` does (fma(w, 0.0f, acc), as there). For each tap
    (c, kh, kw) ascending every output element of the plane takes ``acc = fma(w, xv, acc)``, then
    + bias: the generated sequence per element. Planes are walked "wide" (Wq columns per
    output row; the extra columns are discarded), one contiguous loop per tap."""
    N, C, H, W, M, KH, KW, OH = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    OW, sh, sw, dh, dw, pt, pl, G = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    Cg = C // G
    if OH <= 0 or OW <= 0:
        return
    if N * M * OH * OW * Cg * KH * KW >= PAR_WORK and N * M > 1 and num_threads() > 1:
        _conv_direct_par(x, w, bias, has_b, p, out, N * M)
    else:
        for q in range(N * M):
            _conv_direct_plane(q, x, w, bias, has_b, p, out)


@njit(**JIT)
def _phase_plan(H, W, sh, sw, pt, pl, Hq, Wq):
    """How an input plane goes into zero-padded phase scratch: padded row r, column c go to
    phase (r % sh, c % sw) at (r // sh, c // sw) of xq (phases Hq x Wq, one after another).
    Each phase row is one contiguous (or strided) copy between zeros, listed here as rows
    of (destination in xq, source offset in the input plane, count). The plan is the same
    for every plane of a Conv, and so are the zeros: the scratch is zeroed once and
    :func:`_phase_copy` runs only the copies, without recomputing the row bounds (their
    divisions cost more than the copies of a small plane)."""
    PQ = Hq * Wq
    plan = np.empty((sh * sw * Hq, 3), dtype=np.int64)
    k = 0
    for ph in range(sh):
        for pw in range(sw):
            pb = (ph * sw + pw) * PQ
            lo = 0 if pl <= pw else (pl - pw + sw - 1) // sw        # first cq with iw >= 0
            e = W - 1 - pw + pl
            hi = 0 if e < 0 else min(Wq, e // sw + 1)               # past the last cq with iw < W
            if hi < lo:
                hi = lo
            if lo > Wq:
                lo = hi = Wq
            if hi == lo:
                continue
            for rq in range(Hq):
                ih = rq * sh + ph - pt
                if ih < 0 or ih >= H:
                    continue
                plan[k, 0] = pb + rq * Wq + lo
                plan[k, 1] = ih * W + lo * sw + pw - pl
                plan[k, 2] = hi - lo
                k += 1
    return plan[:k]


@njit(**JIT)
def _phase_copy(x, xb, sw, plan, xq):
    """The plane at ``xb`` into phase scratch by its :func:`_phase_plan` (pure data
    movement; the padding zeros are already there)."""
    for r in range(plan.shape[0]):
        d = plan[r, 0]
        st = xb + plan[r, 1]
        c = plan[r, 2]
        dst = xq[d:d + c]
        if sw == 1:
            src = x[st:st + c]
            for j in range(c):
                dst[j] = src[j]
        else:
            for j in range(c):
                dst[j] = x[st + j * sw]


@njit(**JIT)
def _conv_gemm_block(it, x, w, bias, has_b, p, out, T, ntiles, RB, nr, direct):
    """One block of _conv_gemm: (image, group, column tile, block of output channels) number ``it``."""
    N, C, H, W, M, KH, KW, OH = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    OW, sh, sw, dh, dw, pt, pl, G = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    Cg = C // G
    Mg = M // G
    K = Cg * KH * KW
    NN = OH * OW
    r = it % nr
    t = (it // nr) % ntiles
    ng = it // (nr * ntiles)
    n = ng // G
    g = ng - n * G
    n0 = t * T
    nt = min(T, NN - n0)
    m0 = r * RB
    mr = min(RB, Mg - m0)
    acc = _gemm_scratch(K, nt)
    o0 = (n * M + g * Mg + m0) * NN
    xb = (n * C + g * Cg) * H * W
    col = np.empty(1 if direct else K * nt, dtype=np.float32)
    if not direct:
        _im2col_cpu(x, xb, Cg, H, W, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl, n0, nt, col)
    src = x if direct else col
    # one _gemm_rows_cpu call site (a second inlined copy doubles the JIT time)
    _gemm_rows_cpu(w, (g * Mg + m0) * K, K, 1, src, xb + n0 if direct else 0, NN if direct else nt, mr, K, nt,
                   out, o0 + n0, NN, acc)
    if has_b:
        for mm in range(mr):
            bv = bias[g * Mg + m0 + mm]
            o = o0 + mm * NN + n0
            seg = out[o:o + nt]
            for j in range(nt):
                seg[j] = seg[j] + bv


@njit(**PAR)
def _conv_gemm_par(x, w, bias, has_b, p, out, T, ntiles, RB, nr, direct, nblocks):
    prev = parallel_chunks(shares(nblocks))   # see llvm.parallel_chunks
    for iu in prange(nblocks):
        _conv_gemm_block(np.int64(iu), x, w, bias, has_b, p, out, T, ntiles, RB, nr, direct)
    parallel_chunks(prev)


@njit(**JIT)
def _conv_gemm(x, w, bias, has_b, p, out):
    """CPU only: Conv as im2col + the blocked GEMM in blocks of (image, group, column tile of
    at most _GEMM_TILE output pixels, block of output channels), in parallel when the Conv is
    large (PAR_WORK); each block im2cols its own tile into a K x T scratch that stays in
    cache (a 1x1 stride-1 unpadded Conv multiplies the input directly). The blocking does
    not depend on the thread count (nor do the results: each element has one sequence)."""
    N, C, H, W, M, KH, KW, OH = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    OW, sh, sw, dh, dw, pt, pl, G = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    Cg = C // G
    Mg = M // G
    NN = OH * OW
    if NN <= 0 or Mg <= 0:
        return
    direct = KH == 1 and KW == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0 and OH == H and OW == W
    T = min(_GEMM_TILE, NN)
    ntiles = (NN + T - 1) // T
    blocks = N * G * ntiles
    # all of a group's output channels in one block: splitting them (so that a one-tile Conv has
    # work for two threads) re-im2cols the tile per block and measured 1.4-2x slower on one thread
    RB = Mg
    nr = 1
    if N * M * NN * Cg * KH * KW >= PAR_WORK and num_threads() > 1:
        _conv_gemm_par(x, w, bias, has_b, p, out, T, ntiles, RB, nr, direct, blocks * nr)
    else:
        for it in range(blocks * nr):
            _conv_gemm_block(it, x, w, bias, has_b, p, out, T, ntiles, RB, nr, direct)


#: wide columns per block of _conv_wide (a multiple of _MK_W): small, so that a block's
#: output scratch (Mg x _CW_T floats) stays in L1/L2 and two threads get several blocks
_CW_T = 128
#: k block of _conv_wide: the taps of one panel (_CW_KC rows of _MK_W floats) stay in L1
_CW_KC = 256
#: _conv_wide is taken while its wide columns (rounded up to _MK_W) are at most this many
#: times the output pixels (the garbage columns are computed and discarded)
_CW_WASTE = 1.5


def _emit_ix(ir, a, ao, sam, sak, b, bo, koff, ko, K, out, oo, som, resume, R):
    """CPU only, compiled inline: _mk_tile's micro-kernel (gemm.emit_tile_rows: R rows x _MK_W
    columns of accumulators in registers, acc = fma(a, b, acc) step by step with k ascending),
    except that B's row k starts at b[bo + koff[ko + k]] (an
    indirect GEMM: Conv taps read straight from the padded input)."""
    emit_tile_rows(ir, R, a, ao, sam, sak, b, lambda k: ir.add(bo, ir.load(koff, ir.add(ko, k))), K, out, oo, som,
                   resume)


_IX_PARAMS = "a, ao, sam, sak, b, bo, koff, ko, K, out, oo, som, resume"
_mk_ix = micro_kernel(f"_mk_ix_r{_MK_R}", _IX_PARAMS, _emit_ix, R=_MK_R)
_mk_ix2 = micro_kernel("_mk_ix_r2", _IX_PARAMS, _emit_ix, R=2)
_mk_ix1 = micro_kernel("_mk_ix_r1", _IX_PARAMS, _emit_ix, R=1)


@njit(**JIT)
def _conv_wide_dims(p):
    """(Hq, Wq, PH, NWp, S) of _conv_wide: phase plane Hq x Wq, floats per input channel
    (sh*sw phases), wide columns OH*Wq rounded up to _MK_W, floats per (image, group) of
    the padded input (its channels, then NWp + _MK_W zeros that the garbage columns read)."""
    C, KH, KW, OH, OW, sh, sw, dh, dw, G = p[1], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[15]
    Hq = ((OH - 1) * sh + (KH - 1) * dh + sh) // sh
    Wq = ((OW - 1) * sw + (KW - 1) * dw + sw) // sw
    PH = sh * sw * Hq * Wq
    NWp = (OH * Wq + _MK_W - 1) // _MK_W * _MK_W
    return Hq, Wq, PH, NWp, (C // G) * PH + NWp + _MK_W


@njit(**JIT)
def _conv_wide_ok(p):
    """Whether _conv_wide suits a 2-D Conv: its garbage columns cost at most _CW_WASTE."""
    C, KH, KW, OH, OW, G = p[1], p[5], p[6], p[7], p[8], p[15]
    if C // G <= 0 or OH <= 0 or OW <= 0 or KH * KW <= 1:
        return False
    Hq, Wq, PH, NWp, S = _conv_wide_dims(p)
    return NWp <= _CW_WASTE * OH * OW


@njit(**JIT)
def _conv_wide_pack(x, p, xq, ch, plan):
    """Input channel plane ``ch`` (of N*C) into xq (zeroed) as _conv_direct_cpu's
    zero-padded phases (by the geometry's :func:`_phase_plan`), at its (image, group)'s
    block of S floats."""
    C, H, W, sw, G = p[1], p[2], p[3], p[10], p[15]
    Cg = C // G
    Hq, Wq, PH, NWp, S = _conv_wide_dims(p)
    ng = ch // Cg
    c = ch - ng * Cg
    o = ng * S + c * PH
    _phase_copy(x, ch * H * W, sw, plan, xq[o:o + PH])


@njit(**JIT)
def _conv_wide_koff(p):
    """koff[k], k = (c*KH + kh)*KW + kw: where tap (c, kh, kw) of wide column 0 lies in an
    (image, group)'s padded phases (tap (kh, kw) of wide column j = oh*Wq + ow reads phase
    ((kh*dh) % sh, (kw*dw) % sw) at (oh + kh*dh // sh)*Wq + ow + kw*dw // sw)."""
    C, KH, KW, sh, sw, dh, dw, G = p[1], p[5], p[6], p[9], p[10], p[11], p[12], p[15]
    Cg = C // G
    Hq, Wq, PH, NWp, S = _conv_wide_dims(p)
    PQ = Hq * Wq
    koff = np.empty(Cg * KH * KW, dtype=np.int64)
    for c in range(Cg):
        for kh in range(KH):
            r0 = kh * dh
            for kw in range(KW):
                c0 = kw * dw
                koff[(c * KH + kh) * KW + kw] = c * PH + ((r0 % sh) * sw + c0 % sw) * PQ + (r0 // sh) * Wq + c0 // sw
    return koff


@njit(**JIT)
def _conv_wide_block(it, xq, w, bias, has_b, p, out, koff, nwt):
    """Block ``it`` of _conv_wide: (image, group) it // nwt, wide columns from (it % nwt) * _CW_T."""
    C, M, OH, OW, G = p[1], p[4], p[7], p[8], p[15]
    Cg = C // G
    Mg = M // G
    K = koff.shape[0]
    Hq, Wq, PH, NWp, S = _conv_wide_dims(p)
    ng = it // nwt
    t = it - ng * nwt
    g = ng % G
    j0 = t * _CW_T
    nc = min(_CW_T, NWp - j0)   # a multiple of _MK_W
    acc = np.empty(Mg * nc, dtype=np.float32)
    MF = Mg - Mg % _MK_R
    M2 = Mg - Mg % 2
    wb = g * Mg * K
    xb = ng * S + j0
    for k0 in range(0, K, _CW_KC):
        kc = min(_CW_KC, K - k0)
        for jp in range(0, nc, _MK_W):
            for mb in range(0, MF, _MK_R):
                _mk_ix(w, wb + mb * K + k0, K, 1, xq, xb + jp, koff, k0, kc, acc, mb * nc + jp, nc, k0)
            for mb in range(MF, M2, 2):
                _mk_ix2(w, wb + mb * K + k0, K, 1, xq, xb + jp, koff, k0, kc, acc, mb * nc + jp, nc, k0)
            if M2 < Mg:
                _mk_ix1(w, wb + M2 * K + k0, K, 1, xq, xb + jp, koff, k0, kc, acc, M2 * nc + jp, nc, k0)
    # the valid columns (ow < OW, oh < OH) to the output, + bias (the generated epilogue)
    NN = OH * OW
    oh0 = j0 // Wq
    oh1 = min(OH, (j0 + nc + Wq - 1) // Wq)
    for mm in range(Mg):
        m = g * Mg + mm
        bv = bias[m] if has_b else np.float32(0)
        ob = ((ng // G) * M + m) * NN
        for oh in range(oh0, oh1):
            s = max(oh * Wq, j0)
            e = min(oh * Wq + OW, j0 + nc)
            if e <= s:
                continue
            src = acc[mm * nc + s - j0:mm * nc + e - j0]
            dst = out[ob + s - oh * Wq + oh * OW:ob + e - oh * Wq + oh * OW]
            if has_b:
                for j in range(e - s):
                    dst[j] = src[j] + bv
            else:
                for j in range(e - s):
                    dst[j] = src[j]


@njit(**PAR)
def _conv_wide_par(x, xq, w, bias, has_b, p, out, koff, nwt, nch, nblocks, plan):
    prev = parallel_chunks(shares(nch))   # see llvm.parallel_chunks
    for cu in prange(nch):
        _conv_wide_pack(x, p, xq, np.int64(cu), plan)
    parallel_chunks(shares(nblocks))
    for iu in prange(nblocks):
        _conv_wide_block(np.int64(iu), xq, w, bias, has_b, p, out, koff, nwt)
    parallel_chunks(prev)


@njit(**JIT)
def _conv_wide(x, w, bias, has_b, p, out):
    """CPU only: 2-D Conv with a k x k kernel (any stride, pad, dilation) as an indirect GEMM
    without im2col. Each input plane is copied once into zero-padded phases (as
    _conv_direct_cpu's, sh x sw phases); output pixel (oh, ow) is wide column
    j = oh*Wq + ow of a phase-plane-wide grid (the Wq - OW columns right of each row are
    garbage, computed and dropped), and tap k = (c, kh, kw) of every column is the padded
    phases at koff[k] + j: one vector load per tap. The register micro-kernel
    (_mk_ix: 6 rows x 16 columns, then row pairs and an odd row) runs acc = acc + w * xv
    over k ascending from 0.0f (padding taps multiply 0.0f), k blocks resuming from the
    stored accumulators, then + bias: the generated sequence per element. Blocks of
    (image, group, _CW_T wide columns) run in parallel when the Conv is large; the blocking
    does not depend on the thread count."""
    N, C, H, W, M, OH, OW, G = p[0], p[1], p[2], p[3], p[4], p[7], p[8], p[15]
    sh, sw, pt, pl = p[9], p[10], p[13], p[14]
    Hq, Wq, PH, NWp, S = _conv_wide_dims(p)
    koff = _conv_wide_koff(p)
    plan = _phase_plan(H, W, sh, sw, pt, pl, Hq, Wq)
    xq = np.zeros(N * G * S, dtype=np.float32)
    nwt = (NWp + _CW_T - 1) // _CW_T
    nblocks = N * G * nwt
    if N * M * OH * OW * koff.shape[0] >= PAR_WORK and num_threads() > 1:
        _conv_wide_par(x, xq, w, bias, has_b, p, out, koff, nwt, N * C, nblocks, plan)
    else:
        for ch in range(N * C):
            _conv_wide_pack(x, p, xq, ch, plan)
        for it in range(nblocks):
            _conv_wide_block(it, xq, w, bias, has_b, p, out, koff, nwt)


@njit(**JIT)
def _conv_gemv_block(b, x, w, bias, has_b, p, out):
    """Block ``b`` of _conv_gemv: (image, group, output pixel, eight output channels)."""
    N, C, H, W, M, G = p[0], p[1], p[2], p[3], p[4], p[15]
    Cg = C // G
    Mg = M // G
    NN = H * W
    nmb = (Mg + 7) // 8
    zero = np.float32(0)
    m0 = (b % nmb) * 8
    t = b // nmb
    j = t % NN
    ng = t // NN
    n = ng // G
    g = ng - n * G
    xb = (n * C + g * Cg) * NN + j
    m = g * Mg + m0
    ob = (n * M + m) * NN + j
    # the input column and the weight rows as slices: indexing them with the loop counter
    # needs no negative-index fix-up, which made this loop ~2.4x slower (576 -> 144 channels)
    xs = x[xb:xb + (Cg - 1) * NN + 1:NN]
    if m0 + 8 <= Mg:
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
        w0 = m * Cg
        r0 = w[w0:w0 + Cg]
        r1 = w[w0 + Cg:w0 + 2 * Cg]
        r2 = w[w0 + 2 * Cg:w0 + 3 * Cg]
        r3 = w[w0 + 3 * Cg:w0 + 4 * Cg]
        r4 = w[w0 + 4 * Cg:w0 + 5 * Cg]
        r5 = w[w0 + 5 * Cg:w0 + 6 * Cg]
        r6 = w[w0 + 6 * Cg:w0 + 7 * Cg]
        r7 = w[w0 + 7 * Cg:w0 + 8 * Cg]
        for k in range(Cg):
            xv = xs[k]
            a0 = fma(r0[k], xv, a0)
            a1 = fma(r1[k], xv, a1)
            a2 = fma(r2[k], xv, a2)
            a3 = fma(r3[k], xv, a3)
            a4 = fma(r4[k], xv, a4)
            a5 = fma(r5[k], xv, a5)
            a6 = fma(r6[k], xv, a6)
            a7 = fma(r7[k], xv, a7)
        if has_b:
            a0 = a0 + bias[m]
            a1 = a1 + bias[m + 1]
            a2 = a2 + bias[m + 2]
            a3 = a3 + bias[m + 3]
            a4 = a4 + bias[m + 4]
            a5 = a5 + bias[m + 5]
            a6 = a6 + bias[m + 6]
            a7 = a7 + bias[m + 7]
        out[ob] = a0
        out[ob + NN] = a1
        out[ob + 2 * NN] = a2
        out[ob + 3 * NN] = a3
        out[ob + 4 * NN] = a4
        out[ob + 5 * NN] = a5
        out[ob + 6 * NN] = a6
        out[ob + 7 * NN] = a7
    else:
        for r in range(Mg - m0):
            a = zero
            w0 = (m + r) * Cg
            rr = w[w0:w0 + Cg]
            for k in range(Cg):
                a = fma(rr[k], xs[k], a)
            if has_b:
                a = a + bias[m + r]
            out[ob + r * NN] = a


@njit(**PAR)
def _conv_gemv_par(x, w, bias, has_b, p, out, nblocks):
    prev = parallel_chunks(shares(nblocks))   # see llvm.parallel_chunks
    for bu in prange(nblocks):
        _conv_gemv_block(np.int64(bu), x, w, bias, has_b, p, out)
    parallel_chunks(prev)


@njit(**JIT)
def _conv_gemv(x, w, bias, has_b, p, out):
    """CPU only: 1x1 stride-1 unpadded Conv with fewer than _MK_W output pixels (the
    squeeze-excite Convs on 1x1 maps, where the GEMM has no full column panel): for each
    output pixel, output channels eight at a time, each a scalar dot product with its own
    register accumulator (eight independent chains hide the add latency): acc = acc + w * x
    over the input channels ascending from 0.0f, then + bias: the generated sequence. The
    blocks (image, group, pixel, eight channels) run in parallel when the Conv is large."""
    N, C, H, W, M, G = p[0], p[1], p[2], p[3], p[4], p[15]
    Mg = M // G
    nblocks = N * G * H * W * ((Mg + 7) // 8)
    if N * M * H * W * (C // G) >= PAR_WORK and nblocks > 1 and num_threads() > 1:
        _conv_gemv_par(x, w, bias, has_b, p, out, nblocks)
    else:
        for b in range(nblocks):
            _conv_gemv_block(b, x, w, bias, has_b, p, out)



# which CPU path a Conv geometry takes (_conv_kind)
_CK_ITEM, _CK_DW, _CK_DIRECT, _CK_GEMVT, _CK_GEMV, _CK_PW, _CK_PX, _CK_WIDE, _CK_GEMM = range(9)
#: the paths whose weights conv_pack lays out (the others read the weight as it is)
_CK_PACKED = (_CK_DW, _CK_GEMVT, _CK_PW, _CK_PX)
CONV_PATHS = {_CK_ITEM: "item (3-D)", _CK_DW: "dw8", _CK_DIRECT: "direct", _CK_GEMVT: "gemvT 1x1",
              _CK_GEMV: "gemv 1x1", _CK_PW: "pw 1x1", _CK_PX: "px", _CK_WIDE: "wide", _CK_GEMM: "im2col+gemm"}


@njit(**JIT)
def _conv_kind(p):
    """The CPU path of a Conv geometry (_CK_*)."""
    if p[16] != 1 or p[17] != 1 or p[18] != 1 or p[21] != 0:
        return _CK_ITEM
    C, H, W, M, KH, KW, OH = p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    OW, sh, sw, pt, pl, G = p[8], p[9], p[10], p[13], p[14], p[15]
    Cg = C // G
    Mg = M // G
    if G > 1 and Cg == 1:
        return _CK_DW
    if G > 1 and Mg <= _DIRECT_MG:
        return _CK_DIRECT
    if KH == 1 and KW == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0 and OH == H and OW == W:
        NN = OH * OW
        if NN == 1 and Mg >= 8 and Cg >= 1:
            return _CK_GEMVT
        if NN >= 8 and Mg >= _PW_R and Cg >= 1:
            return _CK_PW
        if NN < _MK_W:
            return _CK_GEMV
        return _CK_GEMM
    if Mg >= _PX_W and OH * OW >= _PX_R and Cg >= 1:
        return _CK_PX
    if _conv_wide_ok(p):
        return _CK_WIDE
    return _CK_GEMM


def conv_kind(p) -> int:
    """The CPU path (a key of CONV_PATHS) that _conv_cpu and conv_packed_cpu take for geometry ``p``."""
    return int(_conv_kind(np.asarray(p, dtype=np.int64)))


def conv_pack(w, p):
    """The Conv weight ``w`` (M x Cg x KH x KW, float32) in the layout of the CPU path that
    geometry ``p`` takes, or None when that path reads the weight as it is. A copy made once
    when the node is built (the weight an initializer); the values, hence every product's
    bits, are the weight's. Layouts (flat float32):

    - dw8: [block of 8 output channels][tap][channel in the block] (_dw8_pack);
    - pw: per group, blocks of _PW_R output channels (the last one overlapping), each k-major
      [k][row];
    - px: per group, panels of _PX_W output channels (the last one overlapping), each
      k-major [k][channel] (k = (c, kh, kw));
    - gemvT: per group, W^T [k][channel]."""
    p = np.asarray(p, dtype=np.int64)
    kind = conv_kind(p)
    if kind not in _CK_PACKED:
        return None
    C, M, KH, KW, G = (int(v) for v in (p[1], p[4], p[5], p[6], p[15]))
    Cg, Mg = C // G, M // G
    K = Cg * KH * KW
    w = np.asarray(w, dtype=np.float32).reshape(G, Mg, K)
    if kind == _CK_DW:
        return _dw8_pack(w, p)
    if kind == _CK_GEMVT:
        return np.ascontiguousarray(w.transpose(0, 2, 1)).reshape(-1)
    R = _PW_R if kind == _CK_PW else _PX_W
    starts = [min(b * R, Mg - R) for b in range((Mg + R - 1) // R)]
    blocks = np.stack([w[:, s:s + R, :] for s in starts], axis=1)      # G x blocks x R x K
    return np.ascontiguousarray(blocks.transpose(0, 1, 3, 2)).reshape(-1)


@njit(**JIT)
def _conv_pack_nb(w, p, kind):
    """conv_pack in a kernel (a Conv whose weight is not an initializer: packed per call)."""
    C, M, KH, KW, G = p[1], p[4], p[5], p[6], p[15]
    Cg = C // G
    Mg = M // G
    K = Cg * KH * KW
    if kind == _CK_DW:
        nb = (M + 7) // 8
        w8 = np.zeros(nb * K * 8, dtype=np.float32)
        for m in range(M):
            cb = m // 8
            for t in range(K):
                w8[(cb * K + t) * 8 + m - cb * 8] = w[m * K + t]
        return w8
    if kind == _CK_GEMVT:
        wt = np.empty(M * K, dtype=np.float32)
        for g in range(G):
            for k in range(K):
                for m in range(Mg):
                    wt[(g * K + k) * Mg + m] = w[(g * Mg + m) * K + k]
        return wt
    R = _PW_R if kind == _CK_PW else _PX_W
    nbk = (Mg + R - 1) // R
    pk = np.empty(G * nbk * R * K, dtype=np.float32)
    for g in range(G):
        for b in range(nbk):
            s = min(b * R, Mg - R)
            base = (g * nbk + b) * K * R
            for k in range(K):
                for r in range(R):
                    pk[base + k * R + r] = w[(g * Mg + s + r) * K + k]
    return pk


@njit(**JIT)
def conv_packed_cpu(x, wp, bias, has_b, p, out):
    """The Conv CPU path for weights packed by conv_pack (geometry ``p``; see _conv_cpu):
    called directly by the build of a Conv whose weight is an initializer."""
    kind = _conv_kind(p)
    if kind == _CK_DW:
        _conv_dw8(x, wp, bias, has_b, p, out)
    elif kind == _CK_PW:
        _conv_pw(x, wp, bias, has_b, p, out)
    elif kind == _CK_PX:
        _conv_px(x, wp, bias, has_b, p, out)
    elif kind == _CK_GEMVT:
        _conv_gemvt(x, wp, bias, has_b, p, out)


@cpu_kernel
def _conv_cpu(x, w, bias, has_b, p, out):
    """The Conv CPU override: the path of _conv_kind (3-D: the generated per-element walk);
    the packed-weight paths pack the weight here, per call (a Conv whose weight is an
    initializer calls conv_packed_cpu on weights packed once at build time instead)."""
    kind = _conv_kind(p)
    if kind == _CK_ITEM:
        for i in range(out.shape[0]):
            out[i] = _conv_item(i, x, w, bias, has_b, p)
    elif kind == _CK_DW or kind == _CK_PW or kind == _CK_PX or kind == _CK_GEMVT:
        conv_packed_cpu(x, _conv_pack_nb(w, p, kind), bias, has_b, p, out)
    elif kind == _CK_DIRECT:
        _conv_direct_cpu(x, w, bias, has_b, p, out)
    elif kind == _CK_GEMV:
        _conv_gemv(x, w, bias, has_b, p, out)
    elif kind == _CK_WIDE:
        _conv_wide(x, w, bias, has_b, p, out)
    else:
        _conv_gemm(x, w, bias, has_b, p, out)


@cpu_kernel
def _convt_cpu(x, w, bias, has_b, p, out):
    if p[16] != 1 or p[17] != 1 or p[18] != 1 or p[21] != 0:
        for i in range(out.shape[0]):
            out[i] = _convt_item(i, x, w, bias, has_b, p)
        return
    N, C, H, W, M, KH, KW, OH = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    OW, sh, sw, dh, dw, pt, pl, G = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    Cg = C // G
    Mg = M // G
    KK = KH * KW
    HW = H * W
    R = Mg * KK
    cols = np.empty(max(R * HW, 1), dtype=np.float32)
    acc = _gemm_scratch(Cg, HW)
    ONN = OH * OW
    for n in range(N):
        for g in range(G):
            # cols[r, j] with r = (mm*KH + kh)*KW + kw: A[r, c] = w[((g*Cg + c)*Mg + mm)*KK + kh*KW + kw]
            _gemm_rows_cpu(w, g * Cg * Mg * KK, 1, Mg * KK, x, (n * C + g * Cg) * HW, HW, R, Cg, HW, cols, 0, HW,
                           acc)
            for mm in range(Mg):
                o0 = (n * M + g * Mg + mm) * ONN
                dst = out[o0:o0 + ONN]
                dst[:] = np.float32(0)
                for kh in range(KH):
                    for kw in range(KW):
                        r = (mm * KH + kh) * KW + kw
                        for ih in range(H):
                            oh = ih * sh - pt + kh * dh
                            if oh < 0 or oh >= OH:
                                continue
                            src = r * HW + ih * W
                            for iw in range(W):
                                ow = iw * sw - pl + kw * dw
                                if ow >= 0 and ow < OW:
                                    dst[oh * OW + ow] = dst[oh * OW + ow] + cols[src + iw]
                if has_b:
                    bv = bias[g * Mg + mm]
                    for j in range(ONN):
                        dst[j] = dst[j] + bv


def conv_prepare(target, w, p, has_b):
    """The "conv" prepare rule (the contract at ``nn._CONV``): a constant weight packed once
    here into the layout of the path the geometry ``p`` takes (a copy: the same values, the
    same bits), and the run function of that path on it; None when that path reads the
    weight as it is (then the "conv" run override, :func:`_conv_cpu`, runs)."""
    wp = conv_pack(w, p)
    if wp is None:
        return None
    dummy = np.zeros(1, dtype=np.float32)

    @replayable
    def run(inputs, outputs):
        b = flat(inputs[2]) if has_b else dummy
        target.call(conv_packed_cpu, flat(inputs[0]), wp, b, has_b, p, flat(outputs[0]))

    return run


def register() -> None:
    override(_CONV, target="cpu", run=_conv_cpu, prepare=conv_prepare)
    override(_CONVT, target="cpu", run=_convt_cpu)
