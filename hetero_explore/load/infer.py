"""Shape inference: onnx's own (strict first, so an invalid node is named), declarations
checked against it, output shapes that onnx leaves unknown completed from the op definitions
and, for Loop-carried values, from a fixed point of the body."""

from __future__ import annotations

import math

import onnx
from onnx import helper, shape_inference

from ..ir.context import KernelContext
from ..ir.errors import HeteroExploreError, InvalidModelError, ShapeConflictError, node_label
from ..ir.graph import Node, np_to_onnx_dtype, onnx_to_np_dtype, outer_names
from ..ir.graph import fmt_type as _fmt_type
from ..kernels import registry as reg   # the op definitions (no provider state)
from .bind import _check_value_dims
from .options import MAX_ELEMENTS
from .validate import _opsets


# -- shape inference -------------------------------------------------------------------------
def _constant_ref_attrs(body) -> set:
    """Attributes a function body's Constant nodes take their value from (``ref_attr_name``)."""
    return {a.ref_attr_name for n in body.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx")
            for a in n.attribute if a.ref_attr_name}


def fill_inference_defaults(m: onnx.ModelProto) -> None:
    """Write the schema's default value of attributes onnx's shape inference reads wrongly when
    they are absent (onnx 1.23), on the graph's default-domain nodes, in place:

    * of ops that onnx infers through their function body (no inference function of their own),
      the attributes a Constant of the body takes its value from (``ref_attr_name``): inference
      through the body does not substitute the default (MeanVarianceNormalization without
      ``axes``: "One and only one of the attributes 'value', 'value_*' ... must be specified for
      a Constant node");
    * STFT's ``onesided``: inference takes 0 where the schema's default is 1 (an STFT of a real
      signal inferred with every bin, the model declaring n/2 + 1).

    The values written are the defaults, so the model means what it meant."""
    opset = _opsets(m).get("", None)
    if opset is None:
        return
    for n in m.graph.node:
        if n.domain not in ("", "ai.onnx"):
            continue
        try:
            s = onnx.defs.get_schema(n.op_type, opset, "")
        except Exception:  # unknown op: the checker and the planner report it
            continue
        names = {"onesided"} if n.op_type == "STFT" else set()
        if s.has_function and not s.has_type_and_shape_inference_function:  # inferred through its body
            names |= _constant_ref_attrs(s.function_body)
        have = {a.name for a in n.attribute}
        for name in sorted(names - have):
            at = s.attributes.get(name)
            if at is None or not at.default_value.name:
                continue
            d = onnx.AttributeProto.FromString(at.default_value.SerializeToString())
            d.name = name
            n.attribute.append(d)


#: onnx's data propagation turns every element of a value of rank 0 or 1 that a node with a
#: data-propagation function (Add, Sub, Mul, Cast, Concat, Gather, Slice, Squeeze, ...) reads or
#: makes into a dim of a TensorShapeProto, about 150 bytes each, whatever the value is: a
#: 3.5-million-element vector fed to an Add takes 0.5 GB, a 350-million one ends in std::bad_alloc.
#: Values that shape computations propagate are a few elements long; a node reading or making a
#: longer one is kept out of data propagation (its output types come from inference without it)
DATA_PROP_MAX_ELEMENTS = 1 << 12


def _onnx_infer(m: onnx.ModelProto, strict: bool, data_prop: bool) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(m, check_type=True, strict_mode=strict, data_prop=data_prop)
    except MemoryError:
        raise
    except Exception as e:
        from .explain import explain
        raise InvalidModelError(explain(m, str(e), "ONNX shape inference")) from e


def _static_dims(t: onnx.TypeProto | None) -> tuple | None:
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    return tuple(int(d.dim_value) for d in dims) if all(d.HasField("dim_value") for d in dims) else None


