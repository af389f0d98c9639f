"""Seeded random inputs of the right dtypes and shapes for a graph."""

from __future__ import annotations

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
