"""CPU fast paths: hand-tuned overrides of generated CPU kernels.

Each op's kernels are generated from one per-item statement (see
:func:`.target.kernel_pair`); the CUDA kernel runs that statement once per
thread. Where a plain loop over it is slow on a CPU, a function here computes
the same values faster -- a register-blocked GEMM, Conv as register-blocked
(indirect) GEMMs on packed weights (pixel tiles x channel panels, pointwise
row blocks x pixel panels, depthwise 8 pixels x 8 channels in an interleaved
copy; padded phases or im2col where those do not fit), rows of accumulators for
AveragePool, shared row maxima for MaxPool, row-wise Softmax/LayerNorm/Resize/Pad/
gathers, strided copies coalesced into contiguous rows or tiled transposes, Erf from
its near range's formulas where every element of a block lies there -- and
:func:`install` sets it as the pair's ``cpu_fast``. (MatMul/Gemm with a constant B
call :func:`mm_packed_cpu` on a B packed at build time directly, and Conv with a
constant weight :func:`conv_packed_cpu` on a weight packed by :func:`conv_pack`,
when the target's ``fast_paths`` is on.) A fast path may reorder *which* output
elements are computed when (blocking, vectorising across elements) but gives
every element exactly the sequence of float32 operations of the generated kernel
(MaxPool: the same selection, see :func:`_maxpool_cpu`; data movement: the same
bits copied), so results are bit for bit the same:
``tests/test_fastpaths.py`` checks each one against the generated kernel on
random shapes, and fails for a fast path that has no cases there.

(ReduceSum/Mean/Max's row and contiguous paths stay inline in ``reduce.py``,
taken only when the target's ``fast_paths`` is on; the same test covers them.)
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import data, elementwise, nn
from .common import bcast_offset, cpu_kernel
from .data import gather_row_checked
from .nn import (_JIT, _bn_apply, _bn_factor, _conv_item, _convt_item, _div, _gemm_epilogue, _gpool_item, _lerp,
                 _ln_apply, _ln_inv, _ln_row, _pad_map, _pool_at, _pool_pos, _resize_item)
from .pmath import ERF_B, _sel, erf_f32, erf_near_f32, exp_f32, exp_nonpos_f32, log_f32
_GEMM_TILE = 512  # columns per tile (128 and 256 measured slower for MatMul/Gemm/Conv on the bench machine)


_GEMM_PAD = 16  # accumulator rows 512 + 16 floats apart: no 4 KiB aliasing between them
#: njit options of the threaded paths: ``prange`` over independent output blocks (planes, batches);
#: each output element is still computed by one iteration with one fixed sequence, so the results
#: are the same bits for any ``numba.set_num_threads``
_PAR = dict(_JIT, parallel=True)
_bcast_offset_cpu = bcast_offset.cpu  # the @dual's CPU twin, callable from plain njit code
#: multiply-adds below which a kernel stays on the calling thread (a parallel region costs a
#: thread wake-up, and far more on a machine whose cores are all busy)
_PAR_WORK = 1 << 18
#: a grouped Conv with at most this many output channels per group runs the direct path
_DIRECT_MG = 4


@intrinsic
def _num_threads(typingctx):
    """numba.get_num_threads() through the threading layer's symbol, as numba's own
    parallel code calls it (numba.get_num_threads in a kernel reads a ctypes pointer, which
    keeps the kernel out of the disk cache). Only in functions that also call a parallel one:
    loading such a function from the cache starts the threading layer first (numba's reload
    hook of parallel code), which registers the symbol. The Conv, MatMul/Gemm and Softmax
    dispatchers run their parallel loop only with more than one thread (a parallel region on
    one thread costs a few microseconds for nothing); the blocking never depends on it, so
    neither do the results."""
    from numba.np.ufunc.parallel import _launch_threads
    _launch_threads()

    def codegen(context, builder, signature, args):
        fnty = llvm_ir.FunctionType(llvm_ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "get_num_threads")
        return builder.call(fn, [])

    return types.intp(), codegen


@njit(**_JIT)
def _gemm_rowacc_cpu(a, a0, sam, sak, b, b0, sbk, M, K, N, out, o0, som, acc):
    """CPU only: out[o0 + m*som + n] = sum_k a[a0 + m*sam + k*sak] * b[b0 + k*sbk + n]
    (k ascending from 0.0f), for m < M, n < N; B rows contiguous. ``acc`` is
    the scratch from _gemm_scratch. Columns go in tiles, rows four at a
    time, k two at a time: ``acc = (acc + a_k*b_k) + a_k1*b_k1`` is exactly
    two sequential steps (no FMA, no reassociation without fastmath). Slices
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
                        r0[n] = (r0[n] + v00 * x0) + v01 * x1
                        r1[n] = (r1[n] + v10 * x0) + v11 * x1
                        r2[n] = (r2[n] + v20 * x0) + v21 * x1
                        r3[n] = (r3[n] + v30 * x0) + v31 * x1
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
                        r0[n] = r0[n] + v00 * x0
                        r1[n] = r1[n] + v10 * x0
                        r2[n] = r2[n] + v20 * x0
                        r3[n] = r3[n] + v30 * x0
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
                        r0[n] = (r0[n] + v00 * bk0[n]) + v01 * bk1[n]
                    k += 2
                if k < K:
                    v00 = a[ab + k * sak]
                    st = b0 + k * sbk + n0
                    bk0 = b[st:st + nt]
                    for n in range(nt):
                        r0[n] = r0[n] + v00 * bk0[n]
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


def _mk_tile_of(R):
    """The register micro-kernel for blocks of ``R`` rows (see _mk_tile)."""

    def tile(typingctx, a, ao, sam, sak, b, bo, sbk, K, out, oo, som, resume):
        return _mk_tile_codegen(R, a, ao, sam, sak, b, bo, sbk, K, out, oo, som, resume)

    tile.__name__ = tile.__qualname__ = f"_mk_tile_r{R}"   # one name per row count
    return intrinsic(tile)


def _mk_tile_codegen(_MK_R, a, ao, sam, sak, b, bo, sbk, K, out, oo, som, resume):
    """CPU only, compiled inline: for r < _MK_R, j < _MK_W,
    out[oo + r*som + j] = acc + sum_k a[ao + r*sam + k*sak] * b[bo + k*sbk + j]
    with k ascending and the sum taken step by step (acc = acc + a*b: fmul,
    then fadd, each rounded to float32; LLVM fuses neither without
    fast-math/contract flags, so no FMA); acc = 0.0f, or the value already in
    out when ``resume`` != 0 (a later k block). The _MK_R x _MK_W accumulators
    live in registers for the whole k loop. No bounds checks: the caller
    guarantees the ranges."""
    sig = types.void(a, ao, sam, sak, b, bo, sbk, K, out, oo, som, resume)

    def codegen(context, builder, signature, args):
        a_, ao_, sam_, sak_, b_, bo_, sbk_, K_, out_, oo_, som_, resume_ = args
        ap = context.make_array(signature.args[0])(context, builder, a_).data
        bp = context.make_array(signature.args[4])(context, builder, b_).data
        op = context.make_array(signature.args[8])(context, builder, out_).data
        i32 = llvm_ir.IntType(32)
        i64 = llvm_ir.IntType(64)
        vt = llvm_ir.VectorType(llvm_ir.FloatType(), _MK_W)
        undef = llvm_ir.Constant(vt, llvm_ir.Undefined)
        splat = llvm_ir.Constant(llvm_ir.VectorType(i32, _MK_W), [0] * _MK_W)

        def vptr(base, idx):
            return builder.bitcast(builder.gep(base, [idx]), vt.as_pointer())

        def out_row(r):
            return builder.add(oo_, builder.mul(llvm_ir.Constant(i64, r), som_))

        accs = []
        for r in range(_MK_R):
            slot = cgutils.alloca_once(builder, vt)  # promoted to a register by mem2reg
            builder.store(llvm_ir.Constant(vt, [0.0] * _MK_W), slot)
            accs.append(slot)
        with builder.if_then(builder.icmp_signed("!=", resume_, llvm_ir.Constant(resume_.type, 0))):
            for r in range(_MK_R):
                builder.store(builder.load(vptr(op, out_row(r)), align=4), accs[r])
        with cgutils.for_range(builder, K_) as loop:
            k = loop.index
            bv = builder.load(vptr(bp, builder.add(bo_, builder.mul(k, sbk_))), align=4)
            ak = builder.add(ao_, builder.mul(k, sak_))
            for r in range(_MK_R):
                av = builder.load(builder.gep(ap, [builder.add(ak, builder.mul(llvm_ir.Constant(i64, r), sam_))]))
                av = builder.shuffle_vector(builder.insert_element(undef, av, llvm_ir.Constant(i32, 0)), undef, splat)
                builder.store(builder.fadd(builder.load(accs[r]), builder.fmul(av, bv)), accs[r])
        for r in range(_MK_R):
            builder.store(builder.load(accs[r]), vptr(op, out_row(r)), align=4)
        return context.get_dummy_value()

    return sig, codegen


