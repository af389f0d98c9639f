"""onnx's checker and shape-inference errors, said the project's way.

One rule for every typed error about a node: its first line names the node (its name, or its
index and op type when it has none), the input or attribute at fault and what would be valid;
onnx's own text follows on the next line, whole. onnx says ``[ShapeInferenceError] Inference
error(s): (op_type:Transpose): [TypeInferenceError] Invalid attribute perm {0, 5}, input
shape = {2, 3}``; this says ``node #0 (Transpose, unnamed): attribute 'perm' = [0, 5] is
invalid (Invalid attribute perm {0, 5}, input shape = {2, 3}); valid: a permutation of
0..1 (input 0 'x' has rank 2)`` and then onnx's line.

:func:`explain` finds the node onnx names (by name, else by op type, else by inferring each
candidate node alone), then the input or attribute its text points at (an ``Input k``, a
formal input's or an attribute's name), and what would be valid: the axis range for the
input's rank, the type constraint's types, else the operator schema's own description."""

from __future__ import annotations

import re

import onnx
from onnx import helper, shape_inference

from ..ir.errors import node_label
from ..ir.graph import fmt_type

_NODE = re.compile(r"\(op_type:([\w.]+)(?:, node name: ((?:[^()]|\([^()]*\))*))?\)")
_CONTEXT = re.compile(r"(?:Bad node spec for node\. Name|of node: name): (.*?) OpType: ([\w.]+)")
_TAGS = re.compile(r"\[(?:ShapeInferenceError|TypeInferenceError|ValidationError)\]\s*|Inference error\(s\):\s*")
_INPUT_K = re.compile(r"\b[Ii]nput (\d+)\b")
#: how long a schema description may be quoted (cut at a sentence or word end, never mid-word)
_DESCRIPTION = 160


def one_line(text: str) -> str:
    return " ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())


def _short(text: str, limit: int = _DESCRIPTION) -> str:
    """``text`` on one line, cut after a sentence (else a word) near ``limit``; never mid-word."""
    text = one_line(text)
    if len(text) <= limit:
        return text
    cut = text.rfind(". ", 0, limit)
    if cut >= limit // 3:
        return text[:cut + 1]
    cut = text.rfind(" ", 0, limit)
    return text[:cut if cut > 0 else limit].rstrip(",;:") + " ..."


def _opset(m: onnx.ModelProto, domain: str) -> int | None:
    for o in m.opset_import:
        if (o.domain or "") in (domain, "ai.onnx" if domain == "" else domain):
            return o.version
    return None


def _schema(m, n):
    dom = "" if n.domain in ("", "ai.onnx") else n.domain
    v = _opset(m, dom)
    try:
        return onnx.defs.get_schema(n.op_type, v, dom) if v is not None else None
    except Exception:
        return None


