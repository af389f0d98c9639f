"""Every hand-tuned CPU fast path gives bitwise the generated kernel's results.

A fast path (a rule registered by key for the "cpu" target in
``kernels/overrides.py``: a ``run`` that replaces a pair's generated kernel, a
``prepare`` step at build time; or an inline path taken only when the target's
``fast_paths`` is on) overrides the kernel generated from the op's per-item
statement, which is also what the CUDA kernel runs. Here every op family with a
fast path runs on random shapes twice: on the CPU provider (fast paths on) and on
a CPU provider whose target runs only the generated kernels; the outputs must be
equal bit for bit (NaNs by position).

The list of fast paths is read from the override registry, so a new fast path
without a case here fails :func:`test_every_fast_path_has_cases`.
"""

import os
import zlib

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from onnx import helper

from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.kernels import overrides, registry
from hetero_explore.kernels.common import cpu_kernel
from hetero_explore.kernels.target import CPUTarget

from support.harness import run_node

F = np.float32


class GeneratedCPU(NumbaCPUProvider):
    """The CPU provider with every fast path off: generated kernels only."""

    target = CPUTarget(generated_only=True)


FAST = NumbaCPUProvider()
GEN = GeneratedCPU("cpu-generated")


def canon(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.float32(np.nan), a).astype(a.dtype)
    return a.view(np.uint8)


def same(op, inputs, const_inputs=(), opset=17, n_out=1, **attrs):
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    node = helper.make_node(op, names, [f"y{k}" for k in range(n_out)], name=f"{op}_n", **attrs)
    a = run_node(FAST, node, inputs, opset=opset, const_inputs=const_inputs)
    b = run_node(GEN, node, inputs, opset=opset, const_inputs=const_inputs)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(canon(x), canon(y)), (op, attrs, [np.shape(i) for i in inputs])
    return a


def rnd(rng, *shape):
    return rng.standard_normal(shape).astype(F)


# --- one random-shape case generator per fast path (by KernelPair name) --------------
def case_mm(rng):
    for _ in range(6):
        M, K, N = (int(v) for v in rng.integers(1, 40, 3))
        same("MatMul", [rnd(rng, M, K), rnd(rng, K, N)])
        same("MatMul", [rnd(rng, 2, M, K), rnd(rng, K, N)])
        tb = int(rng.integers(0, 2))
        b = rnd(rng, N, K) if tb else rnd(rng, K, N)
        same("Gemm", [rnd(rng, M, K), b, rnd(rng, N)], const_inputs=(1,), transB=tb, alpha=0.5, beta=2.0)
    # one row times a constant B (a decoder step: the one-row micro-kernel, _MK_G panels at a
    # time, the last group panel by panel, a partial last panel), with and without the epilogue
    for K, N in ((1, 1), (7, 15), (256, 16), (33, 17), (300, 128), (64, 129), (40, 300)):
        same("MatMul", [rnd(rng, 1, K), rnd(rng, K, N)], const_inputs=(1,))
        same("MatMul", [rnd(rng, 1, 1, K), rnd(rng, K, N)], const_inputs=(1,))
        same("Gemm", [rnd(rng, 1, K), rnd(rng, K, N), rnd(rng, N)], const_inputs=(1,), alpha=0.5, beta=2.0)
    # large enough for the register-blocked micro-kernel and K blocking
    same("MatMul", [rnd(rng, 37, 300), rnd(rng, 300, 45)])
    # every row tail below the 6-row blocks (M % 6 = 0 .. 5: 2-row blocks, an odd last row)
    # with column edges (N % 16 != 0) and k blocks (K > 256)
    for M in range(24, 30):
        same("MatMul", [rnd(rng, M, 260), rnd(rng, 260, 35)])
    # A's rows 4 KiB apart (k-major repacking of A, including a tail block of 4 rows)
    same("MatMul", [rnd(rng, 16, 1024), rnd(rng, 1024, 64)])
    # unbatched products split in parallel blocks (48 rows x 256 columns), with the Gemm
    # epilogue per block (bias broadcast over rows, alpha, beta) and a constant transposed B
    same("MatMul", [rnd(rng, 101, 64), rnd(rng, 64, 300)])
    same("Gemm", [rnd(rng, 53, 96), rnd(rng, 270, 96), rnd(rng, 270)], const_inputs=(1,), transB=1,
         alpha=0.5, beta=2.0)
    same("Gemm", [rnd(rng, 96, 53), rnd(rng, 96, 270), rnd(rng, 1, 270)], transA=1)
    # the attention pattern: batched Q K^T (heads x S x d @ heads x d x S) and P V
    same("MatMul", [rnd(rng, 1, 4, 37, 32), rnd(rng, 1, 4, 32, 37)])
    same("MatMul", [rnd(rng, 1, 4, 37, 37), rnd(rng, 1, 4, 37, 32)])
    # edge columns (N % 16 = 1 .. 15) through the micro-kernels on a zero-padded panel, with
    # every row tail, K blocks (K > 256, resumed partial sums) and non-finite values in A (the
    # padding columns see them too, and are thrown away)
    for N in (1, 2, 7, 15, 17, 31, 46):
        for M in (1, 2, 5, 6, 7, 13):
            same("MatMul", [rnd(rng, M, 19), rnd(rng, 19, N)])
        a = rnd(rng, 8, 300)
        a[1, 3], a[4, 290], a[7, 0] = np.inf, np.nan, -np.inf
        same("MatMul", [a, rnd(rng, 300, N)])
    # the Gemm epilogue on row slices: C per column (N,), per row (M, 1), scalar (1,), full
    # (M, N) and absent; alpha/beta values whose products round, and a constant transposed B
    for cshape in ((29,), (11, 1), (1,), (11, 29), None):
        ins = [rnd(rng, 11, 40), rnd(rng, 29, 40)] + ([rnd(rng, *cshape)] if cshape else [])
        same("Gemm", ins, const_inputs=(1,), transB=1, alpha=0.3, beta=-1.7)
        same("Gemm", ins, transB=1, alpha=1.0, beta=1.0)
    # a constant B (an initializer) packed into panels once at build time (the "mm" prepare
    # rule: cpu_fast.gemm.mm_pack_b, mm_packed_cpu): MatMul with batched A sharing it, every
    # row tail (odd M too), N % 16 = 0 and not, K blocks, K = 0; Gemm with transA/transB, C of
    # every broadcast; in parallel panels
    for M, K, N in ((1, 5, 3), (2, 16, 16), (7, 19, 33), (13, 300, 48), (25, 64, 70), (6, 1, 17), (3, 0, 5)):
        same("MatMul", [rnd(rng, M, K), rnd(rng, K, N)], const_inputs=(1,))
        same("MatMul", [rnd(rng, 2, 3, M, K), rnd(rng, K, N)], const_inputs=(1,))
    same("MatMul", [rnd(rng, 5), rnd(rng, 5, 9)], const_inputs=(1,))
    a = rnd(rng, 9, 40)
    a[2, 5], a[8, 39] = np.nan, np.inf
    same("MatMul", [a, rnd(rng, 40, 21)], const_inputs=(1,))
    for ta, tb in ((0, 0), (0, 1), (1, 0), (1, 1)):
        for cshape in ((35,), (11, 1), (1,), (11, 35), None):
            A = rnd(rng, 40, 11) if ta else rnd(rng, 11, 40)
            B = rnd(rng, 35, 40) if tb else rnd(rng, 40, 35)
            ins = [A, B] + ([rnd(rng, *cshape)] if cshape else [])
            same("Gemm", ins, const_inputs=(1,), transA=ta, transB=tb, alpha=0.3, beta=-1.7)
    same("Gemm", [rnd(rng, 33, 128), rnd(rng, 100, 128), rnd(rng, 100)], const_inputs=(1, 2), transB=1)
    # large enough for the parallel blocks (48 x 256), C per row
    same("Gemm", [rnd(rng, 60, 64), rnd(rng, 64, 300), rnd(rng, 60, 1)], alpha=0.7, beta=0.3)


