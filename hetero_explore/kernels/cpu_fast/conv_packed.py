"""Conv on the CPU with weights packed into a path's own layout: depthwise 8 x 8 register
tiles (dw8), pointwise row blocks x pixel panels (pw), pixel tiles x channel panels (px)
and 1x1 on a one-pixel map (gemvT).

The weights come packed by :func:`.conv.conv_pack` (once per node when the weight is an
initializer, else per call in :func:`.conv._conv_cpu`). Each output element still gets the
generated kernel's sequence: acc = 0.0f; acc = fma(w, x, acc) per tap (c, kh, kw)
ascending (``llvm.fma`` on vectors: the exact product plus acc, rounded once to float32, lane
for lane the scalar :func:`..fmadd.fma`); padding taps multiply a 0.0f of a zero-padded copy; then acc + bias. The vectors run across
output elements (pixels or channels); none splits or reorders a sum.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .base import JIT, PAR, PAR_WORK
from .gemm import _MK_KC, _MK_W, _mk_copy
from .llvm import V8, micro_kernel, num_threads, parallel_chunks, shares, vec


def _emit_tr8_scatter(ir, src, soff, so, dst, dpos, do):
    """CPU only: dst[dpos[do + j] + i] = src[soff[i] + so + j] for i, j < 8: eight rows of eight
    floats transposed in registers, each column stored where the table says (data movement)."""
    rows = [ir.load_vec(src, ir.add(ir.load(soff, ir.c64(i)), so)) for i in range(8)]
    cols = ir.transpose8(rows)
    for j in range(8):
        ir.store_vec(cols[j], dst, ir.load(dpos, ir.add(do, ir.c64(j))))


_tr8_scatter = micro_kernel("_tr8_scatter", "src, soff, so, dst, dpos, do", _emit_tr8_scatter)


def _emit_dw8(ir, xs, pofs, po, toff, T, w8, wo, bias8, bo, has_b, out, oo, ost, nv):
    """CPU only, compiled inline: depthwise Conv for 8 output pixels x 8 output channels. xs
    holds the channels' zero-padded planes interleaved (8 floats per position, one per
    channel); pixel r's window starts at xs[pofs[po + r]], tap t at toff[t] from it, and
    w8[wo + 8t : +8] are the 8 channels' weights of tap t. For each pixel, in registers:
    acc = 0.0f, then acc = fma(w, x, acc) for t ascending, then + bias
    (bias8[bo : +8]) when has_b. The 8 x 8 block is transposed in registers and channel i's 8
    pixels are stored at out[oo + i*ost : +8], for i < nv."""
    bases = [ir.at(xs, ir.load(pofs, ir.add(po, ir.c64(r)))) for r in range(8)]
    accs = ir.accumulators(V8, 8)
    with ir.for_range(T) as t:
        to = ir.load(toff, t)
        wv = ir.load_vec(w8, ir.add(wo, ir.mul(t, ir.c64(8))))
        for r in range(8):
            ir.mac(accs[r], wv, ir.load_vec(bases[r], to))
    with ir.b.if_then(ir.nonzero(has_b)):
        bv = ir.load_vec(bias8, bo)
        for r in range(8):
            ir.add_to(accs[r], bv)
    cols = ir.transpose8([ir.b.load(a) for a in accs])
    for i in range(8):
        with ir.b.if_then(ir.b.icmp_signed(">", nv, ir.c64(i))):
            ir.store_vec(cols[i], out, ir.add(oo, ir.mul(ost, ir.c64(i))))


_dw8_tile = micro_kernel("_dw8_tile", "xs, pofs, po, toff, T, w8, wo, bias8, bo, has_b, out, oo, ost, nv", _emit_dw8)


#: blocks of a parallel depthwise Conv per chunk: fixed chunks of (image, 8 channels) blocks,
#: each chunk with its own scratch (the chunking does not depend on the thread count)
_DW_CHUNKS = 16


@njit(**JIT)
def _dw8_dims(p):
    """(Hp, Wp): the padded input extent the taps of a Conv read (rows x columns)."""
    KH, KW, OH, OW, sh, sw, dh, dw = p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12]
    return (OH - 1) * sh + (KH - 1) * dh + 1, (OW - 1) * sw + (KW - 1) * dw + 1


def _dw8_pack(w, p):
    """Depthwise weights for _dw8_tile: [block of 8 output channels][tap][channel in the
    block], 0.0f for the channels past M (their results are never stored)."""
    M, KK = int(p[4]), int(p[5]) * int(p[6])
    nb = (M + 7) // 8
    w8 = np.zeros((nb * 8, KK), dtype=np.float32)
    w8[:M] = np.asarray(w, dtype=np.float32).reshape(M, KK)
    return np.ascontiguousarray(w8.reshape(nb, 8, KK).transpose(0, 2, 1)).reshape(-1)


@njit(**JIT)
def _dw8_tables(p):
    """(tap offsets, pixel offsets, input positions) of _dw8_blocks, in floats of the
    interleaved scratch: toff[kh*KW + kw], pofs[oh*OW + ow] (at least 8 entries, the last
    repeated), ipos[ih*W + iw] (where input element (ih, iw) goes: padded row ih + pt, column
    iw + pl; elements outside the extent the taps read go to a dump slot past it)."""
    H, W, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl = (p[2], p[3], p[5], p[6], p[7], p[8], p[9], p[10], p[11],
                                                    p[12], p[13], p[14])
    Hp, Wp = _dw8_dims(p)
    toff = np.empty(KH * KW, dtype=np.int64)
    for kh in range(KH):
        for kw in range(KW):
            toff[kh * KW + kw] = ((kh * dh) * Wp + kw * dw) * 8
    P = OH * OW
    pofs = np.empty(max(P, 8), dtype=np.int64)
    for oh in range(OH):
        for ow in range(OW):
            pofs[oh * OW + ow] = ((oh * sh) * Wp + ow * sw) * 8
    for j in range(P, pofs.shape[0]):
        pofs[j] = pofs[P - 1]
    ipos = np.empty(H * W, dtype=np.int64)
    for ih in range(H):
        for iw in range(W):
            r = ih + pt
            c = iw + pl
            ipos[ih * W + iw] = (r * Wp + c) * 8 if r < Hp and c < Wp else Hp * Wp * 8
    return toff, pofs, ipos


@njit(**JIT)
def _dw8_scratch(p):
    """The interleaved scratch (Hp x Wp positions of 8 floats, then the 8-float dump slot)
    with its padding zeroed; the copies of _dw8_blocks overwrite only the rest."""
    H, W, pt, pl = p[2], p[3], p[13], p[14]
    Hp, Wp = _dw8_dims(p)
    xs = np.empty(Hp * Wp * 8 + 8, dtype=np.float32)
    r1 = min(Hp, H + pt)
    c1 = min(Wp, W + pl)
    zero = np.float32(0)
    for r in range(Hp):
        row = xs[r * Wp * 8:(r + 1) * Wp * 8]
        if r < pt or r >= r1:
            row[:] = zero
        else:
            row[:pl * 8] = zero
            row[c1 * 8:] = zero
    xs[Hp * Wp * 8:] = zero
    return xs


@njit(**JIT)
def _dw8_blocks(b0, b1, x, w8, bias, has_b, p, out, xs, toff, pofs, ipos):
    """Blocks b0 <= b < b1 of _conv_dw8: block b is image b // nb, output channels 8*(b % nb)
    and up. The 8 channels' input planes (channel m reads input channel m // Mg; a lane past
    M repeats the last) go into the scratch, eight input elements x eight channels per
    transposition; then _dw8_tile runs the output pixels eight at a time (the last eight
    overlap the previous ones when the plane is not a multiple of 8: the same values again)."""
    N, C, H, W, M, KH, KW, OH = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    OW, G = p[8], p[15]
    Mg = M // G
    KK = KH * KW
    nb = (M + 7) // 8
    P = OH * OW
    HW = H * W
    soff = np.empty(8, dtype=np.int64)
    tmp = np.empty(64 if P < 8 else 1, dtype=np.float32)
    b8 = np.zeros(8, dtype=np.float32)
    for b in range(b0, b1):
        n = b // nb
        cb = b - n * nb
        m0 = cb * 8
        nv = min(8, M - m0)
        for i in range(8):
            soff[i] = (n * C + min(m0 + i, M - 1) // Mg) * HW
        if HW >= 8:
            for e in range(0, HW, 8):
                e0 = min(e, HW - 8)
                _tr8_scatter(x, soff, e0, xs, ipos, e0)
        else:
            for e in range(HW):
                d = ipos[e]
                for i in range(8):
                    xs[d + i] = x[soff[i] + e]
        bb = bias
        bo = m0
        if has_b and nv < 8:   # the tile reads 8 biases: the last block's from a padded copy
            for i in range(nv):
                b8[i] = bias[m0 + i]
            bb = b8
            bo = 0
        wo = cb * KK * 8
        ob = (n * M + m0) * P
        if P >= 8:
            for q in range(0, P, 8):
                q0 = min(q, P - 8)
                _dw8_tile(xs, pofs, q0, toff, KK, w8, wo, bb, bo, has_b, out, ob + q0, P, nv)
        else:
            _dw8_tile(xs, pofs, 0, toff, KK, w8, wo, bb, bo, has_b, tmp, 0, 8, 8)
            for i in range(nv):
                for j in range(P):
                    out[ob + i * P + j] = tmp[i * 8 + j]


@njit(**PAR)
def _conv_dw8_par(x, w8, bias, has_b, p, out, toff, pofs, ipos, nblk, nch):
    prev = parallel_chunks(shares(nch))   # see llvm.parallel_chunks
    for cu in prange(nch):
        c = np.int64(cu)
        xs = _dw8_scratch(p)
        _dw8_blocks(c * nblk // nch, (c + 1) * nblk // nch, x, w8, bias, has_b, p, out, xs, toff, pofs, ipos)
    parallel_chunks(prev)


@njit(**JIT)
def _conv_dw8(x, w8, bias, has_b, p, out):
    """CPU only: depthwise Conv (one input channel per group, any channel multiplier), 2-D,
    any stride/pad/dilation, vectorised across 8 output channels (weights packed by
    _dw8_pack): per (image, 8 channels), the channels' input planes are copied into one
    zero-padded scratch with the 8 channels interleaved (every position one vector), then
    blocks of 8 output pixels x 8 channels run in registers (_dw8_tile: for each tap (kh, kw)
    ascending, acc = acc + w * xv from 0.0f, a padding tap multiplying 0.0f, then + bias: the
    generated sequence) and are transposed into the output planes. Planes of any size and
    strides need no garbage columns. Chunks of blocks run in parallel when the Conv is large."""
    N, M, KH, KW, OH, OW = p[0], p[4], p[5], p[6], p[7], p[8]
    if OH <= 0 or OW <= 0:
        return
    toff, pofs, ipos = _dw8_tables(p)
    nblk = N * ((M + 7) // 8)
    if N * M * OH * OW * KH * KW >= PAR_WORK and nblk > 1 and num_threads() > 1:
        _conv_dw8_par(x, w8, bias, has_b, p, out, toff, pofs, ipos, nblk, min(nblk, _DW_CHUNKS))
    else:
        xs = _dw8_scratch(p)
        _dw8_blocks(0, nblk, x, w8, bias, has_b, p, out, xs, toff, pofs, ipos)


def _emit_mkr(ir, a, ao, b, bo, sbk, K, out, oo, som, resume, bias, bo2, fin, R, NW):
    """CPU only, compiled inline: for r < R, j < NW,
    out[oo + r*som + j] = acc + sum_k a[ao + k*R + r] * b[bo + k*sbk + j], k ascending, the
    sum taken step by step in registers (acc = fma(a, b, acc), one rounding per step);
    acc = 0.0f, or out's value when ``resume`` != 0 (a later k block); then, when
    ``fin`` != 0, acc + bias[bo2 + r] (the Conv's bias, after the last k block). A is packed
    R rows at a time, k-major (conv_pack), so its broadcasts read one stream."""
    vt = vec(NW)
    abase = ir.at(a, ao)

    def a_of(k):
        ak = ir.at(abase, ir.mul(k, ir.c64(R)))
        return lambda r: ir.load(ak, ir.c64(r))

    def finish(accs):
        with ir.b.if_then(ir.nonzero(fin)):
            for r in range(R):
                ir.add_to(accs[r], ir.splat(ir.load(bias, ir.add(bo2, ir.c64(r))), NW))

    ir.register_tile(R, vt, K, a_of, lambda k: ir.load_vec(b, ir.add(bo, ir.mul(k, sbk)), vt), out,
                     lambda r: ir.add(oo, ir.mul(ir.c64(r), som)), resume, finish)


def _mkr_of(R, NW):
    """A register micro-kernel of R rows x NW columns with A packed k-major (see _emit_mkr)."""
    return micro_kernel(f"_mkr_r{R}_w{NW}", "a, ao, b, bo, sbk, K, out, oo, som, resume, bias, bo2, fin", _emit_mkr,
                        R=R, NW=NW)


_PW_R = 6          # rows (output channels) per pointwise block, as _MK_R
_PW_W2 = 2 * _MK_W   # pixels of the wide panel: two vectors per row (twelve accumulators)
_mkr6w2 = _mkr_of(_PW_R, _PW_W2)
_mkr6 = _mkr_of(_PW_R, _MK_W)
_mkr6n8 = _mkr_of(_PW_R, 8)
#: output channels and pixels per parallel item of _conv_pw (fixed; the last item of each
#: dimension takes the remainder, so that overlapping blocks always share an item)
_PW_ROWS = 8 * _PW_R
_PW_COLS = 16 * _MK_W


@njit(**JIT)
def _pw_item(ap, ab, Mg, K, x, xb, NN, out, ob, bias, mb, has_b, r0, r1, c0, c1, bbuf):
    """Row blocks r0 <= rb < r1 (block rb: output channels from min(rb*_PW_R, Mg - _PW_R) of
    the group) x pixels c0 <= j < c1 (c1 - c0 >= 8) of a pointwise Conv's group: out[ob +
    m*NN + j] = sum_k A[m, k] * x[xb + k*NN + j] (+ bias[mb + m]). Panels of 32 pixels (two
    vectors per row: each broadcast of A feeds two fmas, and the tile's epilogue and stores
    serve twice the work of a 16-pixel panel, which paid ~20% on the K = 16..64 Convs of
    MobileViT), then of 16, the last one overlapping the previous ones (or 8 wide: the same
    values again); per panel
    the k blocks resume from the partial sums in ``out``, and the overlapping last row
    block runs after the others have finished (it never resumes from a row they wrote).
    Pixel rows a multiple of 256 bytes apart are first copied into ``bbuf`` (they would share
    L1 sets)."""
    nrb = (Mg + _PW_R - 1) // _PW_R
    copy = NN % 64 == 0
    rl = r1 - 1 if r1 == nrb and Mg % _PW_R != 0 else r1
    j = c0
    while j < c1:
        w = c1 - j
        if w >= _PW_W2:
            jp, nw = j, _PW_W2
        elif w >= _MK_W:
            jp, nw = j, _MK_W
        elif w > 8 and c1 - _MK_W >= c0:
            jp, nw = c1 - _MK_W, _MK_W
        elif w > 8:
            jp, nw = j, 8
        else:
            jp, nw = c1 - 8, 8
        for part in range(2):
            ra, rb = (r0, rl) if part == 0 else (rl, r1)
            if rb <= ra:
                continue
            for k0 in range(0, K, _MK_KC):
                kc = min(_MK_KC, K - k0)
                fin = has_b and k0 + kc == K
                bsrc = x
                bo = xb + k0 * NN + jp
                sb = NN
                if copy:
                    for k in range(kc):
                        s = xb + (k0 + k) * NN + jp
                        if nw == _PW_W2:
                            _mk_copy(x, s, bbuf, k * _PW_W2)
                            _mk_copy(x, s + _MK_W, bbuf, k * _PW_W2 + _MK_W)
                        elif nw == _MK_W:
                            _mk_copy(x, s, bbuf, k * _MK_W)
                        else:
                            for jj in range(8):
                                bbuf[k * 8 + jj] = x[s + jj]
                    bsrc = bbuf
                    bo = 0
                    sb = nw
                for blk in range(ra, rb):
                    m0 = min(blk * _PW_R, Mg - _PW_R)
                    if nw == _PW_W2:
                        _mkr6w2(ap, ab + (blk * K + k0) * _PW_R, bsrc, bo, sb, kc, out, ob + m0 * NN + jp, NN, k0,
                                bias, mb + m0, fin)
                    elif nw == _MK_W:
                        _mkr6(ap, ab + (blk * K + k0) * _PW_R, bsrc, bo, sb, kc, out, ob + m0 * NN + jp, NN, k0,
                              bias, mb + m0, fin)
                    else:
                        _mkr6n8(ap, ab + (blk * K + k0) * _PW_R, bsrc, bo, sb, kc, out, ob + m0 * NN + jp, NN, k0,
                                bias, mb + m0, fin)
        j = jp + nw


@njit(**JIT)
def _pw_do(it, x, ap, bias, has_b, p, out, nrc, ncc):
    """Item ``it`` of _conv_pw: (image, group, chunk of row blocks, chunk of pixels)."""
    C, H, W, M, G = p[1], p[2], p[3], p[4], p[15]
    Cg = C // G
    Mg = M // G
    NN = H * W
    nrb = (Mg + _PW_R - 1) // _PW_R
    per = nrc * ncc
    ng = it // per
    t = it - ng * per
    rc = t // ncc
    cc = t - rc * ncc
    n = ng // G
    g = ng - n * G
    r0 = rc * (_PW_ROWS // _PW_R)
    r1 = nrb if rc == nrc - 1 else r0 + _PW_ROWS // _PW_R
    c0 = cc * _PW_COLS
    c1 = NN if cc == ncc - 1 else c0 + _PW_COLS
    bbuf = np.empty(min(_MK_KC, Cg) * _PW_W2 if NN % 64 == 0 else 1, dtype=np.float32)
    _pw_item(ap, g * nrb * Cg * _PW_R, Mg, Cg, x, (n * C + g * Cg) * NN, NN, out, (n * M + g * Mg) * NN, bias,
             g * Mg, has_b, r0, r1, c0, c1, bbuf)


@njit(**PAR)
def _conv_pw_par(x, ap, bias, has_b, p, out, nrc, ncc, nit):
    prev = parallel_chunks(shares(nit))   # see llvm.parallel_chunks
    for iu in prange(nit):
        _pw_do(np.int64(iu), x, ap, bias, has_b, p, out, nrc, ncc)
    parallel_chunks(prev)


@njit(**JIT)
def _conv_pw(x, ap, bias, has_b, p, out):
    """CPU only: pointwise Conv (1x1, stride 1, no padding; at least 8 pixels and _PW_R
    output channels per group) as a GEMM per (image, group): W (Mg x Cg, packed by
    conv_pack: blocks of _PW_R rows, k-major, the last block overlapping) times the input
    planes (Cg x H*W, read in place). The register micro-kernel (_mkr6: 6 output channels x
    16 pixels; 8 pixels for a last panel of at most 8) runs acc = acc + w * x over the input
    channels ascending from 0.0f, k blocks resuming from the partial sums, then + bias in
    registers before its last store: the generated sequence per element. Items of row and
    pixel chunks run in parallel when the Conv is large (fixed blocking)."""
    N, C, H, W, M, G = p[0], p[1], p[2], p[3], p[4], p[15]
    Mg = M // G
    NN = H * W
    nrb = (Mg + _PW_R - 1) // _PW_R
    nrc = max(1, nrb // (_PW_ROWS // _PW_R))
    ncc = max(1, NN // _PW_COLS)
    nit = N * G * nrc * ncc
    if N * M * NN * (C // G) >= PAR_WORK and nit > 1 and num_threads() > 1:
        _conv_pw_par(x, ap, bias, has_b, p, out, nrc, ncc, nit)
    else:
        for it in range(nit):
            _pw_do(it, x, ap, bias, has_b, p, out, nrc, ncc)


def _emit_mkpx(ir, x, xo, pofs, po, koff, ko, K, b, bo, acc, ao, resume, fin, bias, bo2, has_b, out, oo, P, R, NW):
    """CPU only, compiled inline: R output pixels x NW output channels of a Conv as an
    indirect GEMM with the pixels as rows. Pixel r's tap k is the input value
    x[xo + pofs[po + r] + koff[ko + k]] (broadcast), channel j's weight of tap k is
    b[bo + k*NW + j] (packed by conv_pack); in registers, acc = 0.0f (or the partial sums at
    acc[ao + r*NW : +NW] when ``resume`` != 0), acc = fma(w, x, acc) per k ascending (the
    generated kernel's sequence). When ``fin`` != 0 (the
    last k block), + bias[bo2 + j] (when has_b), and the tile is transposed in registers and
    stored to the output planes: out[oo + j*P + r]; else the partial sums go back to ``acc``.
    R <= 8, NW a multiple of 8."""
    vt = vec(NW)
    xp = ir.at(x, xo)
    kbase = ir.at(koff, ko)
    bbase = ir.at(b, bo)

    def srow(r):
        return ir.add(ao, ir.c64(r * NW))

    bases = [ir.at(xp, ir.load(pofs, ir.add(po, ir.c64(r)))) for r in range(R)]
    accs = ir.accumulators(vt, R)
    with ir.b.if_then(ir.nonzero(resume)):
        for r in range(R):
            ir.b.store(ir.load_vec(acc, srow(r), vt), accs[r])
    with ir.for_range(K) as k:
        kv = ir.load(kbase, k)
        bv = ir.load_vec(bbase, ir.mul(k, ir.c64(NW)), vt)
        for r in range(R):
            ir.mac(accs[r], bv, ir.splat(ir.load(bases[r], kv), NW))
    with ir.b.if_else(ir.nonzero(fin)) as (then, otherwise):
        with then:
            with ir.b.if_then(ir.nonzero(has_b)):
                bv = ir.load_vec(bias, bo2, vt)
                for r in range(R):
                    ir.add_to(accs[r], bv)
            vals = [ir.b.load(a) for a in accs]
            undef = ir.undef(V8)
            for h in range(NW // 8):
                rows = [ir.shuffle(v, v, list(range(8 * h, 8 * h + 8))) for v in vals]
                cols = ir.transpose8(rows + [undef] * (8 - R))
                for j in range(8):
                    ir.store_first(cols[j], R, out, ir.add(oo, ir.mul(P, ir.c64(8 * h + j))))
        with otherwise:
            for r in range(R):
                ir.store_vec(ir.b.load(accs[r]), acc, srow(r))


def _mkpx_of(R, NW):
    """The pixel-tile micro-kernel of R output pixels x NW output channels (see _emit_mkpx)."""
    return micro_kernel(f"_mkpx_r{R}_w{NW}",
                        "x, xo, pofs, po, koff, ko, K, b, bo, acc, ao, resume, fin, bias, bo2, has_b, out, oo, P",
                        _emit_mkpx, R=R, NW=NW)


_PX_R = 6         # output pixels per tile
_PX_W = _MK_W     # output channels per tile
_mkpx6 = _mkpx_of(_PX_R, _PX_W)


@njit(**JIT)
def _px_dims(p):
    """(Hp, Wp, direct) of _conv_px: the planes the taps read are the input's own (direct:
    no tap reaches the padding) or zero-padded copies Hp x Wp."""
    H, W, pt, pl = p[2], p[3], p[13], p[14]
    Hp, Wp = _dw8_dims(p)
    if pt == 0 and pl == 0 and Hp <= H and Wp <= W:
        return H, W, True
    return Hp, Wp, False


@njit(**JIT)
def _px_tables(p):
    """(pofs, koff) of _conv_px: output pixel oh*OW + ow starts at pofs (in its group's
    planes), tap (c, kh, kw) at koff[(c*KH + kh)*KW + kw] from it."""
    C, KH, KW, OH, OW, sh, sw, dh, dw, G = p[1], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[15]
    Cg = C // G
    Hp, Wp, direct = _px_dims(p)
    pofs = np.empty(OH * OW, dtype=np.int64)
    for oh in range(OH):
        for ow in range(OW):
            pofs[oh * OW + ow] = (oh * sh) * Wp + ow * sw
    koff = np.empty(Cg * KH * KW, dtype=np.int64)
    for c in range(Cg):
        for kh in range(KH):
            for kw in range(KW):
                koff[(c * KH + kh) * KW + kw] = c * Hp * Wp + (kh * dh) * Wp + kw * dw
    return pofs, koff


@njit(**JIT)
def _px_pad(x, p, ch, xp):
    """Input channel plane ``ch`` (of N*C) into its plane of xp, zero-padded: every float of
    the Hp x Wp plane is written (data movement and zeros)."""
    H, W, pt, pl = p[2], p[3], p[13], p[14]
    Hp, Wp, direct = _px_dims(p)
    r1 = min(Hp, H + pt)    # padded rows [pt, r1) hold input rows
    c1 = min(Wp, W + pl)
    zero = np.float32(0)
    for r in range(Hp):
        d = (ch * Hp + r) * Wp
        row = xp[d:d + Wp]
        if r < pt or r >= r1:
            row[:] = zero
            continue
        row[:pl] = zero
        row[c1:] = zero
        s = (ch * H + r - pt) * W
        src = x[s:s + c1 - pl]
        dst = row[pl:c1]
        for j in range(c1 - pl):
            dst[j] = src[j]


#: pixel tiles per item of _conv_px (fixed: the last chunk of a plane takes the remainder, so
#: that the last tile, which overlaps the one before it, always shares its item)
_PX_TILES = 32


@njit(**JIT)
def _px_do(it, xp, bp, bias, has_b, p, out, pofs, koff, nq, ntc):
    """Item ``it`` of _conv_px: (image, group, channel panels, pixel tiles). Panels from
    (it // ntc) % nq: one panel, or the last two when the last one overlaps (they share
    output channels); tiles from (it % ntc) * _PX_TILES, the last chunk taking the rest."""
    C, M, KH, KW, OH, OW, G = p[1], p[4], p[5], p[6], p[7], p[8], p[15]
    Cg = C // G
    Mg = M // G
    K = Cg * KH * KW
    P = OH * OW
    Hp, Wp, direct = _px_dims(p)
    npn = (Mg + _PX_W - 1) // _PX_W
    tc = it % ntc
    u = it // ntc
    ng = u // nq
    q0 = u - ng * nq
    q1 = npn if q0 == nq - 1 else q0 + 1
    g = ng % G
    n = ng // G
    xo = ng * Cg * Hp * Wp
    nt = (P + _PX_R - 1) // _PX_R
    t0 = tc * _PX_TILES
    t1 = nt if tc == ntc - 1 else t0 + _PX_TILES
    nkb = (K + _MK_KC - 1) // _MK_KC
    kcb = (K + nkb - 1) // nkb   # k blocks of equal size (a last block of a few taps costs a whole epilogue)
    acc = np.empty((t1 - t0) * _PX_R * _PX_W if nkb > 1 else 1, dtype=np.float32)
    for q in range(q0, q1):
        mq = g * Mg + min(q * _PX_W, Mg - _PX_W)
        bb = (g * npn + q) * K * _PX_W
        ob = (n * M + mq) * P
        for k0 in range(0, K, kcb):
            kc = min(kcb, K - k0)
            fin = k0 + kc == K
            for t in range(t0, t1):
                p0 = min(t * _PX_R, P - _PX_R)
                _mkpx6(xp, xo, pofs, p0, koff, k0, kc, bp, bb + k0 * _PX_W, acc, (t - t0) * _PX_R * _PX_W, k0,
                       fin, bias, mq, has_b, out, ob + p0, P)


@njit(**PAR)
def _conv_px_par(x, xp, bp, bias, has_b, p, out, pofs, koff, nch, nit, pad, nq, ntc):
    prev = parallel_chunks(shares(nch))   # see llvm.parallel_chunks
    if pad:
        for cu in prange(nch):
            _px_pad(x, p, np.int64(cu), xp)
    parallel_chunks(shares(nit))
    for iu in prange(nit):
        _px_do(np.int64(iu), xp if pad else x, bp, bias, has_b, p, out, pofs, koff, nq, ntc)
    parallel_chunks(prev)


@njit(**JIT)
def _conv_px(x, bp, bias, has_b, p, out):
    """CPU only: 2-D Conv (any kernel, stride, padding, dilation, groups; at least 16 output
    channels per group and 6 output pixels) as an indirect GEMM with output pixels as rows
    and output channels as columns: tiles of 6 pixels x 16 channels (_mkpx6) broadcast each
    pixel's tap k from the input planes (x itself when no tap reaches the padding, else a
    zero-padded copy of each plane) and multiply it into the 16 channels' weights of tap k
    (W^T packed by conv_pack in panels of 16 channels, the last one overlapping). Per element:
    acc = 0.0f, acc = acc + w * xv over k = (c, kh, kw) ascending (a padding tap multiplies
    0.0f), k blocks of at most _MK_KC resuming from stored partial sums, then + bias: the generated
    sequence. The last k block transposes the tile in registers into the output planes; the
    last tile of a plane overlaps the previous one (the same values again), so no column is
    computed for nothing but those few, whatever the plane's width (the wide path computes
    Wq - OW garbage columns per row). Items of (image, group, channel panel, chunk of pixel
    tiles) run in parallel when the Conv is large (fixed blocking)."""
    N, C, M, KH, KW, OH, OW, G = p[0], p[1], p[4], p[5], p[6], p[7], p[8], p[15]
    Cg = C // G
    Mg = M // G
    Hp, Wp, direct = _px_dims(p)
    pofs, koff = _px_tables(p)
    npn = (Mg + _PX_W - 1) // _PX_W
    nq = npn - 1 if Mg % _PX_W != 0 else npn
    ntc = max(1, (OH * OW + _PX_R - 1) // _PX_R // _PX_TILES)
    nit = N * G * nq * ntc
    xp = np.empty(1 if direct else N * C * Hp * Wp, dtype=np.float32)
    if N * M * OH * OW * Cg * KH * KW >= PAR_WORK and nit > 1 and num_threads() > 1:
        _conv_px_par(x, xp, bp, bias, has_b, p, out, pofs, koff, N * C, nit, not direct, nq, ntc)
    else:
        if not direct:
            for ch in range(N * C):
                _px_pad(x, p, ch, xp)
        for it in range(nit):
            _px_do(it, x if direct else xp, bp, bias, has_b, p, out, pofs, koff, nq, ntc)


def _emit_gemvt(ir, x, xo, K, wt, wo, ld, bias, bo, has_b, out, oo, NW):
    """CPU only, compiled inline: out[oo + j] = sum_k wt[wo + k*ld + j] * x[xo + k] (k
    ascending from 0.0f, acc = fma(w, x, acc) in registers), then + bias[bo + j]
    when has_b, for j < NW (W^T packed by conv_pack: output channels contiguous)."""
    vt = vec(NW)
    xp = ir.at(x, xo)
    wp = ir.at(wt, wo)
    slot = ir.accumulators(vt, 1)[0]
    with ir.for_range(K) as k:
        ir.mac(slot, ir.load_vec(wp, ir.mul(k, ld), vt), ir.splat(ir.load(xp, k), NW))
    with ir.b.if_then(ir.nonzero(has_b)):
        ir.add_to(slot, ir.load_vec(bias, bo, vt))
    ir.store_vec(ir.b.load(slot), out, oo)


def _gemvt_of(NW):
    """NW output channels of a 1x1 Conv on a one-pixel map (see _emit_gemvt)."""
    return micro_kernel(f"_gemvt_w{NW}", "x, xo, K, wt, wo, ld, bias, bo, has_b, out, oo", _emit_gemvt, NW=NW)


_gemvt64 = _gemvt_of(64)
_gemvt32 = _gemvt_of(32)
_gemvt8 = _gemvt_of(8)


@njit(**JIT)
def _gemvt_do(it, x, wt, bias, has_b, p, out, NW, nbk):
    """Block ``it`` of _conv_gemvt: (image, group) it // nbk, NW channels from (it % nbk)*NW
    (the last block overlapping)."""
    C, M, G = p[1], p[4], p[15]
    Cg = C // G
    Mg = M // G
    ng = it // nbk
    m0 = min((it - ng * nbk) * NW, Mg - NW)
    n = ng // G
    g = ng - n * G
    m = g * Mg + m0
    xo = n * C + g * Cg
    wo = g * Cg * Mg + m0
    if NW == 64:
        _gemvt64(x, xo, Cg, wt, wo, Mg, bias, m, has_b, out, n * M + m)
    elif NW == 32:
        _gemvt32(x, xo, Cg, wt, wo, Mg, bias, m, has_b, out, n * M + m)
    else:
        _gemvt8(x, xo, Cg, wt, wo, Mg, bias, m, has_b, out, n * M + m)


@njit(**PAR)
def _conv_gemvt_par(x, wt, bias, has_b, p, out, NW, nbk, nit):
    prev = parallel_chunks(shares(nit))   # see llvm.parallel_chunks
    for iu in prange(nit):
        _gemvt_do(np.int64(iu), x, wt, bias, has_b, p, out, NW, nbk)
    parallel_chunks(prev)


@njit(**JIT)
def _conv_gemvt(x, wt, bias, has_b, p, out):
    """CPU only: 1x1 Conv on a one-pixel map (squeeze-excite Convs, a classifier as Conv;
    at least 8 output channels per group): output channels 64, 32 or 8 at a time in vector
    accumulators (W^T packed by conv_pack, channels contiguous; the last block overlapping),
    acc = acc + x * w over the input channels ascending from 0.0f, then + bias: the
    generated sequence. Blocks run in parallel when the Conv is large."""
    N, C, M, G = p[0], p[1], p[4], p[15]
    Mg = M // G
    NW = 64 if Mg >= 64 else (32 if Mg >= 32 else 8)
    nbk = (Mg + NW - 1) // NW
    nit = N * G * nbk
    if N * M * (C // G) >= PAR_WORK and nit > 1 and num_threads() > 1:
        _conv_gemvt_par(x, wt, bias, has_b, p, out, NW, nbk, nit)
    else:
        for it in range(nit):
            _gemvt_do(it, x, wt, bias, has_b, p, out, NW, nbk)


