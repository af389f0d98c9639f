"""MatMul/Gemm on the CPU: a register-blocked GEMM, and the packed-B path for a constant B.

Every output element gets the generated kernel's sequence (``nn._MM``): acc = 0.0f, then
acc = fma(a[k], b[k], acc) for k ascending (:func:`..fmadd.fma`: the exact product plus acc,
rounded once to float32), then the Gemm epilogue. The bulk runs the register micro-kernel (:func:`_mk_tile`: _MK_R rows x
_MK_W columns of accumulators in vector registers); edges run rows of accumulators in
memory (:func:`_gemm_rowacc_cpu`); a constant B is packed into the micro-kernel's panels
once when the node is built (the "mm" prepare rule, :func:`mm_prepare`). Blocking and
threading change which elements are computed when, never an element's sequence.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..common import bcast_offset, cpu_kernel, flat, replayable
from ..fmadd import fma
from ..nn import _MM, _gemm_epilogue
from ..overrides import override
from .base import JIT, PAR, PAR_WORK
from .llvm import micro_kernel, num_threads, parallel_chunks, shares, vec

_GEMM_TILE = 512  # columns per tile (128 and 256 measured slower for MatMul/Gemm/Conv on the bench machine)
_GEMM_PAD = 16  # accumulator rows 512 + 16 floats apart: no 4 KiB aliasing between them
_bcast_offset_cpu = bcast_offset.cpu  # the @dual's CPU twin, callable from plain njit code


@njit(**JIT)
def _gemm_rowacc_cpu(a, a0, sam, sak, b, b0, sbk, M, K, N, out, o0, som, acc):
    """CPU only: out[o0 + m*som + n] = sum_k a[a0 + m*sam + k*sak] * b[b0 + k*sbk + n]
    (k ascending from 0.0f), for m < M, n < N; B rows contiguous. ``acc`` is
    the scratch from _gemm_scratch. Columns go in tiles, rows four at a
    time, k two at a time: ``acc = fma(a_k1, b_k1, fma(a_k, b_k, acc))`` is exactly
    two sequential steps (no reassociation without fastmath). Slices
    keep the inner loops free of negative-index checks so that LLVM
    vectorizes them over n, which does not reorder any element's sum."""
    T = acc.shape[1] - _GEMM_PAD
    for n0 in range(0, N, T):
        nt = min(T, N - n0)
        m = 0
        while m < M:
            if M - m >= 4:
                r0 = acc[0, :nt]
                r1 = acc[1, :nt]
                r2 = acc[2, :nt]
                r3 = acc[3, :nt]
                r0[:] = np.float32(0)
                r1[:] = np.float32(0)
                r2[:] = np.float32(0)
                r3[:] = np.float32(0)
                ab = a0 + m * sam
                k = 0
                while k + 2 <= K:
                    ak = ab + k * sak
                    v00 = a[ak]
                    v10 = a[ak + sam]
                    v20 = a[ak + 2 * sam]
                    v30 = a[ak + 3 * sam]
                    ak1 = ak + sak
                    v01 = a[ak1]
                    v11 = a[ak1 + sam]
                    v21 = a[ak1 + 2 * sam]
                    v31 = a[ak1 + 3 * sam]
                    st = b0 + k * sbk + n0
                    bk0 = b[st:st + nt]
                    bk1 = b[st + sbk:st + sbk + nt]
                    for n in range(nt):
                        x0 = bk0[n]
                        x1 = bk1[n]
                        r0[n] = fma(v01, x1, fma(v00, x0, r0[n]))
                        r1[n] = fma(v11, x1, fma(v10, x0, r1[n]))
                        r2[n] = fma(v21, x1, fma(v20, x0, r2[n]))
                        r3[n] = fma(v31, x1, fma(v30, x0, r3[n]))
                    k += 2
                if k < K:
                    ak = ab + k * sak
                    v00 = a[ak]
                    v10 = a[ak + sam]
                    v20 = a[ak + 2 * sam]
                    v30 = a[ak + 3 * sam]
                    st = b0 + k * sbk + n0
                    bk0 = b[st:st + nt]
                    for n in range(nt):
                        x0 = bk0[n]
                        r0[n] = fma(v00, x0, r0[n])
                        r1[n] = fma(v10, x0, r1[n])
                        r2[n] = fma(v20, x0, r2[n])
                        r3[n] = fma(v30, x0, r3[n])
                for r in range(4):
                    o = o0 + (m + r) * som + n0
                    out[o:o + nt] = acc[r, :nt]
                m += 4
            else:
                r0 = acc[0, :nt]
                r0[:] = np.float32(0)
                ab = a0 + m * sam
                k = 0
                while k + 2 <= K:
                    v00 = a[ab + k * sak]
                    v01 = a[ab + (k + 1) * sak]
                    st = b0 + k * sbk + n0
                    bk0 = b[st:st + nt]
                    bk1 = b[st + sbk:st + sbk + nt]
                    for n in range(nt):
                        r0[n] = fma(v01, bk1[n], fma(v00, bk0[n], r0[n]))
                    k += 2
                if k < K:
                    v00 = a[ab + k * sak]
                    st = b0 + k * sbk + n0
                    bk0 = b[st:st + nt]
                    for n in range(nt):
                        r0[n] = fma(v00, bk0[n], r0[n])
                o = o0 + m * som + n0
                out[o:o + nt] = r0
                m += 1


