"""Graph inputs: validation of what a user feeds, and seeded random inputs."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .errors import InputValidationError
from .ir import shape_is_static


def random_inputs(graph, seed: int = 0, scale: float = 1.0) -> dict[str, np.ndarray]:
    """One array per graph input: floats ~ N(0, scale), ints in [0, 4), bools random.

    Raises InputValidationError when an input's shape is not static (bind it with
    ``load_model(..., input_shapes=...)``)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        v = graph.values[name]
        if v.dtype is None or not shape_is_static(v.shape):
            raise InputValidationError(
                f"input {name!r} has shape {v.shape} and dtype {v.dtype}; random inputs need a static "
                "shape: bind it with load_model(model, input_shapes={...})")
        shape = tuple(v.shape)
        if v.dtype.kind == "f":
            arr = (rng.standard_normal(shape) * scale).astype(v.dtype)
        elif v.dtype.kind in "iu":
            arr = rng.integers(0, 4, size=shape).astype(v.dtype)
        elif v.dtype.kind == "b":
            arr = rng.random(shape) < 0.5
        else:
            raise InputValidationError(f"input {name!r}: cannot make random data of dtype {v.dtype}")
        out[name] = np.ascontiguousarray(arr)
    return out


def _fmt_spec(dtype, shape) -> str:
    return f"{'?' if dtype is None else np.dtype(dtype).name} {tuple(shape) if shape is not None else '(?)'}"


def validate_inputs(graph, inputs) -> dict[str, np.ndarray]:
    """Check ``inputs`` (a mapping name → array, or a sequence in graph-input
    order) against the graph's inputs by name, dtype and static dims. Every
    problem is listed in one :class:`InputValidationError`; nothing is cast."""
    names = list(graph.inputs)
    if inputs is None:
        inputs = {}
    if isinstance(inputs, Mapping):
        feeds = dict(inputs)
    elif isinstance(inputs, (list, tuple)):
        if len(inputs) != len(names):
            raise InputValidationError(f"got {len(inputs)} positional input(s); the graph takes "
                                       f"{len(names)}: {names}")
        feeds = dict(zip(names, inputs))
    else:
        raise InputValidationError(f"inputs must be a dict (input name → numpy array) or a list in graph "
                                   f"input order {names}; got {type(inputs).__name__}")
    vals = graph.values
    problems: list[str] = []
    missing = [n for n in names if n not in feeds]
    if missing:
        problems.append("missing input(s): " + ", ".join(
            f"{n!r} (expected {_fmt_spec(vals[n].dtype, vals[n].shape)})" for n in missing))
    extra = [n for n in feeds if n not in graph.inputs]
    if extra:
        bits = []
        for n in extra:
            if graph.is_constant(n):
                bits.append(f"{n!r} (an initializer: weights cannot be fed)")
            else:
                bits.append(repr(n))
        problems.append(f"unexpected input(s): {', '.join(bits)}; these names are unknown to the graph, "
                        f"whose inputs are {names}")
    out: dict[str, np.ndarray] = {}
    for n in names:
        if n not in feeds:
            continue
        a = feeds[n]
        if not isinstance(a, np.ndarray):
            a = np.asarray(a)
        v = vals[n]
        bad_dtype = v.dtype is not None and a.dtype != v.dtype
        bad_shape = v.shape is not None and (len(v.shape) != a.ndim or any(
            isinstance(d, (int, np.integer)) and d != s for d, s in zip(v.shape, a.shape)))
        if bad_dtype or bad_shape:
            what = " and ".join(w for w, bad in (("dtype", bad_dtype), ("shape", bad_shape)) if bad)
            hint = f"; cast it with .astype(np.{v.dtype.name})" if bad_dtype else ""
            problems.append(f"input {n!r}: expected {_fmt_spec(v.dtype, v.shape)}, got "
                            f"{_fmt_spec(a.dtype, a.shape)} (wrong {what}){hint}")
            continue
        out[n] = a
    if problems:
        raise InputValidationError("inputs do not match the graph:\n  - " + "\n  - ".join(problems))
    return out
