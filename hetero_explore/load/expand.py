"""Expand nodes into the function bodies that onnx's operator schemas define.

Many standard ops (Attention, SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss,
RMSNormalization, Gelu, Mish, Celu, GroupNormalization, ...) are defined by onnx
as a *function* of other ops, either a plain body (``schema.has_function``, one
per opset version in ``schema.function_opset_versions``) or a body built for the
node's attributes and input types (``schema.has_context_dependent_function``).
When no provider runs such an op, the planner expands its node into that body
(:func:`expand_nodes`), re-loads the graph (shape inference, constant folding as
the graph was loaded) and places the body's nodes instead; a provider that runs
the op itself is asked first, so native kernels win.

An expansion

* picks the body for the node's opset: the highest body version ≤ the opset the
  model imports for the op's domain (none: the node is not expandable);
* binds the body's inputs and outputs to the node's values (absent optional
  inputs stay absent; absent optional outputs become internal values) and gives
  every internal value and node a fresh name derived from the node's name;
* binds attribute references (``ref_attr_name``) to the node's attribute, else the
  schema's default (context-dependent bodies see the defaults too, as onnx's
  backend tests build them), else the function's default, else drops the attribute;
* respects the body's opset imports: a domain the model does not import is added;
  a domain imported at another version is accepted only when every op the body
  takes from it means the same at both opsets: the same schema version, or a later
  one with the same inputs, outputs and attributes (defaults included) that only
  adds types (how onnx's own ``*_expanded`` backend cases run bodies);
* is recorded: ``graph.info["expansions"]`` (one dict per expanded node: node,
  op_type, opset, body kind and version, the nodes it became, its depth and the
  model node it came from) and ``graph.info["expanded_from"]`` (node name → the
  name of the model node it was expanded from), shown by
  :meth:`hetero_explore.planner.plan.Plan.placement_df` and ``Plan.summary()``.

Expansion is bounded: a node made by expansions nested deeper than
:data:`MAX_EXPANSION_DEPTH`, or a graph growing past :data:`MAX_EXPANDED_NODES`
nodes, raises :class:`~hetero_explore.ir.errors.FunctionExpansionError`.
"""

from __future__ import annotations

import onnx
from onnx import AttributeProto, FunctionProto, helper

from ..ir.errors import FunctionExpansionError, FunctionInliningError, InvalidModelError

__all__ = ["BodyUnavailable", "function_body", "expandable", "has_function_body", "expand_nodes",
           "expansion_records", "carry_expansions", "MAX_EXPANSION_DEPTH", "MAX_EXPANDED_NODES"]

#: expansions nested deeper than this (a body node expanded again, and so on) raise
MAX_EXPANSION_DEPTH = 8
#: the most nodes a graph may have once expanded
MAX_EXPANDED_NODES = 1 << 20

_DEFAULT_DOMAINS = ("", "ai.onnx")


class BodyUnavailable(FunctionExpansionError):
    """A node's op has no function body that can be used for this node (none at its
    opset, onnx cannot build it for the node's inputs, or it would mean something
    else at the model's opsets)."""

    def __init__(self, message: str, node_name: str = ""):
        super().__init__(message)
        self.node_name = node_name


def _dom(d: str) -> str:
    return "" if d in _DEFAULT_DOMAINS else d


def _schema(op_type: str, domain: str, opset: int):
    try:
        return onnx.defs.get_schema(op_type, opset, _dom(domain))
    except onnx.defs.SchemaError:
        return None


def _body_version(versions, opset: int) -> int | None:
    ok = [v for v in versions if v <= opset]
    return max(ok) if ok else None


def expandable(graph, node) -> str | None:
    """None when onnx defines ``node``'s op by a function body usable at the node's
    opset, else why not (a short reason)."""
    s = _schema(node.op_type, node.domain, node.opset)
    if s is None:
        return f"no onnx schema for {node.op_type} at opset {node.opset}"
    if node.implicit_inputs or node.subgraphs or any(
            graph.values[x].is_host_value for x in node.inputs if x and x in graph.values):
        # SequenceMap's context-dependent body: onnx's builder crashed the process (SIGSEGV) on
        # the backend cases; nodes with subgraphs or sequence inputs run as they are (control.py)
        return f"{node.op_type} has a subgraph or sequence inputs: it is not expanded"
    plain = _body_version(s.function_opset_versions, node.opset)
    ctx = _body_version(s.context_dependent_function_opset_versions, node.opset)
    if plain is None and ctx is None:
        have = sorted(set(s.function_opset_versions) | set(s.context_dependent_function_opset_versions))
        if have:
            return (f"onnx's function body for {node.op_type} needs opset {have[0]} or later "
                    f"(the model imports opset {node.opset})")
        return f"onnx defines no function body for {node.op_type}"
    return None