def _types(m: onnx.ModelProto) -> dict:
    """Value name -> TypeProto, from inference that skips what it cannot infer (no data
    propagation: it materialises nothing)."""
    try:
        inf = shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=False)
    except Exception:
        inf = m
    g = inf.graph
    out = {vi.name: vi.type for vi in list(g.input) + list(g.value_info) + list(g.output)}
    for t in g.initializer:
        out.setdefault(t.name, helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    return out


def _fails_alone(m, n, types) -> bool:
    """Does onnx's inference of node ``n`` alone (its input types known) fail?"""
    s = _schema(m, n)
    if s is None:
        return False
    consts = {t.name: t for t in m.graph.initializer}
    try:
        shape_inference.infer_node_outputs(
            s, n, {x: types[x] for x in n.input if x and x in types},
            {x: consts[x] for x in n.input if x in consts}, opset_imports=list(m.opset_import))
    except Exception:
        return True
    return False


def _locate(m: onnx.ModelProto, text: str, types: dict | None):
    """(index, node) of the main-graph node onnx's ``text`` is about, or None."""
    nodes = list(m.graph.node)
    hit = _NODE.search(text)
    op = name = None
    if hit:
        op, name = hit.group(1), (hit.group(2) or "").strip()
    else:
        ctx = _CONTEXT.search(text)
        if ctx:
            name, op = ctx.group(1).strip(), ctx.group(2)
    if op is None:
        return None
    if name:
        for i, n in enumerate(nodes):
            if n.name == name and n.op_type == op:
                return i, n
    cands = [(i, n) for i, n in enumerate(nodes) if n.op_type == op and (not name or n.name == name)]
    if not name:
        cands = [(i, n) for i, n in cands if not n.name] or cands
    if len(cands) <= 1:
        return cands[0] if cands else None
    types = _types(m) if types is None else types
    for i, n in cands:
        if _fails_alone(m, n, types):
            return i, n
    return cands[0]


def _inner(text: str) -> str:
    """onnx's reason, without its tags and the node prefix."""
    t = one_line(text)
    hit = _NODE.search(t)
    if hit is not None:   # the first failing node's reason (onnx lists the nodes after it too)
        t = t[hit.end():]
        nxt = _NODE.search(t)
        if nxt is not None:
            t = t[:nxt.start()]
    t = _TAGS.sub("", t)
    t = re.sub(r"==> Context:.*$", "", t)
    return t.strip(" :")


def _word(name: str, text: str) -> bool:
    if len(name) <= 2:   # A, B, X, T: as written, a word of its own
        return re.search(rf"(?<![\w']){re.escape(name)}(?![\w'])", text) is not None
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE) is not None


def _rank(types, name) -> int | None:
    t = types.get(name) if name else None
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return len(t.tensor_type.shape.dim)


def _attr_value(a) -> str:
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, (onnx.TensorProto, onnx.GraphProto)) or (isinstance(v, list) and v
                                                               and not isinstance(v[0], (int, float, bytes))):
        return f"a {type(v).__name__}"
    if isinstance(v, list):
        v = [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
    return _short(repr(v), 80)


def _valid_attribute(m, n, s, name: str, types) -> str:
    data = next((x for x in n.input if x), None)
    r = _rank(types, data)
    where = f" (input 0 {data!r} has rank {r})" if r is not None else ""
    if name == "perm" and r is not None:
        return f"a permutation of 0..{r - 1}{where}"
    if name in ("axis", "axes") or name.endswith("_axis"):
        if r is not None:
            extra = 0
            if n.op_type in ("Unsqueeze",):
                extra = len(helper.get_attribute_value(next(a for a in n.attribute if a.name == "axes"))) \
                    if any(a.name == "axes" for a in n.attribute) else 0
            lo, hi = -(r + extra), r + extra - 1
            return (f"{'an int' if name != 'axes' else 'distinct ints'} in [{lo}, {hi}]{where}"
                    if hi >= lo else f"none: input 0 {data!r} has rank 0{where}")
    if name == "to" and n.op_type in ("Cast", "CastLike", "RandomNormal", "RandomUniform", "EyeLike"):
        names = sorted(k for k, v in onnx.TensorProto.DataType.items() if v)
        return "an onnx.TensorProto data type: " + ", ".join(names)
    spec = s.attributes.get(name) if s is not None else None
    if spec is not None and one_line(spec.description):
        return f"{s.name}-{s.since_version}: {_short(spec.description)}"
    if spec is not None:
        return f"an attribute of type {spec.type.name} ({s.name}-{s.since_version})"
    return f"{n.op_type} defines no attribute {name!r}"


def _formal(s, k: int):
    """The formal parameter input ``k`` binds to (variadic last ones included)."""
    if s is None or not s.inputs:
        return None
    return s.inputs[min(k, len(s.inputs) - 1)]


def _valid_input(m, n, s, k: int, detail: str, types) -> str:
    f = _formal(s, k)
    if f is None:
        return "see the operator's specification"
    if "type" in detail.lower():
        allowed = next((tc.allowed_type_strs for tc in s.type_constraints if tc.type_param_str == f.type_str), None)
        if allowed:
            same = ""
            if "inconsistent" in detail.lower():
                first = next((j for j, x in enumerate(n.input) if x and _formal(s, j) is not None
                              and _formal(s, j).type_str == f.type_str and j != k), None)
                if first is not None and n.input[first] in types:
                    same = f"the type of input {first} {n.input[first]!r} ({fmt_type(types[n.input[first]])}), "
            return f"{same}{f.type_str} in {{{', '.join(allowed)}}} ({s.name}-{s.since_version} input {f.name!r})"
    if f.name.lower() in ("axes",):
        data = next((x for x in n.input if x), None)
        r = _rank(types, data)
        if r is not None:
            t = types.get(n.input[k])
            dims = t.tensor_type.shape.dim if t is not None and t.HasField("tensor_type") else []
            if n.op_type == "Unsqueeze" and len(dims) == 1 and dims[0].HasField("dim_value"):
                out = r + dims[0].dim_value   # axes index the output
                return f"distinct ints in [{-out}, {out - 1}] (the output's rank {out}: input 0's {r} + {out - r} new)"
            return f"distinct ints in [{-r}, {r - 1}] (input 0 {data!r} has rank {r})"
    desc = _short(f.description) if one_line(f.description) else ""
    return f"{s.name}-{s.since_version} input {f.name!r}" + (f": {desc}" if desc else "")


def _show_input(n, k: int, types) -> str:
    x = n.input[k] if k < len(n.input) else ""
    t = types.get(x) if x else None
    return f"input {k} {x!r}" + (f" ({fmt_type(t)})" if t is not None else "")


#: formal input names that are ordinary words in onnx's messages: only quoted ones point at them
_COMMON = {"input", "inputs", "data", "output", "shape"}
#: what fitting inputs look like, for ops whose inputs must agree in shape (onnx names none of them)
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
              "And", "Or", "Xor", "Where", "Max", "Min", "Sum", "Mean", "PRelu", "BitShift", "BitwiseAnd",
              "BitwiseOr", "BitwiseXor"}
