"""The execution-provider protocol.

A provider is small: a name, a device, a capability oracle
(:meth:`ExecutionProvider.supports`), kernel creation and a handful of
memory hooks. Planning needs only the capability half; execution needs the
rest. Capability checks compose (see :mod:`hetero_explore.providers.virtual`).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..ir.context import KernelContext
from ..ir.errors import KernelError


@dataclass(frozen=True, order=True)
class DeviceId:
    """A device: its type (``cpu``, ``cuda``, ``npu`` ...) and index."""

    type: str
    """Device type, lower case."""
    index: int = 0
    """Index among devices of that type."""

    def __str__(self) -> str:
        return f"{self.type}:{self.index}"

    @property
    def is_host(self) -> bool:
        """True for host memory (the CPU)."""
        return self.type == "cpu"

    @classmethod
    def parse(cls, text: "str | DeviceId") -> "DeviceId":
        if isinstance(text, DeviceId):
            return text
        t, _, i = str(text).partition(":")
        return cls(t.strip().lower(), int(i) if i else 0)


def transfer_kind(src: DeviceId, dst: DeviceId) -> str:
    """What moving a value from ``src`` to ``dst`` is: H2D, D2H, D2D, H2H or same-device."""
    if src == dst:
        return "same-device"
    if src.is_host and not dst.is_host:
        return "H2D"
    if not src.is_host and dst.is_host:
        return "D2H"
    return "H2H" if src.is_host else "D2D"


@dataclass(frozen=True)
class KernelMatch:
    """The answer to "can this provider run this node?"."""

    supported: bool
    """Whether the provider claims the node."""
    reason: str = ""
    """Why not (or a note when supported)."""

    def __bool__(self) -> bool:
        return self.supported

    @classmethod
    def yes(cls, note: str = "") -> "KernelMatch":
        return cls(True, note)

    @classmethod
    def no(cls, reason: str) -> "KernelMatch":
        return cls(False, reason)


class Identity:
    """Hashable by the identity of ``obj`` (holding it, so that its id stays unique):
    for capability keys that depend on an object rather than its value."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return type(other) is Identity and other.obj is self.obj


def own_supports(p, cls) -> bool:
    """True when ``p`` answers with ``cls.supports`` itself: not a subclass override,
    not a function patched onto the instance (a capability key then means nothing)."""
    return type(p).supports is cls.supports and "supports" not in getattr(p, "__dict__", {})


class DeviceBuffer:
    """One allocation owned by a provider."""

    __slots__ = ("provider", "shape", "dtype", "nbytes", "data", "freed", "meter")

    def __init__(self, provider: "ExecutionProvider", shape, dtype, data):
        self.provider = provider
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize  # exact ints; np.prod costs ~5 us a call
        #: the provider's array: numpy for host providers, a device array otherwise
        self.data = data
        self.freed = False
        #: the :class:`AllocationMeter` that counted this allocation (None when none was open)
        self.meter = None

    @property
    def device(self) -> DeviceId:
        return self.provider.device

    def __repr__(self) -> str:
        return f"DeviceBuffer({self.provider.name}, {self.shape}, {self.dtype})"


class Kernel:
    """A built kernel: validated at build time, run on provider buffers."""

    #: the kernel may return (write) an output that aliases an input
    may_alias_input: bool = False
    #: the output size depends on input data, not only on shapes
    data_dependent_output: bool = False

    def __init__(self, ctx: KernelContext, fn: Callable[[Sequence[Any], Sequence[Any]], None], *,
                 may_alias_input: bool = False, data_dependent_output: bool = False,
                 bitwise_portable: bool = True, replayable: bool = False):
        self.ctx = ctx
        self.node = ctx.node
        self._fn = fn
        self.may_alias_input = may_alias_input
        self.data_dependent_output = data_dependent_output
        self.bitwise_portable = bitwise_portable
        #: ``fn``'s only effects are host-target launches fixed by its arrays: the runner may
        #: record them once and replay them (see ``kernels.common.replayable``)
        self.replayable = replayable

    def run(self, inputs: Sequence[DeviceBuffer | None], outputs: Sequence[DeviceBuffer]) -> None:
        """Compute ``outputs`` from ``inputs`` (absent optional inputs are None)."""
        self._fn([None if b is None else b.data for b in inputs], [b.data for b in outputs])

    def __repr__(self) -> str:
        return f"Kernel({self.node.op_type}, {self.node.name!r})"


