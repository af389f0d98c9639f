"""Structural validation (kept even without onnx's checker): IR version, unique producers,
attributes against the op schemas, optional outputs nobody reads, the size of inlined
functions, and nodes that shape inference silently gave up on."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from ..ir.errors import FunctionExpansionError, InvalidModelError, node_label
from ..ir.graph import fmt_type as _fmt_type
from .options import DEFAULT_MAX_INLINED_NODES, STANDARD_DOMAINS as _STANDARD_DOMAINS


# -- structural validation (kept even with check=False) -------------------------------------
def _opsets(m: onnx.ModelProto) -> dict[str, int]:
    return {("" if o.domain == "ai.onnx" else o.domain): o.version for o in m.opset_import}


def validate_structure(m: onnx.ModelProto) -> None:
    """What the kernels and the IR rely on, checked whether or not onnx.checker runs:
    a known IR version, unique producers, unique graph inputs, and attributes whose
    names and types match the operator's schema at the model's opset."""
    max_ir = onnx.IR_VERSION
    if not 1 <= m.ir_version <= max_ir:
        raise InvalidModelError(f"the model's ir_version is {m.ir_version}; this onnx ({onnx.__version__}) "
                                f"reads IR versions 1 to {max_ir}")
    g = m.graph
    opsets = _opsets(m)
    max_opset = onnx.defs.onnx_opset_version()
    if opsets.get("", 0) > max_opset:
        raise InvalidModelError(f"the model imports opset {opsets['']} of the default domain; this onnx "
                                f"knows opsets up to {max_opset}")
    seen_inputs: set[str] = set()
    for vi in g.input:
        if vi.name in seen_inputs:
            raise InvalidModelError(f"graph input {vi.name!r} is listed twice")
        seen_inputs.add(vi.name)
    producer: dict[str, str] = {}
    for name in seen_inputs:
        producer[name] = "a graph input"
    for t in g.initializer:
        if t.name in producer and producer[t.name] != "a graph input":
            raise InvalidModelError(f"initializer {t.name!r} is defined twice")
        producer[t.name] = "an initializer"
    functions = {(f.domain, f.name) for f in m.functions}
    for i, n in enumerate(g.node):
        label = node_label(n, i)
        for o in n.output:
            if not o:
                continue
            if o in producer:
                raise InvalidModelError(f"value {o!r} is produced by {label} and also by {producer[o]}; "
                                        "every value must have exactly one producer")
            producer[o] = label
        _validate_attributes(n, label, opsets, functions)


_ATTR_NAMES = {v: k for k, v in onnx.AttributeProto.AttributeType.items()}


def _validate_attributes(n: onnx.NodeProto, label: str, opsets: dict, functions: set) -> None:
    domain = "" if n.domain == "ai.onnx" else n.domain
    if domain not in _STANDARD_DOMAINS or (n.domain, n.op_type) in functions:
        return
    version = opsets.get(domain)
    if version is None:
        raise InvalidModelError(f"{label} uses domain {domain or 'ai.onnx'!r}, which the model does not "
                                "import (add it to opset_import)")
    try:
        schema = onnx.defs.get_schema(n.op_type, version, domain)
    except onnx.defs.SchemaError:
        raise InvalidModelError(f"{label}: no operator {n.op_type!r} exists in domain {domain or 'ai.onnx'!r} "
                                f"at opset {version}") from None
    allowed = schema.attributes
    names = set()
    for a in n.attribute:
        if a.name in names:
            raise InvalidModelError(f"{label} has attribute {a.name!r} twice")
        names.add(a.name)
        if a.ref_attr_name:
            raise InvalidModelError(f"{label} attribute {a.name!r} refers to a function attribute "
                                    f"({a.ref_attr_name!r}) outside a function")
        spec = allowed.get(a.name)
        if spec is None:
            raise InvalidModelError(
                f"{label} has attribute {a.name!r}, which {n.op_type}-{schema.since_version} (the version "
                f"opset {version} runs) does not define; its attributes are: {sorted(allowed) or 'none'}")
        if int(a.type) != int(spec.type):
            raise InvalidModelError(
                f"{label} attribute {a.name!r} is {_ATTR_NAMES.get(a.type, a.type)}, but "
                f"{n.op_type}-{schema.since_version} defines it as {spec.type.name}")
    missing = [k for k, s in allowed.items() if s.required and k not in names]
    if missing:
        raise InvalidModelError(f"{label} lacks required attribute(s) {missing} of "
                                f"{n.op_type}-{schema.since_version}")


def _run_checker(m: onnx.ModelProto) -> None:
    try:
        onnx.checker.check_model(m)
    except onnx.checker.ValidationError as e:
        from .explain import explain
        msg = " ".join(line.strip() for line in str(e).strip().splitlines() if line.strip()) or repr(e)
        if "Field 'shape' of 'type' is required but missing" in msg:
            bare = [f"graph {kind} {vi.name!r}" for kind, vis in (("input", m.graph.input), ("output", m.graph.output))
                    for vi in vis if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape")]
            if bare:
                raise InvalidModelError(
                    f"{', '.join(bare)} declare(s) no shape: onnx's checker wants one on every graph input and "
                    "output; valid: its dims, with names for the unknown ones (e.g. ['batch', 3])\n"
                    f"onnx.checker: {msg}") from e
        raise InvalidModelError(explain(m, msg, "onnx.checker")) from e
    except MemoryError:
        raise
    except Exception as e:  # protobuf errors and the like
        raise InvalidModelError(f"onnx.checker could not check the model: {e}") from e


def drop_unused_optional_outputs(m: onnx.ModelProto) -> None:
    """Drop the trailing optional outputs of main-graph nodes that nothing reads.

    Old exporters name outputs no one uses: Dropout-7's ``mask``, MaxPool-8's
    ``Indices``. onnx's shape inference leaves some of them without a shape (Dropout-7),
    which would otherwise make the node look invalid and its model unplannable; an
    optional output that is neither consumed (here or in a subgraph) nor a graph output
    changes nothing when it is not computed."""
    g = m.graph
    used = {o.name for o in g.output}

    def reads(graph):
        for n in graph.node:
            used.update(n.input)
            for sg in _subgraphs(n):
                reads(sg)

    reads(g)
    opsets = _opsets(m)
    types = _known_elem_types(g)
    for n in g.node:
        domain = "" if n.domain == "ai.onnx" else n.domain
        if domain not in _STANDARD_DOMAINS or not n.output or n.output[-1] in used:
            continue
        try:
            formal = onnx.defs.get_schema(n.op_type, opsets.get(domain, 1), domain).outputs
        except Exception:  # no schema: validated elsewhere
            continue
        outs = list(n.output)
        while (outs and len(outs) <= len(formal) and (not outs[-1] or outs[-1] not in used)
               and formal[len(outs) - 1].option == onnx.defs.OpSchema.FormalParameterOption.Optional):
            outs.pop()
        if len(outs) < len(n.output):
            keep = _outputs_inference_needs(n, len(outs), opsets.get(domain, 1), domain, types)
            del n.output[keep:]


def _known_elem_types(g) -> dict:
    """Element types the main graph declares (inputs, initializers, value_info, outputs)."""
    types = {t.name: t.data_type for t in g.initializer}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types.setdefault(vi.name, vi.type.tensor_type.elem_type)
    return types


def _outputs_inference_needs(node, keep: int, opset: int, domain: str, types: dict) -> int:
    """How many outputs of ``node`` to keep when ``keep`` would do for its readers: ``keep``,
    unless onnx's inference for the node rejects that many although it accepts them all
    (a training-mode BatchNormalization must list all three outputs); then the fewest it
    accepts. Checked with ``onnx.shape_inference.infer_node_outputs`` on the declared element
    types (float where one is not declared yet); when even the full node does not infer
    this way, ``keep`` (inference of the whole model judges the node)."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, domain)
    except Exception:
        return keep

    def infers(k: int) -> bool:
        trial = onnx.NodeProto()
        trial.CopyFrom(node)
        del trial.output[k:]
        ins = {}
        for name in trial.input:
            if name:
                tp = onnx.TypeProto()
                tp.tensor_type.elem_type = types.get(name, TensorProto.FLOAT)
                ins[name] = tp
        try:
            onnx.shape_inference.infer_node_outputs(schema, trial, ins)
        except Exception:
            return False
        return True

    full = len(node.output)
    if infers(keep) or not infers(full):
        return keep
    return next(k for k in range(keep + 1, full + 1) if infers(k))


