"""A small, read-mostly graph IR over an ONNX model.

Every value knows its producer and its consumers; every node has a stable
integer id (its position in a topological order of the loaded graph). The
original protos are kept so that partitions can be extracted as standalone
ONNX subgraphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .arrays import GraphArrays, build_arrays


def onnx_to_np_dtype(elem_type: int) -> np.dtype | None:
    """numpy dtype of an ONNX TensorProto element type (None when unknown/undefined)."""
    if elem_type in (0, None):
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def np_to_onnx_dtype(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


#: the dtype of a host value (a sequence, map or optional): its buffer is a 0-d object array on a
#: host provider holding the Python value (a list of arrays, a dict, or None / the element)
HOST_DTYPE = np.dtype(object)

#: TypeProto fields of values that are held as host values, not tensors
HOST_TYPE_FIELDS = ("sequence_type", "map_type", "optional_type")


def type_str(t: onnx.TypeProto | None) -> str:
    """A short ONNX type string: ``tensor(float)``, ``seq(tensor(int64))``, ``map(int64,tensor(float))``,
    ``optional(seq(tensor(float)))``."""
    if t is None:
        return "?"
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        et = t.tensor_type.elem_type
        return f"tensor({onnx.TensorProto.DataType.Name(et).lower() if et else '?'})"
    if kind == "sequence_type":
        return f"seq({type_str(t.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_str(t.optional_type.elem_type)})"
    if kind == "map_type":
        kt = t.map_type.key_type
        return f"map({onnx.TensorProto.DataType.Name(kt).lower() if kt else '?'},{type_str(t.map_type.value_type)})"
    return kind or "?"


def fmt_type(t: onnx.TypeProto) -> str:
    """A type with its shape, as messages show it: ``float[1, 3, N]``, ``int64[unknown rank]``."""
    if not t.HasField("tensor_type"):
        return t.WhichOneof("value") or "unknown type"
    tt = t.tensor_type
    dt = onnx.TensorProto.DataType.Name(tt.elem_type).lower() if tt.elem_type else "?"
    if not tt.HasField("shape"):
        return f"{dt}[unknown rank]"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return f"{dt}[{', '.join(dims)}]"


def subgraph_attrs(proto: onnx.NodeProto) -> list[tuple[str, onnx.GraphProto]]:
    """(attribute name, GraphProto) of every subgraph of a node (``GRAPHS`` attributes as ``name[i]``)."""
    out = []
    for a in proto.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append((a.name, a.g))
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend((f"{a.name}[{i}]", g) for i, g in enumerate(a.graphs))
    return out


def outer_names(g: onnx.GraphProto) -> list[str]:
    """Names a subgraph reads from enclosing scopes (its own and its nested subgraphs' reads and
    outputs that it does not define itself), in first-use order."""
    defined = {vi.name for vi in g.input} | {t.name for t in g.initializer} | {
        t.values.name for t in g.sparse_initializer}
    for n in g.node:
        defined.update(o for o in n.output if o)
    used: dict[str, None] = {}
    for n in g.node:
        for i in n.input:
            if i:
                used.setdefault(i, None)
        for _, sg in subgraph_attrs(n):
            for i in outer_names(sg):
                used.setdefault(i, None)
    for o in g.output:
        used.setdefault(o.name, None)
    return [u for u in used if u not in defined]


def shape_is_static(shape) -> bool:
    return shape is not None and all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape)


def nbytes_of(dtype, shape) -> int | None:
    """Bytes of a dense tensor, or None when dtype or shape is unknown."""
    if dtype is None or not shape_is_static(shape):
        return None
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


class Value:
    """A named tensor value: dtype, shape, who produces it and who uses it."""

    __slots__ = ("name", "dtype", "shape", "producer", "consumers", "kind", "elem_type", "type_proto", "index")

    def __init__(self, name: str, elem_type: int = 0, shape=None, kind: str = "intermediate",
                 type_proto: onnx.TypeProto | None = None):
        self.name = name
        #: the ONNX TypeProto declared or inferred for the value (None when unknown)
        self.type_proto = type_proto
        #: ONNX element type (TensorProto.FLOAT, ...); 0 when unknown.
        self.elem_type = elem_type
        #: numpy dtype, or None when unknown (or not a tensor).
        self.dtype = onnx_to_np_dtype(elem_type)
        #: tuple of dims (int, symbolic str, or None) or None when the rank is unknown.
        self.shape = shape
        #: id of the producing node, or None for graph inputs and initializers.
        self.producer: int | None = None
        #: ids of consuming nodes, in ascending order (a node using a value twice appears once).
        self.consumers: list[int] = []
        #: "input", "initializer", or "intermediate".
        self.kind = kind
        #: position of the value in ``Graph.values`` (set by :func:`build_graph`; -1 before)
        self.index = -1
        if self.is_host_value:  # a sequence, map or optional: one host object (see HOST_DTYPE)
            self.dtype = HOST_DTYPE
            self.shape = ()

    @property
    def is_host_value(self) -> bool:
        """True for sequences, maps and optionals (held on the host as Python values)."""
        tp = self.type_proto
        return tp is not None and tp.WhichOneof("value") in HOST_TYPE_FIELDS

    @property
    def type_str(self) -> str:
        return type_str(self.type_proto) if self.type_proto is not None else (
            f"tensor({self.dtype})" if self.dtype is not None else "?")

    @property
    def is_static(self) -> bool:
        return self.dtype is not None and shape_is_static(self.shape)

    @property
    def nbytes(self) -> int | None:
        return nbytes_of(self.dtype, self.shape)

    def __repr__(self) -> str:
        return f"Value({self.name!r}, {self.dtype}, {self.shape}, {self.kind})"


class Node:
    """One operator instance."""

    __slots__ = ("id", "name", "op_type", "domain", "opset", "inputs", "outputs",
                 "_attributes", "proto", "implicit_inputs")

    def __init__(self, id: int, proto: onnx.NodeProto, opset: int):
        #: stable id: position in the topological order of the loaded graph
        self.id = id
        self.name = proto.name or f"{proto.op_type}_{id}"
        self.op_type = proto.op_type
        self.domain = proto.domain or ""
        #: opset version of this node's domain in the model
        self.opset = opset
        #: input names; empty optional slots are kept as ""
        self.inputs: tuple[str, ...] = tuple(proto.input)
        self.outputs: tuple[str, ...] = tuple(proto.output)
        #: outer-scope values its subgraphs read (If/Loop/Scan/SequenceMap): appended to ``inputs``
        #: by :func:`build_graph`, so that the planner sees the edges and plans their transfers
        self.implicit_inputs: tuple[str, ...] = ()
        self._attributes: dict[str, Any] | None = None
        self.proto = proto

    @property
    def attributes(self) -> dict[str, Any]:
        """Attributes as Python values (tensors as numpy arrays, graphs as GraphProto)."""
        if self._attributes is None:
            attrs: dict[str, Any] = {}
            for a in self.proto.attribute:
                if a.ref_attr_name:
                    attrs[a.name] = ("ref", a.ref_attr_name)
                    continue
                v = helper.get_attribute_value(a)
                if isinstance(v, onnx.TensorProto):
                    v = numpy_helper.to_array(v)
                elif isinstance(v, bytes):
                    v = v.decode("utf-8", "replace")
                elif isinstance(v, list) and v and isinstance(v[0], bytes):
                    v = [x.decode("utf-8", "replace") for x in v]
                attrs[a.name] = v
            self._attributes = attrs
        return self._attributes

    def attr(self, name: str, default=None):
        return self.attributes.get(name, default)

    @property
    def formal_inputs(self) -> tuple[str, ...]:
        """The node's own inputs (``inputs`` without the implicit outer-scope ones)."""
        return self.inputs[:len(self.inputs) - len(self.implicit_inputs)]

    @property
    def subgraphs(self) -> list[tuple[str, onnx.GraphProto]]:
        """(attribute name, GraphProto) of the node's subgraphs."""
        return subgraph_attrs(self.proto)

    @property
    def present_inputs(self) -> tuple[str, ...]:
        return tuple(i for i in self.inputs if i)

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.name!r}, {self.domain + '::' if self.domain else ''}{self.op_type})"