_MK_W = 16  # micro-kernel columns: one <16 x float> vector (a zmm register with AVX-512)


#: micro-kernel rows: 6 rows x 2 AVX2 registers = 12 accumulators, B's two halves and a
#: broadcast A value fit the 16 ymm registers (16 rows spilled: 19-24 GMAC/s against 30-36
#: with 6 on the AVX2 bench machine, bench/model_profile.py; 4, 5, 7, 8 and 12 measured slower)
_MK_R = 6
#: rows of the tail micro-kernel (the M % _MK_R rows left below the _MK_R blocks, in pairs)
_MK_R2 = 2


_MK_KC = 256  # k block: a packed B panel (_MK_KC x _MK_W floats, 16 KiB) stays in L1


def emit_tile_rows(ir, R, a, ao, sam, sak, b, b_row, K, out, oo, som, resume):
    """The register micro-kernel: for r < R, j < _MK_W,
    out[oo + r*som + j] = acc + sum_k a[ao + r*sam + k*sak] * b[b_row(k) + j]
    with k ascending and the sum taken step by step (acc = fma(a, b, acc): one rounding to
    float32 per step); acc = 0.0f, or the value already in out when ``resume`` != 0
    (a later k block). The R x _MK_W accumulators live in registers for the whole k loop;
    ``b_row(k)`` is where B's row k starts (strided: _mk_tile; a table of offsets: the Conv's
    indirect GEMM)."""
    vt = vec(_MK_W)

    def a_of(k):
        ak = ir.add(ao, ir.mul(k, sak))
        return lambda r: ir.load(a, ir.add(ak, ir.mul(ir.c64(r), sam)))

    ir.register_tile(R, vt, K, a_of, lambda k: ir.load_vec(b, b_row(k), vt), out,
                     lambda r: ir.add(oo, ir.mul(ir.c64(r), som)), resume)


def _emit_tile(ir, a, ao, sam, sak, b, bo, sbk, K, out, oo, som, resume, R):
    """CPU only, compiled inline: emit_tile_rows with B's row k at b[bo + k*sbk]."""
    emit_tile_rows(ir, R, a, ao, sam, sak, b, lambda k: ir.add(bo, ir.mul(k, sbk)), K, out, oo, som, resume)


_TILE_PARAMS = "a, ao, sam, sak, b, bo, sbk, K, out, oo, som, resume"
_mk_tile = micro_kernel(f"_mk_tile_r{_MK_R}", _TILE_PARAMS, _emit_tile, R=_MK_R)
_mk_tile2 = micro_kernel(f"_mk_tile_r{_MK_R2}", _TILE_PARAMS, _emit_tile, R=_MK_R2)


def _emit_copy(ir, src, so, dst, do):
    """CPU only: dst[do:do + _MK_W] = src[so:so + _MK_W] as one vector load and store."""
    ir.store_vec(ir.load_vec(src, so, vec(_MK_W)), dst, do)


