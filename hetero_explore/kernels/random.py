"""Random ops, counter-based: RandomUniform, RandomNormal, RandomUniformLike,
RandomNormalLike, Bernoulli, Multinomial -- the same numbers on every target.

Each output element ``i`` draws from a counter-based generator: ``_bits(key, ctr)`` is
SplitMix64's finaliser of ``key + (ctr + 1) * 0x9E3779B97F4A7C15`` (uint64 arithmetic,
wrapping), with ``ctr = i * 256 + j`` for the element's ``j``-th draw. Nothing is sequential,
so a CPU loop and one CUDA thread per element draw bitwise-identical numbers, in any order.
``key`` is SplitMix64 of the float64 bits of the ``seed`` attribute.

Without a ``seed`` attribute the seed is picked when the kernel is built, deterministically
from the node (:func:`implicit_seed`: a hash of its op type, name and output names), so the
reference run and a heterogeneous run of the same plan -- which build their kernels
separately -- draw the same numbers, and so does every later run of that model; :func:`implicit_seed` gives the seed
of any node (the node's attributes are left alone). (ONNX leaves unseeded draws implementation-defined; a byte-identity
explorer needs them reproducible.)

Distributions, in exact or fixed float steps:

* uniform float32: ``u = float32(bits >> 40) * 2**-24`` (exact, in [0, 1)), then
  ``low + u * (high - low)`` in float32; float64 outputs use 53 bits and float64 steps.
* normal (float32): Marsaglia's polar method -- draws ``j = 2a, 2a+1`` give ``u, v`` in
  [-1, 1); the first attempt ``a`` with ``0 < s = u*u + v*v < 1`` yields
  ``u * sqrt(-2 * log(s) / s)`` with :mod:`.pmath`'s portable log and sqrt; then
  ``mean + scale * z``. (After 127 rejected attempts -- probability ~1e-85 -- the draw is 0.)
* Bernoulli: ``1 if u53 < p else 0`` with a 53-bit uniform ``u53`` and ``p`` in float64
  (exact comparison), cast to the output type.
* Multinomial: per sample, ``m = max_j x_j``, ``total = sum_j exp(x_j - m)`` (j ascending,
  float32, portable exp), ``t = u * total``; the class is the first ``j`` whose running sum
  exceeds ``t`` (the last class if rounding leaves none).
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np
from numba import njit

from .common import flat, kernel_pair, node_error, prod
from .opdef import OpList
from .pmath import exp_f32, log_f32, sqrt_f32

OPS = OpList()

_JIT = dict(cache=True, error_model="numpy")
U_GOLD = np.uint64(0x9E3779B97F4A7C15)
U_M1 = np.uint64(0xBF58476D1CE4E5B9)
U_M2 = np.uint64(0x94D049BB133111EB)
U_1 = np.uint64(1)
U_11 = np.uint64(11)
U_27 = np.uint64(27)
U_30 = np.uint64(30)
U_31 = np.uint64(31)
U_40 = np.uint64(40)
U_256 = np.uint64(256)
F_2M24 = np.float32(2.0 ** -24)
D_2M53 = np.float64(2.0 ** -53)
F0 = np.float32(0.0)
F1 = np.float32(1.0)
F2 = np.float32(2.0)
FM2 = np.float32(-2.0)

_MASK = (1 << 64) - 1


def _splitmix_py(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def seed_key(seed: float) -> np.uint64:
    """The generator key of a float seed (SplitMix64 of its float64 bits)."""
    return np.uint64(_splitmix_py(struct.unpack("<Q", struct.pack("<d", float(seed)))[0]))


def implicit_seed(node) -> float:
    """The seed used when a node has no ``seed`` attribute: from its op type, name and outputs."""
    text = "\0".join([node.op_type, node.name or "", *node.outputs])
    return float(int.from_bytes(hashlib.sha256(text.encode()).digest()[:3], "little"))


@njit(**_JIT)
def _bits(key, ctr):
    """SplitMix64 finaliser of key + (ctr + 1) * golden (uint64, wrapping)."""
    z = np.uint64(key) + (np.uint64(ctr) + U_1) * U_GOLD
    z = (z ^ (z >> U_30)) * U_M1
    z = (z ^ (z >> U_27)) * U_M2
    return z ^ (z >> U_31)


@njit(**_JIT)
def _u24(key, ctr):
    return np.float32(_bits(key, ctr) >> U_40) * F_2M24


@njit(**_JIT)
def _u53(key, ctr):
    return np.float64(_bits(key, ctr) >> U_11) * D_2M53


@njit(**_JIT)
def _normal_f32(key, i):
    base = np.uint64(i) * U_256
    for a in range(127):
        u = F2 * np.float32(_u24(key, base + np.uint64(2 * a))) - F1
        v = F2 * np.float32(_u24(key, base + np.uint64(2 * a + 1))) - F1
        s = u * u + v * v
        if s > F0 and s < F1:
            return u * np.float32(sqrt_f32(FM2 * np.float32(log_f32(s)) / s))
    return F0


_UNIFORM = kernel_pair(
    "random_uniform", "out, key, low, high, dbl",
    """
if dbl == 1:
    lo = np.float64(low)
    out[i] = lo + np.float64(_u53(key, np.uint64(i) * U_256)) * (np.float64(high) - lo)
else:
    lo32 = np.float32(low)
    out[i] = lo32 + np.float32(_u24(key, np.uint64(i) * U_256)) * (np.float32(high) - lo32)