def case_conv(rng):
    for _ in range(6):
        C = int(rng.integers(1, 5))
        g = C if rng.integers(0, 2) else 1
        M = g * int(rng.integers(1, 3))
        k = int(rng.integers(1, 4))
        s = int(rng.integers(1, 3))
        H, W = (int(v) for v in rng.integers(k, 12, 2))
        p = int(rng.integers(0, 2))
        same("Conv", [rnd(rng, 1, C, H, W), rnd(rng, M, C // g, k, k), rnd(rng, M)], const_inputs=(1, 2),
             strides=[s, s], pads=[p, p, p, p], group=g)
    same("Conv", [rnd(rng, 2, 3, 9, 9), rnd(rng, 4, 3, 3, 3)], dilations=[2, 1])
    # 1-D (the 2-D path with H = 1) and 3-D (the override runs the generated walk), including a
    # depth-1 input with depth padding, which must not take the 2-D path
    same("Conv", [rnd(rng, 2, 3, 9), rnd(rng, 4, 3, 3), rnd(rng, 4)], const_inputs=(1, 2), pads=[1, 0])
    same("Conv", [rnd(rng, 1, 2, 3, 4, 5), rnd(rng, 2, 2, 2, 2, 3), rnd(rng, 2)], const_inputs=(1, 2),
         pads=[1, 0, 1, 0, 1, 1], strides=[2, 1, 1])
    same("Conv", [rnd(rng, 1, 2, 1, 4, 5), rnd(rng, 2, 2, 1, 2, 2)], pads=[1, 0, 0, 1, 0, 0])
    # the direct path (grouped, <= 4 outputs per group): depthwise 5x5 and 3x3/2, channel
    # multiplier 2, groups of 2 inputs, dilation, asymmetric pads, 1-D
    same("Conv", [rnd(rng, 2, 6, 11, 10), rnd(rng, 6, 1, 5, 5), rnd(rng, 6)], const_inputs=(1, 2),
         pads=[2, 2, 2, 2], group=6)
    same("Conv", [rnd(rng, 1, 4, 12, 9), rnd(rng, 8, 1, 3, 3)], const_inputs=(1,), strides=[2, 2],
         pads=[1, 0, 0, 1], group=4)
    same("Conv", [rnd(rng, 1, 8, 9, 9), rnd(rng, 12, 2, 3, 3), rnd(rng, 12)], const_inputs=(1, 2),
         strides=[2, 3], dilations=[2, 1], pads=[1, 1, 2, 2], group=4)
    same("Conv", [rnd(rng, 2, 4, 13), rnd(rng, 4, 1, 3)], const_inputs=(1,), strides=[2], pads=[1, 1], group=4)
    # the depthwise path (one input channel per group; _conv_dw8, more in case_conv_packed): 1x1,
    # 2x3, 3x3, 5x5, 1x7 kernels, odd sizes, strides 1/2/3, pads, dilation, channel
    # multipliers 1-3, with and without bias, batch 2
    for KH, KW, s, d, pd, mult, bias in ((3, 3, 1, 1, 1, 1, True), (3, 3, 2, 1, 1, 1, False),
                                         (3, 3, 1, 2, 2, 2, True), (5, 5, 2, 1, 2, 1, True),
                                         (2, 3, 1, 1, 0, 3, False), (1, 1, 2, 1, 0, 1, True),
                                         (1, 7, 3, 2, 3, 1, False), (3, 3, 2, 3, 1, 2, True)):
        C = int(rng.integers(2, 6))
        H, W = (int(v) for v in rng.integers(7, 16, 2))
        ins = [rnd(rng, 2, C, H, W), rnd(rng, C * mult, 1, KH, KW)] + ([rnd(rng, C * mult)] if bias else [])
        same("Conv", ins, const_inputs=(1, 2) if bias else (1,), strides=[s, s + 1 if s == 2 else s],
             dilations=[d, 1], pads=[pd, pd // 2, pd // 2 + 1, pd], group=C)


    # the wide indirect-GEMM path (_conv_wide: k x k kernels of dense and grouped Conv with 5-15
    # outputs per group; from 16 the pixel-tile path, below): every row tail (M % 6 = 0..5: row pairs, an odd last row),
    # k blocks (K = Cg*KH*KW > 256), several column blocks (OH*Wq > 128), strides, dilations,
    # asymmetric pads, batch 2, bias or not, a 7x7/2 stem, a 4x4/4 patchify, 1-D, odd sizes
    for M in range(6, 14):
        same("Conv", [rnd(rng, 1, 3, 9, 8), rnd(rng, M, 3, 3, 3), rnd(rng, M)], const_inputs=(1, 2),
             pads=[1, 1, 1, 1])
    for xs, ws, at, bias in (((2, 30, 13, 11), (7, 30, 3, 3), dict(pads=[1, 0, 2, 1]), True),
                             ((1, 5, 23, 19), (9, 5, 3, 3), dict(strides=[2, 1], dilations=[1, 2]), False),
                             ((1, 3, 27, 26), (8, 3, 7, 7), dict(strides=[2, 2], pads=[3, 3, 3, 3]), True),
                             ((1, 3, 17, 16), (10, 3, 4, 4), dict(strides=[4, 4]), True),
                             ((2, 12, 10, 9), (10, 6, 3, 2), dict(group=2, pads=[1, 0, 1, 1]), True),
                             ((1, 4, 40), (7, 4, 5), dict(pads=[2, 2], strides=[3]), True)):
        ins = [rnd(rng, *xs), rnd(rng, *ws)] + ([rnd(rng, ws[0])] if bias else [])
        same("Conv", ins, const_inputs=(1, 2) if bias else (1,), **at)

    # 1x1 Conv on maps of fewer than 8 pixels (_conv_gemv: channels 8 at a time and a tail; one
    # pixel with 8+ channels: gemvT, below), groups, batch 2, bias or not
    for xs, M, g, bias in (((1, 37, 1, 1), 5, 1, True), ((2, 30, 2, 3), 20, 1, False), ((1, 12, 2, 2), 9, 3, True),
                           ((1, 16, 1, 7), 9, 1, True), ((2, 8, 3, 5), 7, 1, False)):
        ins = [rnd(rng, *xs), rnd(rng, M * g, xs[1] // g, 1, 1)] + ([rnd(rng, M * g)] if bias else [])
        same("Conv", ins, const_inputs=(1, 2) if bias else (1,), group=g)
    # the im2col GEMM (_conv_gemm): 1x1 with fewer than 6 outputs per group on 16+ pixels, and a
    # k x k Conv whose wide grid would be mostly garbage (one output column)
    same("Conv", [rnd(rng, 1, 5, 4, 5), rnd(rng, 4, 5, 1, 1), rnd(rng, 4)], const_inputs=(1, 2))
    same("Conv", [rnd(rng, 2, 4, 9, 3), rnd(rng, 8, 4, 3, 3)], const_inputs=(1,))
    case_conv_packed(rng)


def _conv_both(rng, xs, ws, bias=True, nonfinite=False, **attrs):
    """One Conv with its weight an initializer (packed once at build time: conv_packed_cpu)
    and as an input (packed per call in _conv_cpu), each against the generated kernel."""
    x, w = rnd(rng, *xs), rnd(rng, *ws)
    if nonfinite:   # inf/NaN weights (a padding tap must multiply them by 0.0f) and inputs
        w.reshape(-1)[::7] = np.inf
        w.reshape(-1)[3::11] = -np.inf
        x.reshape(-1)[::13] = np.nan
    ins = [x, w] + ([rnd(rng, ws[0])] if bias else [])
    same("Conv", ins, const_inputs=(1, 2) if bias else (1,), **attrs)
    same("Conv", ins, **attrs)


def case_conv_packed(rng):
    """The packed-weight Conv paths (cpu_fast.conv.conv_kind: dw8, pw, px, gemvT), each with its
    weight an initializer and not."""
    from hetero_explore.kernels.cpu_fast import conv as fastconv
    # dw8: depthwise, 8 channels per vector: channel counts not a multiple of 8 (the last
    # block's lanes past M), multipliers 1-3, 3x3/5x5/1x7, strides 1-3, dilation, asymmetric
    # and oversized pads, output planes of fewer than 8 pixels and not a multiple of 8 (the
    # last 8 overlapping), input planes of fewer than 8 elements and ones the taps read only
    # partly (stride 3), batch 2, bias or not, non-finite weights and inputs
    for xs, mult, k, at in (((1, 5, 9, 9), 1, 3, dict(pads=[1] * 4)),
                            ((2, 13, 14, 14), 1, 3, dict(pads=[1] * 4, strides=[2, 2])),
                            ((1, 19, 7, 7), 1, 5, dict(pads=[2] * 4)),
                            ((1, 9, 4, 4), 1, 5, dict(pads=[2] * 4)),
                            ((1, 16, 7, 7), 1, 5, dict(pads=[2] * 4, strides=[2, 2])),
                            ((1, 6, 2, 2), 2, 3, dict(pads=[1, 0, 1, 1])),
                            ((1, 4, 12, 11), 3, 3, dict(pads=[2, 1, 0, 2], dilations=[2, 1])),
                            ((2, 8, 10, 13), 1, 3, dict(strides=[3, 3])),
                            ((1, 3, 5, 6), 2, 3, dict(pads=[4, 3, 4, 5])),
                            ((1, 11, 30, 23), 1, 3, dict(pads=[1] * 4)),
                            ((1, 8, 1, 20), 1, (1, 7), dict(pads=[0, 3, 0, 3], strides=[1, 2]))):
        C = xs[1]
        kh, kw = k if isinstance(k, tuple) else (k, k)
        for bias in (True, False):
            _conv_both(rng, xs, (C * mult, 1, kh, kw), bias=bias, group=C, **at)
    _conv_both(rng, (1, 10, 9, 8), (10, 1, 3, 3), nonfinite=True, group=10, pads=[1] * 4)
    # pw: 1x1 stride 1: output channels per group 6-13 (the last 6-row block overlapping),
    # pixels 8-15 (8-wide panels), 17-31 (the last 16-wide panel overlapping), 32 and more
    # (32-wide panels, then 16- and 8-wide ones: 45, 56; two items of pixels: 288), a multiple of
    # 64 (panels copied), K > 256 (k blocks resuming, with the overlapping blocks), groups,
    # batch 2, bias or not, non-finite values
    for xs, M, g in (((1, 5, 2, 4), 6, 1), ((1, 7, 3, 5), 13, 1), ((2, 9, 4, 5), 11, 1), ((1, 12, 3, 7), 8, 1),
                     ((1, 20, 8, 8), 17, 1), ((1, 300, 5, 7), 14, 1), ((1, 270, 8, 8), 9, 1),
                     ((2, 12, 6, 6), 14, 2), ((1, 3, 1, 9), 7, 1), ((1, 10, 7, 8), 13, 1), ((1, 300, 5, 9), 7, 1),
                     ((1, 8, 16, 18), 6, 1), ((2, 6, 8, 16), 20, 2)):
        for bias in (True, False):
            _conv_both(rng, xs, (M, xs[1] // g, 1, 1), bias=bias, group=g)
    _conv_both(rng, (1, 9, 5, 5), (12, 9, 1, 1), nonfinite=True)
    # px: k x k (and strided or padded 1x1) with 16+ output channels per group: channels not a
    # multiple of 16 (the last panel overlapping), pixels 6, 7 and more (the last tile
    # overlapping), strides, dilation, asymmetric pads, no padding (taps read the input in
    # place), K > 256 (k blocks), chunks of 32 tiles (the last taking the rest), groups,
    # batch 2, 1-D, a 7x7/2 stem, non-finite values
    for xs, ws, at in (((1, 3, 8, 8), (16, 3, 3, 3), dict(pads=[1] * 4)),
                       ((2, 5, 9, 7), (17, 5, 3, 3), dict(pads=[1, 0, 2, 1])),
                       ((1, 4, 5, 5), (33, 4, 3, 3), dict()),
                       ((1, 4, 4, 5), (16, 4, 3, 3), dict()),
                       ((1, 4, 9), (16, 4, 3), dict()),
                       ((1, 6, 5, 7), (20, 6, 3, 3), dict(strides=[2, 2], pads=[1] * 4)),
                       ((1, 4, 11, 9), (16, 4, 3, 2), dict(dilations=[2, 3], pads=[2, 1, 1, 2])),
                       ((1, 30, 6, 6), (16, 30, 3, 3), dict(pads=[1] * 4)),
                       ((1, 30, 20, 20), (17, 30, 3, 3), dict(pads=[1] * 4)),
                       ((1, 3, 23, 21), (16, 3, 7, 7), dict(strides=[2, 2], pads=[3] * 4)),
                       ((2, 8, 9, 9), (36, 4, 3, 3), dict(group=2, pads=[1] * 4)),
                       ((1, 7, 10, 10), (18, 7, 1, 1), dict(strides=[2, 2])),
                       ((1, 7, 5, 5), (16, 7, 1, 1), dict(pads=[1, 0, 0, 1])),
                       ((1, 4, 30), (21, 4, 5), dict(pads=[2, 2], strides=[2]))):
        for bias in (True, False):
            _conv_both(rng, xs, ws, bias=bias, **at)
    _conv_both(rng, (1, 6, 7, 7), (19, 6, 3, 3), nonfinite=True, pads=[1] * 4)
    # gemvT: 1x1 on a one-pixel map, blocks of 64/32/8 channels (the last overlapping), groups,
    # batch 2, bias or not
    for xs, M, g in (((1, 20, 1, 1), 8, 1), ((1, 7, 1, 1), 9, 1), ((2, 40, 1, 1), 31, 1), ((1, 33, 1, 1), 32, 1),
                     ((1, 300, 1, 1), 65, 1), ((1, 16, 1, 1), 100, 1), ((2, 24, 1, 1), 20, 2)):
        for bias in (True, False):
            _conv_both(rng, xs, (M * g if g > 1 else M, xs[1] // g, 1, 1), bias=bias, group=g)
    _conv_both(rng, (1, 30, 1, 1), (40, 30, 1, 1), nonfinite=True)
    # every packed path was taken by some case above
    kinds = {fastconv.conv_kind(nn_geometry(xs, ws, at)) for xs, ws, at in (
        ((1, 5, 9, 9), (5, 1, 3, 3), dict(group=5, pads=[1] * 4)), ((1, 5, 2, 4), (6, 5, 1, 1), {}),
        ((1, 3, 8, 8), (16, 3, 3, 3), dict(pads=[1] * 4)), ((1, 20, 1, 1), (8, 20, 1, 1), {}))}
    assert kinds == {fastconv._CK_DW, fastconv._CK_PW, fastconv._CK_PX, fastconv._CK_GEMVT}, kinds


def nn_geometry(xs, ws, attrs):
    """Conv's geometry array for shapes and attributes (as the build computes it)."""
    from types import SimpleNamespace
    from hetero_explore.kernels import nn
    ctx = SimpleNamespace(node=SimpleNamespace(op_type="Conv", name="c"), attrs=attrs)
    nsp = len(xs) - 2
    pads = attrs.get("pads", [0] * 2 * nsp)
    st = attrs.get("strides", [1] * nsp)
    dl = attrs.get("dilations", [1] * nsp)
    ys = [xs[0], ws[0]] + [(xs[2 + i] + pads[i] + pads[nsp + i] - (ws[2 + i] - 1) * dl[i] - 1) // st[i] + 1
                           for i in range(nsp)]
    return nn.conv_geometry(ctx, xs, ws, ys)

def case_convt(rng):
    for _ in range(4):
        C, M = (int(v) for v in rng.integers(1, 4, 2))
        k, s = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        H, W = (int(v) for v in rng.integers(1, 7, 2))
        same("ConvTranspose", [rnd(rng, 1, C, H, W), rnd(rng, C, M, k, k), rnd(rng, M)], const_inputs=(1, 2),
             strides=[s, s])
    same("ConvTranspose", [rnd(rng, 1, 2, 5), rnd(rng, 2, 3, 3), rnd(rng, 3)], const_inputs=(1, 2), strides=[2])
    same("ConvTranspose", [rnd(rng, 1, 2, 2, 3, 2), rnd(rng, 2, 2, 2, 2, 3)], strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 0])
    same("ConvTranspose", [rnd(rng, 1, 2, 1, 3, 2), rnd(rng, 2, 2, 1, 2, 2)], pads=[0, 0, 0, 0, 0, 0],
         output_padding=[0, 0, 0])


def case_pool(rng):
    for _ in range(6):
        k, s = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        H, W = (int(v) for v in rng.integers(k, 12, 2))
        p = int(rng.integers(0, min(k, 2)))
        x = rnd(rng, 2, 3, H, W)
        same("MaxPool", [x], kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p],
             ceil_mode=int(rng.integers(0, 2)))
        same("AveragePool", [x], kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p],
             count_include_pad=int(rng.integers(0, 2)))
    x = rnd(rng, 2, 2, 3, 4, 5)
    same("MaxPool", [x], kernel_shape=[2, 2, 3], strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 1], ceil_mode=1)
    same("AveragePool", [x], kernel_shape=[2, 2, 2], pads=[1, 1, 0, 0, 1, 1], count_include_pad=1)
    x = rnd(rng, 1, 2, 1, 4, 5)
    same("AveragePool", [x], kernel_shape=[1, 2, 2], pads=[1, 0, 0, 0, 0, 0], count_include_pad=1)
    same("MaxPool", [rnd(rng, 2, 3, 9)], kernel_shape=[3], strides=[2], pads=[1, 1])
    case_maxpool_rows(rng)


def ties(rng, *shape):
    """Random values with many +0/-0 (equal, different bits: the first maximal tap must win),
    NaNs (never taken), +-inf and whole rows of NaN or -inf."""
    x = rnd(rng, *shape)
    u = rng.random(shape)
    x[u < 0.3] = F(0.0)
    x[(u >= 0.3) & (u < 0.6)] = F(-0.0)
    x[(u >= 0.6) & (u < 0.65)] = np.nan
    x[(u >= 0.65) & (u < 0.68)] = np.inf
    x[(u >= 0.68) & (u < 0.71)] = -np.inf
    x[(u >= 0.71)] = -np.abs(x[(u >= 0.71)])   # the zeros are the maxima of many windows
    if x.ndim >= 3 and x.shape[-2] > 2:
        x[..., 1, :] = np.nan
        x[..., 2, :] = -np.inf
    return x


def case_maxpool_rows(rng):
    """MaxPool's row-maxima path (_maxpool_cpu): W a multiple of the stride (one span per
    plane, edge columns redone) and not (one span per row), strides 1/2/3, dilations, kernels
    of 1-7 taps per axis (groups of three taps and rows chained), asymmetric pads, ceil_mode,
    windows without an in-input tap, 1-D, ties of +0/-0, NaN and inf."""
    for xs, at in (((1, 4, 12, 12), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
                   ((2, 3, 11, 13), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
                   ((1, 3, 10, 12), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
                   ((1, 3, 9, 9), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
                   ((1, 2, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2])),
                   ((1, 2, 9, 7), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
                   ((1, 2, 10, 10), dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])),
                   ((1, 2, 13, 12), dict(kernel_shape=[7, 4], strides=[1, 2], pads=[3, 1, 3, 2])),
                   ((1, 2, 12, 12), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1])),
                   ((1, 2, 14, 15), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[0, 2, 2, 0], ceil_mode=1)),
                   ((1, 2, 12, 12), dict(kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 2], pads=[2, 2, 2, 2])),
                   ((1, 2, 11, 12), dict(kernel_shape=[2, 3], strides=[1, 1], dilations=[3, 2], pads=[1, 0, 0, 2])),
                   ((1, 2, 6, 6), dict(kernel_shape=[1, 1], strides=[2, 2])),
                   ((1, 2, 5, 6), dict(kernel_shape=[3, 13], strides=[1, 1], pads=[1, 6, 1, 6])),
                   ((2, 3, 4, 4), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])),
                   ((1, 2, 3, 2), dict(kernel_shape=[3, 3], strides=[1, 1], pads=[2, 2, 2, 2])),
                   ((2, 3, 17), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
                   ((1, 2, 16), dict(kernel_shape=[5], strides=[1], pads=[2, 2]))):
        same("MaxPool", [ties(rng, *xs)], **at)
        same("MaxPool", [rnd(rng, *xs)], **at)
    # a window entirely in the padding (ceil_mode, opset 12: onnx's shape inference keeps it)
    same("MaxPool", [ties(rng, 1, 2, 5, 5)], opset=12, kernel_shape=[2, 2], strides=[3, 3], pads=[0, 0, 1, 1],
         ceil_mode=1)


def case_bn(rng):
    for _ in range(4):
        C = int(rng.integers(1, 6))
        x = rnd(rng, 2, C, *(int(v) for v in rng.integers(1, 6, 2)))
        same("BatchNormalization", [x, rnd(rng, C), rnd(rng, C), rnd(rng, C), np.abs(rnd(rng, C)) + F(0.1)],
             const_inputs=(1, 2, 3, 4), epsilon=1e-3)


def case_gpool(rng):
    """GlobalAveragePool eight rows side by side and a tail of 0-7 rows; GlobalMaxPool; NaN/inf
    in some rows, 1-D to 3-D spatial, batch 2."""
    for _ in range(6):
        N, C = int(rng.integers(1, 3)), int(rng.integers(1, 20))
        sp = tuple(int(v) for v in rng.integers(1, 9, int(rng.integers(1, 4))))
        x = rnd(rng, N, C, *sp) * F(10)
        fl = x.reshape(-1)
        fl[rng.integers(0, fl.size, 3)] = [np.nan, np.inf, -np.inf]
        same("GlobalAveragePool", [x])
        same("GlobalMaxPool", [x])


def case_softmax(rng):
    for _ in range(4):
        shape = tuple(int(v) for v in rng.integers(1, 9, 3))
        axis = int(rng.integers(-3, 3))
        x = rnd(rng, *shape) * F(10)
        same("Softmax", [x], axis=axis)
        same("LogSoftmax", [x], axis=axis)
    # the last axis: rows in groups of four (interleaved max and sum) and a tail of 1-3 rows,
    # axis lengths 1 .. 100, infinities and NaNs in some rows, large and tiny values
    for rows in (1, 3, 4, 5, 8, 13):
        for A in (1, 2, 37, 64, 100):
            x = rnd(rng, rows, A) * F(30)
            if rows > 2 and A > 1:
                x[1, 0], x[2, A - 1] = np.inf, np.nan
                x[rows - 1, :] = -np.inf
            same("Softmax", [x], axis=-1)
            same("LogSoftmax", [x], axis=-1)
    same("Softmax", [rnd(rng, 1, 4, 37, 37) * F(8)], axis=-1)   # the attention shape
    # exps in whole vectors: rows of A % 8 != 0 run A rounded up to 8 (into the next row, except
    # the array's last row), rows of A % 8 == 0 straight into the output; groups of four rows
    # with a short last group; the parallel blocks of 16 rows (outer * A >= 2**13) with both
    for shape in ((1, 4, 64, 64), (1, 4, 64, 37), (2, 3, 7, 9), (5, 24), (7, 8), (3, 1, 8, 16)):
        x = rnd(rng, *shape) * F(8)
        x.reshape(-1, shape[-1])[-1, :3] = (np.nan, -np.inf, np.inf)[:shape[-1]]
        same("Softmax", [x], axis=-1)
        same("LogSoftmax", [x], axis=-1)
    # the max of a row: signed zeros (the first one met wins), exps that underflow to subnormals
    # and to 0, a row that is all NaN
    x = np.zeros((6, 11), F)
    x[0, 3], x[1, 0], x[2, :] = -0.0, -0.0, -0.0
    x[3, :] = -np.arange(11, dtype=F) * F(9.5)
    x[4, :] = np.nan
    x[5, 1:] = -np.linspace(80, 110, 10, dtype=F)
    same("Softmax", [x], axis=-1)
    same("LogSoftmax", [x], axis=-1)


def case_ln(rng):
    for _ in range(4):
        shape = tuple(int(v) for v in rng.integers(1, 9, 3))
        D = shape[-1]
        same("LayerNormalization", [rnd(rng, *shape), rnd(rng, D), rnd(rng, D)], const_inputs=(1, 2), axis=-1)
    same("LayerNormalization", [rnd(rng, 3, 4, 5), rnd(rng, 4, 5)], const_inputs=(1,), axis=-2)
    # groups of eight rows (interleaved sums) with a short last group, bias or none, the Mean and
    # InvStdDev outputs, rows of one element and the models' 64 x 128 / 37 x 128
    for rows in (1, 3, 8, 9, 17, 37, 64):
        for D in (1, 5, 128):
            x = rnd(rng, rows, D) * F(3) + F(1)
            same("LayerNormalization", [x, rnd(rng, D), rnd(rng, D)], const_inputs=(1, 2), axis=-1, n_out=3)
            same("LayerNormalization", [x, rnd(rng, D)], const_inputs=(1,), axis=-1)
    # blocks of rows in parallel (the last block short): ConvNeXt's channels-last 56 x 56 x 40
    x = rnd(rng, 1, 41, 40, 40)
    same("LayerNormalization", [x, rnd(rng, 40), rnd(rng, 40)], const_inputs=(1, 2), axis=-1)
    same("LayerNormalization", [x, rnd(rng, 40), rnd(rng, 40)], const_inputs=(1, 2), axis=-1, n_out=3)


def case_resize(rng):
    for mode in ("nearest", "linear"):
        for _ in range(3):
            x = rnd(rng, 1, 2, *(int(v) for v in rng.integers(1, 7, 2)))
            sc = np.array([1, 1, rng.choice([0.5, 1.5, 2.0]), rng.choice([0.75, 2.0, 3.0])], F)
            same("Resize", [x, None, sc], const_inputs=(2,), opset=13, mode=mode)
    # rows copied from the row before (upsampled along a row axis), nearest x2 along the last
    # axis (each input element written twice), odd and even widths, batch and channels (the row
    # odometer), rank 3 and 5, every nearest mode and coordinate transformation, downscaling
    for xs, sc, at in (((2, 3, 5, 7), (1, 1, 2, 2), dict(coordinate_transformation_mode="asymmetric",
                                                         nearest_mode="floor")),
                       ((1, 4, 4, 6), (1, 1, 2, 2), {}),
                       ((1, 2, 3, 5), (1, 1, 3, 2), dict(nearest_mode="round_prefer_ceil")),
                       ((1, 2, 6, 4), (1, 1, 2, 3), dict(coordinate_transformation_mode="align_corners")),
                       ((2, 2, 6, 8), (1, 1, 0.5, 0.5), dict(nearest_mode="ceil")),
                       ((1, 2, 3, 4), (1, 2, 2, 1), {}),
                       ((3, 5, 4), (1, 2, 2), dict(coordinate_transformation_mode="asymmetric")),
                       ((1, 2, 2, 3, 4), (1, 1, 2, 2, 2), {})):
        x = rnd(rng, *xs)
        x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
        same("Resize", [x, None, np.array(sc, F)], const_inputs=(2,), opset=13, mode="nearest", **at)
    for xs, sc in (((2, 2, 4, 5), (1, 1, 2, 2)), ((1, 3, 3, 4), (1, 1, 2, 1)), ((1, 2, 3, 4), (1, 1, 1, 2))):
        same("Resize", [rnd(rng, *xs), None, np.array(sc, F)], const_inputs=(2,), opset=13, mode="linear")


def case_pad(rng):
    for mode in ("constant", "reflect", "edge"):
        for _ in range(3):
            x = rnd(rng, 2, *(int(v) for v in rng.integers(2, 6, 2)))
            pads = np.array([0, int(rng.integers(0, 2)), int(rng.integers(0, 2)),
                             0, int(rng.integers(0, 2)), int(rng.integers(0, 2))], np.int64)
            same("Pad", [x, pads], const_inputs=(1,), mode=mode)


def case_tile(rng):
    """Random ranks 1-5, repeats 1-3 per dim (size-1 and repeated dims merged by the walk), a
    0-sized input dim, element widths 1, 2, 4 and 8 bytes, and the grouped-query-attention
    repeat of a KV cache (1, 2, 1, 128, 32) x (1, 1, 4, 1, 1)."""
    def tile(x, reps):
        return same("Tile", [x, np.array(reps, np.int64)], const_inputs=(1,))
    for _ in range(8):
        nd = int(rng.integers(1, 6))
        xs = tuple(int(v) for v in rng.integers(1, 6, nd))
        tile(rnd(rng, *xs), [int(v) for v in rng.integers(1, 4, nd)])
    for dt in (np.int8, np.float16, np.int64):
        tile(rng.integers(-9, 9, (3, 1, 4)).astype(dt), [2, 3, 1])
    tile(rnd(rng, 2, 0, 3), [2, 2, 2])
    tile(rnd(rng, 1, 2, 1, 128, 32), [1, 1, 4, 1, 1])
    tile(rnd(rng, 5), [1])


def case_topk(rng):
    """TopK over the last axis and an inner one, largest and smallest, k from 1 to the whole
    axis, ties (few distinct values) and NaNs (they rank highest), float32 and int64."""
    for _ in range(6):
        n = int(rng.integers(1, 60))
        k = int(rng.integers(1, n + 1))
        x = rng.integers(-4, 4, (3, n, 2)).astype(F) if rng.integers(0, 2) else rnd(rng, 3, n, 2)
        if n > 3:
            x[0, rng.integers(0, n, 2), 1] = np.nan
        for axis, largest in ((1, 1), (1, 0), (-1, 1)):
            kk = k if axis == 1 else min(k, 2)
            same("TopK", [x, np.array([kk], np.int64)], const_inputs=(1,), n_out=2, axis=axis, largest=largest)
    same("TopK", [rng.integers(-9, 9, (4, 50)).astype(np.int64), np.array([7], np.int64)], const_inputs=(1,),
         n_out=2, largest=0)
    same("TopK", [rnd(rng, 64, 1000), np.array([5], np.int64)], const_inputs=(1,), n_out=2, largest=0)   # kNN


def case_gather_strided(rng):
    for _ in range(4):
        shape = tuple(int(v) for v in rng.integers(1, 7, 3))
        x = rnd(rng, *shape)
        same("Transpose", [x], perm=list(rng.permutation(3)))
        st = np.array([int(rng.integers(0, shape[2]))], np.int64)
        same("Slice", [x, st, np.array([shape[2]], np.int64), np.array([2], np.int64), np.array([1], np.int64)],
             const_inputs=(1, 2, 3, 4))
    # transpositions in tiles (more than 64 x 32 elements, partial tiles; 8 x 8 blocks transposed in
    # registers, edges not a multiple of 8), with the contiguous axis first, in the middle or with
    # dims between, size-1 dims merged away, 5-D, every permutation of a 4-D shape, element widths
    # 1, 2 and 8 bytes
    for xs, perm in (((1, 70, 9, 9), (0, 2, 3, 1)), ((1, 12, 11, 11), (0, 2, 3, 1)), ((2, 5, 130), (0, 2, 1)),
                     ((3, 40, 70), (2, 0, 1)), ((6, 1, 7, 1, 5), (4, 1, 2, 0, 3)), ((1, 1, 1), (2, 1, 0)),
                     ((2, 3, 4, 5, 6), (0, 3, 1, 4, 2)), ((1, 24, 24, 40), (0, 3, 1, 2)),
                     ((1, 40, 24, 24), (0, 2, 3, 1)), ((4, 16, 3, 24), (0, 3, 2, 1)), ((2, 72, 9, 40), (0, 3, 2, 1))):
        same("Transpose", [rnd(rng, *xs)], perm=list(perm))
    import itertools
    x = rnd(rng, 2, 3, 4, 5)
    for perm in itertools.permutations(range(4)):
        same("Transpose", [x], perm=list(perm))
    for dt in (np.uint8, np.float16, np.int64):
        same("Transpose", [(rnd(rng, 3, 33, 70) * 50).astype(dt)], perm=[2, 0, 1])
        same("Transpose", [(rnd(rng, 16, 24, 40) * 50).astype(dt)], perm=[2, 0, 1])   # 8 x 8 blocks in registers
    # rows: contiguous (a Slice of whole rows), strided (steps 2 and -1), broadcast (Expand,
    # stride 0 innermost and outer), Split, DepthToSpace
    x = rnd(rng, 4, 6, 10)
    for starts, ends, axes, steps in (([1], [3], [0], [1]), ([1, 0], [5, 10], [1, 2], [1, 2]),
                                      ([-1], [-100], [2], [-1]), ([3, 5], [-100, -100], [0, 1], [-2, -2])):
        same("Slice", [x] + [np.array(v, np.int64) for v in (starts, ends, axes, steps)], const_inputs=(1, 2, 3, 4))
    for xs, shape in (((3, 1), (2, 3, 5)), ((1, 5), (4, 3, 5)), ((1,), (3, 2)), ((2, 1, 4), (2, 3, 4))):
        same("Expand", [rnd(rng, *xs), np.array(shape, np.int64)], const_inputs=(1,))
    same("Split", [rnd(rng, 3, 10, 4)], n_out=3, opset=18, axis=1, num_outputs=3)
    same("DepthToSpace", [rnd(rng, 1, 8, 3, 5)], blocksize=2, mode="CRD")


def case_scatter_strided(rng):
    for _ in range(4):
        a = rnd(rng, 2, int(rng.integers(1, 5)), 3)
        b = rnd(rng, 2, int(rng.integers(1, 5)), 3)
        same("Concat", [a, b], axis=1)
        same("Concat", [rnd(rng, 2, 3, int(rng.integers(1, 5))), rnd(rng, 2, 3, 2)], axis=2)
    # the detector's concatenation of flattened anchors (one contiguous copy per part), every
    # axis, size-1 and empty parts, 8-byte elements
    same("Concat", [rnd(rng, 1, n, 20) for n in (48, 12, 3)], axis=1)
    for axis in range(3):
        parts = [rnd(rng, *[(k + 1) if d == axis else s for d, s in enumerate((2, 3, 4))]) for k in range(3)]
        same("Concat", parts, axis=axis)
    same("Concat", [rnd(rng, 1, 3, 1), rnd(rng, 1, 3, 0), rnd(rng, 1, 3, 2)], axis=2)
    same("Concat", [(rnd(rng, 2, 2, 5) * 9).astype(np.int64), (rnd(rng, 2, 1, 5) * 9).astype(np.int64)], axis=1)


def case_gather(rng):
    for _ in range(4):
        shape = tuple(int(v) for v in rng.integers(1, 7, 3))
        axis = int(rng.integers(0, 3))
        idx = rng.integers(-shape[axis], shape[axis], size=int(rng.integers(1, 6))).astype(np.int64)
        same("Gather", [rnd(rng, *shape), idx], axis=axis)


def case_reduce_inline(rng):
    """The reductions' row and contiguous CPU paths (taken when target.fast_paths): ReduceSum/
    Mean/Max on any non-bool type, ReduceSumSquare/L1/Prod/Min on floats; NaN and inf among the
    values (Max/Min propagate NaN, from the first element on), contiguous blocks of 1-9 outputs
    (the four-at-a-time chains and their tail)."""
    ops = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceSumSquare", "ReduceL1", "ReduceProd", "ReduceMin")
    for op in ops:
        for _ in range(4):
            shape = tuple(int(v) for v in rng.integers(1, 7, 3))
            axes = sorted(set(int(a) for a in rng.integers(0, 3, int(rng.integers(1, 3)))))
            x = rnd(rng, *shape) * F(0.9 if op == "ReduceProd" else 100)
            same(op, [x, np.array(axes, np.int64)], const_inputs=(1,), opset=18, keepdims=int(rng.integers(0, 2)))
        for rows in (1, 3, 4, 9):
            x = rnd(rng, rows, 2, 7) * F(3)
            x.reshape(-1)[::11] = np.nan
            x.reshape(-1)[5::13] = np.inf
            x[0, 0, 0] = np.nan
            for axes in ([2], [1, 2], [1]):
                same(op, [x, np.array(axes, np.int64)], const_inputs=(1,), opset=18, keepdims=0)
        if op != "ReduceMean":   # float32 only
            same(op, [rnd(rng, 3, 4).astype(np.float64), np.array([1], np.int64)], const_inputs=(1,), opset=18)
    for op in ("ReduceSumSquare", "ReduceL1"):   # the last axis of a stacked distance (kNN), other axes
        for shape, axes in (((5, 7, 20), [2]), ((9, 3), [1]), ((4, 6, 5), [1]), ((3, 8), [0])):
            same(op, [rnd(rng, *shape) * F(30), np.array(axes, np.int64)], const_inputs=(1,), opset=18, keepdims=0)


def case_erf(rng):
    """Erf: erf_near_f32 on the blocks of eight with |x| < 1.25 only, erf_f32 on the rest (few
    far blocks) or on everything (many); lengths not a multiple of 8, specials in both paths."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.84375, -0.84375, 1.25, -1.25, 4.0, 1e-40], F)
    edges = np.nextafter(np.repeat(np.array([0.84375, 1.25, -0.84375, -1.25], F), 8), F(0))
    for n, scale in ((1, 0.4), (7, 0.4), (8, 0.4), (1001, 0.4), (32768, 0.4), (5000, 0.6), (999, 3.0), (64, 0.1),
                     (70001, 0.5), (50000, 2.0)):
        x = rnd(rng, n) * F(scale)
        same("Erf", [x])
        if n >= 100:
            x[rng.integers(0, n, 8)] = specials[rng.integers(0, specials.size, 8)]
            x[:edges.size] = edges
            same("Erf", [x])
    same("Erf", [rnd(rng, 1, 37, 512) * F(0.4)])    # the GELU shape


def case_sigmoid(rng):
    """Sigmoid: sigmoid_near_f32 on every element of a block, sigmoid_f32 on its elements with
    |x| > 64 or NaN; one block and many (the parallel blocks), far values and specials in some."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 64.0, -64.0, 64.00001, -64.00001, 90.0, -90.0,
                         -103.9, -104.5, 1e-40], F)
    for n, scale in ((1, 4.0), (7, 4.0), (1001, 8.0), (40000, 4.0), (70001, 30.0), (33, 200.0)):
        x = rnd(rng, n) * F(scale)
        same("Sigmoid", [x])
        if n >= 100:
            x[rng.integers(0, n, 16)] = specials[rng.integers(0, specials.size, 16)]
            x[:specials.size] = specials
            same("Sigmoid", [x])
    same("Sigmoid", [rnd(rng, 1, 32, 40, 40) * F(3)])    # a YOLO activation


def case_binary(rng):
    """Add/Sub/Mul/Div (float32): the generated loop on blocks of elements (no input broadcast:
    both full, a scalar either side) or of rows of the coalesced shape's outer axis (a channel
    scale, a bias row, an outer broadcast), small (one block) and large (parallel blocks, row
    blocks not dividing the rows), non-finite values and division by zero."""
    for op in ("Add", "Sub", "Mul", "Div"):
        for ash, bsh in (((7, 5), (7, 5)), ((1, 64, 40, 41), (1, 64, 40, 41)), ((3, 70001), ()), ((), (70001,)),
                         ((1, 48, 60, 60), (1, 48, 1, 1)), ((1, 56, 56, 40), (40,)), ((5, 1, 30000), (5, 4, 1)),
                         ((37, 3000), (1, 3000)), ((2, 3), (3,))):
            a, b = rnd(rng, *ash), rnd(rng, *bsh)
            if a.size > 100:
                a.ravel()[:4] = [np.inf, -np.inf, np.nan, 0.0]
            if b.size > 100:
                b.ravel()[:3] = [0.0, -0.0, np.nan]
            same(op, [a, b])


def case_unary(rng):
    """Relu/LeakyRelu/Exp/Tanh/Sqrt (float32): the generated statement per element, serial and in
    parallel blocks (the last one short), non-finite values, signed zeros, negatives for Sqrt."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 88.0, -104.0, 9.5], F)
    for op, at in (("Relu", {}), ("LeakyRelu", dict(alpha=0.1)), ("Exp", {}), ("Tanh", {}), ("Sqrt", {})):
        for n in (1, 37, 140001):
            x = rnd(rng, n) * F(3)
            x[:min(n, specials.size)] = specials[:min(n, specials.size)]
            same(op, [x], **at)


def case_norms(rng):
    """InstanceNormalization (many and few channels, 1-3 spatial dims), GroupNormalization (one
    group: the GroupNorm(1) of MobileViT; several), RMS, MeanVariance and Lp normalisations:
    the statistics in fours or per group, the apply step per run (with and without scale and
    bias, Lp's zero rows), serial and in parallel blocks."""
    for shape in ((1, 3, 5), (2, 7, 4, 3), (1, 70, 9, 8), (1, 5, 2, 3, 4), (1, 2, 300, 240)):
        C = shape[1]
        same("InstanceNormalization", [rnd(rng, *shape) * F(3), rnd(rng, C), rnd(rng, C)], const_inputs=(1, 2),
             epsilon=1e-3)
    for shape, G in (((1, 8, 6, 5), 1), ((2, 12, 7, 3), 4), ((1, 16, 40, 40), 1)):
        same("GroupNormalization", [rnd(rng, *shape), rnd(rng, shape[1]), rnd(rng, shape[1])], const_inputs=(1, 2),
             opset=21, num_groups=G)
    same("RMSNormalization", [rnd(rng, 3, 5, 16), rnd(rng, 16)], const_inputs=(1,), opset=23, axis=-1)
    same("MeanVarianceNormalization", [rnd(rng, 2, 3, 4, 5)], opset=13)
    x = rnd(rng, 6, 9)
    x[2] = 0
    for p in (1, 2):
        same("LpNormalization", [x], axis=1, p=p)
        same("LpNormalization", [rnd(rng, 4, 5, 3)], axis=1, p=p)


def case_lstm(rng):
    """LSTM (cpu_fast.rnn: gate products over transposed weights, the node one call): W/R
    initializers (transposed at build time) and graph inputs (transposed per run); forward,
    reverse, bidirectional; batch rows, sequence_lens with short and empty rows; initial
    states, peepholes, input_forget, clip, other activations (with alpha/beta), layout 1;
    every output present or not; a hidden size that is not a multiple of the vector width."""
    for T, B, I, H, D, extra in ((3, 1, 5, 4, 1, {}), (4, 2, 7, 9, 1, dict(direction="reverse")),
                                 (5, 3, 6, 5, 2, dict(direction="bidirectional")),
                                 (2, 2, 3, 17, 1, dict(clip=0.7, input_forget=1)),
                                 (3, 2, 4, 6, 1, dict(activations=["HardSigmoid", "LeakyRelu", "Softsign"],
                                                      activation_alpha=[0.3, 0.05], activation_beta=[0.4])),
                                 (1, 1, 128, 32, 1, {}), (0, 2, 3, 4, 1, {})):
        for lens, peep, init, layout, outs in ((False, False, False, 0, 3), (True, True, True, 0, 3),
                                               (False, True, True, 1, 2), (True, False, True, 0, 1)):
            if T == 0 and lens:
                continue
            xs = (B, T, I) if layout else (T, B, I)
            hs = (B, D, H) if layout else (D, B, H)
            ins = [rnd(rng, *xs), rnd(rng, D, 4 * H, I), rnd(rng, D, 4 * H, H), rnd(rng, D, 8 * H)]
            ins.append(rng.integers(0, T + 1, B).astype(np.int32) if lens else None)
            ins += [rnd(rng, *hs), rnd(rng, *hs)] if init else [None, None]
            ins.append(rnd(rng, D, 3 * H) if peep else None)
            while ins[-1] is None:
                ins.pop()
            at = dict(extra, hidden_size=H, layout=layout)
            got = same("LSTM", ins, const_inputs=(1, 2, 3), n_out=outs, **at)
            same("LSTM", ins, n_out=outs, **at)
            assert all(np.isfinite(g).all() for g in got)


CASES = {"mm": case_mm, "lstm_step": case_lstm,
         "norm_stats": case_norms, "norm_apply": case_norms, "conv": case_conv, "convt": case_convt, "pool": case_pool, "gpool": case_gpool, "bn": case_bn,
         "softmax": case_softmax, "ln": case_ln, "resize": case_resize, "pad": case_pad,
         "gather_strided": case_gather_strided, "scatter_strided": case_scatter_strided, "gather": case_gather,
         "tile": case_tile, "topk": case_topk, "Erf_f32": case_erf, "Sigmoid_f32": case_sigmoid, "Add_f32": case_binary,
         "Sub_f32": case_binary, "Mul_f32": case_binary, "Div_f32": case_binary, "Relu_f32": case_unary,
         "LeakyRelu_f32": case_unary, "Exp_f32": case_unary, "Tanh_f32": case_unary, "Sqrt_f32": case_unary}
INLINE = {"reduce": case_reduce_inline}


def fast_paths() -> set:
    """Keys of the CPU rules (kernel pair names), read from the override registry."""
    registry.registry()      # registers the fast paths
    return set(overrides.rules("cpu"))


def test_every_fast_path_has_cases():
    assert fast_paths() == set(CASES), "fast paths without a bitwise case (or cases without a fast path)"


@pytest.mark.parametrize("name", sorted(CASES) + sorted(INLINE))
def test_fast_path_bitwise_equal_to_generated(name):
    fn = CASES.get(name) or INLINE[name]
    fn(np.random.default_rng(zlib.crc32(name.encode())))  # crc32: the same shapes on every run


def test_a_broken_fast_path_is_caught():
    """The comparison can fail: a fast path that rounds differently is noticed."""
    @cpu_kernel
    def broken(x, scale, bias, mean, var, eps, C, S, out):
        for i in range(out.shape[0]):
            out[i] = x[i] + np.float32(1e-3)

    registry.registry()
    with overrides.overriding("bn", target="cpu", run=broken):
        with pytest.raises(AssertionError):
            case_bn(np.random.default_rng(0))
    assert overrides.rule("bn", "cpu").run is not broken     # restored


def _off_by_one(key, calls, what=lambda args: 1):
    """The CPU rule of ``key`` with a prepare step whose run functions add 1 to the first
    output element after the real run (and count their calls)."""
    real = overrides.rule(key, "cpu")

    def prepare(target, *args, **kw):
        run = real.prepare(target, *args, **kw)
        if run is None:
            return None

        def broken(inputs, outputs):
            calls.append(what(args))
            run(inputs, outputs)
            outputs[0].reshape(-1)[0] += F(1)

        return broken

    return overrides.overriding(key, target="cpu", run=real.run, prepare=prepare)


def test_the_packed_constant_b_path_is_taken_and_checked():
    """MatMul/Gemm with an initializer B run the "mm" prepare rule (B packed at build time,
    cpu_fast.gemm.mm_packed_cpu on it): the comparison above reaches it and can fail."""
    registry.registry()
    calls = []
    rng = np.random.default_rng(0)
    with _off_by_one("mm", calls):
        for op, ins, at in (("MatMul", [rnd(rng, 7, 19), rnd(rng, 19, 33)], {}),
                            ("Gemm", [rnd(rng, 7, 19), rnd(rng, 33, 19), rnd(rng, 33)], dict(transB=1))):
            n = len(calls)
            with pytest.raises(AssertionError):
                same(op, ins, const_inputs=(1,), **at)
            assert len(calls) > n, op


def test_the_packed_conv_path_is_taken_and_checked():
    """A Conv with an initializer weight runs the "conv" prepare rule (the weight packed at
    build time, cpu_fast.conv.conv_packed_cpu on it): the comparison above reaches it, on
    every packed path, and can fail."""
    from hetero_explore.kernels.cpu_fast import conv as fastconv
    registry.registry()
    calls = []
    rng = np.random.default_rng(0)
    with _off_by_one("conv", calls, what=lambda args: fastconv.conv_kind(args[1])):
        for xs, ws, at in (((1, 8, 6, 6), (8, 1, 3, 3), dict(group=8, pads=[1] * 4)),
                           ((1, 8, 4, 4), (12, 8, 1, 1), {}),
                           ((1, 4, 6, 6), (16, 4, 3, 3), dict(pads=[1] * 4)), ((1, 8, 1, 1), (16, 8, 1, 1), {})):
            n = len(calls)
            with pytest.raises(AssertionError):
                same("Conv", [rnd(rng, *xs), rnd(rng, *ws)], const_inputs=(1,), **at)
            assert len(calls) > n, (xs, ws)
    assert set(calls) == {fastconv._CK_DW, fastconv._CK_PW, fastconv._CK_PX, fastconv._CK_GEMVT}


def test_the_lstm_path_is_taken_and_checked():
    """An LSTM runs the "lstm_step" prepare rule (cpu_fast.rnn), with constant weights and
    without: the comparison above reaches it and can fail."""
    registry.registry()
    calls = []
    rng = np.random.default_rng(0)
    ins = [rnd(rng, 2, 1, 3), rnd(rng, 1, 16, 3), rnd(rng, 1, 16, 4)]
    with _off_by_one("lstm_step", calls):
        for consts in ((1, 2), ()):
            n = len(calls)
            with pytest.raises(AssertionError):
                same("LSTM", ins, const_inputs=consts, hidden_size=4)
            assert len(calls) > n, consts


def test_generated_only_takes_no_rule():
    """``CPUTarget(generated_only=True)`` neither launches a run rule nor asks a prepare rule."""
    registry.registry()
    gen, fast = CPUTarget(generated_only=True), CPUTarget()
    assert gen.prepared("mm", np.ones((2, 3), F), rows=1, sam=2, sak=1) is None
    assert fast.prepared("mm", np.ones((2, 3), F), rows=1, sam=2, sak=1) is not None
    runs = {k for k, r in overrides.rules("cpu").items() if r.run is not None}
    assert not gen._runs and set(fast._runs) == runs
