"""Signal kernels (signal.py): DFT (opsets 17 and 20: real/complex, axis, dft_length
padding/truncation, inverse, onesided, irfft), STFT (window, frame_length, onesided), the
window functions and MelWeightMatrix, against numpy's FFT / window functions and onnx's
reference; CPU vs CUDA simulator bitwise; the documented per-bin order."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.kernels.signal import twiddles
from support.harness import run_both, node_model, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32
RNG = np.random.default_rng(4)


@pytest.fixture(autouse=True)
def _claim_full_inverse(monkeypatch):
    """The kernels are tested with the full inverse claimed (see signal.CLAIM_FULL_INVERSE)."""
    from hetero_explore.kernels import signal
    monkeypatch.setattr(signal, "CLAIM_FULL_INVERSE", True)


def both(node, ins, opset, const=()):
    return run_both(node, ins, opset, const)[0]


def as_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0]


def pairs(z):
    return np.stack([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("cplx,inverse,onesided", [(False, 0, 0), (True, 0, 0), (False, 0, 1), (False, 1, 0),
                                                   (True, 1, 0)])   # onesided forward: real input only
@pytest.mark.parametrize("n", [None, 6, 11])
def test_dft(opset, cplx, inverse, onesided, n):
    x = RNG.standard_normal((2, 8, 3, 2 if cplx else 1)).astype(F)
    axis = 1
    names, ins, const = ["x"], [x], []
    if n is not None or opset >= 20:
        names.append("n" if n is not None else "")
        ins.append(np.asarray(n, np.int64) if n is not None else None)
        if n is not None:
            const.append(1)
    attrs = dict(inverse=inverse, onesided=onesided)
    if opset >= 20:
        names.append("ax")
        ins.append(np.asarray(axis, np.int64))
        const.append(2)
    else:
        attrs["axis"] = axis
    node = helper.make_node("DFT", names, ["y"], name="dft", **attrs)
    got = both(node, ins, opset, tuple(const))
    z = as_complex(x.astype(np.float64))
    N = n or 8
    want = np.fft.ifft(z, n=N, axis=axis) if inverse else np.fft.fft(z, n=N, axis=axis)
    if onesided:
        want = want[:, :N // 2 + 1]
    np.testing.assert_allclose(got, pairs(want), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("n", [8, 7])
def test_irfft(n):
    x = RNG.standard_normal((3, n // 2 + 1, 2)).astype(F)
    node = helper.make_node("DFT", ["x", "n", "ax"], ["y"], name="irfft", inverse=1, onesided=1)
    got = both(node, [x, np.asarray(n, np.int64), np.asarray(-2, np.int64)], 20, (1, 2))
    want = np.fft.irfft(as_complex(x.astype(np.float64)), n=n, axis=1)[..., None]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


def test_dft_documented_order():
    x = RNG.standard_normal((1, 5, 1)).astype(F)
    got = both(helper.make_node("DFT", ["x"], ["y"], name="d", axis=1), [x], 17)
    ct, st = twiddles(5)
    for k in range(5):
        re, im = F(0), F(0)
        for n in range(5):
            m = (k * n) % 5
            re = F(re + F(x[0, n, 0] * ct[m]))
            im = F(im + F(-F(x[0, n, 0] * st[m])))
        assert got[0, k, 0].view(np.uint32) == re.view(np.uint32)
        assert got[0, k, 1].view(np.uint32) == im.view(np.uint32)


@pytest.mark.parametrize("window,onesided,cplx", [(True, 1, False), (False, 1, False), (True, 0, True)])
def test_stft(window, onesided, cplx):
    L, N, step = 20, 8, 3
    x = RNG.standard_normal((2, L, 2 if cplx else 1)).astype(F)
    w = np.hanning(N).astype(F)
    names = ["x", "step", "w" if window else "", "fl"]
    ins = [x, np.asarray(step, np.int64), w if window else None, np.asarray(N, np.int64)]
    node = helper.make_node("STFT", names, ["y"], name="stft", onesided=onesided)
    got = both(node, ins, 17, (1, 3))
    z = as_complex(x.astype(np.float64))
    nF = 1 + (L - N) // step
    frames = np.stack([z[:, f * step:f * step + N] * (w if window else 1) for f in range(nF)], axis=1)
    want = np.fft.fft(frames, axis=-1)
    if onesided:
        want = want[..., :N // 2 + 1]
    np.testing.assert_allclose(got, pairs(want), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("op,np_fn", [("HannWindow", np.hanning), ("HammingWindow", None),
                                      ("BlackmanWindow", np.blackman)])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, np_fn, periodic):
    node = helper.make_node(op, ["n"], ["y"], name="w", periodic=periodic)
    got = both(node, [np.asarray(10, np.int64)], 17, (0,))
    M = 11 if periodic else 10
    if np_fn is None:
        want = 25 / 46 - 21 / 46 * np.cos(2 * np.pi * np.arange(M) / (M - 1))
    else:
        want = np_fn(M)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want[:10], rtol=0, atol=1e-7)
    node = helper.make_node(op, ["n"], ["y"], name="w", output_datatype=11)
    assert both(node, [np.asarray(4, np.int32)], 17, (0,)).dtype == np.float64


def test_mel_weight_matrix():
    ins = [np.asarray(8, np.int64), np.asarray(16, np.int64), np.asarray(8192, np.int64),
           np.asarray(0, F), np.asarray(4096, F)]
    node = helper.make_node("MelWeightMatrix", ["a", "b", "c", "d", "e"], ["y"], name="mel")
    got = both(node, ins, 17, (0, 1, 2, 3, 4))
    want = ReferenceEvaluator(node_model(node, ins, 17, const_inputs=(0, 1, 2, 3, 4))).run(None, {})[0]
    assert got.shape == (9, 8) and np.array_equal(got, want)


def test_declines(monkeypatch):
    from hetero_explore.kernels import signal
    x = RNG.standard_normal((1, 8, 1)).astype(F)
    monkeypatch.setattr(signal, "CLAIM_FULL_INVERSE", False)
    node = helper.make_node("DFT", ["x"], ["y"], name="d", inverse=1)
    m = supports(CPU, node, [x], opset=17)
    assert not m.supported and "full inverse transform" in m.reason
    node = helper.make_node("DFT", ["x", "n"], ["y"], name="d")
    m = supports(CPU, node, [x, np.asarray(8, np.int64)], opset=17)
    assert not m.supported and "dft_length (input 1) must be a constant" in m.reason
    node = helper.make_node("HannWindow", ["n"], ["y"], name="w")
    m = supports(CPU, node, [np.asarray(8, np.int64)], opset=17)
    assert not m.supported and "must be a constant" in m.reason