class AllocationMeter:
    """What one run allocated on one provider: opened by the run's thread with
    :meth:`ExecutionProvider.open_meter`, it counts the allocations that thread
    makes while it is open, and their frees (from any thread). Several threads
    can run on one provider at once, each with its own meter, so a run's leak
    check and peak do not see the other runs' buffers."""

    __slots__ = ("allocations", "live_allocations", "live_bytes", "peak_bytes")

    def __init__(self) -> None:
        self.allocations = 0
        self.live_allocations = 0
        self.live_bytes = 0
        self.peak_bytes = 0


class ExecutionProvider:
    """Base class of providers. Subclasses set ``name`` and ``device`` and
    override :meth:`supports`; executing providers also override the
    memory hooks and :meth:`get_kernel`."""

    name: str = "provider"
    device: DeviceId = DeviceId("cpu", 0)

    def __init__(self) -> None:
        self.live_bytes = 0
        self.peak_bytes = 0
        self.live_allocations = 0
        self.total_allocations = 0
        self._counter_lock = threading.Lock()
        self._meters = threading.local()

    # -- capability -------------------------------------------------------
    def supports(self, ctx: KernelContext) -> KernelMatch:
        """Can this provider run the node described by ``ctx`` (see :func:`node_context`)?"""
        raise NotImplementedError

    def signature_cacheable(self, node) -> bool:
        """True when :meth:`supports` for ``node`` depends only on its domain, op type,
        opset and input dtypes, so the planner may ask once per such signature."""
        return False

    def capability_key(self):
        """A hashable that fixes every answer of :meth:`supports`, or None. With one, the
        planner remembers this provider's answers on the graph across plans (a re-plan
        re-asks nothing it asked before); without, within one plan only. Return None
        from any subclass whose answers depend on anything the key does not hold."""
        return None

    def available(self) -> tuple[bool, str]:
        """(True, "") when this provider can execute on this machine, else (False, reason)."""
        return True, ""

    @property
    def can_execute(self) -> bool:
        return False

    def support_df(self):
        """The provider's op table as a DataFrame (domain, op_type, opsets, dtypes, ...)."""
        import pandas as pd
        return pd.DataFrame(columns=["domain", "op_type", "since_opset", "until_opset", "dtypes", "bitwise_portable"])

    # -- memory -----------------------------------------------------------
    # The counters are shared by every thread using the provider: updated under a lock.
    # A run's own bookkeeping goes through a meter of its thread (see AllocationMeter).
    def open_meter(self) -> AllocationMeter:
        """Start counting what the calling thread allocates on this provider."""
        m = AllocationMeter()
        stack = getattr(self._meters, "stack", None)
        if stack is None:
            stack = self._meters.stack = []
        stack.append(m)
        return m

    def close_meter(self, meter: AllocationMeter) -> None:
        """Stop counting into ``meter`` (opened by this thread)."""
        stack = getattr(self._meters, "stack", None)
        if stack and meter in stack:
            stack.remove(meter)

    def _track_alloc(self, nbytes: int, buf: DeviceBuffer | None = None) -> None:
        stack = getattr(self._meters, "stack", None)
        m = stack[-1] if stack else None
        with self._counter_lock:
            self.live_bytes += nbytes
            self.live_allocations += 1
            self.total_allocations += 1
            if self.live_bytes > self.peak_bytes:
                self.peak_bytes = self.live_bytes
            if m is not None:
                m.allocations += 1
                m.live_allocations += 1
                m.live_bytes += nbytes
                if m.live_bytes > m.peak_bytes:
                    m.peak_bytes = m.live_bytes
        if m is not None and buf is not None:
            buf.meter = m

    def _track_free(self, nbytes: int, buf: DeviceBuffer | None = None) -> None:
        if buf is not None:
            m = buf.meter
        else:  # a provider that does not say which buffer: the thread's open meter
            stack = getattr(self._meters, "stack", None)
            m = stack[-1] if stack else None
        with self._counter_lock:  # the freeing thread need not be the allocating one
            self.live_bytes -= nbytes
            self.live_allocations -= 1
            if m is not None:
                m.live_allocations -= 1
                m.live_bytes -= nbytes

    def reset_peak(self) -> None:
        with self._counter_lock:
            self.peak_bytes = self.live_bytes

    #: byte alignment of values laid out in one arena allocation (see :meth:`arena_view`);
    #: 0 when the provider cannot hand out such views (each value is then allocated per run)
    arena_alignment: int = 0

    def arena_view(self, arena: DeviceBuffer, offset: int, shape, dtype):
        """The provider's array for a value of ``shape`` and ``dtype`` at byte ``offset`` of
        ``arena`` (a one-dimensional uint8 allocation of this provider)."""
        raise NotImplementedError(f"provider {self.name!r} has no arena views")

    def allocate(self, shape, dtype) -> DeviceBuffer:
        raise NotImplementedError(f"provider {self.name!r} cannot allocate memory (planning only)")

    def free(self, buf: DeviceBuffer) -> None:
        raise NotImplementedError

    def copy_from_host(self, array: np.ndarray, out: DeviceBuffer | None = None) -> DeviceBuffer:
        """Synchronous host-to-device copy (allocates ``out`` when not given)."""
        raise NotImplementedError

    def copy_to_host(self, buf: DeviceBuffer) -> np.ndarray:
        """Synchronous device-to-host copy into a fresh numpy array."""
        raise NotImplementedError

    def copy_from_host_async(self, array: np.ndarray, out: DeviceBuffer):
        """Start a host-to-device copy into ``out``; returns an event for :meth:`fence`."""
        self.copy_from_host(array, out)
        return None

    def copy_device_async(self, src: DeviceBuffer, out: DeviceBuffer):
        """Start a copy from another provider's buffer into ``out``; returns an event."""
        self.copy_from_host(src.provider.copy_to_host(src), out)
        return None

    def fence(self, event) -> None:
        """Wait until the copy behind ``event`` has finished."""

    def synchronize(self) -> None:
        """Wait for all outstanding work on this provider."""

    # -- partitions (providers that run whole partitions, e.g. ONNX Runtime's EPs) -------
    def partition_runner(self, graph, node_ids, outputs, *, partition: int | None = None):
        """A runner for a whole partition (``provider``, ``arena_size``, ``steps``, ``bind``,
        ``run`` as :class:`~hetero_explore.runner.core.NodeRunner` has them), or None: the
        executor then runs the partition node by node with this provider's kernels."""
        return None

    def partition_blocker(self, graph, node_ids, outputs, *, partition: int | None = None) -> str | None:
        """Why a partition of these nodes cannot run on this provider (checked when planning), or None."""
        return None

    # -- kernels ----------------------------------------------------------
    def get_kernel(self, ctx: KernelContext) -> Kernel:
        raise KernelError(f"provider {self.name!r} has no kernels (it only plans); "
                          "give it an executing provider to run on")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.device})"