""", module=__name__)

_NORMAL = kernel_pair(
    "random_normal", "out, key, mean, scale",
    """
out[i] = np.float32(mean) + np.float32(scale) * np.float32(_normal_f32(key, i))
""", module=__name__)

_BERNOULLI = kernel_pair(
    "random_bernoulli", "p, out, key",
    """
out[i] = 1 if np.float64(_u53(key, np.uint64(i) * U_256)) < np.float64(p[i]) else 0
""", module=__name__)

_MULTINOMIAL = kernel_pair(
    "random_multinomial", "x, out, key, C, S",
    """
b = i // S
row = b * C
m = np.float32(x[row])
for j in range(1, C):
    if np.float32(x[row + j]) > m:
        m = np.float32(x[row + j])
total = np.float32(0)
for j in range(C):
    total = total + np.float32(exp_f32(np.float32(x[row + j]) - m))
t = np.float32(_u24(key, np.uint64(i) * U_256)) * total
acc = np.float32(0)
pick = C - 1
for j in range(C):
    acc = acc + np.float32(exp_f32(np.float32(x[row + j]) - m))
    if acc > t:
        pick = j
        break
out[i] = pick
""", module=__name__)


def _key(ctx):
    seed = ctx.attrs.get("seed", None)
    if seed is None:
        seed = implicit_seed(ctx.node)
    return seed_key(float(seed))


def _out_dtype(ctx):
    dts = ctx.out_dtypes
    return None if not dts or dts[0] is None else np.dtype(dts[0]).name


def _check_gen(ctx, target):
    op = ctx.node.op_type
    odt = _out_dtype(ctx)
    ok = ("float32",) if "Normal" in op else ("float32", "float64")
    if odt not in ok:
        return f"{op}: output dtype {odt} not supported ({', '.join(ok)})"
    if not ctx.out_shapes or ctx.out_shapes[0] is None:
        return f"{op}: output shape unknown"
    return None


def _build_gen(ctx, target):
    op = ctx.node.op_type
    key = _key(ctx)
    at = ctx.attrs
    n = prod(ctx.out_shapes[0])
    if "Uniform" in op:
        low, high = float(at.get("low", 0.0)), float(at.get("high", 1.0))
        dbl = 1 if _out_dtype(ctx) == "float64" else 0

        def run(inputs, outputs):
            target.launch(_UNIFORM, n, flat(outputs[0]), key, low, high, dbl)
    else:
        # float32 arguments: the kernel computes in float32 (no float64 conversion on the GPU)
        mean, scale = np.float32(at.get("mean", 0.0)), np.float32(at.get("scale", 1.0))

        def run(inputs, outputs):
            target.launch(_NORMAL, n, flat(outputs[0]), key, mean, scale)

    return run


_ANY = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
_GEN_NOTE = "counter-based (SplitMix64 of seed, index): bitwise equal on every target; no seed: one from the node"
OPS.add("RandomUniform", _build_gen, since=1, until=22, check=_check_gen, note=_GEN_NOTE, kernels=(_UNIFORM,))
OPS.add("RandomNormal", _build_gen, since=1, until=22, check=_check_gen, note=_GEN_NOTE + "; polar method",
        kernels=(_NORMAL,))
OPS.add("RandomUniformLike", _build_gen, since=1, until=22, dtypes=_ANY, check=_check_gen, note=_GEN_NOTE,
        kernels=(_UNIFORM,))
OPS.add("RandomNormalLike", _build_gen, since=1, until=22, dtypes=_ANY, check=_check_gen,
        note=_GEN_NOTE + "; polar method", kernels=(_NORMAL,))


def _check_bern(ctx, target):
    odt = _out_dtype(ctx)
    if odt not in _ANY:
        return f"Bernoulli: output dtype {odt} not supported"
    if ctx.in_shapes[0] is None:
        return "Bernoulli: input shape unknown"
    return None


def _build_bern(ctx, target):
    key = _key(ctx)
    n = prod(ctx.in_shapes[0])

    def run(inputs, outputs):
        target.launch(_BERNOULLI, n, flat(inputs[0]), flat(outputs[0]), key)

    return run


OPS.add("Bernoulli", _build_bern, since=15, until=22, dtypes=("float32", "float64"), check=_check_bern,
        note="1 if u < p (53-bit uniform, float64 compare); counter-based, bitwise equal on every target",
        kernels=(_BERNOULLI,))


def _check_multi(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) != 2:
        return "Multinomial: input must be 2-D (batch, classes) with a known shape"
    if xs[1] < 1:
        return "Multinomial: needs at least one class"
    if _out_dtype(ctx) not in ("int32", "int64"):
        return f"Multinomial: output dtype {_out_dtype(ctx)} not supported (int32, int64)"
    return None


def _build_multi(ctx, target):
    key = _key(ctx)
    B, C = ctx.in_shapes[0]
    S = int(ctx.attrs.get("sample_size", 1))
    if S < 1:
        raise node_error(ctx, f"sample_size={S} must be >= 1")

    def run(inputs, outputs):
        target.launch(_MULTINOMIAL, B * S, flat(inputs[0]), flat(outputs[0]), key, C, S)

    return run


OPS.add("Multinomial", _build_multi, since=7, until=22, dtypes=("float32",), check=_check_multi,
        note="inverse CDF of softmax(x) per sample (portable exp, j ascending); counter-based",
        kernels=(_MULTINOMIAL,))
