"""Neural-network ops (float32), written once for both targets.

Every output element's float math lives in one ``@dual`` (array-walking) or
``@njit`` (scalar) function that the CPU kernel and the CUDA kernel both
call, and every accumulation has one fixed order, documented per op below.
The CPU kernels may visit output elements in a different order than the CUDA
threads (e.g. a row of accumulators for MatMul and Conv) as long as each
output element sees exactly the same sequence of float32 operations: that
is bitwise the same result. Helpers named ``*_cpu`` are such CPU-only
performance paths (blocked GEMM for MatMul/Gemm/Conv/ConvTranspose, rows of
accumulators for pooling, row-wise Resize/Pad); the tests check them bit for
bit against the CUDA kernels (simulator) and against the documented orders.

On a real GPU the contract also needs FMA contraction off: NVVM contracts
``a*b + c`` by default (``-fma=1``) unless the compile options say otherwise.

Transcendental functions come from :mod:`.pmath` (portable, IEEE-exact
building blocks) -- never ``math.exp`` and friends, which differ between
numba's CPU target and the CUDA simulator.

Simulator pitfall: there an ``@njit`` helper runs as compiled CPU code and
returns a *Python float* (float64). Passed on to another untyped ``@njit``
function it would compile a float64 variant, so every scalar helper here has
an explicit float32 signature, and ``@dual`` code wraps helper results in
``np.float32(...)`` before doing arithmetic with them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..ir.errors import KernelError
from .common import node_error as _err, prod as _prod  # noqa: F401
from .common import (bcast_offset, copy_array, broadcast_strides, dual, flat, kernel_pair, replayable, shape_array,
                     to_target)
from .pmath import exp_f32, log_f32, pow_f32, sqrt_f32
from .opdef import ALL, OpList

OPS = OpList()
register = OPS.register

F32 = ("float32",)


def _i64(*vals):
    return np.asarray([int(v) for v in vals], dtype=np.int64)


def _dummy_f32():
    return np.zeros(1, dtype=np.float32)


# error_model="numpy": a float32 division by zero gives inf/NaN (IEEE), as on the GPU,
# instead of numba's default Python ZeroDivisionError.
# nogil: the kernels release the GIL while they run (see target.LazyKernel)
_JIT = dict(cache=True, error_model="numpy", nogil=True)
# Scalar helpers take no explicit signature (numba-cuda refuses to call a CPU function
# whose compilation is disabled, as a signature does); each converts its arguments
# with np.float32(...) instead, which keeps it float32-only on every target.


@njit(**_JIT)
def _div(a, b):
    a = np.float32(a)
    b = np.float32(b)
    return a / b


# =============================================================================
# MatMul / Gemm
# Order: per output element, acc = 0.0f, then acc = acc + a[k] * b[k] for
# k = 0 .. K-1 (product rounded to float32, then the sum rounded); no FMA.
# Gemm then computes y = alpha * acc, and y = y + beta * c when C is given.
# CPU (_gemm_rows_cpu): a register-blocked GEMM. The bulk (rows in blocks of
# _MK_R, columns in panels of _MK_W) runs a micro-kernel (_mk_tile) that
# holds an _MK_R x _MK_W block of accumulators in vector registers and
# updates it k by k, ascending (a vector fmul, then a vector fadd: no FMA);
# K is split into blocks of _MK_KC, and a block after the first resumes from
# the float32 partial sums it stored in ``out`` (storing and reloading a
# float32 changes no bit). Panels of B (and, for row strides that alias in
# the cache, blocks of A) are first copied into contiguous scratch (a copy
# changes no value). Edge rows/columns go through _gemm_rowacc_cpu: rows of
# accumulators in memory, four output rows at a time, updated k by k. Either
# way each element gets the same sequence of operations as the per-element
# dot product the CUDA kernel runs (one thread per output element). A
# transposed B is first copied into a k-major scratch buffer. A constant B
# (an initializer: a layer's weight) is packed into the micro-kernel's panel
# layout once when the node is built (fastpaths.mm_pack_b, CPU with fast paths
# on), and fastpaths.mm_packed_cpu multiplies A by it in place; a MatMul's
# batches of A that share a 2-D B run as one product of all their rows.
# =============================================================================


@njit(**_JIT)
def _gemm_epilogue(acc, epi, alpha, beta, cv):
    acc = np.float32(acc)
    epi = np.int64(epi)
    alpha = np.float32(alpha)
    beta = np.float32(beta)
    cv = np.float32(cv)
    if epi == 0:
        return acc
    y = alpha * acc
    if epi == 2:
        y = y + beta * cv
    return y


@dual
def _dot(a, a0, sak, b, b0, sbk, K):
    acc = np.float32(0)
    for k in range(K):
        acc += a[a0 + k * sak] * b[b0 + k * sbk]
    return acc


_MM = kernel_pair(
    "mm", "a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi, alpha, beta",
    """
    MN = M * N
    bt = i // MN
    r = i - bt * MN
    m = r // N
    n = r - m * N
    a0 = bcast_offset(bt, bshape, sa)
    b0 = bcast_offset(bt, bshape, sb)
    acc = _dot(a, a0 + m * sam, sak, b, b0 + n * sbn, sbk, K)
    cv = c[m * scm + n * scn] if epi == 2 else np.float32(0)
    out[i] = _gemm_epilogue(acc, epi, alpha, beta, cv)
    """, count="out.shape[0]", index="i", module=__name__)


def _mm_launch(target, a, b, out, c, dims, meta, epi, alpha, beta):
    M, K, N, sam, sak, sbk, sbn, scm, scn = dims
    bshape, sa, sb = meta
    args = (a, b, out, c, M, K, N, sam, sak, sbk, sbn, bshape, sa, sb, scm, scn, epi,
            np.float32(alpha), np.float32(beta))
    target.launch(_MM, out.shape[0], *args)


def _check_matmul(ctx, target):
    sa, sb = ctx.in_shapes[0], ctx.in_shapes[1]
    if sa is None or sb is None or len(sa) == 0 or len(sb) == 0:
        return "MatMul needs ranked operands of rank >= 1"
    return None


def _build_matmul(ctx, target):
    sa, sb = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    M, K = a2[-2], a2[-1]
    K2, N = b2[-2], b2[-1]
    if K != K2:
        raise _err(ctx, f"inner dimensions differ: {sa} x {sb}")
    abatch, bbatch = a2[:-2], b2[:-2]
    obatch = tuple(np.broadcast_shapes(abatch, bbatch))
    bshape = shape_array(obatch)
    stra = broadcast_strides(abatch, obatch) * (M * K)
    strb = broadcast_strides(bbatch, obatch) * (K * N)
    meta = to_target(target, bshape, stra, strb)
    c = to_target(target, _dummy_f32())
    dims = (M, K, N, K, 1, N, 1, 0, 0)
    bconst = ctx.const(1)
    if target.fast_paths and bconst is not None and len(sb) == 2:
        # CPU fast path: an initializer B (a weight) is packed into micro-kernel panels once
        # here; every batch of A shares it, so the batches run as one (rows x K) product
        from . import fastpaths
        bp = fastpaths.mm_pack_b(np.asarray(bconst).reshape(K, N))
        rows = _prod(abatch) * M
        one = np.float32(1)

        @replayable
        def run_packed(inputs, outputs):
            target.call(fastpaths.mm_packed_cpu, flat(inputs[0]), K, 1, bp, rows, K, N, flat(outputs[0]), c, 0, 0,
                        0, one, one)

        return run_packed

    @replayable
    def run(inputs, outputs):
        _mm_launch(target, flat(inputs[0]), flat(inputs[1]), flat(outputs[0]), c, dims, meta, 0, 1.0, 1.0)

    return run


register("MatMul", dtypes=F32, since=9, check=_check_matmul,
         note="per element: k ascending from 0.0f, no FMA")(_build_matmul)


def _check_gemm(ctx, target):
    sa, sb = ctx.in_shapes[0], ctx.in_shapes[1]
    if sa is None or sb is None or len(sa) != 2 or len(sb) != 2:
        return "Gemm needs 2-D A and B"
    return None


def _build_gemm(ctx, target):
    at = ctx.attrs
    alpha = float(at.get("alpha", 1.0))
    beta = float(at.get("beta", 1.0))
    ta = int(at.get("transA", 0))
    tb = int(at.get("transB", 0))
    sa, sb = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    M, K = (sa[1], sa[0]) if ta else sa
    K2, N = (sb[1], sb[0]) if tb else sb
    if K != K2:
        raise _err(ctx, f"inner dimensions differ: A{sa} transA={ta}, B{sb} transB={tb}")
    sam, sak = (1, M) if ta else (K, 1)
    sbk, sbn = (1, K) if tb else (N, 1)
    has_c = ctx.has_input(2) and ctx.in_shapes[2] is not None
    if has_c:
        cs = broadcast_strides(tuple(ctx.in_shapes[2]), (M, N))
        scm, scn = int(cs[0]), int(cs[1])
    else:
        scm = scn = 0
    epi = 2 if has_c else 1
    meta = to_target(target, shape_array(()), np.zeros(1, np.int64), np.zeros(1, np.int64))
    dummy = to_target(target, _dummy_f32())
    dims = (M, K, N, sam, sak, sbk, sbn, scm, scn)
    # CPU: a constant transposed B (a Linear layer's weight) is copied k-major once here
    # instead of at every run (a copy: the values, hence the bits, are the same).
    if target.fast_paths and ctx.const(1) is not None:
        # CPU fast path: a constant B (a Linear layer's weight, transposed or not) is packed
        # into micro-kernel panels once here (a copy: the same values, the same bits)
        from . import fastpaths
        bmat = np.asarray(ctx.const(1), dtype=np.float32)
        bp = fastpaths.mm_pack_b(bmat.T if tb else bmat)
        al, be = np.float32(alpha), np.float32(beta)

        @replayable
        def run_packed(inputs, outputs):
            c = flat(inputs[2]) if has_c else dummy
            target.call(fastpaths.mm_packed_cpu, flat(inputs[0]), sam, sak, bp, M, K, N, flat(outputs[0]), c, scm,
                        scn, epi, al, be)

        return run_packed
    b_kmajor = None
    if target.host and tb and ctx.const(1) is not None:
        b_kmajor = np.ascontiguousarray(np.asarray(ctx.const(1), dtype=np.float32).T).reshape(-1)
        dims = (M, K, N, sam, sak, N, 1, scm, scn)

    @replayable
    def run(inputs, outputs):
        c = flat(inputs[2]) if has_c else dummy
        b = b_kmajor if b_kmajor is not None else flat(inputs[1])
        _mm_launch(target, flat(inputs[0]), b, flat(outputs[0]), c, dims, meta, epi, alpha, beta)

    return run


register("Gemm", dtypes=F32, since=7, check=_check_gemm,
         note="per element: k ascending from 0.0f; then alpha*acc (+ beta*C); no FMA")(_build_gemm)


# =============================================================================
# Conv (1-, 2- and 3-D; every rank runs as 3-D with the missing leading
# spatial dims of size 1, so 1-D and 2-D run exactly the 2-D sequence)
# Order: per output element, acc = 0.0f, then acc = acc + w * xv over input
# channel c (of the group), kernel taps kd, kh, kw, all ascending,
# where xv is the input value, or 0.0f for a tap in the zero padding (as the
# ONNX spec pads with zeros; a padded tap still adds w * 0.0f); then
# acc + bias[m].
# CPU (2-D, and 1-D as 2-D; fastpaths.py): a k x k kernel runs as an indirect
# GEMM on the zero-padded input split in stride phases (every tap (c, kh, kw)
# of a row of output pixels is one contiguous vector load; k order (c, kh, kw)
# ascending); depthwise Conv tap by tap over register blocks of output rows;
# a 1x1 stride-1 unpadded Conv multiplies the input directly (a GEMV on maps of
# under 16 pixels); the rest im2col + the blocked GEMM above. 3-D on the CPU and
# every rank on CUDA: one output element per item, same sequence.
# The walk (_conv_out, _conv_tap) is shared with ConvInteger/QLinearConv
# (quant.py), which accumulate exact int64 products of the same taps.
# =============================================================================

# p (int64), the conv geometry (see conv_geometry):
#  0 N, 1 C, 2 H, 3 W, 4 M, 5 KH, 6 KW, 7 OH, 8 OW, 9 sh, 10 sw, 11 dh, 12 dw,
#  13 pad_top, 14 pad_left, 15 group, 16 D, 17 KD, 18 OD, 19 sd, 20 dd, 21 pad_front
# (indices 0-15 are the 2-D layout the CPU fast paths read)


@dual
def _nchw(i, C, H, W):
    """(n, c, h, w) of flat index ``i`` in an N x C x H x W array."""
    w = i % W
    t = i // W
    h = t % H
    t = t // H
    return t // C, t % C, h, w


@dual
def _conv_out(i, p):
    """(n, m, od, oh, ow) of output element ``i`` (N x M x OD x OH x OW)."""
    n, m, ohd, ow = _nchw(i, p[4], p[18] * p[7], p[8])
    return n, m, ohd // p[7], ohd % p[7], ow


@dual
def _conv_tap(p, n, ci, od, oh, ow, kd, kh, kw):
    """Flat index into x (N x C x D x H x W) of input channel ``ci``'s tap (kd, kh, kw)
    for output position (od, oh, ow), or -1 for a tap in the padding."""
    idd = od * p[19] - p[21] + kd * p[20]
    ih = oh * p[9] - p[13] + kh * p[11]
    iw = ow * p[10] - p[14] + kw * p[12]
    D, H, W = p[16], p[2], p[3]
    if idd < 0 or idd >= D or ih < 0 or ih >= H or iw < 0 or iw >= W:
        return -1
    return ((n * p[1] + ci) * D + idd) * H * W + ih * W + iw


@dual
def _conv_item(i, x, w, bias, has_b, p):
    n, m, od, oh, ow = _conv_out(i, p)
    C, M, G, KD, KH, KW = p[1], p[4], p[15], p[17], p[5], p[6]
    Cg = C // G
    g = m // (M // G)
    acc = np.float32(0)
    for c in range(Cg):
        wb = (m * Cg + c) * KD * KH * KW
        for kd in range(KD):
            for kh in range(KH):
                for kw in range(KW):
                    o = _conv_tap(p, n, g * Cg + c, od, oh, ow, kd, kh, kw)
                    xv = np.float32(0)
                    if o >= 0:
                        xv = x[o]
                    acc += w[wb + (kd * KH + kh) * KW + kw] * xv
    if has_b:
        acc = acc + bias[m]
    return acc


_CONV = kernel_pair(
    "conv", "x, w, bias, has_b, p, out",
    """
    out[i] = _conv_item(i, x, w, bias, has_b, p)
    """, count="out.shape[0]", index="i", module=__name__)


def _spatial_attrs(ctx, nsp, kshape):
    """strides, dilations, pads(begin+end) for ``nsp`` spatial dims (explicit pads / VALID)."""
    at = ctx.attrs
    strides = list(at.get("strides", [1] * nsp) or [1] * nsp)
    dil = list(at.get("dilations", [1] * nsp) or [1] * nsp)
    pads = list(at.get("pads", [0] * 2 * nsp) or [0] * 2 * nsp)
    return strides, dil, pads


def _same_pads(auto_pad, in_sp, out_sp, kshape, strides, dil):
    """Conv/pool auto_pad SAME_* begin/end pads (extra pad at the end for SAME_UPPER)."""
    beg, end = [], []
    for i in range(len(in_sp)):
        total = max(0, (out_sp[i] - 1) * strides[i] + (kshape[i] - 1) * dil[i] + 1 - in_sp[i])
        if auto_pad == "SAME_UPPER":
            b = total // 2
        else:
            b = total - total // 2
        beg.append(b)
        end.append(total - b)
    return beg + end


def _auto_pad(ctx):
    ap = ctx.attrs.get("auto_pad", "NOTSET")
    return ap.decode() if isinstance(ap, bytes) else ap


def _conv_like_check(ctx, kind="N, C, D1[, D2[, D3]]"):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) not in (3, 4, 5):
        return f"{ctx.node.op_type}: only 1-D, 2-D and 3-D inputs ({kind}) with a known rank are supported"
    ap = _auto_pad(ctx)
    if ap not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        return f"{ctx.node.op_type}: auto_pad {ap!r} not supported"
    return None


def _to3(vals, fill):
    """Spatial lists of rank 1-3 as 3-D, with leading ``fill`` dims."""
    vals = [int(v) for v in vals]
    return [fill] * (3 - len(vals)) + vals


def _geometry(N, C, M, G, in_sp, k_sp, out_sp, strides, dil, pads_begin):
    """The conv geometry array ``p`` (layout above) for 1-3 spatial dims."""
    D, H, W = _to3(in_sp, 1)
    KD, KH, KW = _to3(k_sp, 1)
    OD, OH, OW = _to3(out_sp, 1)
    sd, sh, sw = _to3(strides, 1)
    dd, dh, dw = _to3(dil, 1)
    pf, pt, pl = _to3(pads_begin, 0)
    return _i64(N, C, H, W, M, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl, G, D, KD, OD, sd, dd, pf)


def conv_geometry(ctx, xs, ws, ys):
    """Conv's geometry array from the node's attributes (explicit pads, VALID, SAME_*),
    for Conv, ConvInteger and QLinearConv; raises KernelError naming the node."""
    xs, ws, ys = tuple(xs), tuple(ws), tuple(ys)
    op = ctx.node.op_type
    if len(xs) not in (3, 4, 5) or len(ws) != len(xs) or len(ys) != len(xs):
        raise _err(ctx, f"{op}: input, weight and output must be (N, C, D1[, D2[, D3]]) of one rank: "
                        f"{xs}, {ws}, {ys}")
    G = int(ctx.attrs.get("group", 1))
    if G < 1 or xs[1] % G or ws[0] % G or xs[1] // G != ws[1]:
        raise _err(ctx, f"{op}: group={G} does not match the channel counts (x {xs}, w {ws})")
    nsp = len(xs) - 2
    ksp = list(ws[2:])
    if "kernel_shape" in ctx.attrs and list(ctx.attrs["kernel_shape"]) != ksp:
        raise _err(ctx, f"kernel_shape {ctx.attrs['kernel_shape']} does not match the weight {ws}")
    strides, dil, pads = _spatial_attrs(ctx, nsp, ksp)
    if len(strides) != nsp or len(dil) != nsp or len(pads) != 2 * nsp:
        raise _err(ctx, f"strides {strides}, dilations {dil} or pads {pads} do not fit {nsp} spatial dims")
    if any(int(s) < 1 for s in strides) or any(int(d) < 1 for d in dil):
        raise _err(ctx, f"strides {strides} and dilations {dil} must be >= 1")
    ap = _auto_pad(ctx)
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(ap, xs[2:], ys[2:], ksp, strides, dil)
    elif ap == "VALID":
        pads = [0] * (2 * nsp)
    for i in range(nsp):
        want = (xs[2 + i] + pads[i] + pads[nsp + i] - ((ksp[i] - 1) * dil[i] + 1)) // strides[i] + 1
        if want != ys[2 + i]:
            raise _err(ctx, f"output spatial size {ys[2 + i]} != {want} computed from the attributes")
    return _geometry(xs[0], xs[1], ws[0], G, xs[2:], ksp, ys[2:], strides, dil, pads[:nsp])


def _check_conv(ctx, target):
    r = _conv_like_check(ctx)
    if r:
        return r
    ws = ctx.in_shapes[1]
    if ws is None or len(ws) != len(ctx.in_shapes[0]):
        return "Conv: weight rank must match the input rank"
    g = int(ctx.attrs.get("group", 1))
    if g < 1 or ctx.in_shapes[0][1] % g or ws[0] % g or ctx.in_shapes[0][1] // g != ws[1]:
        return f"Conv: group={g} does not match the channel counts"
    return None


def _build_conv(ctx, target):
    p = conv_geometry(ctx, ctx.in_shapes[0], ctx.in_shapes[1], ctx.out_shapes[0])
    has_b = ctx.has_input(2)
    wconst = ctx.const(1)
    if target.fast_paths and wconst is not None:
        # CPU fast path: an initializer weight is packed once here into the layout of the path
        # the geometry takes (a copy: the same values, the same bits); None: that path reads
        # the weight as it is
        from . import fastpaths
        wp = fastpaths.conv_pack(np.asarray(wconst, dtype=np.float32).reshape(-1), p)
        if wp is not None:
            dummy = _dummy_f32()

            @replayable
            def run_packed(inputs, outputs):
                b = flat(inputs[2]) if has_b else dummy
                target.call(fastpaths.conv_packed_cpu, flat(inputs[0]), wp, b, has_b, p, flat(outputs[0]))

            return run_packed
    p, dummy = to_target(target, p, _dummy_f32())

    @replayable
    def run(inputs, outputs):
        x, w, out = flat(inputs[0]), flat(inputs[1]), flat(outputs[0])
        b = flat(inputs[2]) if has_b else dummy
        target.launch(_CONV, out.shape[0], x, w, b, has_b, p, out)

    return run


register("Conv", dtypes=F32, since=11, until=28, check=_check_conv,
         note="1-3 spatial dims; per element: (c, kd, kh, kw) ascending from 0.0f, zero-padding taps add "
              "w*0, then + bias")(_build_conv)


# =============================================================================
# ConvTranspose (1-, 2- and 3-D, as Conv: run as 3-D)
# Order: per output element, acc = 0.0f; for each kernel tap (kd, kh, kw)
# ascending that maps an input position (id, ih, iw) onto this output
# position: part = 0.0f, part = part + w * x over the input channels c of the
# group ascending, then acc = acc + part; finally acc + bias[m].
# CPU (1-D, 2-D): a GEMM (cols[(mm, kh, kw), (ih, iw)] = sum_c w * x, c
# ascending) and a col2im scatter in (kh, kw) order; each output element
# receives at most one part per tap, in the same order. 3-D on the CPU and
# CUDA: one output element per item.
# =============================================================================


@dual
def _convt_item(i, x, w, bias, has_b, p):
    n, m, od, oh, ow = _conv_out(i, p)
    C, H, W, M, KH, KW = p[1], p[2], p[3], p[4], p[5], p[6]
    sh, sw, dh, dw, pt, pl, G = p[9], p[10], p[11], p[12], p[13], p[14], p[15]
    D, KD, sd, dd, pf = p[16], p[17], p[19], p[20], p[21]
    Cg = C // G
    Mg = M // G
    g = m // Mg
    mm = m - g * Mg
    DHW = D * H * W
    KK = KD * KH * KW
    acc = np.float32(0)
    for kd in range(KD):
        td = od + pf - kd * dd
        if td >= 0 and td % sd == 0 and td // sd < D:
            idd = td // sd
            for kh in range(KH):
                th = oh + pt - kh * dh
                if th >= 0 and th % sh == 0 and th // sh < H:
                    ih = th // sh
                    for kw in range(KW):
                        tw = ow + pl - kw * dw
                        if tw >= 0 and tw % sw == 0 and tw // sw < W:
                            iw = tw // sw
                            xo = (n * C + g * Cg) * DHW + (idd * H + ih) * W + iw
                            wo = (g * Cg * Mg + mm) * KK + (kd * KH + kh) * KW + kw
                            part = np.float32(0)
                            for c in range(Cg):
                                part += w[wo + c * Mg * KK] * x[xo + c * DHW]
                            acc = acc + part
    if has_b:
        acc = acc + bias[m]
    return acc


_CONVT = kernel_pair(
    "convt", "x, w, bias, has_b, p, out",
    """
    out[i] = _convt_item(i, x, w, bias, has_b, p)
    """, count="out.shape[0]", index="i", module=__name__)


def _check_convt(ctx, target):
    r = _conv_like_check(ctx)
    if r:
        return r
    ws = ctx.in_shapes[1]
    if ws is None or len(ws) != len(ctx.in_shapes[0]):
        return "ConvTranspose: weight rank must match the input rank"
    g = int(ctx.attrs.get("group", 1))
    if g < 1 or ctx.in_shapes[0][1] % g or ws[0] != ctx.in_shapes[0][1]:
        return f"ConvTranspose: group={g} does not match the channel counts"
    return None


def _convt_pads(ctx, xs, ksp, ys, strides, dil, pads, outpad):
    """ConvTranspose's begin/end pads: explicit, VALID, SAME_*, or from output_shape (the
    schema's total_padding rule: begin = total // 2 for SAME_UPPER, else total - total // 2;
    a negative total, an output_shape beyond the full transposed output, pads with zeros
    plus bias)."""
    nsp = len(ksp)
    ap = _auto_pad(ctx)
    oshape = ctx.attrs.get("output_shape")
    if oshape is not None and len(oshape):
        oshape = [int(v) for v in oshape][-nsp:]
        if len(oshape) != nsp:
            raise _err(ctx, f"output_shape {list(ctx.attrs['output_shape'])} does not fit {nsp} spatial dims")
        beg, end = [], []
        for i in range(nsp):
            total = strides[i] * (xs[2 + i] - 1) + outpad[i] + (ksp[i] - 1) * dil[i] + 1 - oshape[i]
            b = total // 2 if ap == "SAME_UPPER" else total - total // 2
            beg.append(b)
            end.append(total - b)
        return beg + end
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        beg, end = [], []
        for i in range(nsp):
            total = strides[i] * (xs[2 + i] - 1) + outpad[i] + (ksp[i] - 1) * dil[i] + 1 - xs[2 + i] * strides[i]
            b = total // 2 if ap == "SAME_UPPER" else total - total // 2
            beg.append(b)
            end.append(total - b)
        return beg + end
    if ap == "VALID":
        return [0] * (2 * nsp)
    return pads


def _build_convt(ctx, target):
    xs, ws = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    ys = tuple(ctx.out_shapes[0])
    nsp = len(xs) - 2
    ksp = list(ws[2:])
    G = int(ctx.attrs.get("group", 1))
    if ys[1] != ws[1] * G:
        raise _err(ctx, f"output channels {ys[1]} != W.shape[1] * group = {ws[1] * G}")
    strides, dil, pads = _spatial_attrs(ctx, nsp, ksp)
    outpad = list(ctx.attrs.get("output_padding", [0] * nsp) or [0] * nsp)
    if len(strides) != nsp or len(dil) != nsp or len(pads) != 2 * nsp or len(outpad) != nsp:
        raise _err(ctx, f"strides {strides}, dilations {dil}, pads {pads} or output_padding {outpad} "
                        f"do not fit {nsp} spatial dims")
    if any(int(s) < 1 for s in strides) or any(int(d) < 1 for d in dil):
        raise _err(ctx, f"strides {strides} and dilations {dil} must be >= 1")
    pads = _convt_pads(ctx, xs, ksp, ys, strides, dil, pads, outpad)
    for i in range(nsp):
        want = strides[i] * (xs[2 + i] - 1) + outpad[i] + (ksp[i] - 1) * dil[i] + 1 - pads[i] - pads[nsp + i]
        if want != ys[2 + i]:
            raise _err(ctx, f"output spatial size {ys[2 + i]} != {want} computed from the attributes")
    p = _geometry(xs[0], xs[1], ys[1], G, xs[2:], ksp, ys[2:], strides, dil, pads[:nsp])
    has_b = ctx.has_input(2)
    p, dummy = to_target(target, p, _dummy_f32())

    @replayable
    def run(inputs, outputs):
        x, w, out = flat(inputs[0]), flat(inputs[1]), flat(outputs[0])
        b = flat(inputs[2]) if has_b else dummy
        target.launch(_CONVT, out.shape[0], x, w, b, has_b, p, out)

    return run


register("ConvTranspose", dtypes=F32, since=11, until=28, check=_check_convt,
         note="1-3 spatial dims; per element: taps (kd, kh, kw) ascending, each a c-ascending partial sum, "
              "then + bias")(_build_convt)


# =============================================================================
# MaxPool / AveragePool (1-, 2- and 3-D; run as 3-D, as Conv)
# MaxPool: acc = -inf, then for taps (kd, kh, kw) ascending inside the input:
#   if v > acc: acc = v   (NaN inputs are ignored, as onnxruntime and the
#   ONNX reference do). With the Indices output: the first tap that sets the
#   maximum (a first tap of -inf counts), its flat index into x (row-major
#   over (n, c, spatial), or column-major over the spatial dims with
#   storage_order=1); -1 where no tap is a number.
# AveragePool: sum = 0.0f, then sum = sum + v over in-input taps (kd, kh, kw)
# ascending; result = sum / float32(count), count = in-input taps, plus the
# taps in the explicit padding when count_include_pad=1 (taps beyond the end
# padding, from ceil_mode, never count).
# Both targets: per output element (the CPU fast path: rows of accumulators,
# 1-D and 2-D).
# =============================================================================

# p (int64): 0 N, 1 C, 2 H, 3 W, 4 OH, 5 OW, 6 KH, 7 KW, 8 sh, 9 sw, 10 dh, 11 dw,
# 12 pad_top, 13 pad_left, 14 pad_bottom, 15 pad_right, 16 count_include_pad,
# 17 D, 18 OD, 19 KD, 20 sd, 21 dd, 22 pad_front, 23 pad_back
# (indices 0-16 are the 2-D layout the CPU fast path reads)


@dual
def _pool_at(x, nc, od, oh, ow, p, is_max):
    H, W, KH, KW, sh, sw, dh, dw = p[2], p[3], p[6], p[7], p[8], p[9], p[10], p[11]
    pt, pl, pb, pr, include = p[12], p[13], p[14], p[15], p[16]
    D, KD, sd, dd, pf, pk = p[17], p[19], p[20], p[21], p[22], p[23]
    xb = nc * D * H * W
    d0 = od * sd - pf
    h0 = oh * sh - pt
    w0 = ow * sw - pl
    if is_max:
        acc = np.float32(-np.inf)
        for kd in range(KD):
            idd = d0 + kd * dd
            if idd >= 0 and idd < D:
                for kh in range(KH):
                    ih = h0 + kh * dh
                    if ih >= 0 and ih < H:
                        for kw in range(KW):
                            iw = w0 + kw * dw
                            if iw >= 0 and iw < W:
                                v = x[xb + (idd * H + ih) * W + iw]
                                if v > acc:
                                    acc = v
        return acc
    s = np.float32(0)
    cnt = 0
    cpad = 0
    for kd in range(KD):
        idd = d0 + kd * dd
        if idd >= -pf and idd < D + pk:
            ind = idd >= 0 and idd < D
            for kh in range(KH):
                ih = h0 + kh * dh
                if ih >= -pt and ih < H + pb:
                    inh = ind and ih >= 0 and ih < H
                    for kw in range(KW):
                        iw = w0 + kw * dw
                        if iw >= -pl and iw < W + pr:
                            if inh and iw >= 0 and iw < W:
                                s += x[xb + (idd * H + ih) * W + iw]
                                cnt += 1
                            else:
                                cpad += 1
    if include:
        cnt += cpad
    return _div(s, np.float32(cnt))


@dual
def _pool_pos(i, p):
    """(nc, od, oh, ow) of pooled output element ``i``."""
    OH, OW, OD = p[4], p[5], p[18]
    ow = i % OW
    t = i // OW
    oh = t % OH
    t = t // OH
    return t // OD, t % OD, oh, ow


_POOL = kernel_pair(
    "pool", "x, p, is_max, out",
    """
    nc, od, oh, ow = _pool_pos(i, p)
    out[i] = _pool_at(x, nc, od, oh, ow, p, is_max)
    """, count="out.shape[0]", index="i", module=__name__)


@dual
def _maxpool_arg(x, nc, od, oh, ow, p, col_major, lo):
    """MaxPool's value and Indices entry for one output element (see the order above);
    ``lo`` is the lowest value of x's dtype (-inf for float32)."""
    H, W, KH, KW, sh, sw, dh, dw = p[2], p[3], p[6], p[7], p[8], p[9], p[10], p[11]
    pt, pl = p[12], p[13]
    D, KD, sd, dd, pf = p[17], p[19], p[20], p[21], p[22]
    S = D * H * W
    xb = nc * S
    d0 = od * sd - pf
    h0 = oh * sh - pt
    w0 = ow * sw - pl
    acc = lo
    best = -1
    for kd in range(KD):
        idd = d0 + kd * dd
        if idd >= 0 and idd < D:
            for kh in range(KH):
                ih = h0 + kh * dh
                if ih >= 0 and ih < H:
                    for kw in range(KW):
                        iw = w0 + kw * dw
                        if iw >= 0 and iw < W:
                            v = x[xb + (idd * H + ih) * W + iw]
                            if v > acc or (best < 0 and v == acc):
                                acc = v
                                if col_major:
                                    # column-major over the spatial dims (the leading size-1
                                    # dims of 1-D/2-D add nothing)
                                    best = xb + idd + (ih + iw * H) * D
                                else:
                                    best = xb + (idd * H + ih) * W + iw
    return acc, best