class HostMemory:
    """Memory hooks for providers whose buffers are host numpy arrays (mixin)."""

    arena_alignment = 64

    def arena_view(self, arena: DeviceBuffer, offset: int, shape, dtype):
        dtype = np.dtype(dtype)
        n = math.prod(shape) * dtype.itemsize
        return arena.data[offset:offset + n].view(dtype).reshape(tuple(shape))

    def _before_allocate(self) -> None:
        """Hook: raise when this provider cannot hold memory."""

    def allocate(self, shape, dtype) -> DeviceBuffer:
        self._before_allocate()
        arr = np.empty(tuple(shape), dtype=dtype)
        buf = DeviceBuffer(self, shape, dtype, arr)
        self._track_alloc(buf.nbytes, buf)
        return buf

    def free(self, buf: DeviceBuffer) -> None:
        if buf.freed:
            return
        buf.freed = True
        buf.data = None
        self._track_free(buf.nbytes, buf)

    def reuse(self, array: np.ndarray) -> DeviceBuffer:
        """A new allocation over ``array``, a host array of a freed buffer of this provider that
        nobody else holds (a :class:`~hetero_explore.runner.core.BufferPool`'s): counted as
        :meth:`allocate` counts one; its contents are whatever the last user left."""
        self._before_allocate()
        buf = DeviceBuffer(self, array.shape, array.dtype, array)
        self._track_alloc(buf.nbytes, buf)
        return buf

    def copy_from_host(self, array, out: DeviceBuffer | None = None) -> DeviceBuffer:
        array = np.asarray(array)
        if out is None:
            out = self.allocate(array.shape, array.dtype)
        np.copyto(out.data, array, casting="no")
        return out

    def copy_to_host(self, buf: DeviceBuffer) -> np.ndarray:
        return np.array(buf.data, copy=True)

    def copy_device_async(self, src: DeviceBuffer, out: DeviceBuffer):
        host = src.data if isinstance(src.data, np.ndarray) else src.provider.copy_to_host(src)
        np.copyto(out.data, host, casting="no")
        return None
