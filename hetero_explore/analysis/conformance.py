"""ONNX backend conformance: run onnx's own node test cases on one provider.

onnx ≥ 1.23 generates its ~1,900 node cases in memory
(``onnx.backend.test.case.node.collect_testcases()``): each has a one-node (or
expanded-function) model, data sets of inputs and expected outputs, and a
tolerance. For a provider, a case is

* **claimed** when its model loads (with static shapes, or failing that with
  shapes the run computes, see below) and the provider
  supports every node (``provider.supports``) -- after the nodes it declines
  whose op onnx defines by a function body are expanded into that body, as the
  planner does (:mod:`hetero_explore.load.expand`; the ``expanded`` column lists the
  op types expanded); otherwise the ``reason`` column says which node was
  declined and why;
* **passed** when :func:`hetero_explore.execution.runtime.run_graph` reproduces every
  expected output: same shape and dtype; floats within ``rtol = min(1e-4,
  case.rtol)``, ``atol = min(1e-5, case.atol)`` with NaN at the same places (the case's own
  tolerance for the few whose expected values onnx types rounded, ``ROUNDED_EXPECTED``);
  everything else exactly. Cases of the random ops (RandomNormal/Uniform and their Like
  forms, Bernoulli, Multinomial: ``fold.NONDETERMINISTIC_OPS``) compare shape and dtype
  only: onnx generates their expected values with numpy's generator and says they cannot
  be reproduced ("may not produce the same values in different implementations"); the
  providers' own draws are checked bitwise against each other by the kernel tests.
  A Dropout with a ``training_mode`` input is random in the same way (its mask): its
  cases compare shape and dtype and the Dropout invariants (:func:`_check_dropout`:
  identity when not training or ``ratio`` 0; else kept elements exactly ``x / (1 -
  ratio)``, dropped ones 0, the mask True exactly where kept).

How models are loaded (so that kernels, not the loader, answer the case):

* symbolic input dims are bound from the data set's input shapes;
* constant folding is off by default (``fold_constants=False``), so that every
  node runs on a kernel: a folded ``Shape`` or ``Constant`` case would be
  answered by the loader. When the unfolded model is not claimed (typically: a
  function-expanded case holds ``Constant`` nodes, which CUDA does not run),
  ``fold_fallback=True`` (default) retries with folding on, as a runtime's graph
  optimizer would; a model that folds away entirely is not claimed. The
  ``folded`` column counts the nodes folded at load time.
* when no form of a case loads with static shapes, the same forms are tried again
  with shapes left to the run (data-dependent ops such as NonZero, shapes that
  come from run-time values): the node runner computes them as the nodes run.
* many cases pass shape parameters as graph inputs (Reshape's ``shape``,
  Slice's ``starts``, Range's scalars ...). That can leave output shapes
  unknown to static shape inference, or make a provider decline the node (CUDA
  wants constant Slice parameters). With ``const_params=True`` (default) the
  runner then retries with the small (≤ 64 elements, rank ≤ 1) integer inputs,
  then all small inputs, turned into initializers — the same values, now
  constants, as exporters emit them. The ``const_inputs`` column lists them;
  the first form that loads statically and is fully supported is run.

A crashing case never stops the run: its error is recorded.

The on-disk folders
-------------------
onnx also still ships whole-model cases on disk (:data:`FOLDERS`: ``simple``,
``pytorch-converted``, ``pytorch-operator``, and ``light``, nine model-zoo CNNs
whose weights are ConstantOfShape nodes). :func:`folder_cases` reads them as
:class:`FolderCase` objects, named ``"<folder>/<test>"``, that :func:`run_case`
runs like node cases (same loading, claiming and comparison; their tolerance is
onnx's own for the case); :func:`run_folders` runs a set of them into one frame
with a ``folder`` column. The manifest lists their claims under ``"folders"``.

Failing closed: the manifest
----------------------------
``tests/conformance_manifest.json`` lists, per provider, every case it claims
(and, for the CUDA simulator, the cases skipped by its size cap,
:data:`CUDA_SIMULATOR_MAX_ELEMENTS`). The tests fail when a listed case fails,
is no longer claimed or disappears, and when a case is claimed (or capped)
that the manifest does not list (:func:`manifest_verdict`). After a change
that is meant to change the claims (a new op, a new opset), regenerate it with
:data:`MANIFEST_COMMAND` and review the diff.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from ..ir.errors import HeteroExploreError
from ..load.expand import MAX_EXPANSION_DEPTH, expand_nodes, expandable, has_function_body
from ..load.loader import FOLDABLE_OPS, load_model
from ..ir.context import node_context
from ..execution.runtime import run_graph

__all__ = ["node_cases", "folder_cases", "run_folders", "FOLDERS", "FolderCase", "op_without_kernel", "run_case", "run_conformance", "compare_outputs",
           "manifest_entry", "load_manifest", "load_folder_manifest", "write_manifest", "manifest_verdict",
           "COLUMNS", "RTOL", "ATOL", "CUDA_SIMULATOR_MAX_ELEMENTS", "MANIFEST_COMMAND"]

RTOL = 1e-4
ATOL = 1e-5
#: node cases whose expected outputs onnx's generator types by hand as 4-decimal literals
#: (``onnx/backend/test/case/node/averagepool.py``, ``gridsample.py``, ``roialign.py``): the
#: rounding alone is up to 5e-5 off, beyond RTOL on values below 0.5, and onnx's own reference
#: and onnxruntime miss them by as much; they are compared at the case's own tolerance (onnx's
#: runner's). The kernel tests check these ops against the unrounded reference instead.
ROUNDED_EXPECTED = frozenset({
    "test_averagepool_2d_ceil_last_window_starts_on_pad",   # four decimals of (sum of 4) / 9
    "test_gridsample_bicubic", "test_roialign_aligned_false", "test_roialign_aligned_true",
})
#: inputs with at most this many elements (and rank ≤ 1) may be bound as constants
CONST_PARAM_MAX_ELEMENTS = 64

#: the CUDA simulator runs one Python thread per element: its cases are capped at this size
CUDA_SIMULATOR_MAX_ELEMENTS = 256
#: regenerates tests/conformance_manifest.json (run from the repository root)
MANIFEST_COMMAND = "python bench/conformance_report.py --write-manifest"
SIZE_CAP = "skipped: size cap"

COLUMNS = ["case", "ops", "claimed", "passed", "status", "reason", "error", "const_inputs", "folded",
           "expanded", "seconds"]


@functools.lru_cache(maxsize=1)
def node_cases() -> tuple:
    """All ONNX backend node cases (generated once per process, ~6 s)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return tuple(collect_testcases())