_MAXPOOL_IDX = kernel_pair(
    "maxpool_idx", "x, p, col_major, lo, out, idx",
    """
    nc, od, oh, ow = _pool_pos(i, p)
    v, b = _maxpool_arg(x, nc, od, oh, ow, p, col_major, lo)
    out[i] = v
    idx[i] = b
    """, count="out.shape[0]", index="i", module=__name__)


def _check_pool(ctx, target):
    r = _conv_like_check(ctx)
    if r:
        return r
    op = ctx.node.op_type
    ks = ctx.attrs.get("kernel_shape")
    if ks is None or len(ks) != len(ctx.in_shapes[0]) - 2:
        return f"{op}: kernel_shape missing or of the wrong length"
    if op == "MaxPool" and len(ctx.node.outputs) > 1 and ctx.node.outputs[1]:
        if int(ctx.attrs.get("storage_order", 0)) not in (0, 1):
            return "MaxPool: storage_order must be 0 or 1"
    xs = ctx.in_shapes[0]
    ys = ctx.out_shapes[0] if ctx.out_shapes else None
    if ys is None or len(ys) != len(xs):
        return f"{op}: output shape unknown"
    # With ceil_mode a last window may start past the input (in the right padding): onnx's shape
    # inference keeps it before schema version 22 (the output shape the runner allocates; its
    # value is then -inf for MaxPool, 0/0 for AveragePool) and drops it from 22 on, as
    # onnxruntime does at every version. The kernel follows the shapes it is given.
    return None


