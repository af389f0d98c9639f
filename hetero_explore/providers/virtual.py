"""Capability-only and what-if providers.

* :class:`VirtualProvider` — a capability table with its own device identity
  ("an NPU that runs only Conv, Relu and MatMul"). Give it ``kernels=`` (an
  executing host provider) and it also executes: the real provider's kernels
  on allocations of its own, so transfers to and from it are real copies.
* :func:`mask` — deny or allow op types on any provider ("pretend CUDA has no
  Softmax"), keeping the provider's identity and kernels.

Capability checks compose as small functions (see :func:`chain`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np

from .base import DeviceId, ExecutionProvider, HostMemory, Kernel, KernelMatch, own_supports
from ..ir.context import KernelContext

Check = Callable[..., KernelMatch]


@dataclass(frozen=True)
class OpSpec:
    """What a virtual provider claims for one op type."""

    since: int = 1
    """First opset claimed (inclusive)."""
    until: int = 10_000
    """Last opset claimed (inclusive)."""
    dtypes: tuple | None = None
    """dtype names accepted for the first input (None: any)."""


def _spec(v) -> OpSpec:
    if v is None or v is True:
        return OpSpec()
    if isinstance(v, OpSpec):
        return v
    if isinstance(v, Mapping):
        return OpSpec(**v)
    raise TypeError(f"cannot read an op spec from {v!r}; use OpSpec(since=, until=, dtypes=)")


class VirtualProvider(HostMemory, ExecutionProvider):
    """A provider defined by an op table.

    Args:
        name: provider name (unique within a provider list).
        device: its device, e.g. ``"npu:0"``.
        ops: op types it claims: an iterable of names, or a mapping
            op_type → :class:`OpSpec` (opset range, dtypes).
        kernels: optional executing host provider whose kernels it runs.
        domain: the op domain it claims ("" = default ONNX domain).
    """

    def __init__(self, name: str, device: DeviceId | str, ops: Iterable[str] | Mapping = (),
                 kernels: ExecutionProvider | None = None, domain: str = ""):
        super().__init__()
        self.name = name
        self.device = DeviceId.parse(device)
        if isinstance(ops, Mapping):
            self.ops = {k: _spec(v) for k, v in ops.items()}
        else:
            self.ops = {k: OpSpec() for k in ops}
        self.domain = domain
        self.kernels = kernels

    def supports(self, ctx: KernelContext) -> KernelMatch:
        node, opset, dtypes = ctx.node, ctx.opset, ctx.in_dtypes
        if node.domain != self.domain:
            return KernelMatch.no(f"domain {node.domain or 'ai.onnx'} not supported")
        spec = self.ops.get(node.op_type)
        if spec is None:
            return KernelMatch.no(f"{node.op_type} not in {self.name}'s op table")
        if not spec.since <= opset <= spec.until:
            return KernelMatch.no(f"{node.op_type} opset {opset} outside {spec.since}-{spec.until}")
        if spec.dtypes is not None and dtypes and dtypes[0] is not None \
                and np.dtype(dtypes[0]).name not in spec.dtypes:
            return KernelMatch.no(f"dtype {np.dtype(dtypes[0]).name} not supported")
        if self.kernels is not None:
            m = self.kernels.supports(ctx)
            if not m.supported:
                return KernelMatch.no(f"its kernels ({self.kernels.name}) decline: {m.reason}")
        return KernelMatch.yes()

    def signature_cacheable(self, node) -> bool:
        return self.kernels is None or self.kernels.signature_cacheable(node)

    def capability_key(self):
        """The op table, domain, name and the kernels' key: all that :meth:`supports`
        reads (None for a subclass with its own ``supports``)."""
        if not own_supports(self, VirtualProvider):
            return None
        kernels = None
        if self.kernels is not None:
            kernels = getattr(self.kernels, "capability_key", lambda: None)()
            if kernels is None:
                return None
            kernels = (self.kernels.name, kernels)  # its refusals name the kernels
        return ("virtual", self.name, self.domain, frozenset(self.ops.items()), kernels)

    def context_cacheable(self, node) -> bool:
        return self.kernels is None or _context_cacheable(self.kernels, node)

    @property
    def can_execute(self) -> bool:
        return self.kernels is not None and self.kernels.can_execute

    def available(self) -> tuple[bool, str]:
        if self.kernels is None:
            return False, f"virtual provider {self.name!r} has no kernels (planning only)"
        return self.kernels.available()

    def support_df(self):
        import pandas as pd
        rows = [{"domain": self.domain or "ai.onnx", "op_type": op, "since_opset": s.since,
                 "until_opset": s.until, "dtypes": ", ".join(s.dtypes) if s.dtypes else "any",
                 "bitwise_portable": True, "note": f"virtual; kernels: {self.kernels.name if self.kernels else 'none'}"}
                for op, s in sorted(self.ops.items())]
        return pd.DataFrame(rows, columns=["domain", "op_type", "since_opset", "until_opset",
                                           "dtypes", "bitwise_portable", "note"])

    # execution: host kernels on allocations of our own
    def _need_kernels(self):
        if self.kernels is None:
            from ..ir.errors import ProviderUnavailableError
            raise ProviderUnavailableError(
                f"virtual provider {self.name!r} only plans; create it with kernels=NumbaCPUProvider() "
                "to execute")
        return self.kernels

    def _before_allocate(self) -> None:
        self._need_kernels()

    def get_kernel(self, ctx: KernelContext) -> Kernel:
        return self._need_kernels().get_kernel(ctx)


class MaskedProvider(ExecutionProvider):
    """A provider with some op types denied (or only some allowed).

    It keeps the wrapped provider's name, device, memory and kernels."""

    def __init__(self, inner: ExecutionProvider, deny: Iterable[str] = (), allow: Iterable[str] | None = None,
                 check: "Check | None" = None):
        # no super().__init__(): memory counters are the inner provider's
        self.inner = inner
        self.deny = frozenset(deny)
        self.allow = None if allow is None else frozenset(allow)
        #: an extra capability check ``check(ctx) -> KernelMatch`` (see :func:`chain`)
        self.check = check

    def __getattr__(self, item):
        return getattr(self.inner, item)

    @property
    def name(self):
        return self.inner.name

    @property
    def device(self):
        return self.inner.device

    def mask_reason(self, op_type: str) -> str | None:
        """Why the mask itself refuses nodes of ``op_type`` (None when it does not)."""
        if op_type in self.deny:
            return f"{op_type} denied by mask"
        if self.allow is not None and op_type not in self.allow:
            return f"{op_type} not in the allow-list mask"
        return None

    def supports(self, ctx: KernelContext) -> KernelMatch:
        why = self.mask_reason(ctx.node.op_type)
        if why is not None:
            return KernelMatch.no(why)
        if self.check is not None:
            m = self.check(ctx)
            if not m.supported:
                return m
        return self.inner.supports(ctx)

    @property
    def can_execute(self):
        return self.inner.can_execute

    def masked_off(self, node) -> bool:
        """True when the mask itself refuses ``node`` (by op type)."""
        return node.op_type in self.deny or (self.allow is not None and node.op_type not in self.allow)

    def signature_cacheable(self, node) -> bool:
        # a mask's own refusal depends only on the op type, whatever the provider below
        return self.masked_off(node) or (self.check is None and self.inner.signature_cacheable(node))

    def context_cacheable(self, node) -> bool:
        return self.masked_off(node) or (self.check is None and _context_cacheable(self.inner, node))

    def capability_key(self):
        if not own_supports(self, MaskedProvider) or self.check is not None:
            return None
        inner = self.inner.capability_key() if hasattr(self.inner, "capability_key") else None
        return None if inner is None else ("mask", self.deny, self.allow, inner)

    # memory and copies are the inner provider's
    def available(self):
        return self.inner.available()

    def allocate(self, shape, dtype):
        return self.inner.allocate(shape, dtype)

    def free(self, buf):
        return self.inner.free(buf)

    def copy_from_host(self, array, out=None):
        return self.inner.copy_from_host(array, out)

    def copy_to_host(self, buf):
        return self.inner.copy_to_host(buf)

    def copy_from_host_async(self, array, out):
        return self.inner.copy_from_host_async(array, out)

    def copy_device_async(self, src, out):
        return self.inner.copy_device_async(src, out)

    def fence(self, event):
        return self.inner.fence(event)

    def synchronize(self):
        return self.inner.synchronize()

    def reset_peak(self):
        return self.inner.reset_peak()

    def support_df(self):
        df = self.inner.support_df()
        keep = ~df["op_type"].isin(self.deny)
        if self.allow is not None:
            keep &= df["op_type"].isin(self.allow)
        return df[keep].reset_index(drop=True)

    def partition_runner(self, graph, node_ids, outputs, *, partition=None):
        return self.inner.partition_runner(graph, node_ids, outputs, partition=partition)

    def partition_blocker(self, graph, node_ids, outputs, *, partition=None):
        return self.inner.partition_blocker(graph, node_ids, outputs, partition=partition)

    def get_kernel(self, ctx: KernelContext):
        node = ctx.node
        if self.masked_off(node):
            from ..ir.errors import KernelError
            raise KernelError(f"{self.name}: {node.op_type} is masked off on this provider")
        return self.inner.get_kernel(ctx)

    def __repr__(self) -> str:
        bits = []
        if self.deny:
            bits.append(f"deny={sorted(self.deny)}")
        if self.allow is not None:
            bits.append(f"allow={sorted(self.allow)}")
        return f"Masked({self.inner!r}, {', '.join(bits)})"