# -- the on-disk folders -----------------------------------------------------------------
#: the backend folders onnx still ships under onnx/backend/test/data/ (``real`` only points at
#: downloads; its models are the ``light`` ones with their weights)
FOLDERS = ("simple", "pytorch-converted", "pytorch-operator", "light")


def _data_dir() -> Path:
    from onnx.backend.test.loader import DATA_DIR

    return Path(DATA_DIR)


def _read_tensor(path: Path) -> np.ndarray:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def _dummy_input(vi: onnx.ValueInfoProto) -> np.ndarray:
    """The input onnx's backend runner feeds a ``light`` model (``generate_dummy_data`` with
    ``random=False``): arange(n) / n as float32, unknown dims taken as 1."""
    tt = vi.type.tensor_type
    if tt.elem_type != onnx.TensorProto.FLOAT:
        raise ValueError(f"light model input {vi.name!r} is not float32; onnx's runner has no data for it")
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim)
    n = int(np.prod(shape, dtype=np.int64))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


class FolderCase:
    """One model of an on-disk backend folder, shaped like a generated node case
    (``name``, ``model``, ``data_sets``, ``rtol``, ``atol``) so :func:`run_case` runs it.

    ``name`` is ``"<folder>/<test>"``. The model and its data are read on first use.
    Data sets are the folder's ``test_data_set_*/input_*.pb, output_*.pb``; a ``light``
    model has one data set: the input onnx's runner generates and the stored
    ``light_<model>_output_0.pb``. Tolerances are onnx's (``data.json``, else its
    runner's defaults rtol=1e-3, atol=1e-7) and are used as they are
    (``own_tolerance``): these are whole models, compared as onnx's runner compares them."""

    own_tolerance = True

    def __init__(self, folder: str, test: str, model_path: Path, rtol: float = 1e-3, atol: float = 1e-7):
        self.folder, self.test, self.model_path = folder, test, Path(model_path)
        self.name = f"{folder}/{test}"
        self.rtol, self.atol = rtol, atol

    def __repr__(self):
        return f"FolderCase({self.name!r})"

    @functools.cached_property
    def model(self) -> onnx.ModelProto:
        return onnx.load(str(self.model_path))

    @functools.cached_property
    def data_sets(self) -> list:
        if self.folder == "light":
            inits = {t.name for t in self.model.graph.initializer}
            ins = [_dummy_input(vi) for vi in self.model.graph.input if vi.name not in inits]
            stem = self.model_path.with_suffix("")
            outs = [_read_tensor(Path(f"{stem}_output_{i}.pb")) for i in range(len(self.model.graph.output))]
            return [(ins, outs)]
        sets = []
        for d in sorted(self.model_path.parent.glob("test_data_set_*")):
            n_in = len(list(d.glob("input_*.pb")))
            n_out = len(list(d.glob("output_*.pb")))
            sets.append(([_read_tensor(d / f"input_{i}.pb") for i in range(n_in)],
                         [_read_tensor(d / f"output_{i}.pb") for i in range(n_out)]))
        return sets


