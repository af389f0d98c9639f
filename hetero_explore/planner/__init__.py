"""Placement, convex partitioning, ordering and transfer planning."""

from .core import (Heterogeneous, SingleProvider, classify_placement, guard_heterogeneous_fallback, place,
                   plan)
from .plan import Blocker, ConvexitySplit, Partition, Plan, Transfer

__all__ = ["plan", "place", "classify_placement", "guard_heterogeneous_fallback", "Plan", "Partition",
           "Transfer", "Blocker", "ConvexitySplit", "SingleProvider", "Heterogeneous"]
