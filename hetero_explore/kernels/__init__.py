"""Kernels: each op one definition (:mod:`.opdef`), compiled for every target
(:mod:`.target`); :func:`.registry.build_registry` lists them all.

``target`` is imported first: it keys numba's on-disk cache for the kernel
modules on a hash of their sources before any of them is decorated."""

from . import target  # noqa: F401  (must come first, see above)
from . import registry  # noqa: F401

__all__ = ["registry", "target"]
