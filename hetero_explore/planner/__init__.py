"""Placement, convex partitioning, ordering and transfer planning."""

from .core import (Heterogeneous, SingleProvider, classify_placement, guard_heterogeneous_fallback, place,
                   plan)
from .plan import Blocker, ConvexitySplit, Partition, Plan, Transfer
from .policies import POLICIES, CostModel, estimate, register_policy

__all__ = ["plan", "place", "classify_placement", "guard_heterogeneous_fallback", "Plan", "Partition",
           "Transfer", "Blocker", "ConvexitySplit", "SingleProvider", "Heterogeneous", "POLICIES",
           "CostModel", "estimate", "register_policy"]
