"""Execution providers: the Numba CPU and numba.cuda providers, virtual
providers and masks, and name resolution (``"cpu"``, ``"cuda"``, ``"gpu"``)."""

from __future__ import annotations

import functools

from .base import DeviceBuffer, DeviceId, ExecutionProvider, Kernel, KernelMatch, own_supports
from ..ir.context import KernelContext
from .cpu import NumbaCPUProvider
from .cuda import NumbaCUDAProvider
from ..ir.errors import ArgumentTypeError, ArgumentValueError, UnknownProviderError
from .virtual import _context_cacheable
from .virtual import (MaskedProvider, OpSpec, VirtualProvider, chain, decline_if_input_dtype,
                      decline_if_larger_than, mask, unmask)



def cpu(name: str = "cpu"):
    """The Numba CPU provider."""
    return NumbaCPUProvider(name)


def cuda(name: str = "cuda"):
    """The numba.cuda provider (a real GPU, or the simulator when NUMBA_ENABLE_CUDASIM=1)."""
    return NumbaCUDAProvider(name)


def virtual_gpu(name: str = "gpu", device: str = "gpu:0"):
    """A virtual GPU: the CUDA provider's op table, executing CPU kernels on its own
    allocations, so that heterogeneous plans mean something on any laptop."""
    cuda_p = NumbaCUDAProvider()
    host = NumbaCPUProvider(name=f"{name}-kernels")
    return VirtualGPUProvider(name, device, cuda_p, host)


class VirtualGPUProvider(VirtualProvider):
    """Claims exactly what ``capability`` claims; executes with ``kernels``."""

    def __init__(self, name, device, capability, kernels):
        super().__init__(name, device, ops=(), kernels=kernels)
        self.capability = capability

    def supports(self, ctx: KernelContext):
        m = self.capability.supports(ctx)
        if not m.supported:
            return m
        k = self.kernels.supports(ctx)
        if not k.supported:
            return KernelMatch.no(f"its kernels ({self.kernels.name}) decline: {k.reason}")
        return m

    def signature_cacheable(self, node) -> bool:
        return self.capability.signature_cacheable(node) and self.kernels.signature_cacheable(node)

    def context_cacheable(self, node) -> bool:
        return _context_cacheable(self.capability, node) and _context_cacheable(self.kernels, node)

    def capability_key(self):
        """Its capability's and its kernels' keys (the reasons name the kernels)."""
        if not own_supports(self, VirtualGPUProvider):
            return None
        cap = getattr(self.capability, "capability_key", lambda: None)()
        ker = getattr(self.kernels, "capability_key", lambda: None)()
        if cap is None or ker is None:
            return None
        return ("virtual-gpu", self.kernels.name, cap, ker)

    def support_df(self):
        df = self.capability.support_df().copy()
        df["note"] = f"virtual {self.device}; executes with {self.kernels.name}"
        return df


#: provider names -> factories; ``register_provider`` adds one (e.g. a capability profile)
PROVIDERS: dict = {}


def register_provider(name: str, factory) -> None:
    """Make ``name`` resolve to ``factory()`` in provider lists (``plan(g, [name, "cpu"])``)."""
    key = name.strip().lower()
    if not key:
        raise ArgumentValueError("a provider name cannot be empty")
    PROVIDERS[key] = factory


for _name, _factory in (("cpu", cpu), ("cuda", cuda), ("gpu", virtual_gpu)):
    register_provider(_name, _factory)

# capability profiles of real execution providers (coreml, tensorrt, ort-cuda, ...): see .profiles
from .profiles import PROFILE_NAMES, ProfileProvider, profile_provider  # noqa: E402
for _name in PROFILE_NAMES:
    register_provider(_name, functools.partial(profile_provider, _name))


#: name prefixes -> factories taking the whole name (``ort:`` names: ONNX Runtime's EPs)
PREFIXES: dict = {}
#: prefix → a function listing the names of that family usable on this machine
PREFIX_NAMES: dict = {}


