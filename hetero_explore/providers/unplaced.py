"""The ``unplaced`` lane: where a plan puts the nodes no provider takes.

Planning never refuses to show a model (``plan(..., strict=False)``, the default): a
node that every provider declines is placed on this lane — drawn red, listed first
among the plan's execution blockers with each provider's reason — so the rest of the
model is still placed, partitioned and shown. The lane executes nothing: a plan that
uses it has an ``unplaceable`` execution blocker, so execution and
``guard_heterogeneous_fallback`` fail closed exactly as before. ``plan(...,
strict=True)`` raises :class:`~hetero_explore.ir.errors.UnsupportedNodeError` instead.
"""

from __future__ import annotations

from .base import DeviceId, ExecutionProvider, KernelMatch
from ..ir.context import KernelContext

#: the lane's provider name (reserved: a user provider may not take it)
UNPLACED = "unplaced"


class UnplacedLane(ExecutionProvider):
    """A pseudo-provider that supports nothing and executes nothing."""

    name = UNPLACED

    def __init__(self) -> None:
        super().__init__()
        self.device = DeviceId(UNPLACED, 0)

    def supports(self, ctx: KernelContext) -> KernelMatch:
        return KernelMatch.no("the unplaced lane runs nothing")

    def signature_cacheable(self, node) -> bool:
        return True

    def available(self) -> tuple[bool, str]:
        return False, "the unplaced lane holds the nodes no provider supports; it executes nothing"

    def get_kernel(self, ctx: KernelContext):
        from ..ir.errors import KernelError
        raise KernelError(f"node {ctx.node.name!r} ({ctx.node.op_type}) is unplaced: no provider supports it")


def is_unplaced(provider) -> bool:
    return isinstance(provider, UnplacedLane)
