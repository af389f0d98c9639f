"""Which schema changes only added types: where a kernel's claim can be extended.

    python bench/schema_type_changes.py              # the op definitions whose `until` can rise
    python bench/schema_type_changes.py --all        # every type-only step of every onnx op
    python bench/schema_type_changes.py --op Relu    # one op's history, step by step

For every op of the default domain, consecutive schema versions are compared
(``onnx.defs.get_schema(op, v)``): attributes (name, type, required, default),
inputs and outputs (name, type parameter, optional/variadic, homogeneity), and
the type constraints. A step is **type-only** when nothing but the type
constraints' allowed types changed and each new list is a superset of the old
one; ``doc`` says whether the documentation text changed as well (a type-only
step with a changed doc deserves a look: the doc may state new semantics).

For each op definition of this project's registry whose last implemented schema
version is followed by type-only steps, the script prints the opset to which
``until`` can rise (the last opset before the next step that is not type-only).
The dtype check (``OpDef.dtypes``) keeps declining the newly allowed types the
kernel does not take, so such a raise changes no result.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _versions(op: str, domain: str = ""):
    import onnx.defs
    top = onnx.defs.onnx_opset_version()
    out = []
    for n in range(1, top + 1):
        try:
            v = onnx.defs.get_schema(op, n, domain).since_version
        except Exception:
            continue
        if not out or out[-1] != v:
            out.append(v)
    return out


def _attrs(s):
    out = {}
    for name, a in s.attributes.items():
        dv = a.default_value
        out[name] = (int(a.type), bool(a.required), dv.SerializeToString() if dv is not None else b"")
    return out


def _params(ps):
    return [(p.name, p.type_str, int(p.option), bool(p.is_homogeneous)) for p in ps]


def _norm_doc(doc: str) -> str:
    return re.sub(r"\s+", " ", doc or "").strip()


def compare(op: str, v0: int, v1: int, domain: str = "") -> dict:
    """What changed from schema version v0 to v1 of ``op``."""
    import onnx.defs
    a = onnx.defs.get_schema(op, v0, domain)
    b = onnx.defs.get_schema(op, v1, domain)
    changes = []
    if _attrs(a) != _attrs(b):
        changes.append("attributes")
    if _params(a.inputs) != _params(b.inputs) or (a.min_input, a.max_input) != (b.min_input, b.max_input):
        changes.append("inputs")
    if _params(a.outputs) != _params(b.outputs) or (a.min_output, a.max_output) != (b.min_output, b.max_output):
        changes.append("outputs")
    ta = {t.type_param_str: set(t.allowed_type_strs) for t in a.type_constraints}
    tb = {t.type_param_str: set(t.allowed_type_strs) for t in b.type_constraints}
    added = {}
    if set(ta) != set(tb):
        changes.append("type parameters")
    else:
        for k in ta:
            if not ta[k] <= tb[k]:
                changes.append(f"types removed from {k}")
            if tb[k] - ta[k]:
                added[k] = sorted(tb[k] - ta[k])
    return {"op": op, "from": v0, "to": v1, "type_only": not changes, "changes": changes, "added": added,
            "doc_changed": _norm_doc(a.doc) != _norm_doc(b.doc)}


def history(op: str, domain: str = ""):
    vs = _versions(op, domain)
    return [compare(op, a, b, domain) for a, b in zip(vs, vs[1:])]


def extendable(d) -> dict | None:
    """For an op definition: how far `until` can rise through type-only steps (None: not)."""
    import onnx.defs
    from hetero_explore.kernels.opdef import schema_version
    if d.domain not in ("", "ai.onnx"):
        return None
    last = schema_version(d.domain, d.op_type, d.until)
    if last is None:
        return None
    steps = [h for h in history(d.op_type, d.domain) if h["from"] >= last]
    taken = []
    for h in steps:
        if not h["type_only"]:
            break
        taken.append(h)
    if not taken:
        return None
    # the last opset before the next schema version after the chain
    nxt = [h["to"] for h in steps[len(taken):]]
    top = (nxt[0] - 1) if nxt else onnx.defs.onnx_opset_version()
    return {"op": d.op_type, "until": d.until, "new_until": top, "steps": taken,
            "doc_changed": any(h["doc_changed"] for h in taken)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="every type-only step of every onnx op")
    ap.add_argument("--op", action="append", help="one op's history")
    args = ap.parse_args(argv)
    import onnx.defs
    if args.op:
        for op in args.op:
            for h in history(op):
                print(f"{op} {h['from']} -> {h['to']}: {'type-only' if h['type_only'] else ', '.join(h['changes'])}"
                      f"{' (doc changed)' if h['doc_changed'] else ''}  added: {h['added']}")
        return 0
    if args.all:
        ops = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")})
        for op in ops:
            for h in history(op):
                if h["type_only"]:
                    print(f"{op} {h['from']} -> {h['to']}{' (doc changed)' if h['doc_changed'] else ''}: "
                          f"{h['added']}")
        return 0
    from hetero_explore.kernels.registry import registry
    seen = set()
    for d in registry():
        e = extendable(d)
        if e is None or e["new_until"] <= d.until:
            continue
        vs = d.versions()
        later = [o for o in registry() if o is not d and o.op_type == d.op_type and o.domain == d.domain
                 and o.versions() and vs and o.versions()[0] > vs[1]]
        if later:          # another definition implements the later versions
            continue
        key = (d.op_type, d.since, d.until)
        if key in seen:
            continue
        seen.add(key)
        steps = "; ".join(f"{h['from']}->{h['to']} adds {sorted(set(sum(h['added'].values(), [])))}"
                          for h in e["steps"])
        print(f"{d.op_type:24s} until {d.until} -> {e['new_until']}"
              f"{'  [doc changed: review]' if e['doc_changed'] else ''}  ({steps})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
