"""Numba CPU provider: host memory, ``@njit`` kernels."""

from __future__ import annotations

from .base import DeviceId, HostMemory
from ..kernels.target import CPU
from .registry_provider import RegistryProvider


class NumbaCPUProvider(HostMemory, RegistryProvider):
    """Runs kernels compiled with ``numba.njit`` (no fastmath) on the host."""

    target = CPU

    def __init__(self, name: str = "cpu", device: DeviceId | str = "cpu:0"):
        super().__init__()
        self.name = name
        self.device = DeviceId.parse(device)

    @property
    def can_execute(self) -> bool:
        return True
