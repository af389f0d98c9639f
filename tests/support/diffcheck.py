"""Checking one random valid model every way (the differential fuzzer's oracle, issue 29).

For a model and its feeds (:mod:`.modelgen`):

1. **Ours**: load, run on the CPU provider (the reference), intermediates kept. A typed
   refusal of a valid model that both oracles run is a wrong answer; any other exception is
   ``untyped``.
2. **Oracles**: onnxruntime (CPU EP, no graph optimisation) and onnx's ReferenceEvaluator run
   the same model. An output counts as wrong only where both oracles agree with each other
   and not with us. A difference is first localised: every node is run alone on *our* values
   of its inputs by both oracles; the first node where both agree and we differ is the wrong
   one (a whole-model difference with no such node is rounding amplified along the graph, and
   passes). Where the spec leaves the result undefined (a float cast to an integer type out of
   its range, NaNs through ops whose NaN rule the oracles do not share, ...) or the oracles
   disagree, the model is ``undefined``: recorded, not judged.
3. **CPU vs CUDA**: the plan ``["cuda", "cpu"]`` (the simulator in the suite) run and compared
   with the reference bit for bit (one NaN rule, :mod:`.bits`).
4. **Heterogeneous runs under random masks**: ``[mask(cuda), mask(gpu), cpu]`` with random
   op types denied, the plan's invariants checked (:mod:`.plans`), the run byte-identical to
   the reference (:func:`hetero_explore.run_and_compare`).

:func:`check` returns ``(category, detail, facts)``: category one of ``ok``, ``wrong``,
``untyped``, ``undefined`` (``crash`` and ``hang`` are decided by the process pool).
"""

from __future__ import annotations

import random
import traceback

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .bits import bits_equal

CATEGORIES = ("ok", "wrong", "crash", "hang", "untyped", "undefined")


class Finding(Exception):
    """Ends a check with a category and a detail."""

    def __init__(self, category: str, detail: str, node: str | None = None):
        super().__init__(detail)
        self.category, self.detail, self.node = category, detail, node


# -- oracles -----------------------------------------------------------------------------------
def run_ort(model: onnx.ModelProto, feeds: dict):
    """onnxruntime's outputs (name -> array), or None when it refuses the model, fails or
    crashes (it runs in a process of its own: :mod:`.ortserver`)."""
    from . import ortserver
    return ortserver.run(model.SerializeToString(), feeds)


def oracles_disagree_inside(model: onnx.ModelProto, feeds: dict) -> str | None:
    """The first value inside ``model`` whose shape onnxruntime and the reference evaluator
    disagree on (e.g. ConvTranspose with auto_pad SAME and a negative total padding: onnxruntime
    clamps the padding, the reference keeps ``input * stride``), said in words; None when they
    agree on every value they both compute."""
    from onnx import helper, shape_inference
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:
        return None
    types = {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info)
             + list(inferred.graph.input) + list(inferred.graph.output)}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have and types.get(o):
                m.graph.output.append(helper.make_tensor_value_info(o, types[o], None))
                have.add(o)
    a, b = run_ort(m, feeds), run_refev(m, feeds)
    if a is None or b is None:
        return None
    for n in m.graph.node:
        for o in n.output:
            if o in a and o in b and np.shape(a[o]) != np.shape(b[o]):
                return (f"{o!r} from node {n.name or n.op_type!r} ({n.op_type}): shape {list(np.shape(a[o]))} in "
                        f"onnxruntime, {list(np.shape(b[o]))} in the reference")
    return None


def run_refev(model: onnx.ModelProto, feeds: dict):
    """onnx's ReferenceEvaluator's outputs, or None when it fails."""
    import warnings
    from onnx.reference import ReferenceEvaluator
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            ev = ReferenceEvaluator(model)
            names = [o.name for o in model.graph.output]
            want = set(ev.input_names)
            got = ev.run(None, {k: v for k, v in feeds.items() if k in want})
        return {n: np.asarray(v) for n, v in zip(names, got)}
    except Exception:
        return None