def has_function_body(op_type: str, domain: str, opset: int) -> bool:
    """Whether onnx defines ``op_type`` (at ``opset`` of ``domain``) by a function body
    usable at that opset (it may still fail to build for a particular node)."""
    s = _schema(op_type, domain, opset)
    return s is not None and (_body_version(s.function_opset_versions, opset) is not None
                              or _body_version(s.context_dependent_function_opset_versions, opset) is not None)


def _with_defaults(proto: onnx.NodeProto, schema) -> onnx.NodeProto:
    """A copy of the node with the schema's default attributes filled in."""
    n = onnx.NodeProto()
    n.CopyFrom(proto)
    have = {a.name for a in n.attribute}
    for name, attr in schema.attributes.items():
        if name not in have and attr.default_value.type != AttributeProto.UNDEFINED:
            a = AttributeProto()
            a.CopyFrom(attr.default_value)
            a.name = name
            n.attribute.append(a)
    return n


def _type_proto(graph, name: str) -> onnx.TypeProto:
    if not name or name not in graph.values:
        return onnx.TypeProto()
    v = graph.values[name]
    if not v.elem_type:
        return onnx.TypeProto()
    shape = None if v.shape is None else [d if isinstance(d, int) else str(d) for d in v.shape]
    return helper.make_tensor_type_proto(int(v.elem_type), shape)


def function_body(graph, node) -> tuple[FunctionProto, str, int]:
    """``(body, kind, version)`` of ``node``'s op: kind ``"function"`` (a plain body)
    or ``"context-dependent"`` (built for the node's attributes and input types).
    Raises FunctionExpansionError when there is none."""
    why = expandable(graph, node)
    if why is not None:
        raise BodyUnavailable(f"node {node.name!r} ({node.op_type}) cannot be expanded: {why}", node.name)
    s = _schema(node.op_type, node.domain, node.opset)
    plain = _body_version(s.function_opset_versions, node.opset)
    ctxv = _body_version(s.context_dependent_function_opset_versions, node.opset)
    proto = _with_defaults(node.proto, s)
    f = FunctionProto()
    if plain is not None and (ctxv is None or plain >= ctxv):
        data, kind, version = s.get_function_with_opset_version(plain), "function", plain
    else:
        types = [_type_proto(graph, i).SerializeToString() for i in node.inputs]
        try:
            data = s.get_context_dependent_function_with_opset_version(ctxv, proto.SerializeToString(), types)
        except Exception as e:  # onnx's builder rejects the node (an input type it cannot handle)
            raise BodyUnavailable(
                f"onnx could not build the function body of node {node.name!r} ({node.op_type}, opset "
                f"{node.opset}) for its inputs: {e}", node.name) from e
        kind, version = "context-dependent", ctxv
    if not data:
        raise BodyUnavailable(f"onnx returned no function body for node {node.name!r} "
                              f"({node.op_type}, opset {node.opset})", node.name)
    f.ParseFromString(data)
    return f, kind, version


# -- renaming ------------------------------------------------------------------------
class _Names:
    """Fresh names that collide with nothing in the model."""

    def __init__(self, taken):
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


def _bind_attributes(attrs, bound: dict) -> list[AttributeProto]:
    """Attributes of a body node with references resolved (``bound``: name → value)."""
    out = []
    for a in attrs:
        if a.ref_attr_name:
            v = bound.get(a.ref_attr_name)
            if v is None:
                continue  # not given and no default: the attribute is omitted
            b = AttributeProto()
            b.CopyFrom(v)
            b.name = a.name
            out.append(b)
        else:
            out.append(a)
    return out


