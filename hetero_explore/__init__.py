"""hetero_explore: explore heterogeneous execution of ONNX models.

Public API::

    explore(model).show()                       # the live app
    load_model, plan, execute, execute_reference, compare
    run_and_compare                             # execute + reference + compare, as the app, CLI and sweep do
    classify_placement, guard_heterogeneous_fallback, random_inputs
    providers (cpu, cuda, virtual_gpu, VirtualProvider, mask, ...)
    sweep, compare_sweeps, save_sweep, load_sweep   # many models × provider lists, on Dask
    plan_from_ort, move_failed                      # ONNX Runtime: what a real session did; around EP failures
"""

from . import providers
from .analysis.check import CheckedRun, run_and_compare
from .analysis.compare import compare
from .ir.errors import (GraphvizNotFoundError, ExecutionError, FunctionInliningError, HeteroExploreError, HeterogeneousExecutionUnsupported,
                     InputValidationError, InvalidModelError, KernelError, MissingDependencyError, ModelLoadError,
                     PlanningError,
                     ProviderUnavailableError, RunBudgetExceeded, RunCancelled, ShapeBindingError, TransferCountMismatch, UnsupportedNodeError)
from .execution.executor import RunResult, execute, execute_reference
from .session.explorer import Explorer, explore
from .execution.inputs import random_inputs
from .ir.limits import RunLimits
from .ir.graph import Graph, Node, Value
from .load.loader import load_model
from .planner import (Heterogeneous, Plan, SingleProvider, classify_placement, guard_heterogeneous_fallback,
                      move_failed, plan, plan_from_ort)
from .providers import VirtualProvider, mask
from .analysis.fleet import compare_sweeps, load_sweep, save_sweep, sweep

from .data import models  # noqa: E402  (generated models: hetero_explore.models.mlp(...))
from . import viz  # noqa: E402,F401  (registers the views in the display registry)
from .ir.about import __version__

__all__ = [
    "explore", "Explorer", "load_model", "plan", "execute", "execute_reference", "compare", "RunResult",
    "run_and_compare", "CheckedRun",
    "classify_placement", "guard_heterogeneous_fallback", "random_inputs", "providers", "VirtualProvider",
    "mask", "Graph", "Node", "Value", "Plan", "SingleProvider", "Heterogeneous",
    "HeteroExploreError", "ModelLoadError", "InvalidModelError", "ShapeBindingError", "UnsupportedNodeError",
    "FunctionInliningError", "PlanningError", "HeterogeneousExecutionUnsupported",
    "ProviderUnavailableError", "KernelError", "InputValidationError", "ExecutionError",
    "TransferCountMismatch", "GraphvizNotFoundError", "MissingDependencyError", "RunCancelled", "RunBudgetExceeded", "RunLimits",
    "sweep", "compare_sweeps", "save_sweep", "load_sweep", "plan_from_ort", "move_failed",
]
