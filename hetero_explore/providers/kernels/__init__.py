"""Kernels, each op written once for both targets. Importing this package
fills :data:`registry.REGISTRY`."""

from . import registry  # noqa: F401
from . import elementwise  # noqa: F401

__all__ = ["registry"]