_mk_copy = micro_kernel("_mk_copy", "src, so, dst, do", _emit_copy)


@njit(**JIT)
def _gemm_tiles_cpu(a, a0, sam, sak, b, b0, sbk, M, K, N, out, o0, som):
    """CPU only: the _gemm_rows_cpu product for M even, N % _MK_W == 0, K > 0, in
    micro-kernel tiles: per k block, per B panel (copied contiguous), per row block
    (_MK_R rows, then the rest in blocks of _MK_R2). A row stride that is a multiple of
    4 KiB puts all rows of a block in one cache set; then A's block is copied k-major
    first."""
    kcm = min(_MK_KC, K)
    bbuf = np.empty(kcm * _MK_W, dtype=np.float32)
    pack_a = sak == 1 and sam % 1024 == 0 and N >= 4 * _MK_W
    abuf = np.empty(M * kcm if pack_a else 1, dtype=np.float32)
    MF = M - M % _MK_R   # rows in full _MK_R blocks; the rest (even) in _MK_R2 blocks
    for k0 in range(0, K, _MK_KC):
        kc = min(_MK_KC, K - k0)
        if pack_a:
            for mb in range(0, M, _MK_R):
                h = min(_MK_R, M - mb)
                for k in range(kc):
                    src = a0 + mb * sam + k0 + k
                    dst = mb * kc + k * h
                    for r in range(h):
                        abuf[dst + r] = a[src + r * sam]
        for n0 in range(0, N, _MK_W):
            for k in range(kc):
                _mk_copy(b, b0 + (k0 + k) * sbk + n0, bbuf, k * _MK_W)
            for mb in range(0, MF, _MK_R):
                if pack_a:
                    _mk_tile(abuf, mb * kc, 1, _MK_R, bbuf, 0, _MK_W, kc, out, o0 + mb * som + n0, som, k0)
                else:
                    _mk_tile(a, a0 + mb * sam + k0 * sak, sam, sak, bbuf, 0, _MK_W, kc, out, o0 + mb * som + n0,
                             som, k0)
            for mb in range(MF, M, _MK_R2):
                if pack_a:   # the last block's rows are h = M - MF apart in abuf
                    h = M - MF
                    _mk_tile2(abuf, MF * kc + (mb - MF), 1, h, bbuf, 0, _MK_W, kc, out, o0 + mb * som + n0,
                              som, k0)
                else:
                    _mk_tile2(a, a0 + mb * sam + k0 * sak, sam, sak, bbuf, 0, _MK_W, kc, out,
                              o0 + mb * som + n0, som, k0)


@njit(**JIT)
def _gemm_rows_cpu(a, a0, sam, sak, b, b0, sbk, M, K, N, out, o0, som, acc):
    """CPU only: out[o0 + m*som + n] = sum_k a[a0 + m*sam + k*sak] * b[b0 + k*sbk + n]
    (k ascending from 0.0f), for m < M, n < N; B rows contiguous. ``acc`` is
    the scratch from _gemm_scratch. Whole blocks of _MK_R (then _MK_R2) rows x _MK_W
    columns go through the register micro-kernels, the edges (the columns right of
    them, an odd last row) through _gemm_rowacc_cpu; both give every
    element the same sequence of float32 operations."""
    MR = M - M % _MK_R2
    NC = N - N % _MK_W
    if MR > 0 and NC > 0:
        if K > 0:
            _gemm_tiles_cpu(a, a0, sam, sak, b, b0, sbk, MR, K, NC, out, o0, som)
        else:
            for m in range(MR):
                o = o0 + m * som
                out[o:o + NC] = np.float32(0)
    # the columns right of the tiles (2 to 15 of them): the micro-kernels on a zero-padded panel
    edge = MR > 0 and K > 0 and N - NC >= _MK_EDGE
    if edge:
        _gemm_edge_cols(a, a0, sam, sak, b, b0 + NC, sbk, MR, K, N - NC, out, o0 + NC, som)
    # the other edges: those columns when not done above, then the rows below the tiles (one
    # call site: LLVM inlines _gemm_rowacc_cpu, and a second copy doubles the JIT time)
    for part in range(2):
        if part == 0:
            am, bn, mm, nn_, o = a0, b0 + NC, MR, N - NC, o0 + NC
            if edge:
                mm = 0
        else:
            am, bn, mm, nn_, o = a0 + MR * sam, b0, M - MR, N, o0 + MR * som
        if mm > 0 and nn_ > 0:
            _gemm_rowacc_cpu(a, am, sam, sak, b, bn, sbk, mm, K, nn_, out, o, som, acc)


