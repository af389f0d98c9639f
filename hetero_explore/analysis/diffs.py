"""Differences between two arrays (or host values): byte identity with NaNs compared by bit
pattern, counts, largest absolute difference, distance in ULP, first differing index; and the
:class:`Blame` record that says where a run first diverged. :mod:`.compare` and
:mod:`.divergence` build on them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.errors import ArgumentTypeError


def _bits(a: np.ndarray) -> np.ndarray:
    """The array's bit patterns as unsigned integers (one per element where possible)."""
    a = np.ascontiguousarray(a)
    n = a.dtype.itemsize
    if n in (1, 2, 4, 8):
        return a.view(f"u{n}")
    return a.view(np.uint8).reshape(a.shape + (n,))


def _ordered(a: np.ndarray) -> np.ndarray:
    """Float bit patterns mapped to int64 so that adjacent floats differ by one
    (both zeros map to 0; NaNs sort beyond the infinities)."""
    sint = np.dtype(f"i{a.dtype.itemsize}")
    i = np.ascontiguousarray(a).view(sint).astype(np.int64)
    return np.where(i < 0, np.int64(np.iinfo(sint).min) - i, i)


def ulp_distance(a, b) -> np.ndarray:
    """Element-wise distance in units in the last place between two float arrays of
    one dtype (float16, float32, float64), from their ordered integer bit patterns; uint64."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.dtype.kind != "f":
        raise ArgumentTypeError(f"ulp_distance needs two float arrays of one dtype, got {a.dtype} and {b.dtype}")
    oa, ob = _ordered(a), _ordered(b)
    ua, ub = oa.astype(np.uint64), ob.astype(np.uint64)  # wrap-around subtraction is exact below 2**64
    return np.where(oa >= ob, ua - ub, ub - ua)


def _host(x):
    """A sequence / map / optional (a list, dict or None; or the 0-d object array holding one)
    as its Python value, else None-marker ``_NOT_HOST``."""
    if isinstance(x, np.ndarray) and x.dtype == object and x.ndim == 0:
        x = x[()]
    if x is None or isinstance(x, (list, tuple, dict)):
        return x
    return _NOT_HOST


_NOT_HOST = object()


def _kind(x) -> str:
    return "optional (empty)" if x is None else ("map" if isinstance(x, dict) else "sequence")


def _diff_host(a, b) -> dict:
    """:func:`diff_arrays` element by element through sequences, maps and optionals: the counts
    add up, the maxima are over elements, the first index starts with the element's index (or key)."""
    out = {"byte_identical": False, "n_diff": None, "max_abs": None, "max_ulp": None, "first_diff_index": None}
    ha, hb = _host(a), _host(b)
    if ha is _NOT_HOST or hb is _NOT_HOST or _kind(ha) != _kind(hb):
        out["detail"] = f"a {_kind(ha) if ha is not _NOT_HOST else 'tensor'} vs a " \
                        f"{_kind(hb) if hb is not _NOT_HOST else 'tensor'}"
        return out
    if ha is None:
        return {**out, "byte_identical": True, "n_diff": 0}
    if isinstance(ha, dict):
        if set(ha) != set(hb):
            out["detail"] = f"map keys {sorted(map(str, ha))} vs {sorted(map(str, hb))}"
            return out
        keys = sorted(ha, key=str)
        pairs = [(k, ha[k], hb[k]) for k in keys]
    else:
        if len(ha) != len(hb):
            out["detail"] = f"a sequence of {len(ha)} vs {len(hb)} element(s)"
            return out
        pairs = list(zip(range(len(ha)), ha, hb))
    n = 0
    for k, x, y in pairs:
        d = _diff_host(x, y) if _host(x) is not _NOT_HOST or _host(y) is not _NOT_HOST else diff_arrays(x, y)
        if d["n_diff"] is None:
            out["detail"] = f"element {k!r}: {d.get('detail', 'differs')}"
            out["first_diff_index"] = (k,)
            return out
        n += d["n_diff"]
        for key in ("max_abs", "max_ulp"):
            if d[key] is not None:
                out[key] = d[key] if out[key] is None else max(out[key], d[key])
        if d["n_diff"] and out["first_diff_index"] is None:
            out["first_diff_index"] = (k,) + tuple(d["first_diff_index"] or ())
    out["n_diff"] = n
    out["byte_identical"] = n == 0
    return out


def diff_arrays(a, b) -> dict:
    """How ``a`` differs from ``b``: byte_identical, n_diff (elements), max_abs, max_ulp
    (floats only) and first_diff_index (C order), compared bit for bit. Sequences (lists), maps
    (dicts) and optionals (None) are compared element by element (see :func:`_diff_host`)."""
    if _host(a) is not _NOT_HOST or _host(b) is not _NOT_HOST:
        return _diff_host(a, b)
    a, b = np.asarray(a), np.asarray(b)
    out = {"byte_identical": False, "n_diff": None, "max_abs": None, "max_ulp": None,
           "first_diff_index": None}
    if a.dtype != b.dtype or a.shape != b.shape:
        out["detail"] = f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
        return out
    ba, bb = _bits(a), _bits(b)
    mask = ba != bb
    if mask.ndim > a.ndim:  # multi-byte elements compared byte-wise
        mask = mask.any(axis=-1)
    n = int(np.count_nonzero(mask))
    out["n_diff"] = n
    out["byte_identical"] = n == 0
    if n == 0:
        if a.dtype.kind in "fiu":
            out["max_abs"] = 0.0
        if a.dtype.kind == "f":
            out["max_ulp"] = 0
        return out
    out["first_diff_index"] = tuple(int(i) for i in np.unravel_index(int(np.argmax(mask.ravel())), a.shape))
    if a.dtype.kind in "fiu":
        da, db = a[mask].astype(np.float64), b[mask].astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            out["max_abs"] = float(np.max(np.abs(da - db)))
    if a.dtype.kind == "f" and a.dtype.itemsize in (2, 4, 8):
        out["max_ulp"] = int(ulp_distance(a[mask], b[mask]).max())
    return out


@dataclass(frozen=True)
class Blame:
    """Where a differing output first diverged."""

    output: str
    """The graph output that differs."""
    where: str
    """``node``, ``transfer``, ``staging``, ``readback``, ``not-reproduced`` or ``passthrough``; for runs
    with measured (ONNX Runtime) partitions ``partition``, ``node`` or ``not-localised``."""
    node: str | None
    """The node whose output (or, for a transfer or staging, whose input) first differs."""
    op_type: str | None
    partition: int | None
    """The node's partition."""
    provider: str | None
    """The provider that ran it (a transfer's destination)."""
    value: str | None
    """The first differing value."""
    transfers: tuple
    """Transfers the divergent data went through on its way to the output, as text."""
    detail: str
    """A sentence saying all of the above."""