def _rename_subgraph(g: onnx.GraphProto, outer, bound: dict) -> None:
    """Rename, in place, the outer-scope references of a subgraph of a body node
    (names it defines itself stay) and bind its attribute references."""
    local = {vi.name for vi in g.input} | {t.name for t in g.initializer}
    for n in g.node:
        local.update(o for o in n.output if o)
    for n in g.node:
        ins = [i if (not i or i in local) else outer(i) for i in n.input]
        del n.input[:]
        n.input.extend(ins)
        attrs = _bind_attributes(n.attribute, bound)
        del n.attribute[:]
        n.attribute.extend(attrs)
        for a in n.attribute:
            for sg in ([a.g] if a.type == AttributeProto.GRAPH else list(a.graphs)):
                _rename_subgraph(sg, lambda x, _l=local: x if x in _l else outer(x), bound)
    for o in g.output:
        if o.name not in local:
            o.name = outer(o.name)


def _instantiate(node, f: FunctionProto, names: _Names, schema) -> list[onnx.NodeProto]:
    """The body's nodes bound to ``node``'s values, with fresh names."""
    io = {}
    for k, name in enumerate(f.input):
        io[name] = node.inputs[k] if k < len(node.inputs) else ""
    for k, name in enumerate(f.output):
        if k < len(node.outputs) and node.outputs[k]:
            io[name] = node.outputs[k]
    prefix = f"{node.name}/"
    internal: dict[str, str] = {}

    def rename(x: str) -> str:
        if not x:
            return ""
        if x in io:
            return io[x]
        if x not in internal:
            internal[x] = names.fresh(prefix + x)
        return internal[x]

    bound = {a.name: a for a in _with_defaults(node.proto, schema).attribute}
    for a in f.attribute_proto:  # the function's own defaults, where the node has none
        bound.setdefault(a.name, a)
    out = []
    for k, b in enumerate(f.node):
        n = onnx.NodeProto()
        n.CopyFrom(b)
        n.name = names.fresh(f"{prefix}{b.name or b.op_type}_{k}")
        ins = [rename(i) for i in b.input]
        outs = [rename(o) for o in b.output]
        del n.input[:]
        n.input.extend(ins)
        del n.output[:]
        n.output.extend(outs)
        attrs = _bind_attributes(b.attribute, bound)
        del n.attribute[:]
        n.attribute.extend(attrs)
        for a in n.attribute:
            for sg in ([a.g] if a.type == AttributeProto.GRAPH else list(a.graphs)):
                _rename_subgraph(sg, rename, bound)
        out.append(n)
    return out


def _merge_opsets(model: onnx.ModelProto, node, f: FunctionProto) -> None:
    """Add the body's opset imports to ``model``; raise when a domain the model imports at
    another version would change the meaning of an op the body uses."""
    imports = {_dom(o.domain): o for o in model.opset_import}
    used: dict[str, set] = {}
    for b in f.node:
        used.setdefault(_dom(b.domain), set()).add(b.op_type)
    for o in f.opset_import:
        d = _dom(o.domain)
        have = imports.get(d)
        if have is None:
            imp = model.opset_import.add()
            imp.domain, imp.version = d, o.version
            imports[d] = imp
            continue
        if have.version == o.version:
            continue
        for op in sorted(used.get(d, ())):
            a, b = _schema(op, d, o.version), _schema(op, d, have.version)
            why = _incompatible(op, a, b)
            if why:
                raise BodyUnavailable(
                    f"the function body of node {node.name!r} ({node.op_type}) is written for opset "
                    f"{o.version} of domain {d or 'ai.onnx'} and uses {op}, which {why} at the model's "
                    f"opset {have.version}; it cannot be expanded here. Add a provider that implements "
                    f"{node.op_type}", node.name)


def _signature(s) -> tuple:
    ins = tuple((p.name, int(p.option)) for p in s.inputs)
    outs = tuple((p.name, int(p.option)) for p in s.outputs)
    attrs = {k: (int(a.type), a.required, a.default_value.SerializeToString(deterministic=True))
             for k, a in s.attributes.items()}
    return ins, outs, attrs