_mk_tile = _mk_tile_of(_MK_R)
_mk_tile2 = _mk_tile_of(_MK_R2)


@intrinsic
def _mk_copy(typingctx, src, so, dst, do):
    """CPU only: dst[do:do + _MK_W] = src[so:so + _MK_W] as one vector load and store."""
    sig = types.void(src, so, dst, do)

    def codegen(context, builder, signature, args):
        s_, so_, d_, do_ = args
        sp = context.make_array(signature.args[0])(context, builder, s_).data
        dp = context.make_array(signature.args[2])(context, builder, d_).data
        vt = llvm_ir.VectorType(llvm_ir.FloatType(), _MK_W)
        v = builder.load(builder.bitcast(builder.gep(sp, [so_]), vt.as_pointer()), align=4)
        builder.store(v, builder.bitcast(builder.gep(dp, [do_]), vt.as_pointer()), align=4)
        return context.get_dummy_value()

    return sig, codegen


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
def _gemm_scratch(K, N):
    """Accumulator scratch for _gemm_rowacc_cpu (4 rows of a column tile, padded)."""
    t = min(_GEMM_TILE, max(N, 1))
    return np.zeros((4, t + _GEMM_PAD), dtype=np.float32)


@njit(**_JIT)
def _transpose_into(b, b0, sbk, sbn, K, N, dst):
    """dst[k*N + n] = b[b0 + k*sbk + n*sbn], in 32x32 blocks (pure data movement)."""
    for k0 in range(0, K, 32):
        k1 = min(K, k0 + 32)
        for n0 in range(0, N, 32):
            n1 = min(N, n0 + 32)
            for n in range(n0, n1):
                for k in range(k0, k1):
                    dst[k * N + n] = b[b0 + k * sbk + n * sbn]


@njit(**_PAR)
def _mm_batches_par(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta, nb):
    """Batches of _mm_cpu in parallel (each batch writes its own M x N block; scratch per batch)."""
    for bu in prange(nb):
        bt = np.int64(bu)  # prange's index may be unsigned; uint64 with int64 promotes to float64
        acc = _gemm_scratch(K, N)
        bt_buf = np.empty(K * N if sbn != 1 else 1, dtype=np.float32)
        _mm_batch(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta, bt, acc,
                  bt_buf)


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_PAR)
def _mm_blocks_par(a, b, out, c, M, K, N, sam, sak, sbk, scm, scn, epi, alpha, beta, nrb, ncb):
    """One product (no batch, B rows contiguous) in blocks of _MM_PAR_ROWS rows x
    _MM_PAR_COLS columns in parallel; each block is a _gemm_rows_cpu sub-product (its
    elements get the same sequence as in the whole one) plus the Gemm epilogue."""
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


@cpu_kernel
def _mm_cpu(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta):
    MN = M * N
    nb = out.shape[0] // MN if MN > 0 else 0
    nrb = (M + _MM_PAR_ROWS - 1) // _MM_PAR_ROWS
    ncb = (N + _MM_PAR_COLS - 1) // _MM_PAR_COLS
    par = _num_threads() > 1   # one thread: the serial loops (a parallel region costs ~3-5 us for nothing)
    if nb > 1 and nb * M * K * N >= _PAR_WORK and par:
        _mm_batches_par(a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta, nb)
    elif nb == 1 and sbn == 1 and nrb * ncb > 1 and M * K * N >= _PAR_WORK and par:
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


@njit(**_JIT)
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


@njit(**_PAR)
def _mm_packed_par(a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta, NP):
    for iu in prange(NP):
        _mm_packed_panel(np.int64(iu), a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta)


@njit(**_JIT)
def mm_packed_cpu(a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta):
    """out (M x N, contiguous) = A (rows m*sam, columns k*sak) times a constant B packed by
    mm_pack_b, then the Gemm epilogue (epi 0: none; see nn._gemm_epilogue): the MatMul/Gemm
    CPU path for an initializer B, bitwise the generated kernel's results. Panels run in
    parallel (each writes its own columns) above _PAR_WORK multiply-adds, with more than one
    numba thread."""
    NP = (N + _MK_W - 1) // _MK_W
    if M <= 0 or N <= 0:
        return
    if NP > 1 and M * K * N >= _PAR_WORK and _num_threads() > 1:
        _mm_packed_par(a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta, NP)
    else:
        for p in range(NP):
            _mm_packed_panel(p, a, sam, sak, bp, M, K, N, out, c, scm, scn, epi, alpha, beta)


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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
                    acc[j] += wv * src[j]
    _plane_out(out, q, OH, OW, acc, Wq, has_b, bias, m)


@njit(**_PAR)
def _conv_direct_par(x, w, bias, has_b, p, out, planes):
    for qu in prange(planes):
        _conv_direct_plane(np.int64(qu), x, w, bias, has_b, p, out)


@njit(**_JIT)
def _conv_direct_cpu(x, w, bias, has_b, p, out):
    """CPU only: Conv tap by tap over whole output planes, for depthwise and grouped Conv with
    few output channels per group (where im2col + GEMM has one or two rows). Output planes
    (n, m) run in parallel when the Conv is large (_PAR_WORK). Each input plane is first copied into zero-padded scratch, split
    into sh x sw phases (row r, column c of the padded plane go to phase (r % sh, c % sw) at
    (r // sh, c // sw)), so that every tap reads one phase contiguously; a tap in the padding
    multiplies 0.0f as _conv_item's ``xv`` does (w * 0.0f is added, as there). For each tap
    (c, kh, kw) ascending every output element of the plane takes ``acc += w * xv``, then
    + bias: the generated sequence per element. Planes are walked "wide" (Wq columns per
    output row; the extra columns are discarded), one contiguous loop per tap."""
    N, C, H, W, M, KH, KW, OH = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    OW, sh, sw, dh, dw, pt, pl, G = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    Cg = C // G
    if OH <= 0 or OW <= 0:
        return
    if N * M * OH * OW * Cg * KH * KW >= _PAR_WORK and N * M > 1 and _num_threads() > 1:
        _conv_direct_par(x, w, bias, has_b, p, out, N * M)
    else:
        for q in range(N * M):
            _conv_direct_plane(q, x, w, bias, has_b, p, out)


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_PAR)
def _conv_gemm_par(x, w, bias, has_b, p, out, T, ntiles, RB, nr, direct, nblocks):
    for iu in prange(nblocks):
        _conv_gemm_block(np.int64(iu), x, w, bias, has_b, p, out, T, ntiles, RB, nr, direct)


