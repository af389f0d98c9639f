"""What a plan accepted without checking, said on the node.

A capability profile (:mod:`hetero_explore.providers.profiles`) encodes the conditions its
execution provider's table states as checks; the conditions stated only in words are listed
as ``unchecked`` and accepted. A node placed on a profile under such a condition gets a note
here, shown in the placement tables (app, report, CLI) and on the node in the graph, so
"it plans on QNN" never hides "if the table's words allow it".
"""

from __future__ import annotations


def _unwrapped(provider):
    """The provider under masks and the explorer's memo wrappers."""
    seen = 0
    while hasattr(provider, "inner") and seen < 16:
        provider = provider.inner
        seen += 1
    return provider


def unchecked_note(provider, node) -> str:
    """The note for ``node`` placed on ``provider``: '' unless the provider is a capability
    profile whose entry for the node's op has conditions it does not check."""
    prof = getattr(_unwrapped(provider), "profile", None)
    ops = getattr(prof, "ops", None)
    if not isinstance(ops, dict):
        return ""
    spec = ops.get((node.domain, node.op_type))
    unchecked = tuple(getattr(spec, "unchecked", ()) or ())
    if not unchecked:
        return ""
    return (f"placed on {provider.name} without checking what its table states in words "
            f"({getattr(prof, 'execution_provider', provider.name)}): " + " | ".join(unchecked))


def placement_notes(plan) -> dict:
    """``{(subgraph path, node id): note}`` for every node of ``plan`` and its child plans that
    :func:`unchecked_note` has something to say about (empty when none)."""
    out = {}
    for path, p in plan.nested():
        provs = p.providers
        for n in p.graph.nodes:
            note = unchecked_note(provs[p.assignment[n.id]], n)
            if note:
                out[(path, n.id)] = note
    return out