@dataclass
class Graph:
    """A loaded model: nodes in topological order, values, inputs, outputs."""

    name: str
    nodes: list[Node]
    values: dict[str, Value]
    inputs: list[str]
    outputs: list[str]
    #: initializer name -> TensorProto (materialized lazily by :meth:`initializer`)
    initializer_protos: dict[str, onnx.TensorProto]
    #: domain -> opset version
    opset_imports: dict[str, int]
    #: (domain, name) -> FunctionProto for model-local functions
    functions: dict[tuple[str, str], onnx.FunctionProto]
    #: the (bound, inferred, folded) model this graph was built from
    model: onnx.ModelProto
    doc_string: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    #: names of values whose shape is still symbolic or unknown after loading
    symbolic_values: list[str] = field(default_factory=list)
    #: names of nodes folded into constants at load time
    folded_nodes: list[str] = field(default_factory=list)
    #: model-level info for display (producer, ir_version, ...)
    info: dict[str, Any] = field(default_factory=dict)
    #: load-time rewrites applied (:mod:`hetero_explore.load.optimize`): dicts with ``rule``, ``node``,
    #: ``removed``, ``created`` and ``detail``; empty when none applied or ``optimize=False``
    optimizations: list[dict] = field(default_factory=list)
    _init_cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _adj: tuple | None = field(default=None, repr=False)
    #: value indices of every node's input and output slots (-1 for an empty slot), filled by
    #: :func:`build_graph` during its walk for the planner's arrays: (in_lens, in_flat, out_lens,
    #: out_flat), or None when they must be looked up by name
    _slots: tuple | None = field(default=None, repr=False)
    #: whether some node reads outer-scope values in its subgraphs (has ``implicit_inputs``)
    has_implicit_inputs: bool = False
    _arrays: GraphArrays | None = field(default=None, repr=False)
    #: per-graph memory of the layers above (see :meth:`cache`)
    _caches: dict = field(default_factory=dict, repr=False)

    @property
    def arrays(self) -> GraphArrays:
        """The graph's integer arrays (:mod:`hetero_explore.ir.arrays`), built on first use; the
        loader builds them, so that a first plan costs what a re-plan does."""
        if self._arrays is None:
            self._arrays = build_arrays(self)
        return self._arrays

    def cache(self, factory):
        """The memory a layer above keeps about this graph: ``factory()`` made on first use and
        kept under ``factory`` (a class of that layer's own). The graph is immutable after
        loading, so what is derived from it holds for its lifetime."""
        c = self._caches.get(factory)
        if c is None:
            c = self._caches[factory] = factory()
        return c

    def adjacency(self) -> tuple[list[list[int]], list[list[int]]]:
        """(predecessors, successors) of every node id, each sorted ascending; cached."""
        if self._adj is None:
            preds: list[list[int]] = []
            values = self.values
            for n in self.nodes:
                ps = {values[i].producer for i in n.inputs if i}
                ps.discard(None)
                preds.append(sorted(ps))
            succs: list[list[int]] = [[] for _ in self.nodes]
            for v, ps in enumerate(preds):
                for u in ps:
                    succs[u].append(v)
            self._adj = (preds, succs)
        return self._adj

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def value(self, name: str) -> Value:
        return self.values[name]

    def initializer(self, name: str) -> np.ndarray:
        arr = self._init_cache.get(name)
        if arr is None:
            arr = numpy_helper.to_array(self.initializer_protos[name])
            self._init_cache[name] = arr
        return arr

    def is_constant(self, name: str) -> bool:
        return name in self.initializer_protos

    def op_types(self) -> list[str]:
        """Distinct op types present, in order of first appearance."""
        seen: dict[str, None] = {}
        for n in self.nodes:
            seen.setdefault(n.op_type, None)
        return list(seen)

    def function_for(self, node: Node) -> onnx.FunctionProto | None:
        return self.functions.get((node.domain, node.op_type))

    def input_specs(self) -> dict[str, tuple[np.dtype | None, tuple | None]]:
        return {n: (self.values[n].dtype, self.values[n].shape) for n in self.inputs}