def pool_geometry(ctx, xs, ys):
    """MaxPool/AveragePool's geometry array (layout above) from the node's attributes."""
    xs, ys = tuple(xs), tuple(ys)
    nsp = len(xs) - 2
    ksp = [int(k) for k in ctx.attrs["kernel_shape"]]
    strides, dil, pads = _spatial_attrs(ctx, nsp, ksp)
    if len(strides) != nsp or len(dil) != nsp or len(pads) != 2 * nsp:
        raise _err(ctx, f"strides {strides}, dilations {dil} or pads {pads} do not fit {nsp} spatial dims")
    if any(k < 1 for k in ksp) or any(int(s) < 1 for s in strides) or any(int(d) < 1 for d in dil):
        raise _err(ctx, f"kernel_shape {ksp}, strides {strides} and dilations {dil} must be >= 1")
    ap = _auto_pad(ctx)
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(ap, xs[2:], ys[2:], ksp, strides, dil)
    elif ap == "VALID":
        pads = [0] * (2 * nsp)
    include = int(ctx.attrs.get("count_include_pad", 0))
    D, H, W = _to3(xs[2:], 1)
    OD, OH, OW = _to3(ys[2:], 1)
    KD, KH, KW = _to3(ksp, 1)
    sd, sh, sw = _to3(strides, 1)
    dd, dh, dw = _to3(dil, 1)
    pf, pt, pl = _to3(pads[:nsp], 0)
    pk, pb, pr = _to3(pads[nsp:], 0)
    return _i64(xs[0], xs[1], H, W, OH, OW, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, include,
                D, OD, KD, sd, dd, pf, pk)


