"""Signal ops: DFT (17, 20), STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix.

Twiddle factors and windows are computed **on the host in float64 with numpy and
rounded to float32** (``cos(2*pi*m/N)``, ``sin(2*pi*m/N)`` for ``m = 0..N-1``): the
same table for every target, so the contract holds without a portable sin/cos in
:mod:`.pmath` (another branch adds one; the tables can move to it then).

DFT / STFT, per output bin ``k`` (one CUDA thread per bin, a loop on the CPU), in
float32 with ``m = (k * n) mod N``, ``c = cos_t[m]``, ``s = sin_t[m]``, for input
samples ``n`` ascending (``n < min(N, L)``: zero padding adds nothing, a longer signal is
truncated)::

    forward:  re = re + (xr*c + xi*s);  im = im + (xi*c - xr*s)     (real input: xr*c, -(xr*s))
    inverse:  re = re + (xr*c - xi*s);  im = im + (xi*c + xr*s);  then re / N, im / N

The inverse one-sided transform (``inverse=1, onesided=1``, numpy's ``irfft``) extends
the given bins Hermitian-symmetrically (``X[N-k] = conj(X[k])``), drops the imaginary
parts of bins 0 and N/2 as numpy does, and outputs the real part only (last dim 1).
STFT multiplies each sample by the window first (``xr*w``, ``xi*w``), frames
``f = 0 .. (L - N) // step`` at ``f * step``.

Constant inputs: ``dft_length``, DFT-20's ``axis``, STFT's ``frame_step`` and
``frame_length``, and every input of the window ops and MelWeightMatrix must be
constants (they fix output shapes); those ops' outputs are computed on the host (float64,
rounded to the output type) and copied to the target. MelWeightMatrix follows the
onnx reference implementation's formula step by step.
"""

from __future__ import annotations

import numpy as np

from .common import copy_array, flat, kernel_pair, node_error, prod
from .opdef import OpList

OPS = OpList()

_DFT = kernel_pair(
    "dft_bin", "x, out, ct, st, K, inner, L, C, N, nsum, inverse, co, irfft, nitems",
    """
q = i % inner
t = i // inner
k = t % K
o = t // K
re = np.float32(0)
im = np.float32(0)
for n in range(nsum):
    xi = np.float32(0)
    if irfft == 1:
        # Hermitian extension of the L given bins
        src = -1
        sg = np.float32(1)
        if n < L and 2 * n <= N:
            src = n
        elif N - n < L:
            src = N - n
            sg = np.float32(-1)
        if src < 0:
            continue
        off = ((o * L + src) * inner + q) * C
        xr = x[off]
        if C == 2 and n != 0 and 2 * n != N:
            xi = x[off + 1] * sg
    else:
        off = ((o * L + n) * inner + q) * C
        xr = x[off]
        if C == 2:
            xi = x[off + 1]
    m = (k * n) % N
    c = ct[m]
    s = st[m]
    if inverse == 0:
        if C == 2:
            re = re + (xr * c + xi * s)
            im = im + (xi * c - xr * s)
        else:
            re = re + xr * c
            im = im + (-(xr * s))
    else:
        re = re + (xr * c - xi * s)
        im = im + (xi * c + xr * s)
if inverse == 1:
    re = re / np.float32(N)
    im = im / np.float32(N)
out[i * co] = re
if co == 2:
    out[i * co + 1] = im
""", count="nitems", module=__name__)

_STFT = kernel_pair(
    "stft_bin", "x, out, ct, st, win, has_w, nF, K, L, C, N, step, nitems",
    """
k = i % K
t = i // K
f = t % nF
b = t // nF
re = np.float32(0)
im = np.float32(0)
for n in range(N):
    off = (b * L + f * step + n) * C
    w = win[n] if has_w == 1 else np.float32(1)
    xr = x[off] * w
    m = (k * n) % N
    c = ct[m]
    s = st[m]
    if C == 2:
        xi = x[off + 1] * w
        re = re + (xr * c + xi * s)
        im = im + (xi * c - xr * s)
    else:
        re = re + xr * c
        im = im + (-(xr * s))
out[2 * i] = re
out[2 * i + 1] = im
""", count="nitems", module=__name__)


