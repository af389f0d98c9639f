"""Elementwise ops. Scalar math is written once (``@njit``) and called from a
CPU loop and from a CUDA kernel alike, so both targets compute bit for bit the
same thing (see the kernel contract in DESIGN.md and common.py)."""

from __future__ import annotations

import numpy as np
from numba import cuda, njit

from .common import bcast_offset, broadcast_strides, cpu_kernel, cuda_kernel, flat, launch, shape_array, to_target
from .registry import NUMERIC, register

# --- unary -------------------------------------------------------------------
RELU = 0
UNARY_CODES = {"Relu": RELU}


@njit(cache=True)
def unary_scalar(code, x):
    if code == RELU:
        return x if (x > 0 or x != x) else np.float32(0.0)
    return x


@cpu_kernel
def _unary_cpu(code, x, out):
    for i in range(out.shape[0]):
        out[i] = unary_scalar(code, x[i])


@cuda_kernel
def _unary_cuda(code, x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = unary_scalar(code, x[i])


def _build_unary(ctx, target):
    code = UNARY_CODES[ctx.node.op_type]

    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        if target == "cpu":
            _unary_cpu(code, x, out)
        else:
            launch(_unary_cuda, out.shape[0], code, x, out)

    return run


register("Relu", dtypes=("float32",))(_build_unary)

# --- binary with numpy broadcasting ------------------------------------------
ADD = 0
BINARY_CODES = {"Add": ADD}


@njit(cache=True)
def binary_scalar(code, a, b):
    if code == ADD:
        return a + b
    return a


@cpu_kernel
def _binary_cpu(code, a, b, out, shape, sa, sb):
    for i in range(out.shape[0]):
        out[i] = binary_scalar(code, a[bcast_offset(i, shape, sa)], b[bcast_offset(i, shape, sb)])


@cuda_kernel
def _binary_cuda(code, a, b, out, shape, sa, sb):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = binary_scalar(code, a[bcast_offset(i, shape, sa)], b[bcast_offset(i, shape, sb)])


def _build_binary(ctx, target):
    code = BINARY_CODES[ctx.node.op_type]
    out_shape = ctx.out_shapes[0]
    shape, sa, sb = to_target(target, shape_array(out_shape),
                              broadcast_strides(ctx.in_shapes[0], out_shape),
                              broadcast_strides(ctx.in_shapes[1], out_shape))

    def run(inputs, outputs):
        a, b, out = flat(inputs[0]), flat(inputs[1]), flat(outputs[0])
        if target == "cpu":
            _binary_cpu(code, a, b, out, shape, sa, sb)
        else:
            launch(_binary_cuda, out.shape[0], code, a, b, out, shape, sa, sb)

    return run


register("Add", dtypes=NUMERIC)(_build_binary)
