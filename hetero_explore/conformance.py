"""ONNX backend conformance: run onnx's own node test cases on one provider.

onnx ≥ 1.23 generates its ~1,900 node cases in memory
(``onnx.backend.test.case.node.collect_testcases()``): each has a one-node (or
expanded-function) model, data sets of inputs and expected outputs, and a
tolerance. For a provider, a case is

* **claimed** when its model loads with static shapes and the provider
  supports every node (``provider.supports_op``); otherwise the ``reason``
  column says which node was declined and why;
* **passed** when :func:`hetero_explore.runtime.run_graph` reproduces every
  expected output: same shape and dtype; floats within ``rtol = min(1e-4,
  case.rtol)``, ``atol = min(1e-5, case.atol)`` with NaN at the same places;
  everything else exactly.

How models are loaded (so that kernels, not the loader, answer the case):

* symbolic input dims are bound from the data set's input shapes;
* constant folding is off by default (``fold_constants=False``): a folded
  ``Shape`` or ``Constant`` case would be answered by the loader and would be
  "claimed" by any provider;
* many cases pass shape parameters as graph inputs (Reshape's ``shape``,
  Slice's ``starts``, Range's scalars ...), which leaves the output shapes
  unknown to static shape inference. With ``const_params=True`` (default) the
  runner retries with the small (≤ 64 elements, rank ≤ 1) integer inputs, then
  all small inputs, turned into initializers — the same values, now constants,
  as exporters emit them. The ``const_inputs`` column lists them.

A crashing case never stops the run: its error is recorded.
"""

from __future__ import annotations

import fnmatch
import functools
import time
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

from .errors import HeteroExploreError
from .loader import load_model
from .runtime import node_context, run_graph

__all__ = ["node_cases", "run_case", "run_conformance", "compare_outputs", "RTOL", "ATOL"]

RTOL = 1e-4
ATOL = 1e-5
#: inputs with at most this many elements (and rank ≤ 1) may be bound as constants
CONST_PARAM_MAX_ELEMENTS = 64

COLUMNS = ["case", "ops", "claimed", "passed", "status", "reason", "error", "const_inputs", "seconds"]


@functools.lru_cache(maxsize=1)
def node_cases() -> tuple:
    """All ONNX backend node cases (generated once per process, ~6 s)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return tuple(collect_testcases())


def _select(cases, pattern):
    if pattern is None:
        return list(cases)
    pats = [pattern] if isinstance(pattern, str) else list(pattern)
    return [c for c in cases if any(fnmatch.fnmatchcase(c.name, p) for p in pats)]


def _ops(model: onnx.ModelProto) -> str:
    return ",".join(dict.fromkeys(
        (f"{n.domain}::" if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in model.graph.node))


def compare_outputs(expected, actual, rtol: float, atol: float) -> str | None:
    """None when ``actual`` matches ``expected``, else a one-paragraph description."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if expected.dtype.kind in "fc":
        try:
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            return " ".join(str(e).split())[:400]
        return None
    if not np.array_equal(actual, expected):
        diff = np.argwhere(actual != expected)
        n = len(diff)
        first = tuple(int(v) for v in diff[0]) if n else ()
        return (f"{n} of {expected.size} elements differ; first at {first}: "
                f"{actual[first]!r} vs expected {expected[first]!r}")
    return None


def _with_constants(model: onnx.ModelProto, consts: dict) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in consts]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for name, arr in consts.items():
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(arr), name))
    return m


def _load(case, names, arrays, *, fold_constants, const_params):
    """Load ``case.model`` with input shapes bound; with ``const_params`` retry with small
    parameter inputs turned into initializers until every shape is static.
    Returns (graph, tuple of const input names)."""
    small = [n for n, a in zip(names, arrays) if a.size <= CONST_PARAM_MAX_ELEMENTS and a.ndim <= 1]
    ints = [n for n in small if np.asarray(arrays[names.index(n)]).dtype.kind in "iu"]
    attempts = [()]
    if const_params:
        if ints:
            attempts.append(tuple(ints))
        if small and len(small) != len(ints):
            attempts.append(tuple(small))
    best = None
    for const in attempts:
        consts = {n: arrays[names.index(n)] for n in const}
        model = _with_constants(case.model, consts) if consts else case.model
        shapes = {n: tuple(a.shape) for n, a in zip(names, arrays) if n not in consts}
        g = load_model(model, input_shapes=shapes, fold_constants=fold_constants)
        if not g.symbolic_values:
            return g, const
        if best is None:
            best = (g, const)
    return best


def _row(case, **kw):
    r = {"case": case.name, "ops": _ops(case.model), "claimed": False, "passed": False,
         "status": "", "reason": "", "error": "", "const_inputs": "", "seconds": 0.0}
    r.update(kw)
    return r


def _max_elements(graph) -> int:
    sizes = [int(np.prod(v.shape, dtype=np.int64)) for v in graph.values.values()
             if v.shape is not None and all(isinstance(d, int) for d in v.shape)]
    return max(sizes, default=0)