def twiddles(N: int):
    """cos and sin of 2*pi*m/N, m = 0..N-1: float64 numpy, rounded to float32."""
    m = np.arange(max(N, 1), dtype=np.float64)
    ang = 2.0 * np.pi * m / max(N, 1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _const_int(ctx, k, what):
    """The integer value of constant input k (None when absent); KernelError when not constant."""
    if not ctx.has_input(k):
        return None
    v = ctx.const(k)
    if v is None:
        raise node_error(ctx, f"{what} (input {k}) must be a constant: it fixes the output shape")
    v = np.asarray(v)
    if v.size != 1 or v.dtype.kind not in "iu":
        raise node_error(ctx, f"{what} must be one integer, got {v.dtype} of shape {v.shape}")
    return int(v.reshape(-1)[0])


def _dft_params(ctx):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 2 or xs[-1] not in (1, 2):
        raise node_error(ctx, f"input shape {xs}: needs rank >= 2 with a last dim of 1 (real) or 2 (complex)")
    rank = len(xs)
    at = ctx.attrs
    inverse = int(at.get("inverse", 0))
    onesided = int(at.get("onesided", 0))
    if ctx.opset >= 20:
        axis = _const_int(ctx, 2, "axis")
        axis = -2 if axis is None else axis
    else:
        axis = int(at.get("axis", 1))
    if not -rank <= axis < rank:
        raise node_error(ctx, f"axis={axis} is out of range for rank {rank}")
    axis %= rank
    if axis == rank - 1:
        raise node_error(ctx, "axis must not be the last (real/imaginary) dimension")
    L = int(xs[axis])
    n = _const_int(ctx, 1, "dft_length")
    irfft = 1 if inverse and onesided else 0
    if n is None:
        n = 2 * (L - 1) if irfft else L
    if n < 1:
        raise node_error(ctx, f"dft_length={n} must be >= 1")
    if irfft and xs[-1] != 2:
        raise node_error(ctx, "an inverse one-sided DFT needs complex input (last dim 2)")
    K = n // 2 + 1 if (onesided and not inverse) else n
    outer, inner = prod(xs[:axis]), prod(xs[axis + 1:rank - 1])
    return dict(K=K, inner=inner, L=L, C=int(xs[-1]), N=n, nsum=n if irfft else min(n, L),
                inverse=inverse, co=1 if irfft else 2, irfft=irfft, nitems=outer * K * inner)


#: the full inverse transform works (tests/test_kernels_signal.py checks it against numpy's
#: float64 ifft) but is not claimed: onnx's node cases test_dft_inverse[_opset19] expect numpy's
#: float32 FFT noise (an imaginary part of 1.9e-7 where the exact value is 0) with atol 1e-7,
#: which an exact sum cannot meet (onnxruntime fails them too). Set to True to claim it.
CLAIM_FULL_INVERSE = False


def _check_dft(ctx, target):
    from ..ir.errors import KernelError
    try:
        p = _dft_params(ctx)
    except KernelError as e:
        return str(e)
    if p["inverse"] and not p["irfft"] and not CLAIM_FULL_INVERSE:
        return ("DFT: the full inverse transform (inverse=1, onesided=0) is not claimed: onnx's node "
                "cases for it expect float32 FFT rounding noise above their tolerance (see "
                "signal.CLAIM_FULL_INVERSE)")
    return None


def _build_dft(ctx, target):
    p = _dft_params(ctx)
    ct, st = target.to_device(*twiddles(p["N"]))
    args = [p[k] for k in ("K", "inner", "L", "C", "N", "nsum", "inverse", "co", "irfft", "nitems")]

    def run(inputs, outputs):
        target.launch(_DFT, p["nitems"], flat(inputs[0]), flat(outputs[0]), ct, st, *args)

    return run


_DFT_NOTE = ("direct sum per bin, n ascending, host float64 twiddles rounded to float32; "
             "real/complex, inverse, onesided, irfft; dft_length and axis constant")
OPS.add("DFT", _build_dft, since=17, until=17, check=_check_dft, note=_DFT_NOTE, kernels=(_DFT,))
OPS.add("DFT", _build_dft, since=20, until=28, check=_check_dft, note=_DFT_NOTE, kernels=(_DFT,))


def _stft_params(ctx):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) != 3 or xs[-1] not in (1, 2):
        raise node_error(ctx, f"signal shape {xs}: expected (batch, length, 1 or 2)")
    step = _const_int(ctx, 1, "frame_step")
    if step is None or step < 1:
        raise node_error(ctx, f"frame_step={step} must be >= 1")
    ws = ctx.in_shapes[2] if ctx.has_input(2) else None
    fl = _const_int(ctx, 3, "frame_length")
    if ws is not None and (len(ws) != 1 or (fl is not None and ws[0] != fl)):
        raise node_error(ctx, f"window shape {ws} does not match frame_length={fl}")
    N = fl if fl is not None else (ws[0] if ws is not None else xs[1])
    L = int(xs[1])
    if N < 1 or N > L:
        raise node_error(ctx, f"frame length {N} must be in 1..{L} (the signal length)")
    onesided = int(ctx.attrs.get("onesided", 1))
    if onesided and xs[-1] == 2:
        raise node_error(ctx, "onesided=1 needs a real signal")
    K = N // 2 + 1 if onesided else N
    nF = 1 + (L - N) // step
    return dict(nF=nF, K=K, L=L, C=int(xs[-1]), N=N, step=step, nitems=int(xs[0]) * nF * K)


def _check_stft(ctx, target):
    from ..ir.errors import KernelError
    try:
        _stft_params(ctx)
    except KernelError as e:
        return str(e)
    return None


def _build_stft(ctx, target):
    p = _stft_params(ctx)
    ct, st = target.to_device(*twiddles(p["N"]))
    dummy = target.to_device(np.ones(1, np.float32))
    has_w = 1 if ctx.has_input(2) else 0
    args = [p[k] for k in ("nF", "K", "L", "C", "N", "step", "nitems")]

    def run(inputs, outputs):
        w = flat(inputs[2]) if has_w else dummy
        target.launch(_STFT, p["nitems"], flat(inputs[0]), flat(outputs[0]), ct, st, w, has_w, *args)

    return run