@functools.lru_cache(maxsize=None)
def folder_cases(folders: tuple = FOLDERS) -> tuple:
    """The cases of the on-disk backend folders (sorted by name; the files are read lazily)."""
    root = _data_dir()
    out = []
    for folder in folders:
        if folder not in FOLDERS:
            raise ValueError(f"unknown backend folder {folder!r}; the folders are {', '.join(FOLDERS)}")
        base = root / folder
        if folder == "light":
            tol = {}
            for j in sorted((root / "real").glob("*/data.json")):   # light's tolerances live there
                d = json.loads(j.read_text())
                tol[Path(d.get("url", "")).name] = (d.get("rtol", 1e-3), d.get("atol", 1e-7))
            for f in sorted(base.glob("light_*.onnx")):
                rtol, atol = tol.get(f.name, (1e-3, 1e-7))
                out.append(FolderCase(folder, f.stem[len("light_"):], f, rtol, atol))
            continue
        for d in sorted(p for p in base.iterdir() if (p / "model.onnx").is_file()):
            rtol, atol = 1e-3, 1e-7
            if (d / "data.json").is_file():
                j = json.loads((d / "data.json").read_text())
                rtol, atol = j.get("rtol", rtol), j.get("atol", atol)
            out.append(FolderCase(folder, d.name, d / "model.onnx", rtol, atol))
    return tuple(out)


def run_folders(provider, folders=FOLDERS, *, pattern=None, max_elements: int | None = None,
                fold_constants: bool = False, progress=None):
    """:func:`run_conformance` over the on-disk folder cases; the frame gains a ``folder``
    column (first). ``pattern`` matches ``"<folder>/<test>"`` names."""
    cases = folder_cases(tuple(folders))
    df = run_conformance(provider, cases, pattern=pattern, max_elements=max_elements,
                         fold_constants=fold_constants, progress=progress)
    df.insert(0, "folder", df["case"].str.split("/").str[0])
    return df


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
    if expected.dtype.kind == "V" and expected.dtype.type.__module__ == "ml_dtypes" and \
            "float" in expected.dtype.name:
        # bfloat16, float8/6/4 (ml_dtypes): compared as float64 values, NaNs as NaNs
        expected, actual = expected.astype(np.float64), actual.astype(np.float64)
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


def _training_dropouts(model: onnx.ModelProto) -> list:
    """The Dropout nodes of ``model`` that have a ``training_mode`` input (whose mask is random)."""
    return [n for n in model.graph.node if n.op_type == "Dropout" and n.domain in ("", "ai.onnx")
            and len(n.input) > 2 and n.input[2]]