def _incompatible(op: str, a, b) -> str | None:
    """None when a body node of op ``op`` means the same at schema ``b`` (the model's
    opset) as at ``a`` (the body's): the same version, or a later version with the same
    inputs and outputs, the same attributes (types, defaults) plus maybe new optional
    ones, and at least the same types: a bump that only adds types or options whose
    defaults keep the old behaviour (most of onnx's are, e.g. Cast's ``saturate``, which
    only concerns float8); else how it differs. onnx's own ``*_expanded`` backend cases
    run bodies at the model's opset in the same way."""
    if a is None or b is None:
        return "has no schema"
    if a.since_version == b.since_version:
        return None
    (ia, oa, aa), (ib, ob, ab) = _signature(a), _signature(b)
    vs = f"version {a.since_version} vs {b.since_version}"
    if ia != ib or oa != ob:
        return f"has other inputs or outputs ({vs})"
    changed = sorted(k for k in aa if ab.get(k) != aa[k])
    if changed:
        return f"has other attributes {changed} ({vs})"
    added = sorted(k for k in ab if k not in aa and ab[k][1])
    if added:
        return f"has new required attributes {added} ({vs})"
    ta = {t.type_param_str: set(t.allowed_type_strs) for t in a.type_constraints}
    tb = {t.type_param_str: set(t.allowed_type_strs) for t in b.type_constraints}
    if any(not ta[k] <= tb.get(k, set()) for k in ta):
        return f"accepts fewer types ({vs})"
    return None


def expansion_records(graph) -> tuple[list[dict], dict[str, str]]:
    """(``graph.info["expansions"]``, ``graph.info["expanded_from"]``), empty when none."""
    return list(graph.info.get("expansions", ())), dict(graph.info.get("expanded_from", {}))


def carry_expansions(old, new) -> None:
    """Copy the expansion records of ``old`` onto ``new`` (a re-loaded ``old``), keeping
    the names of nodes ``new`` still has."""
    recs, origin = expansion_records(old)
    if not recs:
        return
    present = {n.name for n in new.nodes}
    new.info["expansions"] = recs + [r for r in new.info.get("expansions", ()) if r not in recs]
    merged = {k: v for k, v in origin.items() if k in present}
    merged.update(new.info.get("expanded_from", {}))
    new.info["expanded_from"] = merged


def expand_nodes(graph, node_ids, *, max_depth: int | None = None, max_nodes: int | None = None):
    """A new graph with the nodes ``node_ids`` of ``graph`` replaced by their onnx
    function bodies, re-loaded (shape inference; constants folded when ``graph`` was
    loaded with folding) and carrying the expansion records (see the module docs).

    Raises FunctionExpansionError when a node has no usable body, when the nesting
    exceeds ``max_depth`` (default :data:`MAX_EXPANSION_DEPTH`) or the graph would exceed
    ``max_nodes`` nodes (default :data:`MAX_EXPANDED_NODES`)."""
    from .loader import reload

    max_nodes = MAX_EXPANDED_NODES if max_nodes is None else max_nodes
    max_depth = MAX_EXPANSION_DEPTH if max_depth is None else max_depth
    recs, origin = expansion_records(graph)
    made_at = {b: r["depth"] for r in recs for b in r["nodes"]}  # body node -> its expansion's depth
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    taken = set(graph.values) | {n.name for n in graph.nodes} | {t.name for t in model.graph.initializer}
    names = _Names(taken)
    by_id = {int(i) for i in node_ids}
    bodies: dict[int, list[onnx.NodeProto]] = {}
    total = len(graph.nodes)
    new_recs = []
    for nid in sorted(by_id):
        node = graph.nodes[nid]
        parent = origin.get(node.name)
        depth = made_at.get(node.name, 0) + 1
        if depth > max_depth:
            raise FunctionExpansionError(
                f"node {node.name!r} ({node.op_type}) comes from {depth - 1} nested function expansions "
                f"(starting at {parent!r}); the bound is {max_depth}. The op's function bodies may be "
                f"recursive: add a provider that implements {node.op_type}")
        f, kind, version = function_body(graph, node)
        _merge_opsets(model, node, f)
        s = _schema(node.op_type, node.domain, node.opset)
        body = _instantiate(node, f, names, s)
        total += len(body) - 1
        if total > max_nodes:
            raise FunctionExpansionError(
                f"expanding node {node.name!r} ({node.op_type}) into its {len(body)}-node function body "
                f"would grow the graph to {total} nodes (bound: {max_nodes}); add a provider that "
                f"implements {node.op_type}, or raise the bound (hetero_explore.load.expand.MAX_EXPANDED_NODES)")
        bodies[nid] = body
        root = parent if parent is not None else node.name
        new_recs.append({"node": node.name, "op_type": node.op_type, "domain": node.domain or "ai.onnx",
                         "opset": node.opset, "body": kind, "body_version": version,
                         "nodes": tuple(b.name for b in body), "depth": depth, "expanded_from": root})
        for b in body:
            origin[b.name] = root
    # the nodes in their model order, each expanded node replaced by its body where it stood
    key = {_key(graph.nodes[nid].proto): nid for nid in bodies}
    kept = []
    for p in model.graph.node:
        nid = key.get(_key(p))
        kept.extend(bodies[nid] if nid is not None else [p])
    del model.graph.node[:]
    model.graph.node.extend(kept)
    # re-loaded as it was loaded (folded or not); it was optimised (or not) when it was loaded:
    # its rewrites carry over, none run again
    try:
        g = reload(model, graph)
    except InvalidModelError as e:
        raise _body_error(graph, origin, e) from e
    g.optimizations = list(getattr(graph, "optimizations", ()))
    present = {n.name for n in g.nodes}
    g.info["expansions"] = recs + new_recs
    g.info["expanded_from"] = {k: v for k, v in origin.items() if k in present}
    return g


