"""Capability answers for placement: each provider is asked as few times as its
answers allow, and the answers are remembered per graph.

How far one answer carries (per provider and signature, see :func:`cache_mode`):

* ``SIG``: every node of its signature (domain, op type, opset, input dtypes), when
  the provider declares ``signature_cacheable(node)``;
* ``CTX``: every node of its context class (the signature plus attributes, shapes
  and constant inputs, :func:`~.arrays.context_classes`), when it declares
  ``context_cacheable(node)`` and accepts; a refusal is asked again per node, so
  that its reason names the right node;
* ``NODE``: this node only.

Masks (:class:`~hetero_explore.providers.MaskedProvider`) are not asked at all: their
own refusal depends only on the op type (one table lookup per signature, for all
nodes at once), and the other nodes are answered by the provider below, whatever
mask is on top. A provider that declares a ``capability_key()`` (a hashable that
fixes every answer of its ``supports``; the built-in providers do) has its answers
kept on the graph's arrays under that key, so re-plans after a deny re-ask only
the nodes whose provider changed; a provider without one is remembered within one
:func:`~hetero_explore.planner.core.place` call only.
"""

from __future__ import annotations

import numpy as np

from ..ir.context import node_context
from ..ir.graph import Graph
from ..providers.virtual import MaskedProvider
from .arrays import context_classes, planner_cache

SIG, CTX, NODE = 0, 1, 2


def cache_mode(p, node) -> int:
    """How far one answer of ``p`` for ``node`` carries: SIG, CTX or NODE."""
    f = getattr(p, "signature_cacheable", None)
    if f is not None and f(node):
        return SIG
    f = getattr(p, "context_cacheable", None)
    if f is not None and f(node):
        return CTX
    return NODE


def ask(p, graph, node) -> tuple[bool, str]:
    """(supported, reason) of ``p`` for ``node``; a provider's oracle must not take the
    planner down, so an exception is a refusal that says what failed."""
    try:
        m = p.supports(node_context(graph, node))
    except Exception as e:
        return False, f"capability check failed: {type(e).__name__}: {e}"
    if m.supported:
        return True, ""
    return False, m.reason or "declined"


def capability_key(p):
    f = getattr(p, "capability_key", None)
    if f is None:
        return None
    try:
        key = f()
        hash(key)
    except Exception:  # an unhashable or failing key: remember nothing across plans
        return None
    return key


def _plain_mask(p) -> bool:
    return type(p).supports is MaskedProvider.supports and "supports" not in vars(p)