# -- comparing -------------------------------------------------------------------------------------
_RTOL = {"float16": 2e-2, "float32": 2e-4, "float64": 1e-9}


def close(ours, ref, scale: float = 1.0, rtol: float | None = None) -> str | None:
    """None when ``ours`` matches ``ref`` (exact for integers and booleans; floats within a
    tolerance, NaN where NaN, infinities equal), else what differs."""
    a, b = np.asarray(ours), np.asarray(ref)
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} vs {b.dtype}"
    if a.dtype.kind != "f":
        if not np.array_equal(a, b):
            i = int(np.argmax((a != b).reshape(-1)))
            return f"values differ at flat index {i}: {a.reshape(-1)[i]!r} vs {b.reshape(-1)[i]!r}"
        return None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    na, nb = np.isnan(a64), np.isnan(b64)
    if not np.array_equal(na, nb):
        i = int(np.argmax((na != nb).reshape(-1)))
        return f"NaN at flat index {i} in one only: {a.reshape(-1)[i]!r} vs {b.reshape(-1)[i]!r}"
    fin = np.isfinite(b64) & np.isfinite(a64)
    inf_bad = ~na & ~fin & (a64 != b64)
    r = _RTOL.get(a.dtype.name, 2e-4) if rtol is None else rtol
    atol = r * scale
    bad = inf_bad | (fin & (np.abs(a64 - b64) > atol + r * np.abs(b64)))
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        return f"values differ at flat index {i}: {a.reshape(-1)[i]!r} vs {b.reshape(-1)[i]!r} ({int(bad.sum())} of {a.size})"
    return None


def _scale(arrays) -> float:
    """The magnitude tolerances scale with: the largest finite |value| among ``arrays`` (at least 1)."""
    m = 1.0
    for x in arrays:
        x = np.asarray(x)
        if x.dtype.kind == "f" and x.size:
            f = np.abs(x[np.isfinite(x)].astype(np.float64))
            if f.size:
                m = max(m, float(f.max()))
    return m


#: ops whose output elements each add many products: tolerances scale with the square and the count
_PRODUCTS = {"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "Det", "LpPool", "GlobalLpPool", "LpNormalization",
             "ReduceSumSquare", "ReduceL2", "ReduceProd", "Pow", "LRN", "ReduceLogSumExp", "Exp", "Cosh", "Sinh",
             "Softplus", "Mish", "Mul", "CumSum"}


def node_scale(node, ins, outs) -> float:
    m = _scale(ins)
    n_in = max((np.asarray(x).size for x in ins if x is not None), default=1)
    n_out = max((np.asarray(x).size for x in outs), default=1) or 1
    terms = max(1.0, n_in / n_out)
    return (m * m if node.op_type in _PRODUCTS else m) * terms


