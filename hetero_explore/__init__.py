"""hetero_explore: explore heterogeneous execution of ONNX models.

Public API::

    load_model, plan, classify_placement, guard_heterogeneous_fallback,
    providers (cpu, cuda, virtual_gpu, VirtualProvider, mask, ...)
"""

from . import providers
from .errors import (ExecutionError, FunctionInliningError, HeteroExploreError, HeterogeneousExecutionUnsupported,
                     InputValidationError, InvalidModelError, KernelError, ModelLoadError, PlanningError,
                     ProviderUnavailableError, ShapeBindingError, UnsupportedNodeError)
from .ir import Graph, Node, Value
from .loader import load_model
from .planner import (Heterogeneous, Plan, SingleProvider, classify_placement, guard_heterogeneous_fallback,
                      plan)
from .providers import VirtualProvider, mask

__version__ = "0.1.0"

__all__ = [
    "load_model", "plan", "classify_placement", "guard_heterogeneous_fallback", "providers",
    "VirtualProvider", "mask", "Graph", "Node", "Value", "Plan", "SingleProvider", "Heterogeneous",
    "HeteroExploreError", "ModelLoadError", "InvalidModelError", "ShapeBindingError", "UnsupportedNodeError",
    "FunctionInliningError", "PlanningError", "HeterogeneousExecutionUnsupported",
    "ProviderUnavailableError", "KernelError", "InputValidationError", "ExecutionError",
]

from .explorer import Explorer, explore  # noqa: E402

__all__ += ["explore", "Explorer"]

from .compare import compare  # noqa: E402
from .executor import RunResult, execute, execute_reference  # noqa: E402

__all__ += ["execute", "execute_reference", "compare", "RunResult"]