_FIT = {
    **{op: "shapes that broadcast together (numpy's rules: from the right, dims equal or 1)" for op in _BROADCAST},
    "MatMul": "input 0's last dim equal to input 1's second-to-last (numpy's matmul rules)",
    "MatMulInteger": "input 0's last dim equal to input 1's second-to-last (numpy's matmul rules)",
    "Gemm": "A (M, K) or (K, M) with transA=1, B (K, N) or (N, K) with transB=1, the same K, C broadcastable to (M, N)",
    "Expand": "a 1-D shape that input 0 broadcasts to (numpy's rules)",
    "Conv": "W of shape (M, C/group, k1, ..., kn) with as many spatial dims as X (N, C, d1, ..., dn)",
    "ConvTranspose": "W of shape (C, M/group, k1, ..., kn) with as many spatial dims as X (N, C, d1, ..., dn)",
    "BatchNormalization": "scale, B, input_mean and input_var 1-D, of input 0's channel count (its dim 1)",
    "InstanceNormalization": "scale and B 1-D, of input 0's channel count (its dim 1)",
    "Reshape": "a shape with as many elements as input 0 (one -1 at most)",
    "Squeeze": "axes that name dims of size 1 only",
}


def _attribute(m, n, s, name, types):
    a = next((a for a in n.attribute if a.name == name), None)
    shown = f"attribute {name!r} = {_attr_value(a)}" if a is not None else f"attribute {name!r} (not set)"
    return shown, _valid_attribute(m, n, s, name, types)