# -- what the spec leaves undefined -------------------------------------------------------------------
def undefined_reason(node, ins, outs_ref) -> str | None:
    """Why the spec leaves this node's result on these inputs undefined (None: it does not)."""
    op = node.op_type
    x = np.asarray(ins[0]) if ins and ins[0] is not None else None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if op in ("Cast", "CastLike") and x is not None and x.dtype.kind == "f":
        to = (helper.tensor_dtype_to_np_dtype(attrs["to"]) if op == "Cast" else np.asarray(ins[1]).dtype)
        to = np.dtype(to)
        if to.kind in "iub":
            f = x.astype(np.float64)
            if to.kind == "b":
                return None if not np.isnan(f).any() else "a NaN cast to bool"
            info = np.iinfo(to)
            if (~np.isfinite(f)).any() or (f < info.min).any() or (f > info.max).any():
                return f"a float cast to {to.name} out of its range (or NaN/inf): undefined"
    if op in ("Cast", "CastLike") and x is not None and x.dtype.kind in "iu":
        to = np.dtype(helper.tensor_dtype_to_np_dtype(attrs["to"]) if op == "Cast" else np.asarray(ins[1]).dtype)
        if to.kind in "iu" and x.size:
            info = np.iinfo(to)
            if int(x.min()) < info.min or int(x.max()) > info.max:
                return f"an integer cast to {to.name} out of its range: undefined"
        if to.kind == "f" and to.itemsize == 2 and x.size and np.abs(x.astype(np.float64)).max() > 65504:
            return "an integer beyond float16's range"
    if any(np.asarray(v).dtype.kind == "f" and np.isnan(np.asarray(v)).any() for v in ins if v is not None) and op in (
            "Max", "Min", "ArgMax", "ArgMin", "TopK", "ReduceMax", "ReduceMin", "Clip", "MaxPool", "GlobalMaxPool",
            "Unique", "Relu", "LeakyRelu", "PRelu", "Sign", "Hardmax", "Less", "Greater", "LessOrEqual",
            "GreaterOrEqual", "Mod", "Shrink", "ThresholdedRelu", "HardSigmoid", "Celu", "Elu", "Selu",
            "QuantizeLinear", "Round", "Floor", "Ceil"):
        return f"a NaN through {op} (NaN ordering and propagation differ between runtimes)"
    if op in ("Div", "Mod") and len(ins) > 1 and np.asarray(ins[1]).dtype.kind in "iu" and (np.asarray(ins[1]) == 0).any():
        return "an integer division by zero"
    if op in ("QuantizeLinear",) and x is not None and x.dtype.kind == "f" and not np.isfinite(x).all():
        return "inf/NaN quantized"
    return None


