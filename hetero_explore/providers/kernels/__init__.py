"""Kernels, each op written once for both targets. Importing this package
fills :data:`registry.REGISTRY`."""

from . import registry  # noqa: F401
from . import elementwise  # noqa: F401

__all__ = ["registry"]
from . import reduce  # noqa: F401
from . import nn  # noqa: F401
from . import data  # noqa: F401
