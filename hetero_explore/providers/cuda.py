"""numba.cuda provider: device memory, ``@cuda.jit`` kernels, streams and
events for async copies. Runs on a real GPU, or in numba's CUDA simulator
when ``NUMBA_ENABLE_CUDASIM=1`` was set before numba was first imported.
Without either, :meth:`available` says why and nothing crashes."""

from __future__ import annotations


import glob
import math
import os
import sys

import numpy as np

from ..ir.errors import ProviderUnavailableError
from .base import DeviceBuffer, DeviceId
from ..kernels.target import CUDA
from .registry_provider import RegistryProvider


def _certainly_no_gpu_driver() -> bool:
    """True where no NVIDIA driver can be present: Linux, no simulator asked for, and none of
    the driver's device files (``/dev/nvidia*``, ``/proc/driver/nvidia``, WSL's ``/dev/dxg``).
    There :func:`cuda_status` answers without importing numba.cuda (about 0.4 s)."""
    if not sys.platform.startswith("linux") or os.environ.get("NUMBA_CUDA_DRIVER"):
        return False
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return False
    return not (os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/dxg") or glob.glob("/dev/nvidia*"))


def cuda_status() -> tuple[bool, str]:
    """(available, reason): is there a GPU or the simulator?"""
    if _certainly_no_gpu_driver():
        return False, ("no CUDA GPU found (no NVIDIA driver) and the CUDA simulator is off "
                       "(set NUMBA_ENABLE_CUDASIM=1 before numba is first imported to simulate)")
    try:
        from numba import cuda
    except Exception as e:  # pragma: no cover - numba-cuda missing
        return False, f"numba.cuda cannot be imported: {e}"
    try:
        if cuda.is_available():
            return True, ""
    except Exception as e:  # pragma: no cover
        return False, f"CUDA driver error: {e}"
    return False, ("no CUDA GPU found and the CUDA simulator is off "
                   "(set NUMBA_ENABLE_CUDASIM=1 before numba is first imported to simulate)")


def is_simulator() -> bool:
    from numba import config
    return bool(getattr(config, "ENABLE_CUDASIM", False))


class NumbaCUDAProvider(RegistryProvider):
    """Runs kernels compiled with ``numba.cuda.jit`` (fastmath off)."""

    target = CUDA

    def __init__(self, name: str = "cuda", device: DeviceId | str = "cuda:0"):
        super().__init__()
        self.name = name
        self.device = DeviceId.parse(device)
        self._stream = None

    def available(self) -> tuple[bool, str]:
        return cuda_status()

    @property
    def can_execute(self) -> bool:
        return self.available()[0]

    @property
    def simulated(self) -> bool:
        return is_simulator()

    def _cuda(self):
        ok, why = cuda_status()
        if not ok:
            raise ProviderUnavailableError(f"provider {self.name!r}: {why}")
        from numba import cuda
        return cuda

    def _get_stream(self):
        if self._stream is None:
            self._stream = self._cuda().stream()
        return self._stream

    def allocate(self, shape, dtype) -> DeviceBuffer:
        cuda = self._cuda()
        shape = tuple(int(d) for d in shape)
        arr = cuda.device_array(shape, dtype=np.dtype(dtype))
        buf = DeviceBuffer(self, shape, dtype, arr)
        self._track_alloc(buf.nbytes, buf)
        return buf

    arena_alignment = 256

    def arena_view(self, arena: DeviceBuffer, offset: int, shape, dtype):
        dtype = np.dtype(dtype)
        n = math.prod(shape) * dtype.itemsize
        return arena.data[offset:offset + n].view(dtype).reshape(tuple(shape))

    def free(self, buf: DeviceBuffer) -> None:
        if buf.freed:
            return
        buf.freed = True
        buf.data = None  # numba frees device memory when the last reference goes
        self._track_free(buf.nbytes, buf)

    def copy_from_host(self, array, out=None) -> DeviceBuffer:
        array = np.asarray(array)
        shape = array.shape
        array = np.ascontiguousarray(array).reshape(shape)  # keeps 0-d arrays 0-d
        if out is None:
            out = self.allocate(array.shape, array.dtype)
        if array.size:
            out.data.copy_to_device(array)
        return out

    def copy_to_host(self, buf: DeviceBuffer) -> np.ndarray:
        if buf.nbytes == 0:
            return np.empty(buf.shape, dtype=buf.dtype)
        return buf.data.copy_to_host()

    def copy_from_host_async(self, array, out):
        cuda = self._cuda()
        array = np.asarray(array)
        array = np.ascontiguousarray(array).reshape(array.shape)
        if array.size == 0:
            return None
        stream = self._get_stream()
        out.data.copy_to_device(array, stream=stream)
        ev = cuda.event()
        ev.record(stream)
        return ev

    def copy_device_async(self, src: DeviceBuffer, out: DeviceBuffer):
        if out.nbytes == 0:
            return None
        if src.provider is self or (src.device.type == "cuda" and hasattr(src.data, "copy_to_device")
                                    and not isinstance(src.data, np.ndarray)):
            cuda = self._cuda()
            stream = self._get_stream()
            out.data.copy_to_device(src.data, stream=stream)
            ev = cuda.event()
            ev.record(stream)
            return ev
        return self.copy_from_host_async(src.provider.copy_to_host(src), out)

    def fence(self, event) -> None:
        if event is not None:
            event.synchronize()

    def synchronize(self) -> None:
        if self.available()[0]:
            from numba import cuda
            cuda.synchronize()