def _is_random(model: onnx.ModelProto) -> bool:
    """Does the case run a random op (whose expected values onnx cannot reproduce)?

    The random ops of ``fold.NONDETERMINISTIC_OPS``, and a Dropout with a ``training_mode``
    input: its mask comes from numpy's generator in onnx's cases. Such a case compares shape
    and dtype, and a training-mode Dropout also its invariants (:func:`_check_dropout`)."""
    from ..load.fold import NONDETERMINISTIC_OPS
    return (any(n.op_type in NONDETERMINISTIC_OPS for n in model.graph.node)
            or bool(_training_dropouts(model)))


def _check_dropout(model: onnx.ModelProto, feeds: dict, got: dict) -> str | None:
    """The invariants of each training-mode Dropout whose inputs are graph inputs or
    initializers and whose outputs are graph outputs (onnx's one-node cases): with
    ``training_mode`` false or ``ratio`` 0 the output is ``x`` exactly and the mask all
    True; else each element is exactly ``x / (1 - ratio)`` (float32) where kept and 0 where
    dropped, the mask (when asked for) True exactly where kept."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values = {**inits, **feeds, **got}
    for n in _training_dropouts(model):
        if any(i and i not in values for i in list(n.input) + list(n.output)):
            continue
        x = np.asarray(values[n.input[0]])
        r = np.float32(np.asarray(values[n.input[1]]).reshape(-1)[0]) if len(n.input) > 1 and n.input[1] \
            else np.float32(0.5)
        train = bool(np.asarray(values[n.input[2]]).reshape(-1)[0])
        y = np.asarray(values[n.output[0]])
        mask = np.asarray(values[n.output[1]]) if len(n.output) > 1 and n.output[1] else None
        if mask is not None and mask.shape != x.shape:
            return f"Dropout mask has shape {mask.shape}, the input {x.shape}"
        if y.shape != x.shape:
            return f"Dropout output has shape {y.shape}, the input {x.shape}"
        if not train or r == 0:
            if not np.array_equal(y, x, equal_nan=True):
                return "Dropout (identity: training_mode false or ratio 0): the output differs from the input"
            if mask is not None and not mask.all():
                return "Dropout (identity): the mask is not all True"
            continue
        scaled = (x.astype(np.float32) / (np.float32(1) - r)).astype(x.dtype)
        kept = mask if mask is not None else (y != 0)
        if not np.array_equal(y[kept], scaled[kept], equal_nan=True):
            return "Dropout: a kept element is not x / (1 - ratio)"
        if np.any(y[~kept] != 0):
            return "Dropout: a dropped element (mask False) is not 0"
    return None


def _compare_shape_dtype(expected, actual) -> str | None:
    expected, actual = np.asarray(expected), np.asarray(actual)
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    return None


def _prepare(model: onnx.ModelProto, consts: dict, scalars) -> onnx.ModelProto:
    """A copy of ``model`` with the inputs in ``consts`` turned into initializers and
    the inputs named in ``scalars`` declared rank-0 (see :func:`_load`)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in consts]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for vi in m.graph.input:
        if vi.name in scalars and vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
            vi.type.tensor_type.shape.SetInParent()  # present with no dims: a scalar
    for name, arr in consts.items():
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(arr), name))
    return m


def _attempts(names, arrays, const_params):
    """Which inputs to turn into constants, in the order tried: none, then the small
    integer inputs, then all small inputs."""
    small = [n for n, a in zip(names, arrays) if _is_tensor(a) and a.size <= CONST_PARAM_MAX_ELEMENTS
             and a.ndim <= 1]
    ints = [n for n in small if arrays[names.index(n)].dtype.kind in "iu"]
    attempts = [()]
    if const_params:
        if ints:
            attempts.append(tuple(ints))
        if small and len(small) != len(ints):
            attempts.append(tuple(small))
    return attempts


def _load(case, names, arrays, const, fold_constants):
    """Load ``case.model`` with input shapes bound and the inputs in ``const`` as initializers.

    Rank-0 inputs are declared scalar in the model itself rather than through
    ``input_shapes``: the loader's binding clears the declared shape and then adds
    no dims, which leaves a scalar input with an unknown shape (a loader bug)."""
    consts = {n: arrays[names.index(n)] for n in const}
    scalars = {n for n, a in zip(names, arrays) if _is_tensor(a) and a.ndim == 0 and n not in consts}
    model = _prepare(case.model, consts, scalars) if consts or scalars else case.model
    shapes = {n: tuple(a.shape) for n, a in zip(names, arrays)
              if _is_tensor(a) and n not in consts and n not in scalars}
    # optimize=False: the cases test the kernels of the ops as written (an Identity or Dropout
    # case would otherwise lose its only node)
    return load_model(model, input_shapes=shapes, fold_constants=fold_constants, optimize=False)