def _build_pool(ctx, target):
    xs, ys = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    p = to_target(target, pool_geometry(ctx, xs, ys))
    is_max = ctx.node.op_type == "MaxPool"
    with_idx = is_max and len(ctx.node.outputs) > 1 and bool(ctx.node.outputs[1])
    col_major = int(ctx.attrs.get("storage_order", 0)) == 1
    dt = np.dtype(ctx.in_dtypes[0])
    lo = np.float32(-np.inf) if dt == np.float32 else dt.type(np.iinfo(dt).min)
    # integer MaxPool runs the Indices kernel (no NaN to skip), indices into a scratch buffer
    scratch = None if with_idx or dt == np.float32 else to_target(target, np.empty(max(_prod(ys), 1), np.int64))

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        if with_idx:
            target.launch(_MAXPOOL_IDX, out.shape[0], x, p, col_major, lo, out, flat(outputs[1]))
        elif scratch is not None:
            target.launch(_MAXPOOL_IDX, out.shape[0], x, p, col_major, lo, out, scratch)
        else:
            target.launch(_POOL, out.shape[0], x, p, is_max, out)

    return run


register("MaxPool", dtypes=("float32", "int8", "uint8"), since=12, until=28, check=_check_pool,
         note="1-3 spatial dims; ascending taps, NaN ignored; Indices (storage_order 0/1): the first "
              "maximal tap", kernels=(_POOL, _MAXPOOL_IDX))(_build_pool)