# -- model-local functions -------------------------------------------------------------------
def _subgraphs(n: onnx.NodeProto):
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def inlined_node_count(model: onnx.ModelProto, keys=None) -> int:
    """How many nodes the main graph would hold (subgraphs included) once calls to the
    model-local functions ``keys`` ((domain, name) pairs; all of them when None) are
    inlined, recursively. Computed without inlining, in time linear in the model's size.

    Raises FunctionExpansionError for recursive functions."""
    fns = {(f.domain, f.name): f for f in model.functions}
    keys = set(fns) if keys is None else {k for k in keys if k in fns}
    memo: dict = {}
    active: set = set()

    def nodes_of(nodes) -> int:
        total = 0
        for n in nodes:
            key = (n.domain, n.op_type)
            total += size(key) if key in keys else 1
            for sg in _subgraphs(n):
                total += nodes_of(sg.node)
        return total

    def size(key) -> int:
        if key in memo:
            return memo[key]
        if key in active:
            raise FunctionExpansionError(f"model-local function {key[0]}::{key[1]} calls itself (directly "
                                         "or through others); recursive functions cannot be inlined")
        active.add(key)
        memo[key] = nodes_of(fns[key].node)
        active.discard(key)
        return memo[key]

    return nodes_of(model.graph.node)


