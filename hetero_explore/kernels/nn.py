"""Neural-network ops (float32), written once for every target: MatMul, Gemm, Conv and
ConvTranspose, and the scalar helpers the other neural-network modules share (:mod:`.pool`,
:mod:`.norm`, :mod:`.activation`, :mod:`.resize`).

Every output element's float math lives in one ``@dual`` (array-walking) or
``@njit`` (scalar) function that the CPU kernel and the CUDA kernel both
call, and every accumulation has one fixed order, documented per op below.
The CPU fast paths (:mod:`.cpu_fast`, registered by key in :mod:`.overrides`)
may visit output elements in a different order than the CUDA threads (e.g. a
row of accumulators for MatMul and Conv) as long as each output element sees
exactly the same sequence of float32 operations: that is bitwise the same
result; the tests check them bit for bit against the generated kernels.

Multiply-accumulates are explicit fused multiply-adds (:func:`.fmadd.fma`: the exact
product plus the accumulator, rounded once; ``llvm.fma`` on the CPU, ``fma.rn.f32`` on
CUDA), which IEEE 754 defines to the bit, so they are as portable as a multiply or an add.
Everything else rounds every operation: a compiler contracting ``a*b + c`` on its own is
not portable, so contraction stays off (no fast-math; NVVM gets ``-fma=0``, see
:mod:`.target`).

Transcendental functions come from :mod:`.pmath` (portable, IEEE-exact
building blocks) -- never ``math.exp`` and friends, which differ between
numba's CPU target and the CUDA simulator.

Simulator pitfall: there an ``@njit`` helper runs as compiled CPU code and
returns a *Python float* (float64). Passed on to another untyped ``@njit``
function it would compile a float64 variant, so every scalar helper here
converts its arguments with ``np.float32(...)``, and ``@dual`` code wraps
helper results in ``np.float32(...)`` before doing arithmetic with them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..ir.errors import KernelError
from .common import node_error as _err, prod as _prod  # noqa: F401
from .common import bcast_offset, broadcast_strides, dual, flat, kernel_pair, replayable, shape_array, to_target
from .fmadd import fma
from .opdef import OpList

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
# Order: per output element, acc = 0.0f, then acc = fma(a[k], b[k], acc) for
# k = 0 .. K-1 (the exact product plus acc, rounded once to float32).
# Gemm then computes y = alpha * acc, and y = y + beta * c when C is given.
# CPU (cpu_fast/gemm.py, _gemm_rows_cpu): a register-blocked GEMM. The bulk (rows in blocks of
# _MK_R, columns in panels of _MK_W) runs a micro-kernel (_mk_tile) that
# holds an _MK_R x _MK_W block of accumulators in vector registers and
# updates it k by k, ascending (one vector fma per step);
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
# layout once when the node is built (the "mm" prepare rule, CPU with fast paths
# on), and the packed GEMM multiplies A by it in place; a MatMul's batches of A
# that share a 2-D B run as one product of all their rows.
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
        acc = fma(a[a0 + k * sak], b[b0 + k * sbk], acc)
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
# _MM's prepare rule (a target's build-time step for a constant B, see .overrides):
# target.prepared(_MM, b, rows=, sam=, sak=, c_input=None, scm=0, scn=0, epi=0, alpha=1.0,
# beta=1.0), b the K x N matrix B, returns a run function that computes the output's rows
# m < rows as _MM does (A's element (m, k) at m*sam + k*sak of input 0; C, when c_input is
# an input index, at m*scm + n*scn; epi and alpha/beta as _gemm_epilogue), or None.


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
    if bconst is not None and len(sb) == 2:
        # a constant B (a weight) shared by every batch of A: the batches are one (rows x K)
        # product, which a target's rule may prepare (the contract at _MM)
        run = target.prepared(_MM, np.asarray(bconst).reshape(K, N), rows=_prod(abatch) * M, sam=K, sak=1)
        if run is not None:
            return run

    @replayable
    def run(inputs, outputs):
        _mm_launch(target, flat(inputs[0]), flat(inputs[1]), flat(outputs[0]), c, dims, meta, 0, 1.0, 1.0)

    return run


register("MatMul", dtypes=F32, since=9, check=_check_matmul,
         note="per element: acc = fma(a, b, acc), k ascending from 0.0f")(_build_matmul)


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
    if ctx.const(1) is not None:
        # a constant B (a Linear layer's weight): a target's rule may prepare it (the contract at _MM)
        bmat = np.asarray(ctx.const(1), dtype=np.float32)
        run = target.prepared(_MM, bmat.T if tb else bmat, rows=M, sam=sam, sak=sak, c_input=2 if has_c else None,
                              scm=scm, scn=scn, epi=epi, alpha=alpha, beta=beta)
        if run is not None:
            return run
    # host: a constant transposed B is copied k-major once here instead of at every run (a
    # copy: the values, hence the bits, are the same)
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
         note="per element: acc = fma(a, b, acc), k ascending from 0.0f; then alpha*acc (+ beta*C)")(_build_gemm)


# =============================================================================
# Conv (1-, 2- and 3-D; every rank runs as 3-D with the missing leading
# spatial dims of size 1, so 1-D and 2-D run exactly the 2-D sequence)
# Order: per output element, acc = 0.0f, then acc = fma(w, xv, acc) over input
# channel c (of the group), kernel taps kd, kh, kw, all ascending,
# where xv is the input value, or 0.0f for a tap in the zero padding (as the
# ONNX spec pads with zeros; a padded tap still takes fma(w, 0.0f, acc)); then
# acc + bias[m].
# CPU (2-D, and 1-D as 2-D; cpu_fast/conv*.py): a k x k kernel runs as an indirect
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
                    acc = fma(w[wb + (kd * KH + kh) * KW + kw], xv, acc)
    acc = np.float32(acc)   # the simulator's fma returns a Python float: keep float32 arithmetic
    if has_b:
        acc = acc + bias[m]
    return acc


_CONV = kernel_pair(
    "conv", "x, w, bias, has_b, p, out",
    """
    out[i] = _conv_item(i, x, w, bias, has_b, p)
    """, count="out.shape[0]", index="i", module=__name__)
# _CONV's prepare rule (a target's build-time step for a constant weight, see .overrides):
# target.prepared(_CONV, w, p, has_b), w the flat float32 weight and p the host geometry
# (conv_geometry), returns a run function that computes what _CONV computes (inputs x, w,
# bias when has_b), or None (then _CONV runs).


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


def window_attrs(ctx, xs, ys, ksp):
    """strides, dilations and pads (begin + end) of a Conv/pool window of size ``ksp`` over
    ``xs``'s spatial dims: the attributes, auto_pad SAME_*/VALID resolved against the output
    shape ``ys``; KernelError (naming the node) when they do not fit the spatial dims or a
    kernel size, stride or dilation is below 1."""
    nsp = len(xs) - 2
    strides, dil, pads = _spatial_attrs(ctx, nsp, ksp)
    if len(strides) != nsp or len(dil) != nsp or len(pads) != 2 * nsp:
        raise _err(ctx, f"strides {strides}, dilations {dil} or pads {pads} do not fit {nsp} spatial dims")
    if any(int(k) < 1 for k in ksp) or any(int(s) < 1 for s in strides) or any(int(d) < 1 for d in dil):
        raise _err(ctx, f"kernel_shape {list(ksp)}, strides {strides} and dilations {dil} must be >= 1")
    ap = _auto_pad(ctx)
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(ap, xs[2:], ys[2:], ksp, strides, dil)
    elif ap == "VALID":
        pads = [0] * (2 * nsp)
    return strides, dil, pads


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
    strides, dil, pads = window_attrs(ctx, xs, ys, ksp)
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
    if wconst is not None:
        # a constant weight: a target's rule may prepare it (the contract at _CONV)
        run = target.prepared(_CONV, np.asarray(wconst, dtype=np.float32).reshape(-1), p, has_b)
        if run is not None:
            return run
    return _conv_like_run(target, _CONV, p, has_b)


def _conv_like_run(target, pair, p, has_b):
    """The run function of Conv and ConvTranspose: ``pair`` over every output element of
    geometry ``p`` (inputs x, w and the bias when ``has_b``)."""
    p, dummy = to_target(target, p, _dummy_f32())

    @replayable
    def run(inputs, outputs):
        x, w, out = flat(inputs[0]), flat(inputs[1]), flat(outputs[0])
        b = flat(inputs[2]) if has_b else dummy
        target.launch(pair, out.shape[0], x, w, b, has_b, p, out)

    return run


register("Conv", dtypes=F32, since=11, until=28, check=_check_conv,
         note="1-3 spatial dims; per element: acc = fma(w, x, acc), (c, kd, kh, kw) ascending from 0.0f, "
              "zero-padding taps take fma(w, 0, acc), then + bias")(_build_conv)


# =============================================================================
# ConvTranspose (1-, 2- and 3-D, as Conv: run as 3-D)
# Order: per output element, acc = 0.0f; for each kernel tap (kd, kh, kw)
# ascending that maps an input position (id, ih, iw) onto this output
# position: part = 0.0f, part = fma(w, x, part) over the input channels c of the
# group ascending, then acc = acc + part; finally acc + bias[m].
# CPU (1-D, 2-D): a GEMM (cols[(mm, kh, kw), (ih, iw)] = sum_c w * x, c
# ascending) and a col2im scatter in (kh, kw) order; each output element
# receives at most one part per tap, in the same order (the GEMM's fma steps). 3-D on the CPU and
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
                                part = fma(w[wo + c * Mg * KK], x[xo + c * DHW], part)
                            acc = acc + np.float32(part)   # float32 in the simulator too
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
    return _conv_like_run(target, _CONVT, p, ctx.has_input(2))


register("ConvTranspose", dtypes=F32, since=11, until=28, check=_check_convt,
         note="1-3 spatial dims; per element: taps (kd, kh, kw) ascending, each a c-ascending partial sum, "
              "then + bias")(_build_convt)
