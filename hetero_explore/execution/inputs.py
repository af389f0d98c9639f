"""Graph inputs: validation of what a user feeds, and seeded random inputs."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Mapping

import numpy as np

from ..ir.budget import BUDGET_ENV, memory_budget  # noqa: F401  (re-exported: the budget's home was here)
from ..ir.units import human_bytes as _human
from ..ir.errors import ArgumentTypeError, ArgumentValueError, InputValidationError, MemoryBudgetError
from ..ir.graph import shape_is_static

def random_inputs(graph, seed: int = 0, scale: float = 1.0, *, max_bytes: int | None = None
                  ) -> dict[str, np.ndarray]:
    """One array per graph input, of exactly the input's dtype and shape (a 0-d input gets a
    0-d array): floats ~ N(0, scale), ints in [0, 4), bools random.

    Raises InputValidationError when an input's shape is not static (bind it with
    ``load_model(..., input_shapes=...)``), MemoryBudgetError (before allocating
    anything) when the inputs together would take more than ``max_bytes``
    (default :func:`memory_budget`), and ArgumentTypeError / ArgumentValueError
    for a seed that is not a non-negative integer or a scale that is not a finite number."""
    if isinstance(seed, bool) or not isinstance(seed, (Integral, np.random.Generator)):
        raise ArgumentTypeError(f"seed must be a non-negative integer (or a numpy Generator), got "
                                f"{type(seed).__name__} {seed!r}")
    if isinstance(seed, Integral) and seed < 0:
        raise ArgumentValueError(f"seed must be a non-negative integer, got {seed}")
    if isinstance(scale, bool) or not isinstance(scale, Real):
        raise ArgumentTypeError(f"scale must be a number, got {type(scale).__name__} {scale!r}")
    if not math.isfinite(float(scale)):
        raise ArgumentValueError(f"scale must be finite, got {scale}")
    budget = memory_budget() if max_bytes is None else int(max_bytes)
    specs = []
    total = 0
    for name in graph.inputs:
        v = graph.values[name]
        if v.dtype is None or not shape_is_static(v.shape):
            raise InputValidationError(
                f"input {name!r} has shape {v.shape} and dtype {v.dtype}; random inputs need a static "
                "shape: bind it with load_model(model, input_shapes={...})")
        shape = tuple(int(d) for d in v.shape)
        if any(d < 0 for d in shape):
            raise InputValidationError(f"input {name!r} has a negative dim in {shape}; dims are >= 0")
        nbytes = math.prod(shape) * np.dtype(v.dtype).itemsize  # Python ints: no overflow
        total += nbytes
        specs.append((name, v, shape, nbytes))
    if total > budget:
        parts = ", ".join(f"{n!r} {s} {np.dtype(v.dtype).name}: {_human(b)}" for n, v, s, b in specs)
        raise MemoryBudgetError(
            f"random inputs would take {_human(total)} ({total:,d} bytes), over the memory budget of "
            f"{_human(budget)} ({parts}); bind smaller shapes (input_shapes= / --input-shape), or raise "
            f"the budget with max_bytes= or ${BUDGET_ENV}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(int(seed))
    out = {}
    for name, v, shape, _ in specs:
        if v.dtype.kind == "f":
            arr = (rng.standard_normal(shape) * scale).astype(v.dtype)
        elif v.dtype.kind in "iu":
            arr = rng.integers(0, 4, size=shape).astype(v.dtype)
        elif v.dtype.kind == "b":
            arr = rng.random(shape) < 0.5
        else:
            raise InputValidationError(f"input {name!r}: cannot make random data of dtype {v.dtype}")
        # np.array keeps a 0-d (scalar) input 0-d; np.ascontiguousarray would make it (1,)
        out[name] = np.array(arr, dtype=v.dtype, order="C", copy=True)
    return out


def _dtype_name(dtype) -> str:
    d = np.dtype(dtype)
    if d.byteorder not in ("=", "|") and not d.isnative:
        return f"{d.name} in non-native byte order ({d.str!r})"
    return d.name


def _fmt_spec(dtype, shape) -> str:
    return f"{'?' if dtype is None else _dtype_name(dtype)} {tuple(shape) if shape is not None else '(?)'}"


def is_ml_dtype(dtype) -> bool:
    """A numeric dtype from ``ml_dtypes`` (bfloat16, float8/6/4, int4/int2: numpy holds them
    as kind 'V'), which ONNX and numpy use for these element types."""
    d = np.dtype(dtype)
    return d.kind == "V" and getattr(d.type, "__module__", "") == "ml_dtypes"


def _as_array(n, a, problems: list[str], strings: bool = False) -> np.ndarray | None:
    """``a`` as a plain ndarray (no subclass, no copy where none is needed), or None with a
    problem appended. Masked arrays with masked elements, ragged lists, and values numpy
    can only hold as objects, strings or records are refused: a kernel cannot read them.
    ``strings`` (the graph input is an ONNX string tensor): an array of Python ``str`` (an
    object array, or numpy's ``<U``, converted to one) is what is wanted, and only that."""
    if isinstance(a, np.ma.MaskedArray):
        if np.ma.is_masked(a):
            problems.append(f"input {n!r}: a masked array with masked elements; fill them first "
                            "(a.filled(value)): kernels would read whatever lies under the mask")
            return None
        a = a.data
    if a is None:
        problems.append(f"input {n!r}: got None; give a numpy array")
        return None
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError, OverflowError) as e:
        problems.append(f"input {n!r}: cannot be read as an array ({type(a).__name__}: {e}); give a "
                        "numpy array")
        return None
    if strings:
        if arr.dtype.kind == "U":
            arr = arr.astype(object)
        if arr.dtype != object or not all(isinstance(v, str) for v in arr.flat):
            problems.append(f"input {n!r}: a string tensor takes an array of Python str (dtype object or "
                            f"<U), got {arr.dtype}" + (" holding non-str elements" if arr.dtype == object
                                                       else ""))
            return None
        return arr
    if (arr.dtype.kind in "OSUVMm" or arr.dtype.hasobject) and not is_ml_dtype(arr.dtype):
        problems.append(f"input {n!r}: an array of dtype {arr.dtype} ({type(a).__name__} given); kernels "
                        "take numeric or bool arrays: convert it with np.asarray(x, dtype=...)")
        return None
    return arr


