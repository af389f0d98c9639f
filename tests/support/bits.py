"""Bitwise comparison with one NaN rule, for every test that says "bit for bit".

Two arrays are bitwise equal when their dtypes and shapes are equal, every element that is not
a NaN has the same bit pattern (so ``+0.0`` and ``-0.0`` differ), and NaNs stand at the same
places. A NaN's sign and payload are not compared: they differ between targets by design (x86
makes ``0xffc00000``, GPUs ``0x7fffffff``; LLVM does not preserve them), and no ONNX op's result
depends on them."""

from __future__ import annotations

import numpy as np


def _floats(a: np.ndarray) -> bool:
    return a.dtype.kind in "fc" or a.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                                     "float8_e5m2fnuz", "float4_e2m1fn")


def canonical_bits(a) -> np.ndarray:
    """``a``'s bytes as unsigned integers, every NaN replaced by one canonical pattern."""
    a = np.ascontiguousarray(a)
    n = a.dtype.itemsize
    u = a.view(f"u{n}") if n in (1, 2, 4, 8) else a.view(np.uint8).reshape(a.shape + (n,))
    if _floats(a):
        nan = np.isnan(a.astype(np.float64)) if a.dtype.kind != "c" else np.isnan(a)
        if nan.any():
            u = u.copy()
            u[nan] = np.iinfo(u.dtype).max if u.dtype.kind == "u" and n in (1, 2, 4, 8) else 0xff
    return u


def bits_equal(a, b) -> bool:
    """Bitwise equality under the module's NaN rule (object arrays: element equality)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == object:
        return bool(np.array_equal(a, b))
    return bool(np.array_equal(canonical_bits(a), canonical_bits(b)))


def assert_bits_equal(a, b, what: str = "") -> None:
    """``bits_equal``, failing with where the first difference is."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    if bits_equal(a, b):
        return
    ca, cb = canonical_bits(a), canonical_bits(b)
    diff = np.flatnonzero((ca != cb).reshape(-1) if ca.ndim == a.ndim else (ca != cb).any(axis=-1).reshape(-1))
    i = int(diff[0])
    raise AssertionError(f"{what}: {len(diff)} element(s) differ in their bits; the first at flat index {i}: "
                         f"{a.reshape(-1)[i]!r} vs {b.reshape(-1)[i]!r}")