def _expand_declined(graph, provider):
    """``graph`` with every node that ``provider`` declines and that onnx defines by a
    function body expanded into that body (repeatedly, as the planner does), and the
    op types expanded; ``graph`` itself when there are none."""
    expanded: list[str] = []
    for _ in range(MAX_EXPANSION_DEPTH):
        ids = []
        for node in graph.nodes:
            try:
                ok = provider.supports(node_context(graph, node)).supported
            except Exception:  # reported by _claim
                ok = True
            if not ok and expandable(graph, node) is None:
                ids.append(node.id)
        if not ids:
            break
        expanded += [graph.nodes[i].op_type for i in ids]
        graph = expand_nodes(graph, ids)
    return graph, list(dict.fromkeys(expanded))


def _claim(graph, provider, dynamic: bool = False) -> str | None:
    """None when ``provider`` supports every node, else why not. Shapes must be static
    after loading unless ``dynamic`` (then the run computes them; element types must be known)."""
    if graph.symbolic_values and not dynamic:
        return f"symbolic or unknown shapes after loading: {graph.symbolic_values[:3]}"
    untyped = [n for n in graph.symbolic_values if graph.values[n].dtype is None]
    if untyped:
        return f"unknown element types after loading: {untyped[:3]}"
    from ..planner.core import runtime_shape_blocker
    for node in graph.nodes:
        why = runtime_shape_blocker(graph, node) if dynamic else None
        if why:
            return _op_reason(node.op_type, why)
        ctx = node_context(graph, node)
        try:
            m = provider.supports(ctx)
        except Exception as e:  # a buggy capability check is a failure, not a decline
            raise _ClaimCrash(f"supports crashed on {node.op_type}: {type(e).__name__}: {e}") from e
        if not m.supported:
            return _op_reason(node.op_type, m.reason)
    return None


def _op_reason(op_type: str, reason: str) -> str:
    """``reason`` led by the op's name, once (many checks already name it)."""
    return reason if reason.startswith(f"{op_type}:") else f"{op_type}: {reason}"


class _ClaimCrash(Exception):
    pass


def _as_array(a):
    """A data-set entry as a numpy array (TensorProtos converted); sequences as lists, maps as
    dicts, empty optionals as None (host values, see :mod:`hetero_explore.kernels.host.sequences`)."""
    if isinstance(a, onnx.TensorProto):
        return numpy_helper.to_array(a)
    if isinstance(a, (np.ndarray, np.generic)):
        return np.asarray(a)
    if isinstance(a, (list, tuple)):
        return [_as_array(x) for x in a]
    if isinstance(a, dict):
        return dict(a)
    if isinstance(a, onnx.SequenceProto):
        return [_as_array(x) for x in numpy_helper.to_list(a)]
    if isinstance(a, onnx.OptionalProto):
        return _as_array(numpy_helper.to_optional(a))
    return a


def _is_tensor(a) -> bool:
    return isinstance(a, np.ndarray)