def input_specs(graph) -> tuple | None:
    """``(name, dtype, shape)`` of every graph input, for :func:`exact_feeds`; None when some
    input is not a tensor of static shape and numeric or bool dtype (a sequence, map or
    optional, a string tensor, a symbolic dim): such graphs always take
    :func:`validate_inputs`."""
    specs = []
    for n in graph.inputs:
        v = graph.values[n]
        if v.is_host_value or v.dtype is None or v.shape is None or not shape_is_static(v.shape):
            return None
        dt = np.dtype(v.dtype)
        if dt.hasobject or dt.kind in "OSUVMm" and not is_ml_dtype(dt):
            return None
        specs.append((n, dt, tuple(int(d) for d in v.shape)))
    return tuple(specs)


def exact_feeds(specs, inputs) -> dict[str, np.ndarray] | None:
    """``inputs`` as :func:`validate_inputs` returns it, when it is the common case that needs
    no conversion: a dict holding exactly the inputs of ``specs`` (:func:`input_specs`), each a
    plain ``np.ndarray`` of the exact dtype and shape. None otherwise (then
    :func:`validate_inputs` checks, converts and explains)."""
    if specs is None or type(inputs) is not dict or len(inputs) != len(specs):
        return None
    out = {}
    for name, dtype, shape in specs:
        a = inputs.get(name)
        if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape:
            return None
        out[name] = a
    return out


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
        v = vals[n]
        if v.is_host_value:  # a sequence, optional or map: a Python value on the host
            from ..kernels.host.sequences import as_host_input
            a = as_host_input(n, feeds[n], v.type_str, problems)
            if a is not None:
                out[n] = a
            continue
        a = _as_array(n, feeds[n], problems, strings=v.dtype is not None and np.dtype(v.dtype) == object)
        if a is None:
            continue
        bad_dtype = v.dtype is not None and a.dtype != v.dtype
        bad_shape = v.shape is not None and (len(v.shape) != a.ndim or any(
            isinstance(d, (int, np.integer)) and d != s for d, s in zip(v.shape, a.shape)))
        if bad_dtype or bad_shape:
            what = " and ".join(w for w, bad in (("dtype", bad_dtype), ("shape", bad_shape)) if bad)
            hint = f"; cast it with .astype(np.{np.dtype(v.dtype).name})" if bad_dtype else ""
            problems.append(f"input {n!r}: expected {_fmt_spec(v.dtype, v.shape)}, got "
                            f"{_fmt_spec(a.dtype, a.shape)} (wrong {what}){hint}")
            continue
        out[n] = a
    if problems:
        raise InputValidationError("inputs do not match the graph:\n  - " + "\n  - ".join(problems))
    return out