def _body_error(graph, origin: dict, e: Exception) -> InvalidModelError:
    """``e`` (inference of the expanded graph rejected a body node) said of the node that was
    expanded: the user's node, its inputs, then what onnx said of the body."""
    text = str(e)
    first = text.split("\n", 1)[0]
    root = next((origin[b] for b in sorted(origin, key=len, reverse=True) if f"'{b}'" in first), None)
    node = next((n for n in graph.nodes if n.name == root), None) if root is not None else None
    if node is None:
        return e if isinstance(e, InvalidModelError) else InvalidModelError(text)
    ins = ", ".join(f"{k} {x!r} ({fmt_type_of(graph, x)})" for k, x in enumerate(node.inputs) if x)
    s = _schema(node.op_type, node.domain, node.opset)
    formals = "; ".join(f"{f.name}: {f.type_str}" for f in s.inputs) if s else ""
    return InvalidModelError(
        f"node {node.name!r} ({node.op_type}): its inputs ({ins}) are invalid for it: its function body (expanded "
        f"to run it) does not infer with them; valid: inputs as {node.op_type}-{s.since_version if s else '?'} "
        f"specifies ({formals})\nin the body: {text}")


def fmt_type_of(graph, name: str) -> str:
    v = graph.values.get(name)
    if v is None:
        return "?"
    return f"{v.dtype if v.dtype is not None else '?'}{list(v.shape) if v.shape is not None else '[?]'}"


def _key(p: onnx.NodeProto) -> tuple:
    return (p.name, p.domain, p.op_type, tuple(p.input), tuple(p.output))


def inline_functions(graph, keys: list[tuple[str, str]]):
    """A new graph with the calls of the model-local functions ``keys`` ((domain, name) pairs)
    inlined by onnx's inliner, re-loaded as ``graph`` was loaded (:func:`.loader.reload`)."""
    from onnx import inliner

    from .loader import reload

    for key in keys:
        fns = [f for f in graph.model.functions if (f.domain, f.name) == key]
        if len(fns) > 1 or any(getattr(f, "overload", "") for f in fns):
            raise FunctionInliningError(
                f"function {key[0]}::{key[1]} has several overloads; inlining it would be ambiguous. "
                "Give it a single definition or a provider that implements it")
        f = fns[0]
        if len(f.attribute) or len(f.attribute_proto):
            raise FunctionInliningError(
                f"function {key[0]}::{key[1]} is parameterized by attributes "
                f"({', '.join(list(f.attribute) + [a.name for a in f.attribute_proto])}); it cannot be "
                "inlined safely here. Add a provider that implements it, or inline it when exporting")
    try:
        m = inliner.inline_selected_functions(graph.model, keys, exclude=False)
    except Exception as e:
        raise FunctionInliningError(f"onnx's inliner failed on {keys}: {e}") from e
    return reload(m, graph)