def run_case(case, provider, *, max_elements: int | None = None, fold_constants: bool = False,
             const_params: bool = True) -> dict:
    """Run one backend case on ``provider``; returns one result row (see :data:`COLUMNS`).

    ``status`` is one of: ``passed``, ``failed`` (wrong values), ``error`` (a claimed
    case crashed), ``unclaimed``, ``skipped: size cap``."""
    t0 = time.perf_counter()
    ops_supported = getattr(provider, "supported_op_types", None)
    try:
        # cheap pre-filter: an op type with no kernel at all cannot be claimed
        if ops_supported is not None and not fold_constants:
            have = ops_supported()
            missing = [n.op_type for n in case.model.graph.node
                       if n.domain not in ("", "ai.onnx") or n.op_type not in have]
            if missing:
                return _row(case, status="unclaimed",
                            reason=f"{missing[0]}: no kernel on {provider.name}")
        data_sets = case.data_sets
        for inputs, outputs in data_sets:
            if not all(isinstance(a, np.ndarray) for a in list(inputs) + list(outputs)):
                return _row(case, status="unclaimed",
                            reason="non-tensor inputs or outputs (sequence/optional/map)")
        if max_elements is not None:
            biggest = max((a.size for ins, outs in data_sets for a in list(ins) + list(outs)), default=0)
            if biggest > max_elements:
                return _row(case, status="skipped: size cap",
                            reason=f"a tensor has {biggest} elements > {max_elements}")
        init_names = {t.name for t in case.model.graph.initializer}
        names = [vi.name for vi in case.model.graph.input if vi.name not in init_names]

        rows_ok = True
        const_used: tuple = ()
        for inputs, expected in data_sets:
            inputs = [np.asarray(a) for a in inputs]
            if len(inputs) != len(names):
                return _row(case, status="unclaimed",
                            reason=f"the data set has {len(inputs)} inputs, the model {len(names)}")
            try:
                graph, const_used = _load(case, names, inputs, fold_constants=fold_constants,
                                          const_params=const_params)
            except (HeteroExploreError, onnx.checker.ValidationError) as e:
                return _row(case, status="unclaimed", reason=f"load: {e}")
            if max_elements is not None and _max_elements(graph) > max_elements:
                return _row(case, status="skipped: size cap",
                            reason=f"a value has {_max_elements(graph)} elements > {max_elements}")
            # claim: every node supported
            for node in graph.nodes:
                ctx = node_context(graph, node)
                try:
                    m = provider.supports_op(node, node.opset, ctx.in_shapes, ctx.in_dtypes, ctx)
                except Exception as e:  # a buggy capability check is a failure, not a decline
                    return _row(case, claimed=True, status="error", const_inputs=",".join(const_used),
                                error=f"supports_op crashed on {node.op_type}: {type(e).__name__}: {e}")
                if not m.supported:
                    return _row(case, status="unclaimed", const_inputs=",".join(const_used),
                                reason=f"{node.op_type}: {m.reason}")
            feeds = {n: a for n, a in zip(names, inputs) if n not in const_used}
            try:
                got = run_graph(graph, provider, feeds)
            except Exception as e:
                msg = " ".join(f"{type(e).__name__}: {e}".split())[:600]
                return _row(case, claimed=True, status="error", error=msg,
                            const_inputs=",".join(const_used), seconds=time.perf_counter() - t0)
            rtol = min(RTOL, case.rtol)
            atol = min(ATOL, case.atol)
            out_names = [o.name for o in case.model.graph.output]
            for name, exp in zip(out_names, expected):
                why = compare_outputs(exp, got[name], rtol, atol)
                if why:
                    return _row(case, claimed=True, status="failed", error=f"output {name!r}: {why}",
                                const_inputs=",".join(const_used), seconds=time.perf_counter() - t0)
        return _row(case, claimed=True, passed=rows_ok, status="passed",
                    const_inputs=",".join(const_used), seconds=time.perf_counter() - t0)
    except Exception as e:  # never let one case stop the run
        msg = " ".join(f"{type(e).__name__}: {e}".split())[:600]
        return _row(case, status="error", error=f"runner: {msg}", seconds=time.perf_counter() - t0)


def run_conformance(provider, cases=None, *, pattern=None, max_elements: int | None = None,
                    fold_constants: bool = False, const_params: bool = True, progress=None):
    """Run backend node cases on ``provider``; returns a pandas DataFrame with one row
    per case: case, ops, claimed, passed, status, reason, error, const_inputs, seconds.

    Args:
        cases: the cases to run (default: all of :func:`node_cases`).
        pattern: fnmatch pattern(s) on case names, e.g. ``"test_slice*"``.
        max_elements: skip cases with a tensor larger than this (``skipped: size cap``),
            e.g. for the CUDA simulator.
        fold_constants / const_params: see the module docs.
        progress: optional callable ``progress(i, n, row)`` after each case.
    """
    import pandas as pd

    selected = _select(node_cases() if cases is None else cases, pattern)
    rows = []
    for i, case in enumerate(selected):
        row = run_case(case, provider, max_elements=max_elements, fold_constants=fold_constants,
                       const_params=const_params)
        rows.append(row)
        if progress is not None:
            progress(i, len(selected), row)
    return pd.DataFrame(rows, columns=COLUMNS)
