"""Placement, convex partitioning, ordering and transfer planning."""

from .core import (Heterogeneous, SingleProvider, classify_placement, guard_heterogeneous_fallback, place,
                   plan)
from .plan import Blocker, ConvexitySplit, Partition, Plan, Transfer
from .policies import POLICIES, CostModel, estimate, register_policy
from .ortplan import move_failed, plan_from_ort, to_ort_assignment

__all__ = ["plan", "plan_from_ort", "to_ort_assignment", "move_failed", "place", "classify_placement", "guard_heterogeneous_fallback", "Plan", "Partition",
           "Transfer", "Blocker", "ConvexitySplit", "SingleProvider", "Heterogeneous", "POLICIES",
           "CostModel", "estimate", "register_policy"]