def compare_values(expected, actual, rtol: float, atol: float) -> str | None:
    """:func:`compare_outputs`, element by element through sequences (lists), maps (dicts) and
    optionals (None)."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)):
            return f"a {type(actual).__name__}, expected a sequence"
        if len(actual) != len(expected):
            return f"a sequence of {len(actual)} element(s), expected {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            why = compare_values(e, a, rtol, atol)
            if why:
                return f"element {i}: {why}"
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            return f"map keys {sorted(actual) if isinstance(actual, dict) else type(actual).__name__}, " \
                   f"expected {sorted(expected)}"
        for k in expected:
            why = compare_values(expected[k], actual[k], rtol, atol)
            if why:
                return f"key {k!r}: {why}"
        return None
    if expected is None:
        return None if actual is None else f"a {type(actual).__name__}, expected an empty optional"
    if actual is None or isinstance(actual, (list, dict)):
        return f"a {type(actual).__name__}, expected a tensor"
    return compare_outputs(expected, actual, rtol, atol)


def _row(case, **kw):
    r = {"case": case.name, "ops": _ops(case.model), "claimed": False, "passed": False,
         "status": "", "reason": "", "error": "", "const_inputs": "", "folded": 0, "expanded": "",
         "seconds": 0.0}
    r.update(kw)
    return r


def _max_elements(graph) -> int:
    sizes = [int(np.prod(v.shape, dtype=np.int64)) for v in graph.values.values()
             if v.shape is not None and all(isinstance(d, int) for d in v.shape)]
    return max(sizes, default=0)


def op_without_kernel(case, provider, *, fold: bool = True) -> str | None:
    """Cheap pre-filter: the first op type of ``case`` for which ``provider`` has no
    kernel at all (ops that constant folding may remove are ignored when ``fold``),
    else None. Providers without ``supported_op_types`` are not pre-filtered."""
    ops_supported = getattr(provider, "supported_op_types", None)
    if ops_supported is None:
        return None
    have = ops_supported()
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in case.model.opset_import}
    domain_ops = getattr(provider, "supported_domain_ops", None)
    have_other = domain_ops() if domain_ops is not None else set()   # ai.onnx.ml and other domains

    def runnable(n) -> bool:
        if n.domain in ("", "ai.onnx"):
            return n.op_type in have
        return (n.domain, n.op_type) in have_other

    missing = [(n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
               for n in case.model.graph.node
               if not runnable(n)
               and not has_function_body(n.op_type, n.domain, opsets.get(
                   "" if n.domain == "ai.onnx" else n.domain, 0))]
    hard = [op for op in missing if not (fold and op in FOLDABLE_OPS)]
    return (hard or missing)[0] if hard or (missing and not fold) else None


def run_case(case, provider, *, max_elements: int | None = None, fold_constants: bool = False,
             const_params: bool = True, fold_fallback: bool = True, record: list | None = None) -> dict:
    """Run one backend case on ``provider``; returns one result row (see :data:`COLUMNS`).
    ``record``, when given, receives the outputs of every data set run (name -> array), for
    bitwise comparisons between providers.

    ``status`` is one of: ``passed``, ``failed`` (wrong values), ``error`` (a claimed
    case crashed), ``unclaimed``, ``skipped: size cap``."""
    t0 = time.perf_counter()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # onnx's reference ops, when folding
        return _run_case(case, provider, t0, max_elements, fold_constants, const_params,
                         fold_fallback, record)


def _run_case(case, provider, t0, max_elements, fold_constants, const_params, fold_fallback, record=None):
    try:
        blocker = op_without_kernel(case, provider, fold=fold_constants or fold_fallback)
        if blocker:
            return _row(case, status="unclaimed", reason=f"{blocker}: no kernel on {provider.name}")
        data_sets = [([_as_array(a) for a in ins], [_as_array(a) for a in outs])
                     for ins, outs in case.data_sets]
        if max_elements is not None:
            biggest = max((a.size for ins, outs in data_sets for a in list(ins) + list(outs) if _is_tensor(a)),
                          default=0)
            if biggest > max_elements:
                return _row(case, status="skipped: size cap",
                            reason=f"a tensor has {biggest} elements > {max_elements}")
        init_names = {t.name for t in case.model.graph.initializer}
        names = [vi.name for vi in case.model.graph.input if vi.name not in init_names]

        const_used: tuple = ()
        folded = 0
        expanded: list[str] = []
        for inputs, expected in data_sets:
            if len(inputs) != len(names):
                return _row(case, status="unclaimed",
                            reason=f"the data set has {len(inputs)} inputs, the model {len(names)}")
            graph, reasons = None, []
            forms = [(c, fold_constants) for c in _attempts(names, inputs, const_params)]
            if fold_fallback and not fold_constants:
                forms += [(c, True) for c, _ in forms]
            # static forms first; then, when none is claimed, the same forms with shapes left to the
            # run (symbolic or data-dependent: the node runner computes them, hetero_explore.runner.shapes)
            forms = [(c, f, False) for c, f in forms] + [(c, f, True) for c, f in forms]
            for const, fold, dynamic in forms:
                try:
                    g = _load(case, names, inputs, const, fold)
                except (HeteroExploreError, onnx.checker.ValidationError) as e:
                    reasons.append(f"load: {e}")
                    continue
                if fold and not g.nodes:
                    reasons.append("every node folds away at load time")
                    continue
                if max_elements is not None and _max_elements(g) > max_elements:
                    return _row(case, status="skipped: size cap",
                                reason=f"a value has {_max_elements(g)} elements > {max_elements}")
                try:
                    why = _claim(g, provider, dynamic)
                    ex: list[str] = []
                    if why is not None:
                        try:
                            g2, ex = _expand_declined(g, provider)
                        except HeteroExploreError as e:
                            why = f"{why}; expanding it into its onnx function body failed: {e}"
                        else:
                            if ex:
                                why2 = _claim(g2, provider, dynamic)
                                if why2 is None and fold and not g2.nodes:
                                    why2 = "every node of the expansion folds away at load time"
                                elif why2 is None and max_elements is not None and \
                                        _max_elements(g2) > max_elements:
                                    return _row(case, status="skipped: size cap",
                                                reason=f"a value of the expansion has {_max_elements(g2)} "
                                                       f"elements > {max_elements}")
                                why = None if why2 is None else f"{why}; expanded ({','.join(ex)}): {why2}"
                                g = g2
                except _ClaimCrash as e:
                    return _row(case, claimed=True, status="error", error=str(e),
                                const_inputs=",".join(const))
                if why is None:
                    graph, const_used, folded, expanded = g, const, len(g.folded_nodes), ex
                    break
                reasons.append(why)
            if graph is None:
                # the first reason, unless a later form got past the shapes (then its reason
                # names the op that is missing, e.g. in a function expansion)
                pick = next((r for r in reasons if "symbolic or unknown shapes" not in r), reasons[0])
                return _row(case, status="unclaimed", reason=pick)
            feeds = {n: a for n, a in zip(names, inputs) if n not in const_used}
            xs = ",".join(expanded)
            try:
                got = run_graph(graph, provider, feeds)
            except Exception as e:
                msg = " ".join(f"{type(e).__name__}: {e}".split())[:600]
                return _row(case, claimed=True, status="error", error=msg,
                            const_inputs=",".join(const_used), folded=folded, expanded=xs,
                            seconds=time.perf_counter() - t0)
            if record is not None:
                record.append({k: (np.asarray(v) if isinstance(v, (np.ndarray, np.generic)) else v)
                               for k, v in got.items()})
            if getattr(case, "own_tolerance", False) or case.name in ROUNDED_EXPECTED:
                # folder cases and hand-rounded expected values: onnx's runner's tolerance
                rtol, atol = case.rtol, case.atol
            else:
                rtol = min(RTOL, case.rtol)
                atol = min(ATOL, case.atol)
            out_names = [o.name for o in case.model.graph.output]
            random_case = _is_random(case.model)
            checks = [(name, compare_values(exp, got[name], rtol, atol) if not random_case
                       else _compare_shape_dtype(exp, got[name])) for name, exp in zip(out_names, expected)]
            if random_case:
                checks.append(("(invariants)", _check_dropout(case.model, dict(zip(names, inputs)), got)))
            for name, why in checks:
                if why:
                    return _row(case, claimed=True, status="failed", error=f"output {name!r}: {why}",
                                const_inputs=",".join(const_used), folded=folded, expanded=xs,
                                seconds=time.perf_counter() - t0)
        return _row(case, claimed=True, passed=True, status="passed",
                    const_inputs=",".join(const_used), folded=folded, expanded=xs,
                    seconds=time.perf_counter() - t0)
    except Exception as e:  # never let one case stop the run
        msg = " ".join(f"{type(e).__name__}: {e}".split())[:600]
        return _row(case, status="error", error=f"runner: {msg}", seconds=time.perf_counter() - t0)


def run_conformance(provider, cases=None, *, pattern=None, max_elements: int | None = None,
                    fold_constants: bool = False, const_params: bool = True,
                    fold_fallback: bool = True, progress=None):
    """Run backend node cases on ``provider``; returns a pandas DataFrame with one row
    per case: case, ops, claimed, passed, status, reason, error, const_inputs, folded, seconds.

    Args:
        cases: the cases to run (default: all of :func:`node_cases`).
        pattern: fnmatch pattern(s) on case names, e.g. ``"test_slice*"``.
        max_elements: skip cases with a tensor larger than this (``skipped: size cap``),
            e.g. for the CUDA simulator.
        fold_constants / const_params / fold_fallback: see the module docs.
        progress: optional callable ``progress(i, n, row)`` after each case.
    """
    import pandas as pd

    selected = _select(node_cases() if cases is None else cases, pattern)
    rows = []
    for i, case in enumerate(selected):
        row = run_case(case, provider, max_elements=max_elements, fold_constants=fold_constants,
                       const_params=const_params, fold_fallback=fold_fallback)
        rows.append(row)
        if progress is not None:
            progress(i, len(selected), row)
    return pd.DataFrame(rows, columns=COLUMNS)


# -- the manifest of claims -----------------------------------------------------------
def manifest_entry(df, max_elements: int | None = None) -> dict:
    """One provider's manifest entry from a :func:`run_conformance` frame over all cases."""
    return {"max_elements": max_elements,
            "claimed": sorted(df.loc[df["claimed"].astype(bool), "case"]),
            "size_capped": sorted(df.loc[df["status"] == SIZE_CAP, "case"])}