# -- one node alone -----------------------------------------------------------------------------------
def one_node_model(model, node, values: dict, consts: set) -> tuple[onnx.ModelProto, dict]:
    """``node`` alone, its inputs graph inputs (constants of the model stay initializers)."""
    ins, inits, feeds = [], [], {}
    seen = set()
    for x in node.input:
        if not x or x in seen:
            continue
        seen.add(x)
        a = np.asarray(values[x])
        if x in consts:
            inits.append(numpy_helper.from_array(a, x))
        else:
            ins.append(helper.make_tensor_value_info(x, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
            feeds[x] = a
    outs = [helper.make_tensor_value_info(o, 0, None) for o in node.output if o]
    g = helper.make_graph([node], "one", ins, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=list(model.opset_import))
    m.ir_version = model.ir_version
    return m, feeds


def localize(model, feeds, ours: dict):
    """The first node whose result on our values of its inputs both oracles agree on and we
    do not: ``("wrong", node, detail)``; or ``("undefined", node, why)`` for the first where
    the spec leaves it undefined or the oracles disagree; None when every node agrees."""
    consts = {t.name for t in model.graph.initializer}
    values = dict(feeds)
    values.update({t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
    first_undefined = None
    for node in model.graph.node:
        ins = [values.get(x) if x else None for x in node.input]
        if any(x and values.get(x) is None for x in node.input):
            return first_undefined
        one, f = one_node_model(model, node, values, consts)
        o1, o2 = run_ort(one, f), run_refev(one, f)
        names = [o for o in node.output if o]
        mine = {o: ours[o] for o in names if o in ours}
        agree = o1 is not None and o2 is not None and all(
            close(o1[o], o2[o], node_scale(node, ins, [o1[o]])) is None for o in names)
        truth = o1 if agree else None
        why = undefined_reason(node, ins, None)
        for o in names:
            if o not in mine:
                continue
            scale = node_scale(node, ins, [mine[o]])
            if truth is None:
                if (o1 is not None and close(mine[o], o1[o], scale) is not None) and \
                        (o2 is not None and close(mine[o], o2[o], scale) is not None) and first_undefined is None:
                    first_undefined = ("undefined", node, f"output {o!r}: the oracles disagree with each other and "
                                       "with us")
                continue
            bad = close(mine[o], truth[o], scale)
            if bad is not None:
                if why:
                    first_undefined = first_undefined or ("undefined", node, why)
                    continue
                return ("wrong", node, f"output {o!r} of {node.op_type} node {node.name!r}: {bad} "
                                       "(onnxruntime and ReferenceEvaluator agree)")
        # carry on with our values where we have them, else the oracles' (folded/rewritten values)
        for o in names:
            if o in mine:
                values[o] = mine[o]
            elif truth is not None:
                values[o] = truth[o]
            elif o1 is not None:
                values[o] = o1[o]
            elif o2 is not None:
                values[o] = o2[o]
    return first_undefined


# -- the check ------------------------------------------------------------------------------------
def _typed(e) -> tuple[str, str]:
    from hetero_explore.ir.errors import HeteroExploreError
    if isinstance(e, HeteroExploreError) and str(e).strip():
        return "typed", f"{type(e).__name__}: {str(e)[:400]}"
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return "untyped", f"{type(e).__name__}{where}: {str(e)[:400]}"


def check(model: onnx.ModelProto, feeds: dict, *, seed: int = 0, cuda: bool = True, masks: int = 2) -> tuple:
    """``(category, detail, facts)`` for one model (see the module docs)."""
    facts: dict = {"nodes": len(model.graph.node), "opset": model.opset_import[0].version}
    try:
        _check(model, feeds, seed, cuda, masks, facts)
    except Finding as f:
        facts["node"] = f.node
        return f.category, f.detail, facts
    return "ok", "", facts


def _check(model, feeds, seed, cuda, masks, facts):
    import hetero_explore as he
    rng = random.Random(seed ^ 0x5EED)
    # 1. ours, on the CPU provider
    try:
        g = he.load_model(model)
        ref = he.execute_reference(g, "cpu", feeds, keep_intermediates=True)
    except Exception as e:
        cat, detail = _typed(e)
        if cat == "untyped":
            raise Finding("untyped", f"ours (cpu): {detail}") from None
        o1, o2 = run_ort(model, feeds), run_refev(model, feeds)
        if o1 is not None and o2 is not None:
            inside = oracles_disagree_inside(model, feeds)
            if inside:   # they agree at the outputs only because later nodes hide it
                raise Finding("undefined", f"refused; the oracles disagree inside the model ({inside}): "
                                           f"{detail}") from None
            raise Finding("wrong", f"refused a valid model both oracles run: {detail}") from None
        raise Finding("undefined", f"refused; the oracles fail too: {detail}") from None
    outs = dict(ref.outputs)
    ours_all = dict(ref.intermediates or {})
    ours_all.update(outs)
    # 2. the oracles (on the whole model; node by node where they differ from us or one of them
    # cannot run the whole model)
    from . import ortserver
    o1 = run_ort(model, feeds)
    if o1 is None and "crashed" in ortserver.last_failure:
        facts["ort_crash"] = True
    o2 = run_refev(model, feeds)
    facts["oracles"] = (o1 is not None, o2 is not None)
    differ = []
    for name, mine in outs.items():
        checks = [(k, o[name]) for k, o in (("onnxruntime", o1), ("reference", o2)) if o is not None and name in o]
        if any(close(mine, r, _scale([mine, r]) * 10) is not None for _, r in checks):
            differ.append(name)
    if differ or o1 is None or o2 is None:
        found = localize(model, feeds, ours_all)
        facts["per_node"] = True
        if found is not None:
            kind, node, detail = found
            raise Finding(kind, detail, node.name)
    # 3. CPU vs CUDA, bit for bit
    if cuda:
        _vs_reference(he, g, ["cuda", "cpu"], feeds, ref, "cuda,cpu")
    # 4. heterogeneous runs under random masks
    ops = sorted({n.op_type for n in g.nodes})
    from hetero_explore.providers import cuda as cuda_p, cpu as cpu_p, mask, virtual_gpu
    for k in range(masks):
        first = [mask(cuda_p(), deny=rng.sample(ops, rng.randint(0, len(ops)))),
                 mask(virtual_gpu(), deny=rng.sample(ops, rng.randint(0, len(ops))))]
        if not cuda:
            first = first[1:]
        rng.shuffle(first)
        provs = first + [cpu_p()]
        try:
            p = he.plan(g, provs)
        except Exception as e:
            cat, detail = _typed(e)
            raise Finding("untyped" if cat == "untyped" else "wrong", f"planning under masks: {detail}") from None
        try:
            from .plans import check_invariants
            check_invariants(g, p, nbytes=lambda v: _nbytes(g, ref, v))
        except AssertionError as e:
            raise Finding("wrong", f"plan invariant broken under masks {k}: {e}") from None
        _vs_reference(he, g, p, feeds, ref, f"masks {k}")


def _nbytes(g, ref, name):
    """A transfer's bytes as the plan must know them: from the value's static shape (None when
    its size is known only at run time)."""
    shp = g.values[name].shape
    dt = g.values[name].dtype
    if shp is not None and all(isinstance(d, int) for d in shp) and dt is not None:
        return int(np.prod(shp, dtype=np.int64)) * np.dtype(dt).itemsize
    return None


def _vs_reference(he, g, providers, feeds, ref, what):
    try:
        p = providers if not isinstance(providers, list) else he.plan(g, providers)
        checked = he.run_and_compare(p, feeds, reference_run=ref, blame=False)
    except Exception as e:
        cat, detail = _typed(e)
        raise Finding("untyped" if cat == "untyped" else "wrong", f"{what}: {detail}") from None
    run = checked.run
    for name, want in ref.outputs.items():
        got = run.outputs[name]
        if not bits_equal(got, want):
            raise Finding("wrong", f"{what}: output {name!r} is not bitwise the CPU reference's "
                                   f"({close(got, want, rtol=0.0) or 'NaN positions or -0.0 differ'})")


# -- seeds and the process pool -----------------------------------------------------------------------
def model_seed(run_seed: int, i: int) -> int:
    """The seed of model ``i`` of a run with seed ``run_seed`` (reproducible, independent models)."""
    return (int(run_seed) << 32) | int(i)


def make(seed: int, max_nodes: int, min_nodes: int = 5):
    """The model and feeds of ``seed``: the generator's, valid (onnx's checker and strict shape
    inference with data propagation accept it). The generator checks each node alone; a model
    the whole-model inference still rejects (data propagation overflowing an int64 in a shape
    computation, say) is drawn again from the next sub-seed."""
    from onnx import shape_inference
    from .modelgen import ModelGen
    last = None
    for attempt in range(8):
        m, feeds = ModelGen(seed * 8 + attempt if attempt else seed, max_nodes=max_nodes, min_nodes=min_nodes).build()
        try:
            onnx.checker.check_model(m)
            shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
            return m, feeds
        except Exception as e:  # noqa: BLE001 - onnx's checker and inference errors
            last = e
    raise RuntimeError(f"seed {seed}: no valid model in 8 draws; the last: {last}")


def run_case(params) -> tuple[str, str]:
    """One pool case: ``(seed, max_nodes, min_nodes, cuda, masks)`` -> (category, detail)."""
    import json
    seed, max_nodes, min_nodes, cuda, masks = params
    try:
        m, feeds = make(seed, max_nodes, min_nodes)
    except Exception as e:
        return "untyped", f"the generator failed (a harness bug): {type(e).__name__}: {e}"
    cat, detail, facts = check(m, feeds, seed=seed, cuda=cuda, masks=masks)
    node = facts.get("node")
    op = next((n.op_type for n in m.graph.node if n.name == node), None) if node else None
    return cat, json.dumps({"detail": detail, "node": node, "op": op, "nodes": facts.get("nodes"),
                            "opset": facts.get("opset"), "oracles": facts.get("oracles"),
                            "per_node": facts.get("per_node", False), "ort_crash": facts.get("ort_crash", False)})


def run_model_case(params) -> tuple[str, str]:
    """One pool case of a given model: ``(model bytes, feeds, cuda, masks)`` (shrinking a crash)."""
    data, feeds, cuda, masks = params
    cat, detail, _ = check(onnx.load_from_string(data), feeds, cuda=cuda, masks=masks)
    return cat, detail