#: edge columns from which _gemm_rows_cpu runs them through the micro-kernels on a zero-padded
#: panel (below: _gemm_rowacc_cpu, whose rows of accumulators are as fast for one column)
_MK_EDGE = 2


@njit(**JIT)
def _gemm_edge_cols(a, a0, sam, sak, b, b0, sbk, M, K, nn_, out, o0, som):
    """CPU only: the _gemm_rows_cpu product for M even, K > 0, 0 < nn_ < _MK_W columns: B's
    nn_ columns go into a panel of _MK_W whose other columns are 0.0f, the micro-kernels
    compute all _MK_W columns into a scratch of M x _MK_W partial sums (resumed per k block as
    in _gemm_tiles_cpu), and the nn_ real columns are copied out. Each real element gets the
    same sequence of float32 operations as in _gemm_rowacc_cpu; the padding columns are
    thrown away."""
    kcm = min(_MK_KC, K)
    pbuf = np.zeros(kcm * _MK_W, dtype=np.float32)
    ebuf = np.empty(M * _MK_W, dtype=np.float32)
    MF = M - M % _MK_R
    for k0 in range(0, K, _MK_KC):
        kc = min(_MK_KC, K - k0)
        for k in range(kc):
            src = b0 + (k0 + k) * sbk
            dst = k * _MK_W
            for j in range(nn_):
                pbuf[dst + j] = b[src + j]
        for mb in range(0, MF, _MK_R):
            _mk_tile(a, a0 + mb * sam + k0 * sak, sam, sak, pbuf, 0, _MK_W, kc, ebuf, mb * _MK_W, _MK_W, k0)
        for mb in range(MF, M, _MK_R2):
            _mk_tile2(a, a0 + mb * sam + k0 * sak, sam, sak, pbuf, 0, _MK_W, kc, ebuf, mb * _MK_W, _MK_W, k0)
    for m in range(M):
        o = o0 + m * som
        e = m * _MK_W
        out[o:o + nn_] = ebuf[e:e + nn_]


@njit(**JIT)
def _gemm_scratch(K, N):
    """Accumulator scratch for _gemm_rowacc_cpu (4 rows of a column tile, padded)."""
    t = min(_GEMM_TILE, max(N, 1))
    return np.zeros((4, t + _GEMM_PAD), dtype=np.float32)


@njit(**JIT)
def _transpose_into(b, b0, sbk, sbn, K, N, dst):
    """dst[k*N + n] = b[b0 + k*sbk + n*sbn], in 32x32 blocks (pure data movement)."""
    for k0 in range(0, K, 32):
        k1 = min(K, k0 + 32)
        for n0 in range(0, N, 32):
            n1 = min(N, n0 + 32)
            for n in range(n0, n1):
                for k in range(k0, k1):
                    dst[k * N + n] = b[b0 + k * sbk + n * sbn]


@njit(**PAR)
def _mm_batches_par(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta, nb):
    """Batches of _mm_cpu in parallel (each batch writes its own M x N block; scratch per batch)."""
    prev = parallel_chunks(shares(nb))   # see llvm.parallel_chunks
    for bu in prange(nb):
        bt = np.int64(bu)  # prange's index may be unsigned; uint64 with int64 promotes to float64
        acc = _gemm_scratch(K, N)
        bt_buf = np.empty(K * N if sbn != 1 else 1, dtype=np.float32)
        _mm_batch(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta, bt, acc,
                  bt_buf)
    parallel_chunks(prev)