def _culprit(m, n, detail: str, types) -> tuple[str, str]:
    """(what is at fault, what would be valid)."""
    s = _schema(m, n)
    formals = [(k, f.name) for k, f in enumerate(s.inputs) if k < len(n.input) and n.input[k]] if s is not None else []
    present = [a.name for a in n.attribute]
    attrs = present + [a for a in (s.attributes if s is not None else {}) if a not in present]
    if n.op_type in _FIT and n.op_type in ("Squeeze", "Reshape"):
        k = 1 if len(n.input) > 1 and n.input[1] else 0
        return _show_input(n, k, types), _FIT[n.op_type]
    for k, x in enumerate(n.input):     # a value named by the checker: one nothing produces
        if x and f"'{x}'" in detail and re.search(r"not output of any previous nodes|is not defined|undefined",
                                                   detail):
            return (_show_input(n, k, types), "a graph input, an initializer or an output of a node listed before "
                    "this one (nodes in topological order)")
    hit = _INPUT_K.search(detail)
    if hit and int(hit.group(1)) < len(n.input):
        k = int(hit.group(1))
        return _show_input(n, k, types), _valid_input(m, n, s, k, detail, types)
    for name in attrs:                                   # quoted: 'axis', 'Repeats'
        if re.search(rf"'{re.escape(name)}'", detail, re.IGNORECASE):
            return _attribute(m, n, s, name, types)
    for k, name in formals:   # 'steps' is also said 'step'
        alias = name[:-1] if len(name) > 3 and name.endswith("s") else name
        if re.search(rf"'(?:{re.escape(name)}|{re.escape(alias)})'", detail, re.IGNORECASE):
            return _show_input(n, k, types), _valid_input(m, n, s, k, detail, types)
    for name in attrs:
        if _word(name, detail) and not (name == "to" and n.op_type not in ("Cast", "CastLike")):
            return _attribute(m, n, s, name, types)
    for k, name in formals:
        if name.lower() not in _COMMON and _word(name, detail):
            return _show_input(n, k, types), _valid_input(m, n, s, k, detail, types)
    axes = next((k for k, name in formals if name == "axes"), None)
    if axes is not None and re.search(r"\baxis\b|\baxes\b", detail, re.IGNORECASE):
        return _show_input(n, axes, types), _valid_input(m, n, s, axes, detail, types)
    present_ins = [k for k, x in enumerate(n.input) if x]
    if n.op_type in _FIT:
        shown = " and ".join(_show_input(n, k, types) for k in present_ins)
        if len(present_ins) > 1:
            return f"inputs {shown.replace('input ', '')}", _FIT[n.op_type], "do not fit together"
        return shown, _FIT[n.op_type]
    ins = ", ".join(f"{k} {x!r} ({fmt_type(types[x]) if x in types else '?'})" for k, x in enumerate(n.input) if x)
    attrs_set = ", ".join(f"{a.name}={_attr_value(a)}" for a in n.attribute)
    what = f"its inputs ({ins or 'none'})" + (f" with attributes ({attrs_set})" if attrs_set else "")
    valid = (f"inputs as {s.name}-{s.since_version} specifies: " +
             "; ".join(f"{f.name}: {f.type_str}" for f in s.inputs)) if s is not None else "see its specification"
    return what, valid, "are invalid"


def explain(m: onnx.ModelProto, text: str, what: str, types: dict | None = None) -> str:
    """The message for onnx's error ``text`` (``what`` said it: "ONNX shape inference",
    "onnx.checker") on model ``m``: the rule's first line when the node is found, onnx's text
    on the next line."""
    full = one_line(text)
    found = _locate(m, full, types)
    if found is None:
        return f"{what} rejected the model: {full}"
    i, n = found
    types = _types(m) if types is None else types
    detail = _inner(full)
    culprit, valid, *verb = _culprit(m, n, detail, types)
    reason = _short(detail, 200) if detail else "rejected"
    return f"{node_label(n, i)}: {culprit} {verb[0] if verb else 'is invalid'} ({reason}); valid: {valid}\n{what}: {full}"
