"""Moving a value between buffers of any providers.

A buffer is anything with ``provider``, ``data``, ``shape`` and ``dtype`` (a provider's
``DeviceBuffer``, an arena view); host memory holds numpy arrays, a device its own arrays,
and the providers' copy hooks move between them."""

from __future__ import annotations

import threading

import numpy as np

from .errors import KernelError
from .graph import HOST_DTYPE


def host_array(buf) -> np.ndarray:
    """A buffer's contents on the host (the array itself for host memory; a D2H copy otherwise)."""
    return buf.data if isinstance(buf.data, np.ndarray) else buf.provider.copy_to_host(buf)


def copy_into(src, dst) -> None:
    """Copy buffer ``src`` into buffer ``dst`` (any providers): H2D, D2H, D2D or host copy."""
    dp = dst.provider
    if dst.dtype == HOST_DTYPE or src.dtype == HOST_DTYPE:
        if not (isinstance(dst.data, np.ndarray) and isinstance(src.data, np.ndarray)):
            raise KernelError("host values (sequences/optionals/maps) live on host providers only")
        dst.data[()] = src.data[()]
        return
    if isinstance(dst.data, np.ndarray):
        dp.copy_from_host(host_array(src), dst)
    elif isinstance(src.data, np.ndarray):
        dp.fence(dp.copy_from_host_async(src.data, dst))
    else:
        dp.fence(dp.copy_device_async(src, dst))


class BufferPool:
    """Host arrays of freed buffers, handed out again by
    :class:`~hetero_explore.runner.core.RecyclingLedger` for new buffers of the same provider,
    shape and dtype (last freed, first reused). A control kernel keeps one across its runs: a
    Loop or Scan body's per-iteration buffers (its outputs, the staged slices) come back as the
    same arrays iteration after iteration and run after run, which lets the body's nodes replay
    their recorded calls (:meth:`~hetero_explore.runner.core.NodeRunner.bind`, ``keyed``). Only
    plain writeable C-contiguous arrays that own their memory, of at most ``max_array_bytes``,
    are kept, ``max_bytes`` in all; every buffer made from one is a counted allocation
    (:meth:`~hetero_explore.providers.base.HostMemory.reuse`), so the runs' meters and leak
    checks see what they always did. Thread-safe."""

    __slots__ = ("arrays", "nbytes", "max_bytes", "max_array_bytes", "lock")

    def __init__(self, max_bytes: int = 16 << 20, max_array_bytes: int = 1 << 20):
        #: (provider, shape, dtype) -> free arrays
        self.arrays: dict = {}
        self.nbytes = 0
        self.max_bytes = max_bytes
        self.max_array_bytes = max_array_bytes
        self.lock = threading.Lock()

    def take(self, provider, shape, dtype):
        """A free array for a buffer of ``provider`` of ``shape`` and ``dtype``, or None."""
        with self.lock:
            lst = self.arrays.get((provider, shape, dtype))
            if not lst:
                return None
            a = lst.pop()
            self.nbytes -= a.nbytes
            return a

    def give(self, provider, array) -> None:
        """Keep ``array`` (of a buffer of ``provider`` just freed) for a later buffer."""
        if (type(array) is not np.ndarray or array.base is not None or array.dtype.hasobject
                or array.nbytes > self.max_array_bytes or not array.flags.writeable
                or not array.flags.c_contiguous):
            return
        with self.lock:
            if self.nbytes + array.nbytes > self.max_bytes:
                return
            self.arrays.setdefault((provider, array.shape, array.dtype), []).append(array)
            self.nbytes += array.nbytes

    def clear(self) -> None:
        with self.lock:
            self.arrays.clear()
            self.nbytes = 0