@njit(**_JIT)
def _conv_gemm(x, w, bias, has_b, p, out):
    """CPU only: Conv as im2col + the blocked GEMM in blocks of (image, group, column tile of
    at most _GEMM_TILE output pixels, block of output channels), in parallel when the Conv is
    large (_PAR_WORK); each block im2cols its own tile into a K x T scratch that stays in
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
    if N * M * NN * Cg * KH * KW >= _PAR_WORK and _num_threads() > 1:
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


def _mk_ix_of(R):
    """The register micro-kernel of _mk_tile with B rows at a table of offsets (see _mk_ix_codegen)."""

    def tile(typingctx, a, ao, sam, sak, b, bo, koff, ko, K, out, oo, som, resume):
        return _mk_ix_codegen(R, a, ao, sam, sak, b, bo, koff, ko, K, out, oo, som, resume)

    tile.__name__ = tile.__qualname__ = f"_mk_ix_r{R}"
    return intrinsic(tile)


def _mk_ix_codegen(R, a, ao, sam, sak, b, bo, koff, ko, K, out, oo, som, resume):
    """CPU only, compiled inline: _mk_tile_codegen's micro-kernel (R rows x _MK_W columns of
    accumulators in registers, acc = acc + a*b step by step with k ascending: fmul then fadd,
    each rounded, no FMA), except that B's row k starts at b[bo + koff[ko + k]] (an
    indirect GEMM: Conv taps read straight from the padded input). No bounds checks: the
    caller guarantees the ranges."""
    sig = types.void(a, ao, sam, sak, b, bo, koff, ko, K, out, oo, som, resume)

    def codegen(context, builder, signature, args):
        a_, ao_, sam_, sak_, b_, bo_, koff_, ko_, K_, out_, oo_, som_, resume_ = args
        ap = context.make_array(signature.args[0])(context, builder, a_).data
        bp = context.make_array(signature.args[4])(context, builder, b_).data
        kp = context.make_array(signature.args[6])(context, builder, koff_).data
        op = context.make_array(signature.args[9])(context, builder, out_).data
        i32 = llvm_ir.IntType(32)
        i64 = llvm_ir.IntType(64)
        vt = llvm_ir.VectorType(llvm_ir.FloatType(), _MK_W)
        undef = llvm_ir.Constant(vt, llvm_ir.Undefined)
        splat = llvm_ir.Constant(llvm_ir.VectorType(i32, _MK_W), [0] * _MK_W)

        def vptr(base, idx):
            return builder.bitcast(builder.gep(base, [idx]), vt.as_pointer())

        def out_row(r):
            return builder.add(oo_, builder.mul(llvm_ir.Constant(i64, r), som_))

        accs = []
        for r in range(R):
            slot = cgutils.alloca_once(builder, vt)
            builder.store(llvm_ir.Constant(vt, [0.0] * _MK_W), slot)
            accs.append(slot)
        with builder.if_then(builder.icmp_signed("!=", resume_, llvm_ir.Constant(resume_.type, 0))):
            for r in range(R):
                builder.store(builder.load(vptr(op, out_row(r)), align=4), accs[r])
        with cgutils.for_range(builder, K_) as loop:
            k = loop.index
            kv = builder.load(builder.gep(kp, [builder.add(ko_, k)]))
            bv = builder.load(vptr(bp, builder.add(bo_, kv)), align=4)
            ak = builder.add(ao_, builder.mul(k, sak_))
            for r in range(R):
                av = builder.load(builder.gep(ap, [builder.add(ak, builder.mul(llvm_ir.Constant(i64, r), sam_))]))
                av = builder.shuffle_vector(builder.insert_element(undef, av, llvm_ir.Constant(i32, 0)), undef, splat)
                builder.store(builder.fadd(builder.load(accs[r]), builder.fmul(av, bv)), accs[r])
        for r in range(R):
            builder.store(builder.load(accs[r]), vptr(op, out_row(r)), align=4)
        return context.get_dummy_value()

    return sig, codegen


_mk_ix = _mk_ix_of(_MK_R)
_mk_ix2 = _mk_ix_of(2)
_mk_ix1 = _mk_ix_of(1)


@njit(**_JIT)
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


@njit(**_JIT)
def _conv_wide_ok(p):
    """Whether _conv_wide suits a 2-D Conv: its garbage columns cost at most _CW_WASTE."""
    C, KH, KW, OH, OW, G = p[1], p[5], p[6], p[7], p[8], p[15]
    if C // G <= 0 or OH <= 0 or OW <= 0 or KH * KW <= 1:
        return False
    Hq, Wq, PH, NWp, S = _conv_wide_dims(p)
    return NWp <= _CW_WASTE * OH * OW


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_PAR)
def _conv_wide_par(x, xq, w, bias, has_b, p, out, koff, nwt, nch, nblocks, plan):
    for cu in prange(nch):
        _conv_wide_pack(x, p, xq, np.int64(cu), plan)
    for iu in prange(nblocks):
        _conv_wide_block(np.int64(iu), xq, w, bias, has_b, p, out, koff, nwt)


@njit(**_JIT)
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
    if N * M * OH * OW * koff.shape[0] >= _PAR_WORK and _num_threads() > 1:
        _conv_wide_par(x, xq, w, bias, has_b, p, out, koff, nwt, N * C, nblocks, plan)
    else:
        for ch in range(N * C):
            _conv_wide_pack(x, p, xq, ch, plan)
        for it in range(nblocks):
            _conv_wide_block(it, xq, w, bias, has_b, p, out, koff, nwt)


@njit(**_JIT)
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
            a0 += r0[k] * xv
            a1 += r1[k] * xv
            a2 += r2[k] * xv
            a3 += r3[k] * xv
            a4 += r4[k] * xv
            a5 += r5[k] * xv
            a6 += r6[k] * xv
            a7 += r7[k] * xv
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
                a += rr[k] * xs[k]
            if has_b:
                a = a + bias[m + r]
            out[ob + r * NN] = a


@njit(**_PAR)
def _conv_gemv_par(x, w, bias, has_b, p, out, nblocks):
    for bu in prange(nblocks):
        _conv_gemv_block(np.int64(bu), x, w, bias, has_b, p, out)


@njit(**_JIT)
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
    if N * M * H * W * (C // G) >= _PAR_WORK and nblocks > 1 and _num_threads() > 1:
        _conv_gemv_par(x, w, bias, has_b, p, out, nblocks)
    else:
        for b in range(nblocks):
            _conv_gemv_block(b, x, w, bias, has_b, p, out)


# --- Conv with packed weights -------------------------------------------------------------
# The paths below take the weights in a layout of their own (conv_pack: once per node when
# the weight is an initializer, else per call in _conv_cpu). Each output element still gets
# the generated kernel's sequence: acc = 0.0f; acc = acc + w*x per tap (c, kh, kw) ascending,
# fmul then fadd, each rounded to float32 (LLVM fuses neither without fast-math flags);
# padding taps multiply a 0.0f of a zero-padded copy; then acc + bias. The vectors run
# across output elements (pixels or channels); none splits or reorders a sum.


_V8 = llvm_ir.VectorType(llvm_ir.FloatType(), 8)
_I32 = llvm_ir.IntType(32)
_I64 = llvm_ir.IntType(64)


def _c64(v):
    return llvm_ir.Constant(_I64, v)


def _shuf(builder, a, b, idx):
    return builder.shuffle_vector(a, b, llvm_ir.Constant(llvm_ir.VectorType(_I32, len(idx)), idx))


def _splat(builder, v, n):
    vt = llvm_ir.VectorType(llvm_ir.FloatType(), n)
    undef = llvm_ir.Constant(vt, llvm_ir.Undefined)
    return _shuf(builder, builder.insert_element(undef, v, llvm_ir.Constant(_I32, 0)), undef, [0] * n)


def _data(context, builder, ty, val):
    return context.make_array(ty)(context, builder, val).data


def _vptr(builder, base, idx, vt=_V8):
    return builder.bitcast(builder.gep(base, [idx]), vt.as_pointer())


def _acc_slots(builder, vt, n):
    """n accumulator vectors at 0.0f (allocas that mem2reg turns into registers)."""
    slots = []
    for _ in range(n):
        slot = cgutils.alloca_once(builder, vt)
        builder.store(llvm_ir.Constant(vt, [0.0] * vt.count), slot)
        slots.append(slot)
    return slots


def _mac(builder, slot, a, b):
    """slot = slot + a*b: an fmul, then an fadd (each rounded; no contraction flags, no FMA)."""
    builder.store(builder.fadd(builder.load(slot), builder.fmul(a, b)), slot)


def _transpose8(builder, rows):
    """Eight <8 x float> rows to their eight columns (unpck/shufps/perm2f128 shuffles; data
    movement only)."""
    t = []
    for i in range(0, 8, 2):
        t.append(_shuf(builder, rows[i], rows[i + 1], [0, 8, 1, 9, 4, 12, 5, 13]))
        t.append(_shuf(builder, rows[i], rows[i + 1], [2, 10, 3, 11, 6, 14, 7, 15]))
    s = [None] * 8
    for h, (a, b) in enumerate(((0, 2), (4, 6))):
        s[4 * h] = _shuf(builder, t[a], t[b], [0, 1, 8, 9, 4, 5, 12, 13])
        s[4 * h + 1] = _shuf(builder, t[a], t[b], [2, 3, 10, 11, 6, 7, 14, 15])
        s[4 * h + 2] = _shuf(builder, t[a + 1], t[b + 1], [0, 1, 8, 9, 4, 5, 12, 13])
        s[4 * h + 3] = _shuf(builder, t[a + 1], t[b + 1], [2, 3, 10, 11, 6, 7, 14, 15])
    cols = [None] * 8
    for j in range(4):
        cols[j] = _shuf(builder, s[j], s[4 + j], [0, 1, 2, 3, 8, 9, 10, 11])
        cols[4 + j] = _shuf(builder, s[j], s[4 + j], [4, 5, 6, 7, 12, 13, 14, 15])
    return cols


def _store_first(builder, vec, n, base, idx):
    """The first n (<= 8) lanes of an <8 x float> at base[idx:idx + n] (4-, 2- and 1-lane stores)."""
    off = 0
    for w in (4, 2, 1):
        while n - off >= w:
            at = builder.add(idx, _c64(off))
            if w == 1:
                builder.store(builder.extract_element(vec, llvm_ir.Constant(_I32, off)), builder.gep(base, [at]))
            else:
                vt = llvm_ir.VectorType(llvm_ir.FloatType(), w)
                builder.store(_shuf(builder, vec, vec, list(range(off, off + w))), _vptr(builder, base, at, vt),
                              align=4)
            off += w


def _true(builder, v):
    return builder.icmp_signed("!=", v, llvm_ir.Constant(v.type, 0))


@intrinsic
def _tr8_scatter(typingctx, src, soff, so, dst, dpos, do):
    """CPU only: dst[dpos[do + j] + i] = src[soff[i] + so + j] for i, j < 8: eight rows of eight
    floats transposed in registers, each column stored where the table says (data movement)."""
    sig = types.void(src, soff, so, dst, dpos, do)

    def codegen(context, builder, signature, args):
        s_, soff_, so_, d_, dpos_, do_ = args
        sp = _data(context, builder, signature.args[0], s_)
        op = _data(context, builder, signature.args[1], soff_)
        dp = _data(context, builder, signature.args[3], d_)
        pp = _data(context, builder, signature.args[4], dpos_)
        rows = [builder.load(_vptr(builder, sp, builder.add(builder.load(builder.gep(op, [_c64(i)])), so_)), align=4)
                for i in range(8)]
        cols = _transpose8(builder, rows)
        for j in range(8):
            d = builder.load(builder.gep(pp, [builder.add(do_, _c64(j))]))
            builder.store(cols[j], _vptr(builder, dp, d), align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _dw8_tile(typingctx, xs, pofs, po, toff, T, w8, wo, bias8, bo, has_b, out, oo, ost, nv):
    """CPU only, compiled inline: depthwise Conv for 8 output pixels x 8 output channels. xs
    holds the channels' zero-padded planes interleaved (8 floats per position, one per
    channel); pixel r's window starts at xs[pofs[po + r]], tap t at toff[t] from it, and
    w8[wo + 8t : +8] are the 8 channels' weights of tap t. For each pixel, in registers:
    acc = 0.0f, then acc = acc + w*x for t ascending (an fmul, then an fadd), then + bias
    (bias8[bo : +8]) when has_b. The 8 x 8 block is transposed in registers and channel i's 8
    pixels are stored at out[oo + i*ost : +8], for i < nv. No bounds checks."""
    sig = types.void(xs, pofs, po, toff, T, w8, wo, bias8, bo, has_b, out, oo, ost, nv)

    def codegen(context, builder, signature, args):
        xs_, pofs_, po_, toff_, T_, w8_, wo_, b8_, bo_, hb_, out_, oo_, ost_, nv_ = args
        xp = _data(context, builder, signature.args[0], xs_)
        pp = _data(context, builder, signature.args[1], pofs_)
        tp = _data(context, builder, signature.args[3], toff_)
        wp = _data(context, builder, signature.args[5], w8_)
        bp = _data(context, builder, signature.args[7], b8_)
        op = _data(context, builder, signature.args[10], out_)
        bases = [builder.gep(xp, [builder.load(builder.gep(pp, [builder.add(po_, _c64(r))]))]) for r in range(8)]
        accs = _acc_slots(builder, _V8, 8)
        with cgutils.for_range(builder, T_) as loop:
            t = loop.index
            to = builder.load(builder.gep(tp, [t]))
            wv = builder.load(_vptr(builder, wp, builder.add(wo_, builder.mul(t, _c64(8)))), align=4)
            for r in range(8):
                _mac(builder, accs[r], wv, builder.load(_vptr(builder, bases[r], to), align=4))
        with builder.if_then(_true(builder, hb_)):
            bv = builder.load(_vptr(builder, bp, bo_), align=4)
            for r in range(8):
                builder.store(builder.fadd(builder.load(accs[r]), bv), accs[r])
        cols = _transpose8(builder, [builder.load(a) for a in accs])
        for i in range(8):
            with builder.if_then(builder.icmp_signed(">", nv_, _c64(i))):
                builder.store(cols[i], _vptr(builder, op, builder.add(oo_, builder.mul(ost_, _c64(i)))), align=4)
        return context.get_dummy_value()

    return sig, codegen


#: blocks of a parallel depthwise Conv per chunk: fixed chunks of (image, 8 channels) blocks,
#: each chunk with its own scratch (the chunking does not depend on the thread count)
_DW_CHUNKS = 16


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_PAR)
def _conv_dw8_par(x, w8, bias, has_b, p, out, toff, pofs, ipos, nblk, nch):
    for cu in prange(nch):
        c = np.int64(cu)
        xs = _dw8_scratch(p)
        _dw8_blocks(c * nblk // nch, (c + 1) * nblk // nch, x, w8, bias, has_b, p, out, xs, toff, pofs, ipos)


@njit(**_JIT)
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
    if N * M * OH * OW * KH * KW >= _PAR_WORK and nblk > 1 and _num_threads() > 1:
        _conv_dw8_par(x, w8, bias, has_b, p, out, toff, pofs, ipos, nblk, min(nblk, _DW_CHUNKS))
    else:
        xs = _dw8_scratch(p)
        _dw8_blocks(0, nblk, x, w8, bias, has_b, p, out, xs, toff, pofs, ipos)


def _mkr_of(R, NW):
    """A register micro-kernel of R rows x NW columns with A packed k-major (see _mkr_codegen)."""

    def tile(typingctx, a, ao, b, bo, sbk, K, out, oo, som, resume, bias, bo2, fin):
        return _mkr_codegen(R, NW, a, ao, b, bo, sbk, K, out, oo, som, resume, bias, bo2, fin)

    tile.__name__ = tile.__qualname__ = f"_mkr_r{R}_w{NW}"
    return intrinsic(tile)


def _mkr_codegen(R, NW, a, ao, b, bo, sbk, K, out, oo, som, resume, bias, bo2, fin):
    """CPU only, compiled inline: for r < R, j < NW,
    out[oo + r*som + j] = acc + sum_k a[ao + k*R + r] * b[bo + k*sbk + j], k ascending, the
    sum taken step by step in registers (acc = acc + a*b: fmul then fadd, each rounded; no
    FMA); acc = 0.0f, or out's value when ``resume`` != 0 (a later k block); then, when
    ``fin`` != 0, acc + bias[bo2 + r] (the Conv's bias, after the last k block). A is packed
    R rows at a time, k-major (conv_pack), so its broadcasts read one stream. No bounds
    checks: the caller guarantees the ranges."""
    sig = types.void(a, ao, b, bo, sbk, K, out, oo, som, resume, bias, bo2, fin)
    vt = llvm_ir.VectorType(llvm_ir.FloatType(), NW)

    def codegen(context, builder, signature, args):
        a_, ao_, b_, bo_, sbk_, K_, out_, oo_, som_, res_, bias_, bo2_, fin_ = args
        abase = builder.gep(_data(context, builder, signature.args[0], a_), [ao_])
        bp = _data(context, builder, signature.args[2], b_)
        op = _data(context, builder, signature.args[6], out_)
        biasp = _data(context, builder, signature.args[10], bias_)

        def orow(r):
            return _vptr(builder, op, builder.add(oo_, builder.mul(_c64(r), som_)), vt)

        accs = _acc_slots(builder, vt, R)
        with builder.if_then(_true(builder, res_)):
            for r in range(R):
                builder.store(builder.load(orow(r), align=4), accs[r])
        with cgutils.for_range(builder, K_) as loop:
            k = loop.index
            bv = builder.load(_vptr(builder, bp, builder.add(bo_, builder.mul(k, sbk_)), vt), align=4)
            ak = builder.gep(abase, [builder.mul(k, _c64(R))])
            for r in range(R):
                _mac(builder, accs[r], _splat(builder, builder.load(builder.gep(ak, [_c64(r)])), NW), bv)
        with builder.if_then(_true(builder, fin_)):
            for r in range(R):
                bb = _splat(builder, builder.load(builder.gep(biasp, [builder.add(bo2_, _c64(r))])), NW)
                builder.store(builder.fadd(builder.load(accs[r]), bb), accs[r])
        for r in range(R):
            builder.store(builder.load(accs[r]), orow(r), align=4)
        return context.get_dummy_value()

    return sig, codegen


_PW_R = 6          # rows (output channels) per pointwise block, as _MK_R
_mkr6 = _mkr_of(_PW_R, _MK_W)
_mkr6n8 = _mkr_of(_PW_R, 8)
#: output channels and pixels per parallel item of _conv_pw (fixed; the last item of each
#: dimension takes the remainder, so that overlapping blocks always share an item)
_PW_ROWS = 8 * _PW_R
_PW_COLS = 16 * _MK_W


@njit(**_JIT)
def _pw_item(ap, ab, Mg, K, x, xb, NN, out, ob, bias, mb, has_b, r0, r1, c0, c1, bbuf):
    """Row blocks r0 <= rb < r1 (block rb: output channels from min(rb*_PW_R, Mg - _PW_R) of
    the group) x pixels c0 <= j < c1 (c1 - c0 >= 8) of a pointwise Conv's group: out[ob +
    m*NN + j] = sum_k A[m, k] * x[xb + k*NN + j] (+ bias[mb + m]). Panels of 16 pixels, the
    last one overlapping the previous ones (or 8 wide: the same values again); per panel
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
        if w >= _MK_W:
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
                        if nw == _MK_W:
                            _mk_copy(x, s, bbuf, k * _MK_W)
                        else:
                            for jj in range(8):
                                bbuf[k * 8 + jj] = x[s + jj]
                    bsrc = bbuf
                    bo = 0
                    sb = nw
                for blk in range(ra, rb):
                    m0 = min(blk * _PW_R, Mg - _PW_R)
                    if nw == _MK_W:
                        _mkr6(ap, ab + (blk * K + k0) * _PW_R, bsrc, bo, sb, kc, out, ob + m0 * NN + jp, NN, k0,
                              bias, mb + m0, fin)
                    else:
                        _mkr6n8(ap, ab + (blk * K + k0) * _PW_R, bsrc, bo, sb, kc, out, ob + m0 * NN + jp, NN, k0,
                                bias, mb + m0, fin)
        j = jp + nw