register("AveragePool", dtypes=F32, since=11, until=28, check=_check_pool,
         note="1-3 spatial dims; ascending float32 sum of taps, then / count")(_build_pool)


# =============================================================================
# GlobalAveragePool / GlobalMaxPool (any rank >= 3)
# Average: sum = 0.0f, += x over the spatial positions in ascending flat order,
# then / float32(count). Max: acc = -inf, if v > acc: acc = v (NaN ignored,
# as MaxPool). One output per (n, c) on both targets.
# =============================================================================


@dual
def _gpool_item(r, x, S, is_max, count):
    b = r * S
    if is_max:
        acc = np.float32(-np.inf)
        for j in range(S):
            v = x[b + j]
            if v > acc:
                acc = v
        return acc
    s = np.float32(0)
    for j in range(S):
        s += x[b + j]
    return _div(s, count)


_GPOOL = kernel_pair(
    "gpool", "x, S, is_max, count, out",
    """
    out[r] = _gpool_item(r, x, S, is_max, count)
    """, count="out.shape[0]", index="r", module=__name__)


def _check_gpool(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 3:
        return f"{ctx.node.op_type}: input must be (N, C, spatial...)"
    return None


def _build_gpool(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    S = _prod(xs[2:])
    is_max = ctx.node.op_type == "GlobalMaxPool"
    count = np.float32(S)

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_GPOOL, out.shape[0], x, S, is_max, count, out)

    return run


register(("GlobalAveragePool", "GlobalMaxPool"), dtypes=F32, since=1, until=28, check=_check_gpool,
         note="ascending spatial order per (n, c)")(_build_gpool)


# =============================================================================
# BatchNormalization (inference)
# Per channel: f = scale / sqrt_f32(var + eps); per element:
# y = (x - mean) * f + b  (each operation rounded to float32, no FMA).
# The CPU computes f once per (n, c) block, CUDA once per element; the same
# scalar functions give the same bits.
# =============================================================================


@njit(**_JIT)
def _bn_factor(scale, var, eps):
    scale = np.float32(scale)
    var = np.float32(var)
    eps = np.float32(eps)
    return scale / sqrt_f32(var + eps)


@njit(**_JIT)
def _bn_apply(x, mean, f, b):
    x = np.float32(x)
    mean = np.float32(mean)
    f = np.float32(f)
    b = np.float32(b)
    t = (x - mean) * f
    return t + b


_BN = kernel_pair(
    "bn", "x, scale, bias, mean, var, eps, C, S, out",
    """
    c = (i // S) % C
    f = _bn_factor(scale[c], var[c], eps)
    out[i] = _bn_apply(x[i], mean[c], f, bias[c])
    """, count="out.shape[0]", index="i", module=__name__)


def _check_bn(ctx, target):
    if int(ctx.attrs.get("spatial", 1)) != 1:
        return "BatchNormalization: spatial=0 (per-element statistics, opset 7) is not supported"
    if int(ctx.attrs.get("training_mode", 0)) != 0:
        return "BatchNormalization: training_mode=1 is not supported (inference only)"
    if len([o for o in ctx.node.outputs if o]) != 1:
        return "BatchNormalization: only the Y output is supported (inference)"
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 2:
        return "BatchNormalization: input must be (N, C, ...)"
    C = xs[1]
    for i in range(1, 5):
        s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
        if s is None or _prod(s) != C or len(s) != 1:
            return "BatchNormalization: scale, B, mean and var must be 1-D of length C"
        d = ctx.in_dtypes[i] if i < len(ctx.in_dtypes) else None
        if d is not None and np.dtype(d) != np.float32 and ctx.const(i) is None:
            # BatchNormalization-15 lets them differ from X; constant ones are converted at build
            return (f"BatchNormalization: input {i} is {np.dtype(d).name} and not a constant; the kernel "
                    "takes float32 scale, B, mean and var (or constants of another float type)")
    return None


def _build_bn(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    C = int(xs[1])
    S = _prod(xs[2:])
    eps = np.float32(ctx.attrs.get("epsilon", 1e-5))
    # parameters of another float type (BatchNormalization-15's T1/T2) are constants: float32 copies
    conv = {i: to_target(target, np.asarray(ctx.const(i), np.float32).reshape(-1)) for i in range(1, 5)
            if np.dtype(ctx.in_dtypes[i]) != np.float32}

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        sc, b, mean, var = (conv[i] if i in conv else flat(inputs[i]) for i in range(1, 5))
        target.launch(_BN, out.shape[0], x, sc, b, mean, var, eps, C, S, out)

    return run


register("BatchNormalization", dtypes=F32, since=7, check=_check_bn,
         note="inference: (x - mean) * (scale / sqrt(var + eps)) + B")(_build_bn)


# =============================================================================
# LRN
# Per element: s = 0.0f; s = s + v*v over channels c - floor((size-1)/2) ..
# c + ceil((size-1)/2) (clipped), ascending; then
# y = x / pow_f32(bias + coef * s, beta), coef = float32(alpha) / float32(size)
# computed once on the host. Both targets: per output element.
# =============================================================================


@njit(**_JIT)
def _lrn_finish(x, s, coef, bias, beta):
    x = np.float32(x)
    s = np.float32(s)
    coef = np.float32(coef)
    bias = np.float32(bias)
    beta = np.float32(beta)
    t = coef * s
    base = bias + t
    return x / pow_f32(base, beta)


@dual
def _lrn_item(i, x, C, S, lo, hi, coef, bias, beta):
    c = (i // S) % C
    b = i - c * S
    c0 = c - lo
    if c0 < 0:
        c0 = 0
    c1 = c + hi
    if c1 > C - 1:
        c1 = C - 1
    s = np.float32(0)
    for cc in range(c0, c1 + 1):
        v = x[b + cc * S]
        s += v * v
    return np.float32(_lrn_finish(x[i], s, coef, bias, beta))


_LRN = kernel_pair(
    "lrn", "x, C, S, lo, hi, coef, bias, beta, out",
    """
    out[i] = _lrn_item(i, x, C, S, lo, hi, coef, bias, beta)
    """, count="out.shape[0]", index="i", module=__name__)


def _check_lrn(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 3:
        return "LRN: input must be (N, C, spatial...)"
    if "size" not in ctx.attrs or int(ctx.attrs["size"]) < 1:
        return "LRN: the size attribute is required"
    return None


def _build_lrn(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    C = int(xs[1])
    S = _prod(xs[2:])
    size = int(ctx.attrs["size"])
    alpha = np.float32(ctx.attrs.get("alpha", 1e-4))
    beta = np.float32(ctx.attrs.get("beta", 0.75))
    bias = np.float32(ctx.attrs.get("bias", 1.0))
    coef = np.float32(alpha / np.float32(size))
    lo = (size - 1) // 2
    hi = size - 1 - lo

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_LRN, out.shape[0], x, C, S, lo, hi, coef, bias, beta, out)

    return run


register("LRN", dtypes=F32, since=1, check=_check_lrn,
         note="ascending channel-window sum of squares; x / pow(bias + alpha/size * s, beta)")(_build_lrn)


# =============================================================================
# Softmax / LogSoftmax (opset >= 13: one axis)
# Per row (all elements along the axis): m = max (first element, then
# if v > m: m = v, ascending); s = 0.0f, s = s + exp_f32(v - m) ascending;
# Softmax: y = exp_f32(v - m) / s; LogSoftmax: y = (v - m) - log_f32(s).
# CUDA: one row per thread (_softmax_row). CPU (_softmax_cpu): the same
# sequence per element, in passes over contiguous slices (max, exps, sum,
# divide for a last-axis softmax, four rows at a time with their max and sum
# chains interleaved, the exps by pmath.exp_nonpos_f32 = exp_f32's bits for
# v - m <= 0; the axis outside and the inner index inside, with a max and a sum
# per inner index, otherwise).
# =============================================================================


@dual
def _softmax_row(r, x, out, A, inner, is_log):
    o = r // inner
    j = r - o * inner
    b = o * A * inner + j
    if A <= 0:
        return
    m = x[b]
    for a in range(1, A):
        v = x[b + a * inner]
        if v > m:
            m = v
    s = np.float32(0)
    if is_log:
        for a in range(A):
            s += np.float32(exp_f32(x[b + a * inner] - m))
        ls = np.float32(log_f32(s))
        for a in range(A):
            k = b + a * inner
            out[k] = (x[k] - m) - ls
    else:
        # keep exp(x - m) in the output, then divide it in place (same bits as recomputing)
        for a in range(A):
            k = b + a * inner
            e = np.float32(exp_f32(x[k] - m))
            out[k] = e
            s += e
        for a in range(A):
            k = b + a * inner
            out[k] = _div(out[k], s)


_SOFTMAX = kernel_pair(
    "softmax", "x, out, rows, A, inner, is_log",
    """
    _softmax_row(r, x, out, A, inner, is_log)
    """, count="rows", index="r", module=__name__)


def _check_softmax(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None:
        return f"{ctx.node.op_type}: unknown rank"
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", -1))
    if rank == 0 or ax < -rank or ax >= rank:
        return f"{ctx.node.op_type}: axis {ax} out of range for rank {rank}"
    return None


def _build_softmax(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", -1))
    ax = ax + rank if ax < 0 else ax
    A = int(xs[ax])
    inner = _prod(xs[ax + 1:])
    rows = _prod(xs[:ax]) * inner
    is_log = ctx.node.op_type == "LogSoftmax"

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_SOFTMAX, rows, x, out, rows, A, inner, is_log)

    return run


register(("Softmax", "LogSoftmax"), dtypes=F32, since=13, check=_check_softmax,
         note="max, ascending sum of exp(x - max), then exp(x - max) / sum (Log: (x - max) - log(sum))")(
    _build_softmax)


# =============================================================================
# LayerNormalization (opset >= 17)
# Per row of D = prod(shape[axis:]) elements: s = 0.0f, s += x ascending;
# mean = s / float32(D); q = 0.0f, q += (x - mean)^2 ascending (d = x - mean;
# q = q + d*d); var = q / float32(D); inv = 1.0f / sqrt_f32(var + eps);
# y = ((x - mean) * inv) * scale (+ bias). Optional outputs Mean, InvStdDev
# get mean and inv. Both targets: one row per item (the CPU fast path,
# fastpaths._ln_cpu, runs eight rows at a time with their sum chains
# interleaved: each row's sequence unchanged).
# =============================================================================


@njit(**_JIT)
def _ln_inv(q, Df, eps):
    q = np.float32(q)
    Df = np.float32(Df)
    eps = np.float32(eps)
    var = q / Df
    return np.float32(1.0) / sqrt_f32(var + eps)


@njit(**_JIT)
def _ln_apply(x, mean, inv, sc):
    x = np.float32(x)
    mean = np.float32(mean)
    inv = np.float32(inv)
    sc = np.float32(sc)
    return ((x - mean) * inv) * sc


@dual
def _ln_row(r, x, out, scale, bias, has_b, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out, inv_out,
            want_stats):
    b = r * D
    s = np.float32(0)
    for j in range(D):
        s += x[b + j]
    mean = np.float32(_div(s, Df))
    q = np.float32(0)
    for j in range(D):
        d = x[b + j] - mean
        q += d * d
    inv = np.float32(_ln_inv(q, Df, eps))
    for j in range(D):
        so = j if sfull else bcast_offset(j, nshape, sstr)
        y = np.float32(_ln_apply(x[b + j], mean, inv, scale[so]))
        if has_b:
            bo = j if bfull else bcast_offset(j, nshape, bstr)
            y = y + bias[bo]
        out[b + j] = y
    if want_stats:
        mean_out[r] = mean
        inv_out[r] = inv


_LN = kernel_pair(
    "ln", "x, out, scale, bias, has_b, rows, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out, inv_out, want_stats",
    """
    _ln_row(r, x, out, scale, bias, has_b, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out, inv_out,
            want_stats)
    """, count="rows", index="r", module=__name__)


def _check_ln(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0:
        return "LayerNormalization: input must have rank >= 1"
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", -1))
    if ax < -rank or ax >= rank:
        return f"LayerNormalization: axis {ax} out of range for rank {rank}"
    if int(ctx.attrs.get("stash_type", 1)) != 1:
        return "LayerNormalization: only stash_type=1 (float32) is supported"
    ax = ax + rank if ax < 0 else ax
    ns = tuple(xs[ax:])
    for i in (1, 2):
        if i == 2 and not ctx.has_input(2):
            continue
        s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
        if s is None:
            return "LayerNormalization: scale/bias shape unknown"
        try:
            if tuple(np.broadcast_shapes(tuple(s), ns)) != ns:
                raise ValueError
        except ValueError:
            return f"LayerNormalization: {'scale' if i == 1 else 'bias'} shape {tuple(s)} " \
                   f"does not broadcast to the normalized shape {ns}"
    outs = ctx.node.outputs
    for k in (1, 2):
        if len(outs) > k and outs[k] and k < len(ctx.out_dtypes) and ctx.out_dtypes[k] is not None \
                and np.dtype(ctx.out_dtypes[k]) != np.float32:
            return "LayerNormalization: Mean/InvStdDev outputs must be float32"
    return None


def _build_ln(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", -1))
    ax = ax + rank if ax < 0 else ax
    ns = tuple(xs[ax:])
    D = _prod(ns)
    rows = _prod(xs[:ax])
    Df = np.float32(D)
    eps = np.float32(ctx.attrs.get("epsilon", 1e-5))
    has_b = ctx.has_input(2)
    ss = tuple(ctx.in_shapes[1])
    sfull = _prod(ss) == D
    bs = tuple(ctx.in_shapes[2]) if has_b else ns
    bfull = _prod(bs) == D
    nshape = shape_array(ns)
    sstr = broadcast_strides(ss, ns)
    bstr = broadcast_strides(bs, ns)
    outs = ctx.node.outputs
    want_mean = len(outs) > 1 and bool(outs[1])
    want_inv = len(outs) > 2 and bool(outs[2])
    want_stats = want_mean or want_inv
    nshape, sstr, bstr, d_scratch = to_target(target, nshape, sstr, bstr, np.zeros(max(rows, 1), np.float32))
    d_scratch2 = to_target(target, np.zeros(max(rows, 1), np.float32))

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        sc = flat(inputs[1])
        b = flat(inputs[2]) if has_b else sc
        mo = flat(outputs[1]) if want_mean else d_scratch
        io = flat(outputs[2]) if want_inv else d_scratch2
        args = (x, out, sc, b, has_b, rows, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mo, io, want_stats)
        target.launch(_LN, rows, *args)

    return run


register("LayerNormalization", dtypes=F32, since=17, check=_check_ln,
         note="two-pass mean/variance in ascending order; ((x - mean) * inv) * scale + bias")(_build_ln)


# =============================================================================
# Dropout (inference): identity copy; the optional mask output is all True.
# =============================================================================


_FILL_TRUE = kernel_pair(
    "fill_true", "out",
    """
    out[i] = True
    """, count="out.shape[0]", index="i", module=__name__)


def _check_dropout(ctx, target):
    if len(ctx.node.outputs) > 1 and ctx.node.outputs[1]:
        dt = ctx.out_dtypes[1] if len(ctx.out_dtypes) > 1 else None
        if dt is None or np.dtype(dt) != np.bool_:
            return "Dropout: a mask output that is not bool (Dropout-7) is not supported"
    if ctx.has_input(2):
        c = ctx.const(2)
        if c is None:
            return "Dropout: training_mode is not a constant (only inference is supported)"
        if bool(np.asarray(c).reshape(-1)[0]):
            return "Dropout: training_mode=True is not supported (inference only)"
    return None


def _build_dropout(ctx, target):
    want_mask = len(ctx.node.outputs) > 1 and bool(ctx.node.outputs[1])

    @replayable
    def run(inputs, outputs):
        copy_array(target, inputs[0], outputs[0])
        if want_mask:
            m = flat(outputs[1])
            target.launch(_FILL_TRUE, m.shape[0], m)

    return run


register("Dropout", dtypes=F32, since=7, until=28, check=_check_dropout,
         note="inference: identity (mask all True); training_mode must be absent or constant False")(_build_dropout)


# =============================================================================
# Resize (modes nearest and linear)
# Coordinates are mapped on the host, once per axis and output position, with
# the ONNX reference's float64 formulas, into integer index tables (and, for
# linear, float32 weights) shared by both targets. Linear interpolates over at
# most two axes (e.g. H and W of NCHW): with weights (a0, a1) on the inner
# axis and (b0, b1) on the outer one,
#   y = (x00*a0 + x01*a1)*b0 + (x10*a0 + x11*a1)*b1   (float32, this order),
#   one axis: y = x0*a0 + x1*a1.
# CPU: row by row over the last axis; CUDA: one thread per output element.
# Axes with an identity mapping are copied, not interpolated.
# =============================================================================


def _resize_axis_tables(mode, ctm, nearest_mode, in_w, out_w, scale):
    """(idx0, idx1, w0, w1, identity) for one axis, per the ONNX reference."""
    if math.isclose(scale, 1.0) and out_w == in_w:
        idx = np.arange(out_w, dtype=np.int64)
        return idx, idx, np.ones(out_w, np.float32), np.zeros(out_w, np.float32), True
    output_width = scale * in_w
    y = np.arange(out_w, dtype=np.float64)
    if ctm == "align_corners":
        x_ori = np.zeros(out_w) if output_width == 1 else y * (in_w - 1) / (output_width - 1)
    elif ctm == "asymmetric":
        x_ori = y / scale
    elif ctm == "pytorch_half_pixel":
        x_ori = np.full(out_w, -0.5) if output_width == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x_ori = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        adjustment = out_w / output_width
        center = in_w / 2
        offset = center * (1 - adjustment)
        x_ori = offset + (y + 0.5) / scale - 0.5
    else:  # pragma: no cover - rejected by the check
        raise ValueError(ctm)
    x_int = np.floor(x_ori).astype(np.int64)
    is_int = x_ori == x_int
    ratio = np.where(is_int, 1.0, x_ori - x_int)
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            up = ratio > 0.5
        elif nearest_mode == "round_prefer_ceil":
            up = ratio >= 0.5
        elif nearest_mode == "floor":
            up = np.zeros(out_w, bool)
        else:  # ceil
            up = np.ones(out_w, bool)
        # an integer x_ori: the reference's neighbours are (x-1, x) with weights (0, 1): x itself
        idx = np.where(is_int, x_int, np.where(up, x_int + 1, x_int))
        idx = np.clip(idx, 0, in_w - 1).astype(np.int64)
        return idx, idx, np.ones(out_w, np.float32), np.zeros(out_w, np.float32), False
    # linear: neighbours (x_int, x_int + 1) with weights (1 - r, r); integer x_ori: (x-1, x), (0, 1)
    i0 = np.where(is_int, x_int - 1, x_int)
    i1 = i0 + 1
    w1 = ratio
    w0 = 1.0 - ratio
    i0 = np.clip(i0, 0, in_w - 1).astype(np.int64)
    i1 = np.clip(i1, 0, in_w - 1).astype(np.int64)
    return i0, i1, w0.astype(np.float32), w1.astype(np.float32), False


@dual
def _resize_item(i, x, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b):
    """Output element i. Axes other than ax_a/ax_b (the interpolated ones,
    ax_b the inner one; -1 when absent) use idx0 (nearest / identity)."""
    nd = oshape.shape[0]
    base = 0
    t = i
    pa = 0
    pb = 0
    for d in range(nd - 1, -1, -1):
        n = oshape[d]
        o = t % n
        t = t // n
        k = tab_off[d] + o
        if d == ax_a:
            pa = k
        elif d == ax_b:
            pb = k
        else:
            base += idx0[k] * istr[d]
    if nlin == 0:
        return x[base]
    if nlin == 1:
        sb = istr[ax_b]
        return _lerp(x[base + idx0[pb] * sb], x[base + idx1[pb] * sb], w0[pb], w1[pb])
    sa = istr[ax_a]
    sb = istr[ax_b]
    r0 = base + idx0[pa] * sa
    r1 = base + idx1[pa] * sa
    c0 = idx0[pb] * sb
    c1 = idx1[pb] * sb
    a0 = w0[pb]
    a1 = w1[pb]
    top = _lerp(x[r0 + c0], x[r0 + c1], a0, a1)
    bot = _lerp(x[r1 + c0], x[r1 + c1], a0, a1)
    return _lerp(top, bot, w0[pa], w1[pa])


@njit(**_JIT)
def _lerp(v0, v1, a0, a1):
    v0 = np.float32(v0)
    v1 = np.float32(v1)
    a0 = np.float32(a0)
    a1 = np.float32(a1)
    t0 = v0 * a0
    t1 = v1 * a1
    return t0 + t1


_RESIZE = kernel_pair(
    "resize", "x, out, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b",
    """
    out[i] = _resize_item(i, x, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b)
    """, count="out.shape[0]", index="i", module=__name__)


_CTM = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_params(ctx):
    """(scales, sizes) as float64 / int lists from constant inputs, or a reason string."""
    xs = ctx.in_shapes[0]
    rank = len(xs)
    scales = sizes = None
    if ctx.has_input(2):
        c = ctx.const(2)
        if c is None:
            return "Resize: the scales input is not a constant"
        c = np.asarray(c).reshape(-1)
        if c.size:
            scales = [float(v) for v in c]
    if ctx.has_input(3):
        c = ctx.const(3)
        if c is None:
            return "Resize: the sizes input is not a constant"
        c = np.asarray(c).reshape(-1)
        if c.size:
            sizes = [int(v) for v in c]
    if (scales is None) == (sizes is None):
        return "Resize: exactly one of scales and sizes must be given"
    if (scales or sizes) and len(scales or sizes) != rank:
        return "Resize: scales/sizes length must equal the input rank"
    return scales, sizes


def _check_resize(ctx, target):
    at = ctx.attrs
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0:
        return "Resize: unknown or zero input rank"
    mode = at.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        return f"Resize: mode {mode!r} not supported (nearest, linear only)"
    ctm = at.get("coordinate_transformation_mode", "half_pixel")
    if ctm not in _CTM:
        return f"Resize: coordinate_transformation_mode {ctm!r} not supported"
    if ctm == "half_pixel_symmetric" and ctx.opset < 19:
        return "Resize: half_pixel_symmetric needs opset 19"
    if mode == "nearest" and at.get("nearest_mode", "round_prefer_floor") not in _NEAREST:
        return f"Resize: nearest_mode {at.get('nearest_mode')!r} not supported"
    if int(at.get("antialias", 0)):
        return "Resize: antialias=1 not supported"
    if "axes" in at:
        return "Resize: the axes attribute is not supported"
    if int(at.get("exclude_outside", 0)):
        return "Resize: exclude_outside=1 not supported"
    if at.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        return "Resize: keep_aspect_ratio_policy other than 'stretch' is not supported"
    p = _resize_params(ctx)
    if isinstance(p, str):
        return p
    ys = ctx.out_shapes[0] if ctx.out_shapes else None
    if ys is not None and any(x == 0 and y != 0 for x, y in zip(xs, ys)):
        return "Resize: an empty axis cannot be resized to a non-empty one (nothing to interpolate from)"
    if mode == "linear":
        scales, sizes = p
        if ys is not None:
            n_interp = 0
            for d in range(len(xs)):
                sc = scales[d] if scales is not None else (sizes[d] / xs[d] if xs[d] else 1.0)
                if not (math.isclose(sc, 1.0) and ys[d] == xs[d]):
                    n_interp += 1
            if n_interp > 2:
                return "Resize: linear interpolation over more than two axes is not supported"
    return None


def _build_resize(ctx, target):
    at = ctx.attrs
    xs, ys = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    rank = len(xs)
    mode = at.get("mode", "nearest")
    ctm = at.get("coordinate_transformation_mode", "half_pixel")
    nm = at.get("nearest_mode", "round_prefer_floor")
    p = _resize_params(ctx)
    if isinstance(p, str):
        raise _err(ctx, p)
    scales, sizes = p
    if scales is None:   # an empty input axis stays empty (checked below): its scale is unused
        scales = [sizes[d] / xs[d] if xs[d] else 1.0 for d in range(rank)]
    i0s, i1s, w0s, w1s, offs, interp = [], [], [], [], [], []
    off = 0
    for d in range(rank):
        if xs[d] == 0 and ys[d] > 0:
            raise _err(ctx, "cannot resize an empty axis to a non-empty one")
        if ys[d] == 0:
            i0, i1, w0, w1, ident = (np.zeros(0, np.int64),) * 2 + (np.zeros(0, np.float32),) * 2 + (True,)
        else:
            i0, i1, w0, w1, ident = _resize_axis_tables(mode, ctm, nm, xs[d], ys[d], float(scales[d]))
        offs.append(off)
        off += ys[d]
        i0s.append(i0)
        i1s.append(i1)
        w0s.append(w0)
        w1s.append(w1)
        if mode == "linear" and not ident:
            interp.append(d)
    if len(interp) > 2:
        raise _err(ctx, "linear interpolation over more than two axes is not supported")
    nlin = len(interp)
    ax_a = interp[0] if nlin == 2 else -1
    ax_b = interp[-1] if nlin >= 1 else -1
    cat = lambda parts, dt: np.concatenate(parts).astype(dt) if off else np.zeros(1, dt)  # noqa: E731
    istr = np.ones(max(rank, 1), np.int64)
    acc = 1
    for d in range(rank - 1, -1, -1):
        istr[d] = acc
        acc *= xs[d]
    tabs = to_target(target, shape_array(ys), istr, np.asarray(offs or [0], np.int64),
                     cat(i0s, np.int64), cat(i1s, np.int64), cat(w0s, np.float32), cat(w1s, np.float32))

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_RESIZE, out.shape[0], x, out, *tabs, nlin, ax_a, ax_b)

    return run


register("Resize", dtypes=F32, since=11, check=_check_resize,
         note="nearest / (bi)linear; host-side coordinate tables; constant scales or sizes")(_build_resize)


# =============================================================================
# Pad (constant / reflect / edge / wrap): pure data movement, any dtype.
# =============================================================================

_PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


@dual
def _pad_map(j, n, mode):
    """Input index along one axis for the (unpadded) index j, or -1 for the constant value."""
    if j >= 0 and j < n:
        return j
    if mode == 0:
        return -1
    if mode == 2:
        return 0 if j < 0 else n - 1
    if mode == 1:
        if n == 1:
            return 0
        per = 2 * (n - 1)
        j = j % per
        if j < 0:
            j += per
        if j >= n:
            j = per - j
        return j
    j = j % n
    if j < 0:
        j += n
    return j


@dual
def _pad_src(i, oshape, ishape, istr, pbeg, mode):
    """Flat input offset of output element i, or -1 for the constant value."""
    off = 0
    t = i
    for d in range(oshape.shape[0] - 1, -1, -1):
        n_o = oshape[d]
        o = t % n_o
        t = t // n_o
        j = _pad_map(o - pbeg[d], ishape[d], mode)
        if j < 0:
            return -1
        off += j * istr[d]
    return off


_PAD = kernel_pair(
    "pad", "x, out, cval, oshape, ishape, istr, pbeg, mode",
    """
    s = _pad_src(i, oshape, ishape, istr, pbeg, mode)
    out[i] = cval[0] if s < 0 else x[s]
    """, count="out.shape[0]", index="i", module=__name__)


def _pad_layout(ctx, xs, pads, axes):
    """Begin pads per dim and the output shape from the pads input (and axes)."""
    rank = len(xs)
    pads = [int(v) for v in np.asarray(pads).reshape(-1)]
    if axes is None:
        axes = list(range(rank))
    else:
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)]
    k = len(axes)
    if len(pads) != 2 * k:
        raise _err(ctx, f"pads has {len(pads)} values, expected {2 * k}")
    beg = [0] * rank
    end = [0] * rank
    for i, a in enumerate(axes):
        beg[a] = pads[i]
        end[a] = pads[k + i]
    oshape = tuple(xs[d] + beg[d] + end[d] for d in range(rank))
    return beg, oshape


def _check_pad(ctx, target):
    mode = ctx.attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        return f"Pad: mode {mode!r} not supported"
    if mode == "wrap" and ctx.opset < 19:
        return "Pad: mode 'wrap' needs opset 19"
    if ctx.in_shapes[0] is None:
        return "Pad: unknown input rank"
    if not target.host:
        for i, what in ((1, "pads"), (2, "constant_value"), (3, "axes")):
            if ctx.has_input(i) and ctx.const(i) is None:
                return f"Pad: the {what} input is not a constant (the CUDA kernel needs it at build time)"
    if ctx.has_input(1) and ctx.const(1) is not None:
        pads = np.asarray(ctx.const(1)).reshape(-1)
        if mode != "constant" and (pads < 0).any():
            return f"Pad: negative pads with mode {mode!r} are not supported"
        xs = ctx.in_shapes[0]
        if mode in ("reflect", "edge", "wrap") and any(d == 0 for d in xs):
            return f"Pad: mode {mode!r} cannot pad an empty axis"
    return None


def _build_pad(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    mode = _PAD_MODES[ctx.attrs.get("mode", "constant")]
    dtype = np.dtype(ctx.in_dtypes[0])
    has_cv = ctx.has_input(2)
    has_axes = ctx.has_input(3)

    def meta(inputs):
        pads = ctx.const(1)
        if pads is None:
            pads = inputs[1]
        axes = None
        if has_axes:
            axes = ctx.const(3)
            if axes is None:
                axes = inputs[3]
        cv = None
        if has_cv:
            cv = ctx.const(2)
            if cv is None:
                cv = inputs[2]
        cval = np.zeros(1, dtype)
        if cv is not None and np.asarray(cv).size:
            cval[0] = np.asarray(cv).reshape(-1)[0]
        beg, oshape = _pad_layout(ctx, xs, pads, axes)
        if tuple(oshape) != tuple(ctx.out_shapes[0]):
            raise _err(ctx, f"output shape {tuple(ctx.out_shapes[0])} != {oshape} from the pads")
        istr = np.ones(max(rank, 1), np.int64)
        acc = 1
        for d in range(rank - 1, -1, -1):
            istr[d] = acc
            acc *= xs[d]
        return to_target(target, cval, shape_array(oshape), shape_array(xs), istr,
                         np.asarray(beg or [0], np.int64))

    static = all((not ctx.has_input(i)) or ctx.const(i) is not None for i in (1, 2, 3))
    fixed = meta(None) if static else None

    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        m = fixed if fixed is not None else meta(inputs)
        target.launch(_PAD, out.shape[0], x, out, *m, mode)

    return replayable(run) if fixed is not None else run   # else it reads the pads at every run


register("Pad", dtypes=ALL, since=11, until=28, check=_check_pad,
         note="constant/reflect/edge/wrap; pads, value and axes must be constants on CUDA")(_build_pad)


# =============================================================================
# Old schema versions whose semantics differ (model-zoo CNNs are opset 9, paddle 11-12)
# =============================================================================
def _check_softmax_old(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None:
        return f"{ctx.node.op_type}: unknown rank"
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", 1))
    if rank == 0 or ax < -rank or ax >= rank:
        return f"{ctx.node.op_type}: axis {ax} out of range for rank {rank}"
    return None


def _build_softmax_old(ctx, target):
    """Softmax/LogSoftmax-1/11: the input is coerced to 2-D at ``axis`` (default 1) and each
    row of prod(shape[axis:]) elements is normalised: the opset-13 kernel with inner = 1."""
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", 1))
    ax = ax + rank if ax < 0 else ax
    A = _prod(xs[ax:])
    rows = _prod(xs[:ax])
    is_log = ctx.node.op_type == "LogSoftmax"

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        if A:
            target.launch(_SOFTMAX, rows, x, out, rows, A, 1, is_log)

    return run


register(("Softmax", "LogSoftmax"), dtypes=F32, since=1, until=12, check=_check_softmax_old,
         note="opset < 13: coerced to 2-D at axis (default 1); the opset-13 row kernel")(_build_softmax_old)


def _check_pad2(ctx, target):
    mode = ctx.attrs.get("mode", "constant")
    if mode not in _PAD_MODES or mode == "wrap":
        return f"Pad: mode {mode!r} not supported"
    xs = ctx.in_shapes[0]
    if xs is None:
        return "Pad: unknown input rank"
    pads = np.asarray(ctx.attrs.get("pads", []), np.int64).reshape(-1)
    if pads.size != 2 * len(xs):
        return f"Pad: pads has {pads.size} values, expected {2 * len(xs)}"
    if mode != "constant" and (pads < 0).any():
        return f"Pad: negative pads with mode {mode!r} are not supported"
    if mode in ("reflect", "edge") and any(d == 0 for d in xs):
        return f"Pad: mode {mode!r} cannot pad an empty axis"
    return None


class _AttrInputs:
    """A view of a Pad-2 context whose pads and value attributes read as constant inputs, so
    that the Pad-11+ build serves it unchanged."""

    def __init__(self, ctx):
        self._ctx = ctx
        dt = np.dtype(ctx.in_dtypes[0])
        self._c = {1: np.asarray(ctx.attrs.get("pads", []), np.int64),
                   2: np.asarray([ctx.attrs.get("value", 0.0)]).astype(dt)}

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def has_input(self, i):
        return i in self._c or (i == 0 and self._ctx.has_input(0))

    def const(self, i):
        return self._c.get(i)


register("Pad", dtypes=F32, since=2, until=10, check=_check_pad2,
         note="Pad-2: pads/mode/value attributes (the Pad-11 kernel)")(
    lambda ctx, target: _build_pad(_AttrInputs(ctx), target))


def _build_clip6(ctx, target):
    from .elementwise import _CLIP
    lo = np.float32(ctx.attrs.get("min", -np.inf))
    hi = np.float32(ctx.attrs.get("max", np.inf))
    aux = np.int64(0)

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_CLIP["f32"], out.shape[0], x, out, lo, hi, aux)

    return run


register("Clip", dtypes=F32, since=6, until=10,
         note="Clip-6: min/max attributes (the Clip-11 float32 kernel)")(_build_clip6)