class Answers:
    """The answers of one :func:`place` call: reason texts interned to small ids
    (0 = none), stores per provider (in the planner's cache of the graph when it has a key)."""

    def __init__(self, graph, arr):
        self.graph = graph
        self.arr = arr
        self.reasons: list[str] = [""]
        self._rid: dict[str, int] = {"": 0}
        self._local: dict[int, tuple] = {}
        self._op_of_sig = None

    def rid(self, text: str) -> int:
        r = self._rid.get(text)
        if r is None:
            r = self._rid[text] = len(self.reasons)
            self.reasons.append(text)
        return r

    def store(self, p) -> dict:
        key = capability_key(p)
        if key is None:
            hit = self._local.get(id(p))
            if hit is None:
                hit = self._local[id(p)] = (p, {})  # holding p keeps its id unique
            return hit[1]
        return planner_cache(self.graph).answers.setdefault(key, {})

    def answer(self, p, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(supported, reason id) of provider ``p`` for node ids ``ids`` (ascending)."""
        if len(ids) and _plain_mask(p):
            sig = self.arr.node_sig[ids]
            table = self._mask_table(p)
            rid = table[sig]
            ok = np.zeros(len(ids), bool)
            rest = rid == 0
            if rest.any():
                below = p.inner if p.check is None else None
                o2, r2 = self.answer(below, ids[rest]) if below is not None else self._leaf(p, ids[rest])
                ok[rest] = o2
                rid[rest] = r2
            return ok, rid
        return self._leaf(p, ids)

    def _mask_table(self, p) -> np.ndarray:
        """Reason id of the mask's own refusal per signature (0: not masked off)."""
        if self._op_of_sig is None:
            self._op_of_sig = [s[1] for s in self.arr.signatures]
        out = np.zeros(len(self._op_of_sig), np.int64)
        for s, op in enumerate(self._op_of_sig):
            why = p.mask_reason(op)
            if why is not None:
                out[s] = self.rid(why)
        return out

    def _leaf(self, p, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        graph, arr = self.graph, self.arr
        nodes = graph.nodes
        store = self.store(p)
        m = len(ids)
        ok = np.zeros(m, bool)
        rid = np.zeros(m, np.int64)
        if not m:
            return ok, rid
        sig = arr.node_sig[ids]
        order = np.argsort(sig, kind="stable")
        sig_s = sig[order]
        cuts = np.flatnonzero(np.concatenate([[True], sig_s[1:] != sig_s[:-1], [True]])).tolist()

        def node_answer(nid: int) -> tuple[bool, str]:
            a = store.get(("n", nid))
            if a is None:
                a = store[("n", nid)] = ask(p, graph, nodes[nid])
            return a

        for a, b in zip(cuts[:-1], cuts[1:]):
            pos = order[a:b]            # positions in ``ids`` (ascending: ids are)
            members = ids[pos]
            s = int(sig_s[a])
            mode = store.get(("m", s))
            if mode is None:
                mode = store[("m", s)] = cache_mode(p, nodes[int(arr.sig_first[s])])
            if mode == SIG:
                ans = store.get(("s", s))
                if ans is None:
                    ans = store[("s", s)] = ask(p, graph, nodes[int(members[0])])
                if ans[0]:
                    ok[pos] = True
                else:
                    rid[pos] = self.rid(ans[1])
                continue
            single = np.ones(len(members), bool)
            if mode == CTX:
                by_sig, bounds = arr.sig_members()
                all_members = by_sig[bounds[s]:bounds[s + 1]]
                cls = context_classes(graph, arr, s, all_members)[arr.sig_pos()[members]]
                comparable = cls >= 0
                if comparable.any():
                    cpos = np.flatnonzero(comparable)
                    uniq, first, inv = np.unique(cls[cpos], return_index=True, return_inverse=True)
                    cls_ok = np.zeros(len(uniq), bool)
                    for k, (c, f) in enumerate(zip(uniq.tolist(), first.tolist())):
                        ans = store.get(("c", s, c))
                        if ans is None:
                            head = int(members[cpos[f]])
                            ans = node_answer(head)
                            store[("c", s, c)] = ans
                        cls_ok[k] = ans[0]
                    good = cls_ok[inv.reshape(-1)]
                    ok[pos[cpos[good]]] = True
                    single[cpos[good]] = False
            # one by one: NODE mode, nodes compared with none, members of refused classes
            for j in np.flatnonzero(single).tolist():
                yes, why = node_answer(int(members[j]))
                if yes:
                    ok[pos[j]] = True
                else:
                    rid[pos[j]] = self.rid(why)
        return ok, rid


def place(graph: Graph, providers) -> tuple[np.ndarray, list[dict], list[int]]:
    """Priority first-fit. Returns (assignment, declined-reasons, unplaceable node ids).

    Each provider is asked only about the nodes every higher-priority provider
    refused, and as few times as its answers allow (see :mod:`.capability`: once per
    signature, once per context class, or per node; masks by op type without asking;
    answers of providers with a ``capability_key()`` are remembered on the graph).
    ``declined[i]`` maps the name of each provider that refused node ``i`` (in
    priority order) to its reason; nodes with equal reasons share one dict."""
    arr = graph.arrays
    n_prov = len(providers)
    n = arr.n_nodes
    answers = Answers(graph, arr)
    assignment = np.full(n, -1, np.int64)
    dkey = np.zeros(n, np.int64)       # per node: id of its tuple of (provider, reason id)
    keys: list[tuple] = [()]
    pending = np.arange(n, dtype=np.int64)
    for pi, p in enumerate(providers):
        if not len(pending):
            break
        ok, rid = answers.answer(p, pending)
        assignment[pending[ok]] = pi
        refused = pending[~ok]
        if len(refused):
            r = len(answers.reasons)
            uniq, inv = np.unique(dkey[refused] * r + rid[~ok], return_inverse=True)
            base = len(keys)
            for u in uniq.tolist():
                old, why = divmod(u, r)
                keys.append(keys[old] + ((pi, why),))
            dkey[refused] = base + inv.reshape(-1)
        pending = refused
    used, inv = np.unique(dkey, return_inverse=True)
    names = [p.name for p in providers]
    texts = answers.reasons
    dicts = [{names[pi]: texts[why] for pi, why in keys[k]} for k in used.tolist()]
    declined = list(map(dicts.__getitem__, inv.reshape(-1).tolist()))
    unplaceable = np.flatnonzero(assignment < 0).tolist()
    assignment[assignment < 0] = n_prov - 1
    return assignment, declined, unplaceable
