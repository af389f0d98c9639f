"""Capability profiles of real execution providers, as virtual providers.

Each ``<name>.json`` here is one execution provider's published supported-op
table (onnxruntime's CUDA, DirectML, CoreML, NNAPI, QNN and OpenVINO EPs,
TensorRT's ONNX parser), produced from its source by
``bench/profile_sources.py`` and recording that source (repository, path,
commit or URL, sha256) and the release it describes. A profile answers
"would that EP take this node?" from its table alone: op type, opset (schema
version) range, the first input's dtype, and the per-op conditions the table
states (ranks, constant inputs, attribute values), each decline quoting the
table. What a table does not state is not claimed; the conditions a table states
in words that are not encoded are listed as ``unchecked`` and named in the
answer.

:func:`profile_provider` makes one a provider that plans and executes with the
Numba CPU kernels on a device of its own (like the virtual ``gpu``), so
``plan(g, ["coreml", "cpu"])`` answers "what would this model do on CoreML?".
A node the profile claims but the CPU kernels lack is declined with both reasons.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

import numpy as np

from ...ir.errors import ArgumentValueError
from ..base import ExecutionProvider, KernelMatch
from ...ir.context import KernelContext
from ...kernels.opdef import schema_version
from ..virtual import VirtualProvider, _context_cacheable

_FILES = {p.name[:-5]: p for p in resources.files(__name__).iterdir() if p.name.endswith(".json")}
#: the profile names, e.g. ``coreml``, ``tensorrt`` (one JSON file each)
PROFILE_NAMES: tuple = tuple(sorted(_FILES))


@dataclass(frozen=True)
class Condition:
    """One documented per-op condition, checked on the node's context."""

    kind: str
    """input_rank, const_input, attr_in, attr_absent, attr_all_ones, input_dtype, outputs_absent, const_or_attr."""
    params: dict
    """The kind's parameters (see ``bench/profile_sources.py``)."""
    text: str
    """The source's sentence this condition enforces (quoted in declines)."""


@dataclass(frozen=True)
class OpVersions:
    """Schema versions of one op with the dtypes claimed for its first input."""

    since: int | None
    """First schema version (None: the table states none)."""
    until: int | None
    """Last schema version (None: open-ended or not stated)."""
    dtypes: tuple | None
    """dtype names for input 0 (None: not stated, any)."""


@dataclass(frozen=True)
class OpProfile:
    """What a profile claims for one op."""

    op: str
    domain: str
    versions: tuple
    note: str
    """The source's note for the op, verbatim."""
    conditions: tuple
    unchecked: tuple
    """Sentences of the note that no condition encodes (accepted, and said so)."""
    source: dict | None = None
    """The op's own source when it is not the profile's (the contrib rows: ``contrib/<name>.json``)."""


@dataclass(frozen=True)
class Profile:
    """One execution provider's published op table."""

    name: str
    title: str
    execution_provider: str
    device: str
    version: str
    source: dict
    derived: str
    model_opsets: tuple | None
    reading_notes: tuple
    ops: dict
    """(domain, op_type) -> :class:`OpProfile`."""

    @property
    def citation(self) -> str:
        """Short form of the source, for decline messages."""
        return _cite(self.execution_provider, self.source)

    def cite(self, spec: "OpProfile") -> str:
        """The citation of one op's row (its own source, or the profile's)."""
        return _cite(self.execution_provider, spec.source) if spec.source else self.citation


def _cite(ep: str, s: dict) -> str:
    where = s.get("url") if s.get("branch") else f"{s['repository']} {s['path']}@{(s.get('commit') or '')[:7]}"
    return f"{ep} table, {where}"


def _ops_from(entries, source=None) -> dict:
    ops = {}
    for e in entries:
        vers = tuple(OpVersions(v["since"], v["until"], None if v["dtypes"] is None else tuple(v["dtypes"]))
                     for v in e["versions"])
        conds = tuple(Condition(c["kind"], {k: v for k, v in c.items() if k not in ("kind", "text")}, c["text"])
                      for c in e["conditions"])
        ops[(e["domain"], e["op"])] = OpProfile(e["op"], e["domain"], vers, e["note"], conds, tuple(e["unchecked"]),
                                                source)
    return ops


def _profile_from_dict(d: dict, contrib: dict | None = None) -> Profile:
    ops = _ops_from(d["ops"])
    if contrib is not None:   # onnxruntime's contrib kernels of the same EP, from their own source
        ops.update(_ops_from(contrib["ops"], dict(contrib["source"])))
    mo = d.get("model_opsets")
    return Profile(d["name"], d["title"], d["execution_provider"], d["device"], d["version"], dict(d["source"]),
                   d["derived"], None if mo is None else tuple(mo), tuple(d["reading_notes"]), ops)