def _context_cacheable(p, node) -> bool:
    """Does ``p``'s answer for ``node`` depend only on its kernel context up to names
    (op, attributes, shapes, dtypes, present inputs, constant inputs)?"""
    if p.signature_cacheable(node):
        return True
    f = getattr(p, "context_cacheable", None)
    return bool(f(node)) if f is not None else False


def mask(provider: ExecutionProvider, deny: Iterable[str] = (), allow: Iterable[str] | None = None,
         check: "Check | None" = None):
    """``provider`` with op types denied (or restricted to ``allow``), and optionally
    a further capability check ``check(ctx) -> KernelMatch`` (compose with :func:`chain`)."""
    if isinstance(provider, MaskedProvider):
        d = provider.deny | frozenset(deny)
        a = provider.allow if allow is None else (frozenset(allow) if provider.allow is None
                                                   else provider.allow & frozenset(allow))
        c = provider.check if check is None else (check if provider.check is None else chain(provider.check, check))
        return MaskedProvider(provider.inner, d, a, c)
    return MaskedProvider(provider, deny, allow, check)


def unmask(provider: ExecutionProvider) -> ExecutionProvider:
    return provider.inner if isinstance(provider, MaskedProvider) else provider


def chain(*checks: Check) -> Check:
    """All checks must accept; the first refusal is the answer."""
    def check(ctx):
        for c in checks:
            m = c(ctx)
            if not m.supported:
                return m
        return KernelMatch.yes()
    return check


def decline_if_input_dtype(dtype) -> Check:
    """A check that declines nodes with any input of ``dtype``."""
    name = np.dtype(dtype).name

    def check(ctx):
        if any(d is not None and np.dtype(d).name == name for d in ctx.in_dtypes):
            return KernelMatch.no(f"declines {name} inputs")
        return KernelMatch.yes()
    return check


def decline_if_larger_than(max_elements: int) -> Check:
    """A check that declines nodes with an input larger than ``max_elements``."""
    def check(ctx):
        for s in ctx.in_shapes:
            if s is not None and all(isinstance(d, int) for d in s) and int(np.prod(s)) > max_elements:
                return KernelMatch.no(f"input larger than {max_elements} elements")
        return KernelMatch.yes()
    return check
