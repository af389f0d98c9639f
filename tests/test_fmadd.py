"""The explicit fused multiply-add of the kernel contract (``kernels.fmadd``): correctly
rounded on the CPU (against exact rational arithmetic), the same bits in numba's CUDA
simulator and in the numpy emulation, and different from a separate multiply and add on
cancellation-heavy inputs (so the checks can fail)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

from fractions import Fraction  # noqa: E402

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from hetero_explore.kernels.common import kernel_pair  # noqa: E402
from hetero_explore.kernels.fmadd import fma, fma_emulated  # noqa: E402
from hetero_explore.kernels.target import CPU, CUDA  # noqa: E402


def _cases(n=600):
    """a, b, c (float32): cancellation (c close to -a*b), subnormal products and results,
    zeros of both signs, random bit patterns whose products stay finite."""
    r = np.random.default_rng(7)
    a = r.standard_normal(n).astype(np.float32)
    b = r.standard_normal(n).astype(np.float32)
    c = (-(a.astype(np.float64) * b)).astype(np.float32)
    q = n // 6
    c[:q] = r.standard_normal(q).astype(np.float32)
    a[q:2 * q] *= np.float32(1e-20)
    b[q:2 * q] *= np.float32(1e-19)
    c[q:2 * q] = (-(a[q:2 * q].astype(np.float64) * b[q:2 * q]) * 1.0000001).astype(np.float32)
    bits = r.integers(0x0080_0000, 0x5f00_0000, size=(3, q), dtype=np.int64).astype(np.uint32)
    sign = r.integers(0, 2, size=(3, q), dtype=np.int64).astype(np.uint32) << np.uint32(31)
    a[2 * q:3 * q], b[2 * q:3 * q], c[2 * q:3 * q] = ((bits | sign).view(np.float32) * np.float32(1e-10))
    a[3 * q:3 * q + 4] = [0.0, -0.0, 1.0, -1.0]
    b[3 * q:3 * q + 4] = [-1.0, 2.0, -0.0, 0.0]
    c[3 * q:3 * q + 4] = [0.0, 0.0, -0.0, 0.0]
    return a, b, c


def _exact(a, b, c) -> np.float32:
    """a*b + c rounded once to float32, from exact rationals (ties to even)."""
    v = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if v == 0:   # IEEE: an exact zero sum is +0 unless both addends are -0
        return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    f = np.float32(float(v))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(cands, key=lambda q: (abs(Fraction(float(q)) - v), int(np.array(q).view(np.uint32)) & 1))


@njit(cache=False)
def _fma_loop(a, b, c, out):
    for i in range(out.shape[0]):
        out[i] = fma(a[i], b[i], c[i])


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def test_cpu_fma_is_correctly_rounded_and_the_emulation_agrees():
    a, b, c = _cases()
    out = np.empty_like(a)
    _fma_loop(a, b, c, out)
    want = np.array([_exact(*t) for t in zip(a, b, c)], np.float32)
    assert np.array_equal(_bits(out), _bits(want))
    assert np.array_equal(_bits(fma_emulated(a, b, c)), _bits(want))
    separate = (a * b + c).astype(np.float32)      # two roundings: what fma is not
    assert np.count_nonzero(_bits(separate) != _bits(want)) > len(a) // 4


_FMA_PAIR = kernel_pair("test_fma", "a, b, c, out", "out[i] = fma(a[i], b[i], c[i])", module=__name__)


def test_simulator_fma_is_bitwise_the_cpu_fma():
    """In numba's simulator the kernel calls the compiled CPU fma (not numba.cuda.fma's
    float64 simulation)."""
    a, b, c = _cases(240)
    cpu_out = np.empty_like(a)
    CPU.launch(_FMA_PAIR, a.size, a, b, c, cpu_out)
    dev = CUDA.to_device(a, b, c, np.empty_like(a))
    CUDA.launch(_FMA_PAIR, a.size, *dev)
    assert np.array_equal(_bits(CUDA.to_host(dev[3])), _bits(cpu_out))
    assert np.array_equal(_bits(cpu_out), _bits(fma_emulated(a, b, c)))