@functools.lru_cache(maxsize=None)
def load_profile(name: str) -> Profile:
    """The profile ``name`` (one of :data:`PROFILE_NAMES`)."""
    key = name.strip().lower()
    if key not in _FILES:
        import difflib
        close = difflib.get_close_matches(key, PROFILE_NAMES, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ArgumentValueError(f"no capability profile named {name!r}{hint}; profiles: {', '.join(PROFILE_NAMES)}")
    extra = resources.files(__name__) / "contrib" / f"{key}.json"
    contrib = json.loads(extra.read_text(encoding="utf-8")) if extra.is_file() else None
    return _profile_from_dict(json.loads(_FILES[key].read_text(encoding="utf-8")), contrib)


@functools.lru_cache(maxsize=4096)
def _attr_default(domain: str, op: str, opset: int, attr: str):
    """(applies, default) of ``attr`` in the schema a model at ``opset`` runs (onnx's schemas)."""
    import onnx.defs
    from onnx import helper
    try:
        schema = onnx.defs.get_schema(op, int(opset), domain)
    except Exception:
        return False, None
    a = schema.attributes.get(attr)
    if a is None:
        return False, None
    dv = a.default_value
    if dv is None or dv.type == 0:
        return True, None
    v = helper.get_attribute_value(dv)
    return True, v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _is_const(ctx: KernelContext, i: int) -> bool | None:
    if ctx.graph is None:
        return None
    return ctx.graph.is_constant(ctx.node.inputs[i])


def _dt(d) -> str | None:
    return None if d is None else np.dtype(d).name


def check_condition(c: Condition, ctx: KernelContext) -> str:
    """"" when ``ctx`` meets ``c``, else what is wrong (without the citation)."""
    node, p = ctx.node, c.params
    k = c.kind
    if k == "input_rank":
        i = p["input"]
        if not ctx.has_input(i) or i >= len(ctx.in_shapes) or ctx.in_shapes[i] is None:
            return ""  # no input or no shape: nothing to check
        r = len(ctx.in_shapes[i])
        if "ranks" in p and r not in p["ranks"]:
            return f"input {i} has rank {r}; the table allows rank {' or '.join(map(str, p['ranks']))}"
        if "min" in p and r < p["min"]:
            return f"input {i} has rank {r}; the table needs rank >= {p['min']}"
        return ""
    if k == "const_input":
        for i in p["inputs"]:
            if ctx.has_input(i):
                const = _is_const(ctx, i)
                if not const:
                    why = "is not a constant initializer" if const is False else "cannot be told constant"
                    return f"input {i} {why}"
        return ""
    if k == "attr_in":
        a = p["attr"]
        applies, default = _attr_default(node.domain, node.op_type, ctx.opset, a)
        if not applies:
            return ""
        v = node.attributes.get(a, default)
        if v is None:
            return ""
        if v not in p["values"]:
            return f"attribute {a}={v!r}; the table allows {', '.join(repr(x) for x in p['values'])}"
        return ""
    if k == "attr_absent":
        bad = [a for a in p["attrs"] if a in node.attributes]
        return f"attribute {bad[0]} is set" if bad else ""
    if k == "attr_all_ones":
        v = node.attributes.get(p["attr"])
        if v is not None and any(int(x) != 1 for x in v):
            return f"attribute {p['attr']}={list(v)}"
        return ""
    if k == "input_dtype":
        idx = range(len(ctx.in_dtypes)) if p["inputs"] == "all" else p["inputs"]
        for i in idx:
            if i < len(ctx.in_dtypes) and ctx.in_dtypes[i] is not None and _dt(ctx.in_dtypes[i]) not in p["dtypes"]:
                return f"input {i} is {_dt(ctx.in_dtypes[i])}; the table allows {', '.join(p['dtypes'])}"
        return ""
    if k == "outputs_absent":
        for o in p["outputs"]:
            if o < len(node.outputs) and node.outputs[o]:
                return f"output {o} is used"
        return ""
    if k == "const_or_attr":
        i, a = p["input"], p["attr"]
        if ctx.has_input(i) and _is_const(ctx, i):
            return ""
        _, default = _attr_default(node.domain, node.op_type, ctx.opset, a)
        v = node.attributes.get(a, default)
        if v == p["value"]:
            return ""
        return f"input {i} is not constant and attribute {a}={v!r} (needs {p['value']!r})"
    raise ArgumentValueError(f"unknown profile condition kind {k!r}")


def _ranges(vers) -> str:
    return ", ".join(f"{v.since}+" if v.until is None else (f"{v.since}" if v.since == v.until
                                                              else f"{v.since}-{v.until}") for v in vers)


class ProfileProvider(VirtualProvider):
    """A virtual provider whose capability is a :class:`Profile` (an EP's published
    op table) and which executes with ``kernels`` (a host provider) on its own device."""

    def __init__(self, profile: Profile, kernels: ExecutionProvider | None = None, name: str | None = None,
                 device: str | None = None):
        super().__init__(name or profile.name, device or profile.device, ops=(), kernels=kernels)
        self.profile = profile
        self.ops = {op: None for (_, op) in profile.ops}  # op names, for masks and listings

    def _spec(self, node) -> OpProfile | None:
        return self.profile.ops.get((node.domain, node.op_type))

    def table_supports(self, ctx: KernelContext) -> KernelMatch:
        """The profile's own answer (without asking the executing kernels)."""
        node, opset = ctx.node, ctx.opset
        prof = self.profile
        spec = self._spec(node)
        dom = node.domain or "ai.onnx"
        if spec is None:
            return KernelMatch.no(f"{dom}:{node.op_type} is not in the {prof.citation}")
        cite = prof.cite(spec)
        mo = prof.model_opsets
        if mo is not None and node.domain == "" and not mo[0] <= opset <= mo[1]:
            return KernelMatch.no(f"{node.op_type} at opset {opset}: the {prof.citation} covers opsets "
                                  f"{mo[0]}-{mo[1]}")
        row = None
        if spec.versions and spec.versions[0].since is None:
            row = spec.versions[0]
        else:
            v = schema_version(node.domain, node.op_type, opset)
            if v is None and node.domain not in ("", "ai.onnx", "ai.onnx.ml"):
                v = opset   # a domain onnx has no schemas for (com.microsoft): its rows count opsets
            for r in spec.versions:
                if v is not None and r.since <= v and (r.until is None or v <= r.until):
                    row = r
                    break
            if row is None:
                return KernelMatch.no(f"{node.op_type} schema version {v} (opset {opset}) is not registered "
                                      f"(registered: {_ranges(spec.versions)}; {cite})")
        d0 = _dt(ctx.in_dtypes[0]) if ctx.in_dtypes else None
        if row.dtypes is not None and d0 is not None and d0 not in row.dtypes:
            return KernelMatch.no(f"{node.op_type} with {d0} input is not supported (the table lists "
                                  f"{', '.join(row.dtypes)}; {cite})")
        for c in spec.conditions:
            why = check_condition(c, ctx)
            if why:
                return KernelMatch.no(f"{node.op_type}: {why} ({cite}: \"{c.text}\")")
        if spec.unchecked:
            return KernelMatch.yes("not checked: " + "; ".join(spec.unchecked))
        return KernelMatch.yes()

    def supports(self, ctx: KernelContext) -> KernelMatch:
        m = self.table_supports(ctx)
        if not m.supported or self.kernels is None:
            return m
        k = self.kernels.supports(ctx)
        if not k.supported:
            return KernelMatch.no(f"the {self.profile.execution_provider} table claims {ctx.node.op_type}, but "
                                  f"the kernels it executes with ({self.kernels.name}) decline: {k.reason}")
        return m

    def signature_cacheable(self, node) -> bool:
        spec = self._spec(node)
        if spec is None:
            return True  # refused by op type and domain alone
        if spec.conditions:
            return False
        return self.kernels is None or self.kernels.signature_cacheable(node)

    def context_cacheable(self, node) -> bool:
        # conditions read attributes, input ranks and dtypes, and which inputs are initializers
        return self.kernels is None or _context_cacheable(self.kernels, node)

    def support_df(self):
        import pandas as pd
        p = self.profile
        src = p.source.get("url")
        rows = []
        for (dom, op), s in sorted(p.ops.items()):
            for v in s.versions:
                rows.append({
                    "domain": dom or "ai.onnx", "op_type": op,
                    "since_opset": v.since if v.since is not None else (p.model_opsets[0] if p.model_opsets else 1),
                    "until_opset": v.until,
                    "dtypes": ", ".join(v.dtypes) if v.dtypes else "not stated",
                    "conditions": " | ".join(c.text for c in s.conditions),
                    "unchecked": " | ".join(s.unchecked),
                    "bitwise_portable": True,
                    "note": f"{p.execution_provider} profile ({p.version}); executes with "
                            f"{self.kernels.name if self.kernels else 'no kernels'} on {self.device}",
                    "source": src,
                })
        return pd.DataFrame(rows, columns=["domain", "op_type", "since_opset", "until_opset", "dtypes", "conditions",
                                           "unchecked", "bitwise_portable", "note", "source"])

    def __repr__(self) -> str:
        return f"ProfileProvider({self.name!r}, {self.device}, {self.profile.execution_provider})"


def profile_provider(name: str, kernels: ExecutionProvider | None = None, *, execute: bool = True) -> ProfileProvider:
    """The provider for profile ``name``; it executes with a fresh Numba CPU provider
    unless ``kernels`` is given or ``execute=False`` (planning only)."""
    prof = load_profile(name)
    if kernels is None and execute:
        from ..cpu import NumbaCPUProvider
        kernels = NumbaCPUProvider(name=f"{prof.name}-kernels")
    return ProfileProvider(prof, kernels)


def profiles_df():
    """One row per profile: name, EP, device, release described, op count, source."""
    import pandas as pd
    rows = []
    for n in PROFILE_NAMES:
        p = load_profile(n)
        rows.append({"name": n, "execution_provider": p.execution_provider, "device": p.device,
                     "version": p.version, "ops": len(p.ops),
                     "conditions": sum(len(o.conditions) for o in p.ops.values()),
                     "source": p.source.get("url")})
    return pd.DataFrame(rows)


__all__ = ["PROFILE_NAMES", "Profile", "OpProfile", "OpVersions", "Condition", "ProfileProvider", "load_profile",
           "profile_provider", "profiles_df", "check_condition"]