@njit(**_JIT)
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
    bbuf = np.empty(min(_MK_KC, Cg) * _MK_W if NN % 64 == 0 else 1, dtype=np.float32)
    _pw_item(ap, g * nrb * Cg * _PW_R, Mg, Cg, x, (n * C + g * Cg) * NN, NN, out, (n * M + g * Mg) * NN, bias,
             g * Mg, has_b, r0, r1, c0, c1, bbuf)


@njit(**_PAR)
def _conv_pw_par(x, ap, bias, has_b, p, out, nrc, ncc, nit):
    for iu in prange(nit):
        _pw_do(np.int64(iu), x, ap, bias, has_b, p, out, nrc, ncc)


@njit(**_JIT)
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
    if N * M * NN * (C // G) >= _PAR_WORK and nit > 1 and _num_threads() > 1:
        _conv_pw_par(x, ap, bias, has_b, p, out, nrc, ncc, nit)
    else:
        for it in range(nit):
            _pw_do(it, x, ap, bias, has_b, p, out, nrc, ncc)


def _mkpx_of(R, NW):
    """The pixel-tile micro-kernel of R output pixels x NW output channels (see _mkpx_codegen)."""

    def tile(typingctx, x, xo, pofs, po, koff, ko, K, b, bo, acc, ao, resume, fin, bias, bo2, has_b, out, oo, P):
        return _mkpx_codegen(R, NW, x, xo, pofs, po, koff, ko, K, b, bo, acc, ao, resume, fin, bias, bo2, has_b,
                             out, oo, P)

    tile.__name__ = tile.__qualname__ = f"_mkpx_r{R}_w{NW}"
    return intrinsic(tile)


def _mkpx_codegen(R, NW, x, xo, pofs, po, koff, ko, K, b, bo, acc, ao, resume, fin, bias, bo2, has_b, out, oo,
                  P):
    """CPU only, compiled inline: R output pixels x NW output channels of a Conv as an
    indirect GEMM with the pixels as rows. Pixel r's tap k is the input value
    x[xo + pofs[po + r] + koff[ko + k]] (broadcast), channel j's weight of tap k is
    b[bo + k*NW + j] (packed by conv_pack); in registers, acc = 0.0f (or the partial sums at
    acc[ao + r*NW : +NW] when ``resume`` != 0), acc = acc + w*x per k ascending (fmul then
    fadd, each rounded; no FMA; the generated kernel's operand order). When ``fin`` != 0 (the
    last k block), + bias[bo2 + j] (when has_b), and the tile is transposed in registers and
    stored to the output planes: out[oo + j*P + r]; else the partial sums go back to ``acc``.
    R <= 8, NW a multiple of 8. No bounds checks."""
    sig = types.void(x, xo, pofs, po, koff, ko, K, b, bo, acc, ao, resume, fin, bias, bo2, has_b, out, oo, P)
    vt = llvm_ir.VectorType(llvm_ir.FloatType(), NW)

    def codegen(context, builder, signature, args):
        x_, xo_, pofs_, po_, koff_, ko_, K_, b_, bo_, acc_, ao_, res_, fin_, bias_, bo2_, hb_, out_, oo_, P_ = args
        xp = builder.gep(_data(context, builder, signature.args[0], x_), [xo_])
        pp = _data(context, builder, signature.args[2], pofs_)
        kbase = builder.gep(_data(context, builder, signature.args[4], koff_), [ko_])
        bbase = builder.gep(_data(context, builder, signature.args[7], b_), [bo_])
        sp = _data(context, builder, signature.args[9], acc_)
        biasp = _data(context, builder, signature.args[13], bias_)
        op = _data(context, builder, signature.args[16], out_)

        def srow(r):
            return _vptr(builder, sp, builder.add(ao_, _c64(r * NW)), vt)

        bases = [builder.gep(xp, [builder.load(builder.gep(pp, [builder.add(po_, _c64(r))]))]) for r in range(R)]
        accs = _acc_slots(builder, vt, R)
        with builder.if_then(_true(builder, res_)):
            for r in range(R):
                builder.store(builder.load(srow(r), align=4), accs[r])
        with cgutils.for_range(builder, K_) as loop:
            k = loop.index
            kv = builder.load(builder.gep(kbase, [k]))
            bv = builder.load(_vptr(builder, bbase, builder.mul(k, _c64(NW)), vt), align=4)
            for r in range(R):
                _mac(builder, accs[r], bv, _splat(builder, builder.load(builder.gep(bases[r], [kv])), NW))
        with builder.if_else(_true(builder, fin_)) as (then, otherwise):
            with then:
                with builder.if_then(_true(builder, hb_)):
                    bv = builder.load(_vptr(builder, biasp, bo2_, vt), align=4)
                    for r in range(R):
                        builder.store(builder.fadd(builder.load(accs[r]), bv), accs[r])
                vals = [builder.load(a) for a in accs]
                undef = llvm_ir.Constant(_V8, llvm_ir.Undefined)
                for h in range(NW // 8):
                    rows = [_shuf(builder, v, v, list(range(8 * h, 8 * h + 8))) for v in vals]
                    cols = _transpose8(builder, rows + [undef] * (8 - R))
                    for j in range(8):
                        _store_first(builder, cols[j], R, op, builder.add(oo_, builder.mul(P_, _c64(8 * h + j))))
            with otherwise:
                for r in range(R):
                    builder.store(builder.load(accs[r]), srow(r), align=4)
        return context.get_dummy_value()

    return sig, codegen


_PX_R = 6         # output pixels per tile
_PX_W = _MK_W     # output channels per tile
_mkpx6 = _mkpx_of(_PX_R, _PX_W)


@njit(**_JIT)
def _px_dims(p):
    """(Hp, Wp, direct) of _conv_px: the planes the taps read are the input's own (direct:
    no tap reaches the padding) or zero-padded copies Hp x Wp."""
    H, W, pt, pl = p[2], p[3], p[13], p[14]
    Hp, Wp = _dw8_dims(p)
    if pt == 0 and pl == 0 and Hp <= H and Wp <= W:
        return H, W, True
    return Hp, Wp, False


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_PAR)
def _conv_px_par(x, xp, bp, bias, has_b, p, out, pofs, koff, nch, nit, pad, nq, ntc):
    if pad:
        for cu in prange(nch):
            _px_pad(x, p, np.int64(cu), xp)
    for iu in prange(nit):
        _px_do(np.int64(iu), xp if pad else x, bp, bias, has_b, p, out, pofs, koff, nq, ntc)


@njit(**_JIT)
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
    if N * M * OH * OW * Cg * KH * KW >= _PAR_WORK and nit > 1 and _num_threads() > 1:
        _conv_px_par(x, xp, bp, bias, has_b, p, out, pofs, koff, N * C, nit, not direct, nq, ntc)
    else:
        if not direct:
            for ch in range(N * C):
                _px_pad(x, p, ch, xp)
        for it in range(nit):
            _px_do(it, x if direct else xp, bp, bias, has_b, p, out, pofs, koff, nq, ntc)


def _gemvt_of(NW):
    """NW output channels of a 1x1 Conv on a one-pixel map (see _gemvt_codegen)."""

    def tile(typingctx, x, xo, K, wt, wo, ld, bias, bo, has_b, out, oo):
        return _gemvt_codegen(NW, x, xo, K, wt, wo, ld, bias, bo, has_b, out, oo)

    tile.__name__ = tile.__qualname__ = f"_gemvt_w{NW}"
    return intrinsic(tile)


def _gemvt_codegen(NW, x, xo, K, wt, wo, ld, bias, bo, has_b, out, oo):
    """CPU only, compiled inline: out[oo + j] = sum_k wt[wo + k*ld + j] * x[xo + k] (k
    ascending from 0.0f, acc = acc + w*x in registers: fmul then fadd), then + bias[bo + j]
    when has_b, for j < NW (W^T packed by conv_pack: output channels contiguous)."""
    sig = types.void(x, xo, K, wt, wo, ld, bias, bo, has_b, out, oo)
    vt = llvm_ir.VectorType(llvm_ir.FloatType(), NW)

    def codegen(context, builder, signature, args):
        x_, xo_, K_, wt_, wo_, ld_, bias_, bo_, hb_, out_, oo_ = args
        xp = builder.gep(_data(context, builder, signature.args[0], x_), [xo_])
        wp = builder.gep(_data(context, builder, signature.args[3], wt_), [wo_])
        biasp = _data(context, builder, signature.args[6], bias_)
        op = _data(context, builder, signature.args[9], out_)
        slot = _acc_slots(builder, vt, 1)[0]
        with cgutils.for_range(builder, K_) as loop:
            k = loop.index
            _mac(builder, slot, builder.load(_vptr(builder, wp, builder.mul(k, ld_), vt), align=4),
                 _splat(builder, builder.load(builder.gep(xp, [k])), NW))
        with builder.if_then(_true(builder, hb_)):
            builder.store(builder.fadd(builder.load(slot), builder.load(_vptr(builder, biasp, bo_, vt), align=4)),
                          slot)
        builder.store(builder.load(slot), _vptr(builder, op, oo_, vt), align=4)
        return context.get_dummy_value()

    return sig, codegen


_gemvt64 = _gemvt_of(64)
_gemvt32 = _gemvt_of(32)
_gemvt8 = _gemvt_of(8)


@njit(**_JIT)
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


@njit(**_PAR)
def _conv_gemvt_par(x, wt, bias, has_b, p, out, NW, nbk, nit):
    for iu in prange(nit):
        _gemvt_do(np.int64(iu), x, wt, bias, has_b, p, out, NW, nbk)


@njit(**_JIT)
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
    if N * M * (C // G) >= _PAR_WORK and nit > 1 and _num_threads() > 1:
        _conv_gemvt_par(x, wt, bias, has_b, p, out, NW, nbk, nit)
    else:
        for it in range(nit):
            _gemvt_do(it, x, wt, bias, has_b, p, out, NW, nbk)


# which CPU path a Conv geometry takes (_conv_kind)
_CK_ITEM, _CK_DW, _CK_DIRECT, _CK_GEMVT, _CK_GEMV, _CK_PW, _CK_PX, _CK_WIDE, _CK_GEMM = range(9)
#: the paths whose weights conv_pack lays out (the others read the weight as it is)
_CK_PACKED = (_CK_DW, _CK_GEMVT, _CK_PW, _CK_PX)
CONV_PATHS = {_CK_ITEM: "item (3-D)", _CK_DW: "dw8", _CK_DIRECT: "direct", _CK_GEMVT: "gemvT 1x1",
              _CK_GEMV: "gemv 1x1", _CK_PW: "pw 1x1", _CK_PX: "px", _CK_WIDE: "wide", _CK_GEMM: "im2col+gemm"}


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


# --- MaxPool: rows of taps folded by selects --------------------------------------------
_NINF = np.float32(-np.inf)


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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
        zero = np.float32(0)
        while r + _GP_ROWS <= R:
            b = r * S
            x0 = x[b:b + S]
            x1 = x[b + S:b + 2 * S]
            x2 = x[b + 2 * S:b + 3 * S]
            x3 = x[b + 3 * S:b + 4 * S]
            x4 = x[b + 4 * S:b + 5 * S]
            x5 = x[b + 5 * S:b + 6 * S]
            x6 = x[b + 6 * S:b + 7 * S]
            x7 = x[b + 7 * S:b + 8 * S]
            s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
            for j in range(S):
                s0 += x0[j]
                s1 += x1[j]
                s2 += x2[j]
                s3 += x3[j]
                s4 += x4[j]
                s5 += x5[j]
                s6 += x6[j]
                s7 += x7[j]
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
_JITI = dict(_JIT, inline="always")


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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
def _softmax_padded_rows(x, out, r0, r1, A, is_log):
    """Rows r0 <= r < r1 through _softmax_padded4, four at a time. is_log comes in as a
    literal (numba compiles one variant per value, without the other's branch: the runtime
    flag cost ~20% of a 148 x 37 Softmax here; the other paths did not notice it, and a
    variant of each for both values doubled the Softmax compile time)."""
    e = np.empty(4 * ((A + 7) // 8 * 8), dtype=np.float32)
    for r in range(r0, r1, 4):
        _softmax_padded4(x, out, r, min(4, r1 - r), A, is_log, e)


@njit(**_PAR)
def _softmax_last_par(x, out, outer, A, is_log, nblk):
    """_softmax_last_rows over blocks of _SM_ROWS rows in parallel."""
    for iu in prange(nblk):
        it = np.int64(iu)
        r0 = it * _SM_ROWS
        _softmax_last_rows(x, out, r0, min(outer, r0 + _SM_ROWS), A, is_log)


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
        if nblk > 1 and outer * A >= _SM_PAR and _num_threads() > 1:
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
def _ln_sums8(x, b, nr, D):
    """Per row of _rows8_at(b, nr, D): s = 0.0f, s = s + x ascending (_ln_row's sum)."""
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


@njit(**_JIT)
def _ln_group_cpu(r0, nr, x, out, scale, bias, has_b, D, Df, eps, mean_out, inv_out, want_stats):
    """CPU only: rows r0 .. r0+nr-1 (1 <= nr <= _LN_G) of _ln_row for full-size scale/bias:
    each row's sum, mean = s / D, sum of squared deviations and inv = 1 / sqrt(q / D + eps)
    in _ln_row's order, the rows' chains interleaved (one row's chain is latency-bound);
    then ((x - mean) * inv) * scale (+ bias) row by row, on slices (vectorised)."""
    b = r0 * D
    s = _ln_sums8(x, b, nr, D)
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


@njit(**_JIT)
def _ln_groups_cpu(x, out, scale, bias, has_b, rows, D, Df, eps, mean_out, inv_out, want_stats):
    """CPU only: every row through _ln_group_cpu, _LN_G at a time."""
    for r in range(0, rows, _LN_G):
        _ln_group_cpu(r, min(_LN_G, rows - r), x, out, scale, bias, has_b, D, Df, eps, mean_out, inv_out,
                      want_stats)


@cpu_kernel
def _ln_cpu(x, out, scale, bias, has_b, rows, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out, inv_out,
            want_stats):
    """CPU only: _ln_row per row; with full-size scale and bias, _LN_G rows at a time
    (_ln_group_cpu). The models' case (a bias, no Mean/InvStdDev outputs) passes its flags as
    literals: numba compiles that variant without the other branches (~10% of a 64 x 128
    node); every other case shares one variant with runtime flags."""
    if sfull and (bfull or not has_b):
        if D > 0:
            if has_b and not want_stats:
                _ln_groups_cpu(x, out, scale, bias, True, rows, D, Df, eps, mean_out, inv_out, False)
            else:
                _ln_groups_cpu(x, out, scale, bias, has_b, rows, D, Df, eps, mean_out, inv_out, want_stats)
            return
    for r in range(rows):
        _ln_row(r, x, out, scale, bias, has_b, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out,
                inv_out, want_stats)


#: Erf: elements per block of the far-argument test (one AVX2 vector), and the share of such
#: blocks from which the whole input goes through erf_f32 instead (measured break-even: ~1/4)
_ERF_BLOCK = 8
_ERF_FAR_SHARE = 3
_F32_ABS = np.uint32(0x7FFFFFFF)
_ERF_B_BITS = np.uint32(np.array([ERF_B], np.float32).view(np.uint32)[0])


@njit(**_JIT)
def _erf_flat(x, out):
    """out = erf_f32(x), the generated kernel's loop."""
    for i in range(x.shape[0]):
        out[i] = erf_f32(x[i])


@njit(**_JIT)
def _erf_near_flat(x, out):
    """out = erf_near_f32(x): erf_f32's bits where |x| < ERF_B."""
    for i in range(x.shape[0]):
        out[i] = erf_near_f32(x[i])


@njit(**_JIT)
def _erf_far_blocks(x):
    """Indices of the _ERF_BLOCK-element blocks of x holding an element with |x| >= ERF_B or
    a NaN (its magnitude bits compare above ERF_B's), the last block possibly short."""
    n = x.shape[0]
    nw = (n + _ERF_BLOCK - 1) // _ERF_BLOCK
    far = np.zeros(nw * _ERF_BLOCK, dtype=np.uint8)
    xb = x.view(np.uint32)
    for i in range(n):
        far[i] = np.uint8((xb[i] & _F32_ABS) >= _ERF_B_BITS)
    fw = far.view(np.uint64)
    idx = np.empty(nw, dtype=np.int64)
    nf = 0
    for w in range(nw):
        idx[nf] = w
        nf += np.int64(fw[w] != 0)
    return idx[:nf]


@cpu_kernel
def _erf_cpu(X, out, p0, p1, aux):
    """CPU only: Erf as the generated kernel's erf_f32 per element. erf_f32 computes all
    three of its ranges' forms on every element (branch-free, vectorised) and selects one;
    most inputs of a GELU lie in the first two (|x| < 1.25), where erf_near_f32 gives the
    same bits from those two alone. So: the blocks of 8 holding a far element (or NaN) are
    found first; with few of them, every element takes erf_near_f32 and the far blocks are
    then recomputed with erf_f32 (gathered into a scratch row, so that its loop stays one
    vectorised loop); with many (a share above 1 / _ERF_FAR_SHARE), all go through
    erf_f32. Either way each element gets erf_f32's bits."""
    n = X.shape[0]
    nw = (n + _ERF_BLOCK - 1) // _ERF_BLOCK
    blocks = _erf_far_blocks(X)
    nf = blocks.shape[0]
    if nf * _ERF_FAR_SHARE > nw:
        _erf_flat(X, out)
        return
    _erf_near_flat(X, out)
    if nf == 0:
        return
    xs = np.zeros(nf * _ERF_BLOCK, dtype=np.float32)
    ys = np.empty(nf * _ERF_BLOCK, dtype=np.float32)
    for j in range(nf):
        o = blocks[j] * _ERF_BLOCK
        for i in range(min(_ERF_BLOCK, n - o)):
            xs[j * _ERF_BLOCK + i] = X[o + i]
    _erf_flat(xs, ys)
    for j in range(nf):
        o = blocks[j] * _ERF_BLOCK
        for i in range(min(_ERF_BLOCK, n - o)):
            out[o + i] = ys[j * _ERF_BLOCK + i]


@cpu_kernel
def _resize_cpu(x, out, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b):
    """_resize_item for every element, a row (the last axis) at a time when the last axis is
    the inner interpolated one (or none is); other layouts per element. Rows are walked plane
    by plane (the dims before the last two by an odometer: no division per row). A row whose
    input offset and row-axis table entry equal the previous row's (upsampling along the row
    axis) is a copy of that row: the same operations on the same values, so the same bits.
    Nearest x2 along the last axis (columns 2q and 2q + 1 both read element q) writes each
    input element twice. The loops are inline: a helper call per row with a dozen array
    arguments cost ~90 ns (reference counts), more than a 32-element row."""
    nd = oshape.shape[0]
    last = nd - 1
    OW = oshape[last]
    if OW == 0 or out.shape[0] == 0 or not (nlin == 0 or ax_b == last):
        for i in range(out.shape[0]):
            out[i] = _resize_item(i, x, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b)
        return
    lo = tab_off[last]
    sl = istr[last]
    c0 = idx0[lo:lo + OW] * sl
    c1 = idx1[lo:lo + OW] * sl
    a0 = w0[lo:lo + OW]
    a1 = w1[lo:lo + OW]
    rep2 = nlin == 0 and sl == 1 and OW % 2 == 0
    for j in range(OW):
        if c0[j] != c0[0] + j // 2:
            rep2 = False
    sa = istr[ax_a] if ax_a >= 0 else 0
    rd = last - 1                       # the row axis (-1 for 1-D)
    R = oshape[rd] if rd >= 0 else 1
    planes = out.shape[0] // (OW * R)
    cnt = np.zeros(nd, np.int64)        # the plane's output coordinates (dims before rd)
    o = 0
    for _ in range(planes):
        pbase = 0
        ppa = 0
        for d in range(rd):
            k = tab_off[d] + cnt[d]
            if d == ax_a:
                ppa = k
            else:
                pbase += idx0[k] * istr[d]
        prev = -1
        prev_pa = -1
        for oh in range(R):
            base = pbase
            pa = ppa
            if rd >= 0:
                k = tab_off[rd] + oh
                if rd == ax_a:
                    pa = k
                else:
                    base += idx0[k] * istr[rd]
            if base == prev and pa == prev_pa:
                for j in range(OW):
                    out[np.uint64(o + j)] = out[np.uint64(o - OW + j)]
            elif nlin == 0:
                if rep2:
                    s0 = base + c0[0]
                    for q in range(OW // 2):
                        v = x[np.uint64(s0 + q)]
                        out[np.uint64(o + 2 * q)] = v
                        out[np.uint64(o + 2 * q + 1)] = v
                else:
                    for j in range(OW):
                        out[np.uint64(o + j)] = x[np.uint64(base + c0[j])]
            elif nlin == 1:
                for j in range(OW):
                    out[np.uint64(o + j)] = _lerp(x[np.uint64(base + c0[j])], x[np.uint64(base + c1[j])], a0[j], a1[j])
            else:
                r0 = base + idx0[pa] * sa
                r1 = base + idx1[pa] * sa
                b0 = w0[pa]
                b1 = w1[pa]
                for j in range(OW):
                    top = _lerp(x[np.uint64(r0 + c0[j])], x[np.uint64(r0 + c1[j])], a0[j], a1[j])
                    bot = _lerp(x[np.uint64(r1 + c0[j])], x[np.uint64(r1 + c1[j])], a0[j], a1[j])
                    out[np.uint64(o + j)] = _lerp(top, bot, b0, b1)
            prev = base
            prev_pa = pa
            o += OW
        d = rd - 1
        while d >= 0:
            cnt[d] += 1
            if cnt[d] < oshape[d]:
                break
            cnt[d] = 0
            d -= 1


@cpu_kernel
def _pad_cpu(x, out, cval, oshape, ishape, istr, pbeg, mode):
    nd = oshape.shape[0]
    last = nd - 1
    OW = oshape[last]
    if OW == 0:
        return
    n = ishape[last]
    colmap = np.empty(OW, dtype=np.int64)
    for ow in range(OW):
        colmap[ow] = _pad_map(ow - pbeg[last], n, mode)
    cv = cval[0]
    rows = out.shape[0] // OW
    for r in range(rows):
        off = 0
        t = r
        const = False
        for d in range(nd - 2, -1, -1):
            n_o = oshape[d]
            o = t % n_o
            t = t // n_o
            j = _pad_map(o - pbeg[d], ishape[d], mode)
            if j < 0:
                const = True
                break
            off += j * istr[d]
        dst = out[r * OW:(r + 1) * OW]
        if const:
            dst[:] = cv
        else:
            for ow in range(OW):
                c = colmap[ow]
                dst[ow] = cv if c < 0 else x[off + c]


# --- strided copies: Transpose, Slice, Split, Expand, DepthToSpace (gather); Concat (scatter) --------
#: a transposition's tile: _MV_TP elements along the source's contiguous axis (read in a row) by
#: _MV_TL along the destination's (measured on the bench machine: 64 x 32 beat 8-32 x 8-16)
_MV_TP = 64
_MV_TL = 32


@njit(**_JIT)
def _mv_coalesce(shape, strides):
    """The walk of a strided copy (``shape`` on the contiguous side, ``strides`` on the other)
    with size-1 dims dropped and each dim merged into the one outside it where the strided
    side is contiguous across both (stride[d-1] == stride[d] * shape[d]): (sizes, strides), at
    least one dim. Visits the same (contiguous index, strided offset) pairs in the same order."""
    nd = shape.shape[0]
    cn = np.empty(nd, np.int64)
    cs = np.empty(nd, np.int64)
    k = 0
    for d in range(nd):
        n = shape[d]
        if n == 1:
            continue
        s = strides[d]
        if k > 0 and cs[k - 1] == s * n:
            cn[k - 1] *= n
            cs[k - 1] = s
        else:
            cn[k] = n
            cs[k] = s
            k += 1
    if k == 0:
        cn[0] = 1
        cs[0] = 0
        k = 1
    return cn[:k], cs[:k]


@njit(**_JIT)
def _mv_transpose(x, src, out, o, P, L, sL, OSp):
    """out[o + ip*OSp + il] = x[src + ip + il*sL] for ip < P, il < L, in tiles: each tile
    reads rows of _MV_TP contiguous elements of x and scatters them _MV_TL at a time,
    instead of reading one element per cache line along the strided axis."""
    for p0 in range(0, P, _MV_TP):
        p1 = min(P, p0 + _MV_TP)
        for l0 in range(0, L, _MV_TL):
            l1 = min(L, l0 + _MV_TL)
            for il in range(l0, l1):
                sb = src + il * sL
                ob = o + il
                for ip in range(p0, p1):
                    out[np.uint64(ob + ip * OSp)] = x[np.uint64(sb + ip)]


@njit(**_JIT)
def _mv_rows(x, out, base, cn, cs, gather):
    """The coalesced walk row by row (the innermost dim), the strided offset carried by an
    odometer (no division per row): gather, out[i] = x[base + off(i)]; else scatter,
    out[base + off(i)] = x[i]. Contiguous rows are plain copy loops."""
    k = cn.shape[0]
    L = cn[k - 1]
    sL = cs[k - 1]
    rows = 1
    for d in range(k - 1):
        rows *= cn[d]
    cnt = np.zeros(k, np.int64)
    off = base
    for r in range(rows):
        o = r * L
        if sL == 1:
            if gather:
                for j in range(L):
                    out[np.uint64(o + j)] = x[np.uint64(off + j)]
            else:
                for j in range(L):
                    out[np.uint64(off + j)] = x[np.uint64(o + j)]
        elif gather:
            if sL == 0:
                v = x[np.uint64(off)]
                for j in range(L):
                    out[np.uint64(o + j)] = v
            else:
                for j in range(L):
                    out[np.uint64(o + j)] = x[np.uint64(off + j * sL)]
        else:
            for j in range(L):
                out[np.uint64(off + j * sL)] = x[np.uint64(o + j)]
        d = k - 2                       # the odometer (inline: a call per row costs more than a short row)
        while d >= 0:
            cnt[d] += 1
            off += cs[d]
            if cnt[d] < cn[d]:
                break
            off -= cs[d] * cn[d]
            cnt[d] = 0
            d -= 1


@cpu_kernel
def _gather_strided_cpu(x, out, base, shape, strides):
    """strided_gather_item for every element: out[i] = x[base + sum_d coord_d(i) * strides[d]].
    Pure data movement (bits, no arithmetic on values), so any order of the copies gives the
    same result. The walk is coalesced (_mv_coalesce); when the innermost remaining dim is
    not contiguous in x but another is (a transposition), it is copied in 2-D tiles
    (_mv_transpose) over the other dims; otherwise row by row (_mv_rows)."""
    if out.shape[0] == 0:
        return
    cn, cs = _mv_coalesce(shape, strides)
    k = cn.shape[0]
    p = -1
    if cs[k - 1] != 1:
        for d in range(k - 1):
            if cs[d] == 1:
                p = d
    if p < 0:
        _mv_rows(x, out, base, cn, cs, True)
        return
    ostr = np.empty(k, np.int64)   # out's (contiguous) strides of the coalesced dims
    acc = 1
    for d in range(k - 1, -1, -1):
        ostr[d] = acc
        acc *= cn[d]
    P, L = cn[p], cn[k - 1]
    cnt = np.zeros(k, np.int64)
    src = base
    o = 0
    for t in range(acc // (P * L)):
        _mv_transpose(x, src, out, o, P, L, cs[k - 1], ostr[p])
        d = k - 2                       # the odometer over the other dims
        while d >= 0:
            if d == p:
                d -= 1
                continue
            cnt[d] += 1
            src += cs[d]
            o += ostr[d]
            if cnt[d] < cn[d]:
                break
            src -= cs[d] * cn[d]
            o -= ostr[d] * cn[d]
            cnt[d] = 0
            d -= 1


@cpu_kernel
def _scatter_strided_cpu(x, out, base, shape, strides):
    """strided_scatter_item for every element: out[base + sum_d coord_d(i) * strides[d]] = x[i]
    (Concat's parts). Pure data movement; the coalesced walk (_mv_coalesce) turns a Concat
    along an axis into one contiguous copy per outer index (_mv_rows)."""
    if x.shape[0] == 0:
        return
    cn, cs = _mv_coalesce(shape, strides)
    _mv_rows(x, out, base, cn, cs, False)


@cpu_kernel
def _gather_cpu(data, idx, out, axis_dim, n_idx, inner, bad):
    # check every index first (sets the flag and writes nothing on a bad one), then copy rows
    # without per-row checks: a check inside the row loop cost ~30% here
    for j in range(idx.shape[0]):
        k = idx[j]
        if k < -axis_dim or k >= axis_dim:
            bad[0] = 1
            return
    if inner > 0:
        for t in range(out.shape[0] // inner):
            gather_row_checked(t, data, idx, out, axis_dim, n_idx, inner)


def install() -> None:
    """Set every fast path as its kernel pair's CPU override."""
    for pair, fast in ((nn._MM, _mm_cpu), (nn._CONV, _conv_cpu), (nn._CONVT, _convt_cpu),
                       (nn._POOL, _pool_cpu), (nn._GPOOL, _gpool_cpu), (nn._BN, _bn_cpu),
                       (nn._SOFTMAX, _softmax_cpu),
                       (nn._LN, _ln_cpu), (nn._RESIZE, _resize_cpu), (nn._PAD, _pad_cpu),
                       (data._GATHER_STRIDED, _gather_strided_cpu),
                       (data._SCATTER_STRIDED, _scatter_strided_cpu), (data._GATHER, _gather_cpu),
                       (elementwise._ERF, _erf_cpu)):
        pair.cpu_fast = fast