@njit(**JIT)
def _mm_batch(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta, bt, acc,
              bt_buf):
    MN = M * N
    a0 = _bcast_offset_cpu(bt, bshape, sa)
    b0 = _bcast_offset_cpu(bt, bshape, sb)
    o0 = bt * MN
    if sbn != 1:
        _transpose_into(b, b0, sbk, sbn, K, N, bt_buf)
        _gemm_rows_cpu(a, a0, sam, sak, bt_buf, 0, N, M, K, N, out, o0, N, acc)
    else:
        _gemm_rows_cpu(a, a0, sam, sak, b, b0, sbk, M, K, N, out, o0, N, acc)
    if epi != 0:
        _epilogue_block(out, o0, N, 0, M, 0, N, c, scm, scn, epi, alpha, beta)


@njit(**JIT)
def _epilogue_block(out, o0, ld, m0, m1, n0, n1, c, scm, scn, epi, alpha, beta):
    """The Gemm epilogue (nn._gemm_epilogue) on out[o0 + m*ld + n] for m0 <= m < m1,
    n0 <= n < n1, on row slices (vectorizable): y = alpha * acc, then y + beta * c[m*scm +
    n*scn] with C given (epi 2). A C constant along a row (scn == 0, a bias per row or a
    scalar) has beta * c computed once per row: the same product, the same bits."""
    al = np.float32(alpha)
    be = np.float32(beta)
    w = n1 - n0
    for m in range(m0, m1):
        o = o0 + m * ld + n0
        row = out[o:o + w]
        if epi == 1:
            for n in range(w):
                row[n] = al * row[n]
        elif scn == 1:
            cs = m * scm + n0
            cr = c[cs:cs + w]
            for n in range(w):
                row[n] = al * row[n] + be * cr[n]
        elif scn == 0:
            bc = be * c[m * scm]
            for n in range(w):
                row[n] = al * row[n] + bc
        else:
            for n in range(w):
                row[n] = _gemm_epilogue(row[n], epi, alpha, beta, c[m * scm + (n0 + n) * scn])


#: rows and columns of one block of a parallel unbatched product (_mm_blocks_par): fixed, so
#: the blocking (and every result) does not depend on the thread count
_MM_PAR_ROWS = 8 * _MK_R
_MM_PAR_COLS = 16 * _MK_W


@njit(**PAR)
def _mm_blocks_par(a, b, out, c, M, K, N, sam, sak, sbk, scm, scn, epi, alpha, beta, nrb, ncb):
    """One product (no batch, B rows contiguous) in blocks of _MM_PAR_ROWS rows x
    _MM_PAR_COLS columns in parallel; each block is a _gemm_rows_cpu sub-product (its
    elements get the same sequence as in the whole one) plus the Gemm epilogue."""
    prev = parallel_chunks(shares(nrb * ncb))   # see llvm.parallel_chunks
    for iu in prange(nrb * ncb):
        it = np.int64(iu)
        rb = it // ncb
        cb = it - rb * ncb
        m0 = rb * _MM_PAR_ROWS
        n0 = cb * _MM_PAR_COLS
        mr = min(_MM_PAR_ROWS, M - m0)
        nc = min(_MM_PAR_COLS, N - n0)
        acc = _gemm_scratch(K, nc)
        _gemm_rows_cpu(a, m0 * sam, sam, sak, b, n0, sbk, mr, K, nc, out, m0 * N + n0, N, acc)
        if epi != 0:
            _epilogue_block(out, 0, N, m0, m0 + mr, n0, n0 + nc, c, scm, scn, epi, alpha, beta)
    parallel_chunks(prev)


@cpu_kernel
def _mm_cpu(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta):
    MN = M * N
    nb = out.shape[0] // MN if MN > 0 else 0
    nrb = (M + _MM_PAR_ROWS - 1) // _MM_PAR_ROWS
    ncb = (N + _MM_PAR_COLS - 1) // _MM_PAR_COLS
    par = num_threads() > 1   # one thread: the serial loops (a parallel region costs ~3-5 us for nothing)
    if nb > 1 and nb * M * K * N >= PAR_WORK and par:
        _mm_batches_par(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta, nb)
    elif nb == 1 and sbn == 1 and nrb * ncb > 1 and M * K * N >= PAR_WORK and par:
        _mm_blocks_par(a, b, out, c, M, K, N, sam, sak, sbk, scm, scn, epi, alpha, beta, nrb, ncb)
    elif nb > 0:
        acc = _gemm_scratch(K, N)
        bt_buf = np.empty(K * N if sbn != 1 else 1, dtype=np.float32)
        for bt in range(nb):
            _mm_batch(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta, bt, acc,
                      bt_buf)