def _value_types(m: onnx.ModelProto) -> dict:
    g = m.graph
    types = {vi.name: vi.type for vi in list(g.input) + list(g.value_info) + list(g.output)}
    for t in g.initializer:
        types.setdefault(t.name, helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    return types


def _check_sizes(m: onnx.ModelProto, types: dict) -> None:
    """Every value whose shape is known (without data propagation) within the element bound; a
    bigger one is a typed error naming the node that makes it (ConstantOfShape, Expand, Tile,
    Range, Resize, ... read from their constant inputs)."""
    for i, n in enumerate(m.graph.node):
        for o in n.output:
            dims = _static_dims(types.get(o)) if o else None
            if dims is not None and (any(d > MAX_ELEMENTS for d in dims) or math.prod(dims) > MAX_ELEMENTS):
                ins = ", ".join(f"{x!r}" for x in n.input if x)
                raise InvalidModelError(
                    f"{node_label(n, i)} would make value {o!r} of shape {list(dims)} "
                    f"({math.prod(dims)} elements, over the bound of {MAX_ELEMENTS}) from its inputs "
                    f"{ins or '(none)'}: a valid model stays within it; the model is corrupt or hostile")


def _data_prop_risks(m: onnx.ModelProto, types: dict) -> list | None:
    """Indices of the nodes data propagation must not see (see :data:`DATA_PROP_MAX_ELEMENTS`);
    None when such a node's outputs are not known without it (no data propagation then)."""
    opset = _opsets(m).get("", None)
    out = []
    for i, n in enumerate(m.graph.node):
        if n.domain not in ("", "ai.onnx") or opset is None:
            continue
        try:
            s = onnx.defs.get_schema(n.op_type, opset, "")
        except Exception:
            continue
        if not s.has_data_propagation_function:
            continue
        long = False
        for x in list(n.input) + list(n.output):
            dims = _static_dims(types.get(x)) if x else None
            if dims is not None and len(dims) <= 1 and math.prod(dims) > DATA_PROP_MAX_ELEMENTS:
                long = True
        if not long:
            continue
        if any(o and _static_dims(types.get(o)) is None for o in n.output):
            return None
        out.append(i)
    return out


def infer_shapes(m: onnx.ModelProto, *, strict: bool = False) -> onnx.ModelProto:
    """onnx's shape inference with data propagation; its errors become InvalidModelError.

    Inference runs first without data propagation (which materialises nothing): every value
    it sizes is checked against the element bound (a typed error naming the node that makes a
    bigger one), and when it sizes every value nothing is left for data propagation to add.
    Otherwise data propagation runs with the nodes that read or make long vectors cut out (their
    outputs given as typed inputs; see :data:`DATA_PROP_MAX_ELEMENTS`), or not at all when such a
    node's outputs are unknown without it."""
    plain = _onnx_infer(m, strict, False)
    types = _value_types(plain)
    _check_sizes(plain, types)
    produced = [o for n in plain.graph.node for o in n.output if o]
    if all(_static_dims(types.get(o)) is not None for o in produced):
        return plain
    cut = _data_prop_risks(plain, types)
    if cut is None:
        return plain
    if not cut:
        return _onnx_infer(m, strict, True)
    return _infer_without(m, plain, set(cut), types, strict)


def _infer_without(m, plain, cut: set, types: dict, strict: bool) -> onnx.ModelProto:
    """Data-propagating inference of ``m`` with the nodes ``cut`` replaced by graph inputs of
    their outputs' types (from ``plain``), merged back into ``m``."""
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    g = probe.graph
    cut_outputs = [o for i in sorted(cut) for o in m.graph.node[i].output if o]
    keep = [n for i, n in enumerate(m.graph.node) if i not in cut]
    del g.node[:]
    g.node.extend(keep)
    have = {vi.name for vi in g.input}
    for o in cut_outputs:
        if o not in have:
            vi = g.input.add()
            vi.name = o
            vi.type.CopyFrom(types[o])
    kept_vi = [vi for vi in g.value_info if vi.name not in set(cut_outputs)]
    del g.value_info[:]
    g.value_info.extend(kept_vi)
    got = _onnx_infer(probe, strict, True)
    out = onnx.ModelProto()
    out.CopyFrom(plain)
    inferred = _value_types(got)
    for vi in list(out.graph.value_info) + list(out.graph.output):
        if vi.name in inferred and vi.name not in set(cut_outputs):
            vi.type.CopyFrom(inferred[vi.name])
    present = {vi.name for vi in list(out.graph.value_info) + list(out.graph.output) + list(out.graph.input)}
    for vi in got.graph.value_info:
        if vi.name not in present:
            out.graph.value_info.add().CopyFrom(vi)
    return out


def _conflict(declared: onnx.TypeProto, inferred: onnx.TypeProto) -> bool:
    if not declared.HasField("tensor_type") or not inferred.HasField("tensor_type"):
        return False
    d, i = declared.tensor_type, inferred.tensor_type
    if d.elem_type and i.elem_type and d.elem_type != i.elem_type:
        return True
    if d.HasField("shape") and i.HasField("shape"):
        if len(d.shape.dim) != len(i.shape.dim):
            return True
        for a, b in zip(d.shape.dim, i.shape.dim):
            if a.HasField("dim_value") and b.HasField("dim_value") and a.dim_value != b.dim_value:
                return True
    return False


def infer_checked(m: onnx.ModelProto) -> onnx.ModelProto:
    """Shape inference that reports invalid nodes and lying declarations.

    onnx's inference keeps what a model declares and, when not strict, silently gives
    up on an invalid node. So it first runs strictly on a copy without the declared
    intermediate and output types (an invalid node is a typed error naming it), then
    compares every declared type with the inferred one (a conflict is a typed error
    naming the value, as onnxruntime rejects it at session creation), and finally
    infers on the model itself, which then merges declared and inferred information.
    """
    g = m.graph
    declared = [(vi.name, vi.type) for vi in list(g.value_info) + list(g.output)]
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    del probe.graph.value_info[:]
    for o in probe.graph.output:
        o.ClearField("type")
    probe = infer_shapes(probe, strict=True)
    inferred = {vi.name: vi.type for vi in list(probe.graph.value_info) + list(probe.graph.output)}
    producers = {o: n for n in g.node for o in n.output if o}
    index = {o: i for i, n in enumerate(g.node) for o in n.output if o}
    outputs = {o.name for o in g.output}
    for name, t in declared:
        it = inferred.get(name)
        if it is not None and _conflict(t, it):
            n = producers.get(name)
            by = f" by {node_label(n, index[name])}" if n is not None else ""
            kind = "graph output" if name in outputs else "value"
            raise ShapeConflictError(
                f"{kind} {name!r} is declared {_fmt_type(t)} but is computed{by} as {_fmt_type(it)}; "
                f"the model's declared type/shape is wrong; valid: declare it {_fmt_type(it)} (what is computed), "
                "or remove that declaration")
    out = infer_shapes(m)
    # onnx's merge keeps a declared tensor type that has no shape even where it infers one of
    # rank 0 (a scalar graph output declared without a shape stays shapeless): the probe's
    # shape, inferred without the declarations, completes it
    for vi in list(out.graph.value_info) + list(out.graph.output):
        t, it = vi.type, inferred.get(vi.name)
        if (t.HasField("tensor_type") and not t.tensor_type.HasField("shape") and it is not None
                and it.HasField("tensor_type") and it.tensor_type.HasField("shape")
                and (not t.tensor_type.elem_type or t.tensor_type.elem_type == it.tensor_type.elem_type)):
            t.tensor_type.shape.CopyFrom(it.tensor_type.shape)
            t.tensor_type.elem_type = it.tensor_type.elem_type
    out = complete_op_shapes(out)
    if any(n.op_type == "Loop" for n in out.graph.node):  # Loop-carried shapes at a fixed point
        out = complete_loop_shapes(out)
    for vi in list(out.graph.value_info) + list(out.graph.output):
        _check_value_dims(vi, "value")
    return out


#: domains whose ops onnx's shape inference mostly leaves without output shapes (or, for
#: com.microsoft, knows nothing of); the kernel definitions' own ``shape`` functions give them
_SHAPE_FN_DOMAINS = ("ai.onnx.ml", "com.microsoft")
#: ops of other domains whose outputs onnx's inference leaves unknown (GroupNormalization: its
#: function body is not inferred; GatherND: a scalar result): their kernel definitions' ``shape``
#: functions give them too
_SHAPE_FN_OPS = {("", "GroupNormalization"), ("", "GatherND")}


def _completed_by_op_shapes(n) -> bool:
    """Whether :func:`complete_op_shapes` completes node ``n``'s outputs."""
    return n.domain in _SHAPE_FN_DOMAINS or (n.domain, n.op_type) in _SHAPE_FN_OPS


def complete_op_shapes(m: onnx.ModelProto) -> onnx.ModelProto:
    """Output shapes that onnx's inference leaves unknown, from the op definitions.

    onnx infers only the element types of most ``ai.onnx.ml`` outputs
    (TreeEnsembleClassifier, LinearClassifier, SVMRegressor, ...), nothing of a
    GroupNormalization's (its function body is not inferred) and nothing of onnxruntime's
    ``com.microsoft`` ops (it has no schemas for them); a kernel definition that knows its
    output shapes (``OpDef.shape``) gives them (the element type from its run-time shape
    function when it has one, else input 0's; a contrib op whose sizes only the data decides
    gets its element type and rank), and inference runs again so that the nodes downstream
    see them. A declared graph-output shape the completed shapes contradict is overruled
    (:func:`_overrule_declared_outputs`). Nothing changes for models without such nodes."""
    g = m.graph
    if not any(_completed_by_op_shapes(n) for n in g.node):
        return m

    opsets = {o.domain or "": o.version for o in m.opset_import}
    for _ in range(sum(1 for n in g.node if _completed_by_op_shapes(n)) + 1):
        types = {vi.name: vi for vi in list(g.input) + list(g.value_info) + list(g.output)}
        inits = {t.name: list(t.dims) for t in g.initializer}
        init_types = {t.name: t.data_type for t in g.initializer}

        def static(name):
            if name in inits:
                return tuple(int(d) for d in inits[name])
            vi = types.get(name)
            if vi is None or not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
                return None
            dims = vi.type.tensor_type.shape.dim
            return tuple(int(d.dim_value) for d in dims) if all(d.HasField("dim_value") for d in dims) else None

        def elem(name):
            vi = types.get(name)
            if vi is None and name in init_types:
                return onnx_to_np_dtype(init_types[name])
            return onnx_to_np_dtype(vi.type.tensor_type.elem_type) if vi is not None and vi.type.HasField(
                "tensor_type") else None

        changed = False
        for i, n in enumerate(g.node):
            if not _completed_by_op_shapes(n) or all(not o or static(o) is not None for o in n.output):
                continue
            opset = opsets.get(n.domain, 1)
            defs = [d for d in reg.registry() if d.domain == n.domain and d.op_type == n.op_type
                    and d.shape is not None and d.claims(opset)]
            ins = [static(x) if x else None for x in n.input]
            partial = any(x and s is None for x, s in zip(n.input, ins))
            # a definition with a run-time shape function (the contrib ops') gives the element
            # types from the input types alone (int32 mask_index, float from uint8, strings from
            # Tokenizer ...), with None for what only the data or unknown shapes decide
            if not defs or (partial and defs[0].infer is None):
                continue
            ctx = KernelContext(Node(i, n, opset), opset, ins, [elem(x) if x else None for x in n.input])
            try:
                shapes = defs[0].shape(ctx)
                typed = defs[0].infer(ctx, [None] * len(n.input)) if defs[0].infer is not None else None
            except Exception:  # the kernel's check will explain what is wrong with the node
                continue
            for k, (o, shp) in enumerate(zip(n.output, shapes)):
                own = typed[k][1] if typed and k < len(typed) and typed[k] is not None else None
                declared = static(o) if o else None
                if (declared is not None and shp is not None and all(d is not None for d in shp)
                        and declared != tuple(int(d) for d in shp)):
                    # a declaration the op contradicts (onnxmltools declares LightGBM's label [1] for
                    # any batch): the computed shape is used, as onnxruntime uses its own and only
                    # warns, so that every label of the batch is produced
                    import warnings
                    warnings.warn(f"output {o!r} of node {n.name or n.op_type!r} ({n.op_type}) is declared "
                                  f"{declared} but the op computes {tuple(shp)} from its inputs: the computed "
                                  "shape is used", stacklevel=2)
                    for vi in list(g.value_info) + list(g.output):
                        if vi.name == o:
                            vi.type.tensor_type.ClearField("shape")
                    declared = None
                if o and shp is None and own is not None and static(o) is None:
                    vi = types.get(o)   # the element type alone
                    if vi is None or not vi.type.tensor_type.elem_type:
                        if vi is None:
                            vi = g.value_info.add()
                            vi.name = o
                            types[o] = vi
                        vi.type.tensor_type.elem_type = np_to_onnx_dtype(own)
                        changed = True
                    continue
                if not o or declared is not None or shp is None:
                    continue
                vi = types.get(o)
                if vi is None:
                    vi = g.value_info.add()
                    vi.name = o
                    types[o] = vi
                tt = vi.type.tensor_type
                before = tt.SerializeToString()
                et = tt.elem_type or (np_to_onnx_dtype(own) if own is not None else
                                      types[n.input[0]].type.tensor_type.elem_type if n.input[0] in types else 0)
                tt.ClearField("shape")
                tt.elem_type = et
                for d in shp:
                    dim = tt.shape.dim.add()
                    if d is not None:   # None: a dim only the run knows (a data-dependent size)
                        dim.dim_value = int(d)
                changed = changed or tt.SerializeToString() != before
        if not changed:
            break
        m = infer_shapes(m)
        g = m.graph
    return _overrule_declared_outputs(m)


def _overrule_declared_outputs(m: onnx.ModelProto) -> onnx.ModelProto:
    """Graph outputs whose declared static shape contradicts what the completed
    shapes give downstream (onnxmltools declares a LightGBM classifier's ``label`` [1] whatever
    the batch; the label reaches the output through an Identity): the computed shape is used, as
    onnxruntime runs such a model with its own shapes (it only warns), so that every label of
    the batch is produced -- with a warning naming the declaration. A static declaration that
    cannot be checked at load (symbolic shapes above it) is not trusted either: its dims are
    left to the run. The earlier check
    (:func:`infer_checked`) could not see these conflicts: onnx's inference alone does not know
    the ml ops' output shapes."""
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    # the graph outputs that onnx's inference computes (not those of the completed ops themselves,
    # whose declarations the completion already checked)
    own = {o for n in m.graph.node if _completed_by_op_shapes(n) for o in n.output}
    declared = {vi.name: _static_dims(vi.type) for vi in probe.graph.output if vi.name not in own}
    for vi in probe.graph.output:
        if declared.get(vi.name) is not None:
            vi.type.tensor_type.ClearField("shape")
    probe = infer_shapes(probe)
    computed = {vi.name: _static_dims(vi.type) for vi in probe.graph.output}
    wrong = {n: (d, computed[n]) for n, d in declared.items()
             if d is not None and computed.get(n) is not None and computed[n] != d}
    # a static declaration nothing can check at load (the shapes above it are symbolic): left to
    # the run, which computes it from the actual inputs (a batch of 10 gets 10 labels)
    unchecked = [n for n, d in declared.items() if d is not None and computed.get(n) is None]
    if not wrong and not unchecked:
        return m
    import warnings
    for name, (d, c) in wrong.items():
        warnings.warn(f"value {name!r} is declared with shape {d}, but the model computes {c} for these inputs: "
                      "the computed shape is used (the declaration is wrong; onnxruntime also runs with its own)",
                      stacklevel=3)
    for vi in m.graph.output:
        if vi.name in wrong:
            vi.type.tensor_type.ClearField("shape")
            for dim in wrong[vi.name][1]:
                vi.type.tensor_type.shape.dim.add().dim_value = int(dim)
        elif vi.name in unchecked:
            for dim in vi.type.tensor_type.shape.dim:
                dim.Clear()   # the rank stays; every dim is computed at run time
    return infer_shapes(m)


def complete_loop_shapes(m: onnx.ModelProto) -> onnx.ModelProto:
    """Static shapes for Loop-carried outputs that onnx's inference leaves without one.

    onnx infers a Loop's carried outputs with their element type only. When the body, inferred
    with the carried inputs at their initial shapes, gives every carried output back the same
    static shape, that shape is a fixed point of the loop and holds after any number of
    iterations: it is written into the model (and inference runs again for the nodes
    downstream). A carried value whose shape changes (a growing Concat) keeps an unknown shape,
    and the plan fails closed on it."""
    g = m.graph
    loops = [n for n in g.node if n.op_type == "Loop" and n.domain in ("", "ai.onnx")]
    if not loops:
        return m
    types = {vi.name: vi.type for vi in list(g.input) + list(g.value_info) + list(g.output)}
    for t in g.initializer:
        types[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))

    def static(t):
        return (t is not None and t.HasField("tensor_type") and t.tensor_type.HasField("shape")
                and all(d.HasField("dim_value") for d in t.tensor_type.shape.dim))

    changed = False
    for n in loops:
        body = next((a.g for a in n.attribute if a.name == "body"), None)
        carried_in = list(n.input[2:])
        n_c = len(carried_in)
        outs = list(n.output[:n_c])
        if body is None or all(not o or static(types.get(o)) for o in outs):
            continue
        init = [types.get(x) for x in carried_in]
        if not all(static(t) for t in init):
            continue
        sub_types = {body.input[0].name: helper.make_tensor_type_proto(onnx.TensorProto.INT64, []),
                     body.input[1].name: helper.make_tensor_type_proto(onnx.TensorProto.BOOL, [])}
        sub_types.update({vi.name: t for vi, t in zip(body.input[2:], init)})
        for x in outer_names(body):
            if x in types:
                sub_types.setdefault(x, types[x])
        g2 = onnx.GraphProto()
        g2.CopyFrom(body)
        formal = {vi.name for vi in g2.input}
        for x in outer_names(body):
            if x not in formal and x in types:
                vi = g2.input.add()
                vi.name = x
                vi.type.CopyFrom(types[x])
        for vi in g2.input:
            if vi.name in sub_types:
                vi.type.CopyFrom(sub_types[vi.name])
        del g2.value_info[:]
        for o in g2.output:
            if o.type.HasField("tensor_type"):
                et = o.type.tensor_type.elem_type
                o.type.ClearField("tensor_type")
                o.type.tensor_type.elem_type = et
        probe = helper.make_model(g2, opset_imports=list(m.opset_import))
        probe.ir_version = m.ir_version
        probe.functions.extend(m.functions)
        try:
            probe = infer_shapes(probe)
        except HeteroExploreError:  # the body does not infer with these shapes: left unknown
            continue
        got = [o.type for o in probe.graph.output[1:1 + n_c]]
        for o, t0, t1 in zip(outs, init, got):
            if not o or static(types.get(o)) or not static(t1):
                continue
            if [d.dim_value for d in t0.tensor_type.shape.dim] != [d.dim_value for d in t1.tensor_type.shape.dim]:
                continue
            vi = next((v for v in list(g.value_info) + list(g.output) if v.name == o), None)
            if vi is not None and vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                if _conflict(vi.type, t1):
                    raise ShapeConflictError(
                        f"value {o!r} is declared {_fmt_type(vi.type)} but {node_label(n)} carries it "
                        f"as {_fmt_type(t1)} at every iteration (its body gives back the shape it is given); the "
                        "model's declared shape is wrong: fix or remove that declaration")
            if vi is None:
                vi = g.value_info.add()
                vi.name = o
            vi.type.CopyFrom(t1)
            types[o] = t1
            changed = True
    return infer_shapes(m) if changed else m