OPS.add("STFT", _build_stft, since=17, until=28, check=_check_stft, kernels=(_STFT,),
        note="per bin: sum over the frame of (x * window) * twiddle, n ascending; host float64 twiddles "
             "rounded to float32; frame_step/frame_length constant")


# ---------------------------------------------------------------------------------------------
# host-computed constants: windows, MelWeightMatrix
# ---------------------------------------------------------------------------------------------
def _window(op, size, periodic):
    n = np.arange(size, dtype=np.float64)
    d = size if periodic else size - 1
    d = d if d != 0 else 1
    if op == "HannWindow":
        return np.sin(np.pi * n / d) ** 2
    if op == "HammingWindow":
        a = 25.0 / 46.0
        return a - (1.0 - a) * np.cos(2.0 * np.pi * n / d)
    return 0.42 - 0.5 * np.cos(2.0 * np.pi * n / d) + 0.08 * np.cos(4.0 * np.pi * n / d)


def mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower, upper):
    """The onnx reference implementation's formula (float64)."""
    nspec = dft_length // 2 + 1
    fb = np.arange(0, num_mel_bins + 2)
    low_mel = 2595 * np.log1p(lower / 700) / np.log(10)
    high_mel = 2595 * np.log1p(upper / 700) / np.log(10)
    step = (high_mel - low_mel) / fb.shape[0]
    fb = fb * step + low_mel
    fb = 700 * np.expm1(fb / 2595 * np.log(10))
    fb = (((dft_length + 1) * fb) // sample_rate).astype(np.int64)
    out = np.zeros((nspec, num_mel_bins))
    for i in range(num_mel_bins):
        lo, c, hi = int(fb[i]), int(fb[i + 1]), int(fb[i + 2])
        if not (0 <= lo <= c <= hi <= nspec):
            raise ValueError(f"mel bin {i} spans spectrogram bins {lo}..{hi}, outside 0..{nspec - 1}")
        if c - lo == 0:
            if c < nspec:
                out[c, i] = 1
        else:
            for j in range(lo, min(c + 1, nspec)):
                out[j, i] = (j - lo) / (c - lo)
        if hi - c > 0:
            for j in range(c, hi):
                out[j, i] = (hi - j) / (hi - c)
    return out


def _host_value(ctx):
    """The op's output computed on the host (float64, then the output dtype)."""
    op = ctx.node.op_type
    odt = ctx.out_dtypes[0] if ctx.out_dtypes else None
    if odt is None:
        raise node_error(ctx, "output dtype unknown")
    if op == "MelWeightMatrix":
        vals = []
        for k, what in enumerate(("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
                                  "upper_edge_hertz")):
            v = ctx.const(k)
            if v is None:
                raise node_error(ctx, f"{what} (input {k}) must be a constant")
            vals.append(np.asarray(v).reshape(-1)[0])
        try:
            res = mel_weight_matrix(int(vals[0]), int(vals[1]), int(vals[2]), float(vals[3]), float(vals[4]))
        except (ValueError, ZeroDivisionError) as e:
            raise node_error(ctx, str(e)) from None
    else:
        size = _const_int(ctx, 0, "size")
        if size is None or size < 0:
            raise node_error(ctx, f"size={size} must be a constant >= 0")
        res = _window(op, size, int(ctx.attrs.get("periodic", 1)))
    res = res.astype(np.dtype(odt))
    if ctx.out_shapes and ctx.out_shapes[0] is not None and tuple(ctx.out_shapes[0]) != res.shape:
        raise node_error(ctx, f"computed shape {res.shape} differs from the inferred {tuple(ctx.out_shapes[0])}")
    return res


def _check_host(ctx, target):
    from ..ir.errors import KernelError
    odt = ctx.out_dtypes[0] if ctx.out_dtypes else None
    if odt is None or np.dtype(odt).kind not in "fiu" or np.dtype(odt).itemsize not in (1, 2, 4, 8) \
            or np.dtype(odt).name == "float16":
        return f"{ctx.node.op_type}: output dtype {odt} not supported (float32/64, integers)"
    try:
        _host_value(ctx)
    except KernelError as e:
        return str(e)
    return None


def _build_host(ctx, target):
    value = _host_value(ctx)
    dev = target.to_device(value.reshape(-1) if value.size else np.zeros(1, value.dtype))

    def run(inputs, outputs):
        if value.size:
            copy_array(target, dev, flat(outputs[0]))

    return run


for _op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    OPS.add(_op, _build_host, since=17, until=28, dtypes=("int64", "int32"), check=_check_host,
            note="constant size; computed on the host in float64 (numpy), rounded to the output type")
OPS.add("MelWeightMatrix", _build_host, since=17, until=28, dtypes=("int64", "int32"), check=_check_host,
        note="constant inputs; the onnx reference formula on the host in float64, rounded to the output type")