def mm_pack_b(bmat) -> np.ndarray:
    """A constant K x N B (float32) in _mm_packed_cpu's layout: panels of _MK_W columns, each
    K x _MK_W contiguous (k-major), the last one padded with 0.0f columns. A copy made once
    when the node is built: the values, hence every product's bits, are B's."""
    bmat = np.asarray(bmat, dtype=np.float32)
    K, N = bmat.shape
    NP = (N + _MK_W - 1) // _MK_W
    pad = np.zeros((K, NP * _MK_W), dtype=np.float32)
    pad[:, :N] = bmat
    return np.ascontiguousarray(pad.reshape(K, NP, _MK_W).transpose(1, 0, 2)).reshape(-1)


@njit(**JIT)
def _mm_packed_panel(p, a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta):
    """Columns p*_MK_W .. of out[m*N + n] = sum_k a[m*sam + k*sak] * B[k, n] (k ascending from
    0.0f, then the Gemm epilogue) with B packed by mm_pack_b: the micro-kernels read the panel
    in place (no copy per call), k blocks of _MK_KC resume from the partial sums. Rows in
    blocks of _MK_R, then _MK_R2; an odd last row runs as the first of a 2-row block whose
    second row is 0.0f (from a scratch copy of it). A panel wider than what is left of N
    computes into a scratch and copies the real columns out. Each real element gets the
    generated kernel's sequence; padding rows/columns are thrown away."""
    n0 = p * _MK_W
    w = min(_MK_W, N - n0)
    MR = M - M % _MK_R2
    MF = MR - MR % _MK_R
    full = w == _MK_W
    ebuf = np.empty(1 if full else MR * _MK_W, dtype=np.float32)
    odd = M > MR
    a2 = np.zeros(2 * K if odd else 1, dtype=np.float32)
    o2 = np.empty(2 * _MK_W if odd else 1, dtype=np.float32)
    if odd:
        for k in range(K):
            a2[k] = a[MR * sam + k * sak]
    pb = p * K * _MK_W
    for k0 in range(0, K, _MK_KC):
        kc = min(_MK_KC, K - k0)
        bo = pb + k0 * _MK_W
        for mb in range(0, MF, _MK_R):
            if full:
                _mk_tile(a, mb * sam + k0 * sak, sam, sak, bp, bo, _MK_W, kc, out, mb * N + n0, N, k0)
            else:
                _mk_tile(a, mb * sam + k0 * sak, sam, sak, bp, bo, _MK_W, kc, ebuf, mb * _MK_W, _MK_W, k0)
        for mb in range(MF, MR, _MK_R2):
            if full:
                _mk_tile2(a, mb * sam + k0 * sak, sam, sak, bp, bo, _MK_W, kc, out, mb * N + n0, N, k0)
            else:
                _mk_tile2(a, mb * sam + k0 * sak, sam, sak, bp, bo, _MK_W, kc, ebuf, mb * _MK_W, _MK_W, k0)
        if odd:
            _mk_tile2(a2, k0, K, 1, bp, bo, _MK_W, kc, o2, 0, _MK_W, k0)
    if not full:
        for m in range(MR):
            o = m * N + n0
            e = m * _MK_W
            out[o:o + w] = ebuf[e:e + w]
    if odd:
        o = MR * N + n0
        out[o:o + w] = o2[:w]
    if K == 0:
        for m in range(M):
            o = m * N + n0
            out[o:o + w] = np.float32(0)
    if epi != 0:
        _epilogue_block(out, 0, N, 0, M, n0, n0 + w, c, scm, scn, epi, alpha, beta)