def build_graph(model: onnx.ModelProto, *, symbolic_values: Iterable[str] = (),
                folded_nodes: Iterable[str] = ()) -> Graph:
    """Build the IR from an (already checked and inferred) ModelProto.

    Nodes are renumbered in a deterministic topological order (Kahn's
    algorithm, ties broken by the original position), so ids are stable.
    """
    g = model.graph
    opsets = {(o.domain or "" if o.domain != "ai.onnx" else ""): o.version for o in model.opset_import}
    values: dict[str, Value] = {}

    def tinfo(vi: onnx.ValueInfoProto) -> tuple[int, tuple | None, onnx.TypeProto | None]:
        t = vi.type
        if not t.HasField("tensor_type"):
            return 0, None, (t if t.WhichOneof("value") else None)
        tt = t.tensor_type
        if not tt.HasField("shape"):
            return tt.elem_type, None, t
        dims = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
        return tt.elem_type, tuple(dims), t

    known: dict[str, tuple[int, tuple | None, onnx.TypeProto | None]] = {}
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        known[vi.name] = tinfo(vi)

    initializer_protos = {t.name: t for t in g.initializer}
    for t in g.sparse_initializer:  # densify sparse initializers
        dense = numpy_helper.from_array(numpy_helper.to_array(t), t.values.name)
        initializer_protos[dense.name] = dense

    inputs = [vi.name for vi in g.input if vi.name not in initializer_protos]
    for name in inputs:
        et, shp, tp = known.get(name, (0, None, None))
        values[name] = Value(name, et, shp, "input", tp)
    for name, t in initializer_protos.items():
        values[name] = Value(name, t.data_type, tuple(int(d) for d in t.dims), "initializer")

    # deterministic topological order
    protos = list(g.node)
    producer_of: dict[str, int] = {}
    for i, n in enumerate(protos):
        for o in n.output:
            if o:
                producer_of[o] = i
    import heapq
    indeg = [0] * len(protos)
    succ: list[list[int]] = [[] for _ in protos]
    for i, n in enumerate(protos):
        reads = list(n.input) + [x for _, sg in subgraph_attrs(n) for x in outer_names(sg)]
        preds = {producer_of[x] for x in reads if x and x in producer_of}
        for p in preds:
            succ[p].append(i)
        indeg[i] = len(preds)
    heap = [i for i in range(len(protos)) if indeg[i] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for s in succ[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, s)
    if len(order) != len(protos):
        from .errors import InvalidModelError
        raise InvalidModelError("the graph has a cycle; ONNX graphs must be acyclic")

    nodes: list[Node] = []
    for new_id, old in enumerate(order):
        p = protos[old]
        dom = p.domain if p.domain not in ("", "ai.onnx") else ""
        node = Node(new_id, p, opsets.get(dom, opsets.get("", 0)))
        subs = node.subgraphs
        if subs:  # outer-scope captures become implicit inputs of the control node
            formal = set(node.inputs)
            implicit = [x for _, sg in subs for x in outer_names(sg)]
            node.implicit_inputs = tuple(x for x in dict.fromkeys(implicit) if x not in formal)
            node.inputs = node.inputs + node.implicit_inputs
        nodes.append(node)
        for o in node.outputs:
            if not o:
                continue
            et, shp, tp = known.get(o, (0, None, None))
            v = Value(o, et, shp, "intermediate", tp)
            v.producer = new_id
            values[o] = v
    # value positions in ``values``; when no name was defined twice (the loader rejects that),
    # the input and output slots of every node are recorded as value indices on the way
    created = len(inputs) + len(initializer_protos) + sum(1 for n in nodes for o in n.outputs if o)
    record = created == len(values)
    for i, v in enumerate(values.values()):
        v.index = i
    in_lens: list[int] = []
    in_flat: list[int] = []
    add = in_flat.append
    get = values.get
    for node in nodes:
        nid = node.id
        in_lens.append(len(node.inputs))
        for x in node.inputs:
            if not x:
                add(-1)
                continue
            v = get(x)
            if v is None:  # outer-scope or undeclared: treat as an unknown input value
                v = values[x] = Value(x, 0, None, "input")
                v.index = len(values) - 1
            add(v.index)
            cons = v.consumers
            if not cons or cons[-1] != nid:  # a node using a value twice appears once
                cons.append(nid)
    slots = None
    if record:
        out_lens = [len(n.outputs) for n in nodes]
        out_flat = [get(o).index if o else -1 for n in nodes for o in n.outputs]
        slots = (in_lens, in_flat, out_lens, out_flat)

    meta = {p.key: p.value for p in model.metadata_props}
    info = {"producer_name": model.producer_name, "producer_version": model.producer_version,
            "ir_version": model.ir_version, "domain": model.domain,
            "model_version": model.model_version}
    return Graph(
        name=g.name or "graph",
        nodes=nodes,
        values=values,
        inputs=inputs,
        outputs=[o.name for o in g.output],
        initializer_protos=initializer_protos,
        opset_imports=opsets,
        functions={(f.domain, f.name): f for f in model.functions},
        model=model,
        doc_string=model.doc_string or g.doc_string,
        metadata=meta,
        symbolic_values=list(symbolic_values),
        folded_nodes=list(folded_nodes),
        info=info,
        _slots=slots,
        has_implicit_inputs=any(n.implicit_inputs for n in nodes),
    )
