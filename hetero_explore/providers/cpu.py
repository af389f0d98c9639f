"""Numba CPU provider: host memory, ``@njit`` kernels."""

from __future__ import annotations

import numpy as np

from .base import DeviceBuffer, DeviceId
from .registry_provider import RegistryProvider


class NumbaCPUProvider(RegistryProvider):
    """Runs kernels compiled with ``numba.njit`` (no fastmath) on the host."""

    target = "cpu"

    def __init__(self, name: str = "cpu", device: DeviceId | str = "cpu:0"):
        super().__init__()
        self.name = name
        self.device = DeviceId.parse(device)

    @property
    def can_execute(self) -> bool:
        return True

    def allocate(self, shape, dtype) -> DeviceBuffer:
        arr = np.empty(tuple(shape), dtype=dtype)
        buf = DeviceBuffer(self, shape, dtype, arr)
        self._track_alloc(buf.nbytes)
        return buf

    def free(self, buf: DeviceBuffer) -> None:
        if buf.freed:
            return
        buf.freed = True
        buf.data = None
        self._track_free(buf.nbytes)

    def copy_from_host(self, array, out=None) -> DeviceBuffer:
        array = np.asarray(array)
        if out is None:
            out = self.allocate(array.shape, array.dtype)
        np.copyto(out.data, array, casting="no")
        return out

    def copy_to_host(self, buf: DeviceBuffer) -> np.ndarray:
        return np.array(buf.data, copy=True)

    def copy_device_async(self, src: DeviceBuffer, out: DeviceBuffer):
        if src.device.is_host:
            np.copyto(out.data, src.data, casting="no")
        else:
            np.copyto(out.data, src.provider.copy_to_host(src), casting="no")
        return None