#: panels of B a one-row product computes at once (_mk_row): enough independent accumulator
#: chains to keep both FMA units busy through the fma latency
_MK_G = 8


def mm_pack_row(bmat) -> np.ndarray:
    """A constant K x N B (float32) in mm_row_cpu's layout: the columns in panels of _MK_W (the
    last padded with 0.0f columns), the panels in groups of _MK_G (the last group may have
    fewer), each group k-major: group g's row k (its gp panels side by side, gp * _MK_W floats)
    at g * _MK_G * K * _MK_W + k * gp * _MK_W, so that a one-row product reads B once, in order.
    A copy made once when the node is built: the values, hence every product's bits, are B's."""
    K, N = np.shape(bmat)
    NP = (N + _MK_W - 1) // _MK_W
    panels = mm_pack_b(bmat).reshape(NP, K, _MK_W)   # the same panels, regrouped k-major
    parts = [panels[g:g + _MK_G].transpose(1, 0, 2).reshape(-1) for g in range(0, NP, _MK_G)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def _emit_row(ir, a, sak, bq, bo, ks, K, out, oo, G):
    """The one-row micro-kernel: for g < G, j < _MK_W,
    out[oo + g*_MK_W + j] = sum_k a[k*sak] * bq[bo + k*ks + g*_MK_W + j], k ascending from 0.0f
    (acc = fma(a, b, acc): the micro-kernels' sequence); G panels side by side (B's row k of
    them at bo + k*ks), each its own chain of accumulators in a register."""
    vt = vec(_MK_W)
    accs = ir.accumulators(vt, G)
    with ir.for_range(K) as k:
        av = ir.splat(ir.load(a, ir.mul(k, sak)), _MK_W)
        bk = ir.add(bo, ir.mul(k, ks))
        for g in range(G):
            ir.mac(accs[g], av, ir.load_vec(bq, ir.add(bk, ir.c64(g * _MK_W)), vt))
    for g in range(G):
        ir.store_vec(ir.b.load(accs[g]), out, ir.add(oo, ir.c64(g * _MK_W)))


_ROW_PARAMS = "a, sak, bq, bo, ks, K, out, oo"
_mk_row = micro_kernel(f"_mk_row_g{_MK_G}", _ROW_PARAMS, _emit_row, G=_MK_G)
_mk_row4 = micro_kernel("_mk_row_g4", _ROW_PARAMS, _emit_row, G=4)
_mk_row2 = micro_kernel("_mk_row_g2", _ROW_PARAMS, _emit_row, G=2)
_mk_row1 = micro_kernel("_mk_row_g1", _ROW_PARAMS, _emit_row, G=1)


@njit(**JIT)
def _mm_row_group(g, a, sak, bq, K, N, out, c, scn, epi, alpha, beta, ebuf):
    """Group g's columns of the one-row product (mm_row_cpu): a whole group inside N straight
    into out; otherwise its panels 4, 2 and 1 at a time into ``ebuf`` and the real columns
    copied out. Then the Gemm epilogue on them."""
    NP = (N + _MK_W - 1) // _MK_W
    p0 = g * _MK_G
    gp = min(_MK_G, NP - p0)
    n0 = p0 * _MK_W
    bo = p0 * K * _MK_W
    ks = gp * _MK_W
    n1 = min(N, n0 + ks)
    if gp == _MK_G and n1 == n0 + ks:
        _mk_row(a, sak, bq, bo, ks, K, out, n0)
    else:
        j = 0
        while j < gp:
            if gp - j >= 4:
                _mk_row4(a, sak, bq, bo + j * _MK_W, ks, K, ebuf, j * _MK_W)
                j += 4
            elif gp - j >= 2:
                _mk_row2(a, sak, bq, bo + j * _MK_W, ks, K, ebuf, j * _MK_W)
                j += 2
            else:
                _mk_row1(a, sak, bq, bo + j * _MK_W, ks, K, ebuf, j * _MK_W)
                j += 1
        out[n0:n1] = ebuf[:n1 - n0]
    if epi != 0:
        _epilogue_block(out, 0, N, 0, 1, n0, n1, c, 0, scn, epi, alpha, beta)


@njit(**PAR)
def _mm_row_par(a, sak, bq, K, N, out, c, scn, epi, alpha, beta, NG):
    prev = parallel_chunks(shares(NG))   # see llvm.parallel_chunks
    for iu in prange(NG):
        ebuf = np.empty(_MK_G * _MK_W, dtype=np.float32)
        _mm_row_group(np.int64(iu), a, sak, bq, K, N, out, c, scn, epi, alpha, beta, ebuf)
    parallel_chunks(prev)


@njit(**JIT)
def mm_row_cpu(a, sak, bq, K, N, out, c, scn, epi, alpha, beta):
    """out (1 x N) = a (1 x K, elements k*sak) times a constant B packed by mm_pack_row, then the
    Gemm epilogue: the MatMul/Gemm CPU path for one row of A (a decoder's step), bitwise the
    generated kernel's results. Groups of panels run in parallel (each writes its own columns)
    above PAR_WORK multiply-adds, with more than one numba thread."""
    NP = (N + _MK_W - 1) // _MK_W
    NG = (NP + _MK_G - 1) // _MK_G
    if N <= 0:
        return
    if NG > 1 and K * N >= PAR_WORK and num_threads() > 1:
        _mm_row_par(a, sak, bq, K, N, out, c, scn, epi, alpha, beta, NG)
    else:
        ebuf = np.empty(_MK_G * _MK_W, dtype=np.float32)
        for g in range(NG):
            _mm_row_group(g, a, sak, bq, K, N, out, c, scn, epi, alpha, beta, ebuf)


@njit(**PAR)
def _mm_packed_par(a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta, NP):
    prev = parallel_chunks(shares(NP))   # see llvm.parallel_chunks
    for iu in prange(NP):
        _mm_packed_panel(np.int64(iu), a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta)
    parallel_chunks(prev)


@njit(**JIT)
def mm_packed_cpu(a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta):
    """out (M x N, contiguous) = A (rows m*sam, columns k*sak) times a constant B packed by
    mm_pack_b, then the Gemm epilogue (epi 0: none; see nn._gemm_epilogue): the MatMul/Gemm
    CPU path for an initializer B, bitwise the generated kernel's results. Panels run in
    parallel (each writes its own columns) above PAR_WORK multiply-adds, with more than one
    numba thread."""
    NP = (N + _MK_W - 1) // _MK_W
    if M <= 0 or N <= 0:
        return
    if NP > 1 and M * K * N >= PAR_WORK and num_threads() > 1:
        _mm_packed_par(a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta, NP)
    else:
        for p in range(NP):
            _mm_packed_panel(p, a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta)



def mm_prepare(target, b, *, rows, sam, sak, c_input=None, scm=0, scn=0, epi=0, alpha=1.0, beta=1.0):
    """The "mm" prepare rule (the contract at ``nn._MM``): B (K x N, a constant) packed into
    micro-kernel panels once here (a copy: the same values, the same bits), and the run
    function that multiplies A's ``rows`` rows by it with :func:`mm_packed_cpu` (one row:
    :func:`mm_pack_row` and :func:`mm_row_cpu`)."""
    K, N = np.shape(b)
    dummy = np.zeros(1, dtype=np.float32)
    al, be = np.float32(alpha), np.float32(beta)
    if rows == 1:     # one row of A (a decoder's step): B in groups of panels, read once in order
        bq = mm_pack_row(b)

        @replayable
        def run_row(inputs, outputs):
            c = flat(inputs[c_input]) if c_input is not None else dummy
            target.call(mm_row_cpu, flat(inputs[0]), sak, bq, K, N, flat(outputs[0]), c, scn, epi, al, be)

        return run_row
    bp = mm_pack_b(b)

    @replayable
    def run(inputs, outputs):
        c = flat(inputs[c_input]) if c_input is not None else dummy
        target.call(mm_packed_cpu, flat(inputs[0]), sam, sak, bp, rows, K, N, flat(outputs[0]), c, scm, scn, epi,
                    al, be)

    return run


def register() -> None:
    override(_MM, target="cpu", run=_mm_cpu, prepare=mm_prepare)