def check_inline_size(model: onnx.ModelProto, keys=None, limit: int = DEFAULT_MAX_INLINED_NODES) -> int:
    """Raise FunctionExpansionError when inlining ``keys`` would produce more than ``limit``
    nodes; returns the count. Call it before ``onnx.inliner`` or shape inference, both
    of which expand every call."""
    count = inlined_node_count(model, keys)
    if count > limit:
        raise FunctionExpansionError(
            f"the model's function calls expand to {count} nodes once inlined (bound: {limit}); "
            "a model this large is refused before inlining or shape inference. Raise the bound with "
            "load_model(..., max_inlined_nodes=...) if the model is genuine")
    return count



_INT_TYPES = (TensorProto.INT64, TensorProto.INT32)


def check_inference_complete(m: onnx.ModelProto) -> None:
    """Raise when shape inference silently gave up on a node it has all it needs for.

    onnx's inference, even strict, returns without an output shape for some invalid
    nodes (Conv ``dilations=[0, 0]``, Slice step 0, Split sizes that do not add up, ...).
    A node of a standard domain whose inputs all have static shapes, whose integer inputs
    after the first are constants (so its output rank cannot depend on run-time data),
    and whose output still has no shape is such a node: it is reported by name instead
    of surfacing later as an unexplained symbolic shape."""
    g = m.graph
    info: dict[str, onnx.TypeProto] = {vi.name: vi.type for vi in list(g.input) + list(g.value_info)
                                       + list(g.output)}
    consts = {t.name for t in g.initializer}
    for t in g.initializer:
        info[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
    functions = {(f.domain, f.name) for f in m.functions}

    def static(name) -> bool:
        t = info.get(name)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.elem_type:
            return False
        tt = t.tensor_type
        return tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)

    for idx, n in enumerate(g.node):
        if (n.domain not in _STANDARD_DOMAINS or (n.domain, n.op_type) in functions
                or any(True for _ in _subgraphs(n))):
            continue
        present = [i for i in n.input if i]
        if not all(static(i) for i in present):
            continue
        if any(i and i not in consts and info[i].tensor_type.elem_type in _INT_TYPES
               for i in list(n.input)[1:]):
            continue
        for o in n.output:
            t = info.get(o) if o else None
            if t is not None and t.WhichOneof("value") not in (None, "tensor_type"):
                continue  # a sequence, map or optional: no tensor shape to expect
            if o and (t is None or not t.tensor_type.HasField("shape")):
                ins = ", ".join(f"{i}: {_fmt_type(info[i])}" for i in present)
                attrs = ", ".join(f"{a.name}={helper.get_attribute_value(a)!r}" for a in n.attribute)
                raise InvalidModelError(
                    f"{node_label(n, idx)}: its inputs ({ins}) and attributes ({attrs or 'none'}) are invalid: "
                    f"ONNX shape inference cannot compute its output {o!r} from them; valid: attributes and "
                    f"constant inputs as {n.op_type}'s specification allows (e.g. positive dilations and "
                    "strides, non-zero steps, split sizes that add up)")
