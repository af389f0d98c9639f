"""Moving a value between buffers of any providers.

A buffer is anything with ``provider``, ``data``, ``shape`` and ``dtype`` (a provider's
``DeviceBuffer``, an arena view); host memory holds numpy arrays, a device its own arrays,
and the providers' copy hooks move between them."""

from __future__ import annotations

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