def write_manifest(path, entries: dict, folder_entries: dict | None = None) -> None:
    """Write ``{provider key: manifest_entry(...)}`` as reviewable JSON (sorted, one case a line);
    ``folder_entries`` (same form, over :func:`folder_cases`) go under ``"folders"``."""
    import onnx as _onnx

    doc = {"about": "ONNX backend node cases each provider claims; the tests fail when one fails, is "
                    "no longer claimed, or a case is claimed that is not listed here",
           "regenerate": MANIFEST_COMMAND, "onnx": _onnx.__version__,
           "providers": {k: entries[k] for k in sorted(entries)}}
    if folder_entries is not None:
        doc["folders"] = {k: folder_entries[k] for k in sorted(folder_entries)}
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")


def load_manifest(path) -> dict:
    """The manifest's providers: key → {"max_elements", "claimed" (set), "size_capped" (set)}."""
    doc = json.loads(Path(path).read_text())
    return {k: {"max_elements": v.get("max_elements"), "claimed": set(v.get("claimed", ())),
                "size_capped": set(v.get("size_capped", ()))} for k, v in doc["providers"].items()}


def load_folder_manifest(path) -> dict:
    """The manifest's on-disk folder claims, in the form of :func:`load_manifest` (empty when
    the manifest predates them)."""
    doc = json.loads(Path(path).read_text())
    return {k: {"max_elements": v.get("max_elements"), "claimed": set(v.get("claimed", ())),
                "size_capped": set(v.get("size_capped", ()))} for k, v in doc.get("folders", {}).items()}


