"""Node contexts: everything known about a node when a provider is asked about it or builds
its kernel (its input and output shapes and dtypes, its constant inputs).

The planner, the executors, folding and the conformance runner all build contexts with
:func:`node_context`, so a provider sees the same context when it is asked and when it
builds the kernel."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class KernelContext:
    """Everything known about a node when a kernel is checked or built."""

    node: Any
    """The :class:`hetero_explore.ir.graph.Node`."""
    opset: int
    """Opset version of the node's domain."""
    in_shapes: list
    """Input shapes (None for absent optional inputs or unknown shapes)."""
    in_dtypes: list
    """Input numpy dtypes (None for absent optional inputs)."""
    out_shapes: list = field(default_factory=list)
    """Output shapes from shape inference."""
    out_dtypes: list = field(default_factory=list)
    """Output numpy dtypes from shape inference."""
    graph: Any = None
    """The graph, for looking up constant inputs; may be None."""

    def const(self, i: int) -> np.ndarray | None:
        """Value of input ``i`` when it is an initializer (a constant), else None."""
        node = self.node
        if self.graph is None or i >= len(node.inputs) or not node.inputs[i]:
            return None
        name = node.inputs[i]
        if self.graph.is_constant(name):
            return self.graph.initializer(name)
        return None

    def has_input(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    @property
    def attrs(self) -> dict:
        return self.node.attributes


def present_outputs(node) -> tuple[str, ...]:
    """The node's outputs without trailing absent ("") ones."""
    outs = list(node.outputs)
    while outs and not outs[-1]:
        outs.pop()
    return tuple(outs)


def node_context(graph, node) -> KernelContext:
    """The kernel context of ``node``: shapes and dtypes from the graph's values
    (``None`` for absent optional inputs/outputs), constants via ``graph``. The
    planner, the executors and the conformance runner all build contexts here, so a
    provider sees the same context when it is asked and when it builds the kernel."""
    vals = graph.values

    def info(name):
        if not name or name not in vals:
            return None, None
        v = vals[name]
        return (None if v.shape is None else tuple(v.shape)), v.dtype

    ins = [info(n) for n in node.inputs]
    outs = [info(n) for n in present_outputs(node)]
    return KernelContext(node, node.opset, [s for s, _ in ins], [d for _, d in ins],
                         [s for s, _ in outs], [d for _, d in outs], graph=graph)


class _Absent:
    """Stands in for an absent optional output (its ``data`` is None)."""

    data = None
    freed = True


#: the placeholder a kernel gets for an absent optional output in the middle of a node's outputs
ABSENT = _Absent()