def register_prefix(prefix: str, factory, names=None) -> None:
    """Make every name starting with ``prefix`` resolve to ``factory(name)`` (``"ort:"`` →
    :func:`hetero_explore.providers.ort.resolve_name`); ``names()`` lists the family's names
    usable here (for pickers, ``--help`` and the docs)."""
    key = prefix.strip().lower()
    if not key:
        raise ArgumentValueError("a provider name prefix cannot be empty")
    PREFIXES[key] = factory
    if names is not None:
        PREFIX_NAMES[key] = names


def prefix_names(prefix: str) -> list[str]:
    """The names of a prefix family usable here (empty when it cannot say, or lacks its runtime)."""
    f = PREFIX_NAMES.get(prefix)
    if f is None:
        return []
    try:
        return list(f())
    except Exception:   # noqa: BLE001 - the family's runtime is missing: nothing to list
        return []


def _ort_name(name: str):
    from .ort import resolve_name
    return resolve_name(name)


def _ort_names() -> list[str]:
    from .ort import available_names
    return available_names()


register_prefix("ort:", _ort_name, _ort_names)


def known_names() -> tuple:
    return tuple(PROVIDERS)


def resolve(p) -> ExecutionProvider:
    """A provider from a provider object or a registered name (``cpu``, ``cuda``, ``gpu``, ...)."""
    if isinstance(p, ExecutionProvider):
        return p
    if isinstance(p, str):
        factory = PROVIDERS.get(p.strip().lower())
        if factory is not None:
            return factory()
        for prefix, make in PREFIXES.items():
            if p.strip().lower().startswith(prefix):
                return make(p.strip())
        import difflib
        close = difflib.get_close_matches(p.strip().lower(), PROVIDERS, n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise UnknownProviderError(f"unknown provider name {p!r}{hint}; known names: {', '.join(PROVIDERS)}, "
                                   f"and {', '.join(p + '<EP>' for p in PREFIXES)} (e.g. 'ort:cpu') "
                                   "(or pass a provider object, e.g. VirtualProvider(...))")
    raise ArgumentTypeError(f"expected a provider or a provider name, got {type(p).__name__}")


def resolve_all(providers) -> list[ExecutionProvider]:
    """Resolve a priority-ordered list, rejecting empty lists and duplicate names."""
    if providers is None:
        raise ArgumentValueError("give at least one provider, e.g. ['gpu', 'cpu']")
    if isinstance(providers, (str, ExecutionProvider)):
        providers = [providers]
    try:
        items = list(providers)
    except TypeError:
        raise ArgumentTypeError(f"providers must be a list of providers or names in priority order, e.g. "
                                f"['gpu', 'cpu']; got {type(providers).__name__}") from None
    out = [resolve(p) for p in items]
    if not out:
        raise ArgumentValueError("the provider list is empty; give at least one provider, e.g. ['cpu']")
    seen = set()
    from .unplaced import UNPLACED, is_unplaced
    for p in out:
        if p.name == UNPLACED and not is_unplaced(p):
            raise ArgumentValueError(f"the provider name {UNPLACED!r} is reserved for the lane of nodes no "
                                     "provider supports; name the provider differently")
        if p.name in seen:
            raise ArgumentValueError(f"two providers are named {p.name!r}; provider names must be unique")
        seen.add(p.name)
    return out


__all__ = [
    "NumbaCPUProvider", "NumbaCUDAProvider", "VirtualGPUProvider", "DeviceBuffer", "DeviceId", "ExecutionProvider", "Kernel", "KernelContext", "KernelMatch",
    "MaskedProvider", "OpSpec", "VirtualProvider", "chain", "decline_if_input_dtype",
    "decline_if_larger_than", "mask", "unmask", "cpu", "cuda", "virtual_gpu", "resolve", "resolve_all",
    "PROVIDERS", "register_provider", "known_names", "PREFIXES", "register_prefix", "prefix_names", "PROFILE_NAMES", "ProfileProvider", "profile_provider",
]