def manifest_verdict(row: dict, entry: dict) -> str | None:
    """None when ``row`` (from :func:`run_case`) agrees with the manifest ``entry`` about
    whether its case is claimed (or skipped by the size cap), else what changed and how
    to accept it. Whether a claimed case passes is judged separately."""
    name, status = row["case"], row["status"]
    was_claimed, was_capped = name in entry["claimed"], name in entry["size_capped"]
    regen = f"if that is intended, regenerate the manifest ({MANIFEST_COMMAND}) and review its diff"
    if status == SIZE_CAP:
        if was_capped:
            return None
        before = "claimed" if was_claimed else "not listed"
        return f"{name} is now skipped by the size cap ({row['reason']}); the manifest has it {before}: {regen}"
    if row["claimed"]:
        if was_claimed:
            return None
        before = "as skipped by the size cap" if was_capped else "as not claimed"
        return f"{name} [{row['ops']}] is newly claimed ({status}); the manifest lists it {before}: {regen}"
    if was_claimed:
        return (f"{name} [{row['ops']}] is in the manifest's claims but is no longer claimed: "
                f"{row['reason'] or row['error'] or status}; {regen}")
    if was_capped:
        return f"{name} was skipped by the size cap (manifest) but is now {status}: {row['reason']}; {regen}"
    return None
