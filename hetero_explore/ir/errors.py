"""Typed errors. Every message says what is wrong and what to do about it."""

from __future__ import annotations


class HeteroExploreError(Exception):
    """Base class of every error this package raises on purpose."""


class ModelLoadError(HeteroExploreError):
    """The model could not be read or is not a valid ONNX model."""


class InvalidModelError(ModelLoadError):
    """onnx.checker (or our own checks) rejected the model."""


class ShapeBindingError(ModelLoadError):
    """An ``input_shapes`` / ``dim_values`` binding does not fit the model."""


class UnsupportedNodeError(HeteroExploreError):
    """No provider in the list supports a node."""

    def __init__(self, message: str, *, node_name: str = "", op_type: str = "",
                 domain: str = "", opset: int | None = None,
                 reasons: dict[str, str] | None = None):
        super().__init__(message)
        self.node_name = node_name
        self.op_type = op_type
        self.domain = domain
        self.opset = opset
        self.reasons = dict(reasons or {})


class FunctionInliningError(HeteroExploreError):
    """A model-local function had to be inlined but cannot be inlined safely."""


class PlanningError(HeteroExploreError):
    """Planning failed for a reason other than an unsupported node."""


class HeterogeneousExecutionUnsupported(HeteroExploreError):
    """The plan can be shown but not executed (fail-closed validation)."""

    def __init__(self, message: str, blockers: list | None = None):
        super().__init__(message)
        self.blockers = list(blockers or [])


class ProviderUnavailableError(HeteroExploreError):
    """A provider cannot run on this machine (no GPU, no simulator, ...)."""


class KernelError(HeteroExploreError):
    """A kernel rejected a node's attributes, dtypes or shapes when it was built."""


class InputValidationError(HeteroExploreError):
    """Inputs passed to execute() do not match the graph's inputs."""


class ExecutionError(HeteroExploreError):
    """Execution failed midway (after validation)."""


class TransferCountMismatch(ExecutionError):
    """The executor performed a different number of transfers than the plan lists."""


class ShapeConflictError(InvalidModelError):
    """A declared value type or shape contradicts what shape inference computes."""


class FunctionExpansionError(FunctionInliningError, InvalidModelError):
    """Model-local functions expand to too many nodes (or recurse) once inlined."""


class UsageError(HeteroExploreError):
    """An API was called with arguments it cannot take (a wrong type, an empty or
    duplicated provider list, an unknown name). Its subclasses also subclass the
    builtin ``TypeError`` / ``ValueError`` so that ``except TypeError`` keeps working."""


class ArgumentTypeError(UsageError, TypeError):
    """An argument has the wrong type (e.g. a Graph where a Plan is wanted)."""


class ArgumentValueError(UsageError, ValueError):
    """An argument has the right type but a value that cannot be used."""


class UnknownProviderError(ArgumentValueError):
    """A provider name that does not resolve (known names: cpu, cuda, gpu)."""


class MemoryBudgetError(HeteroExploreError, MemoryError):
    """Something would allocate more memory than the budget allows; nothing was allocated."""


class OutputWriteError(HeteroExploreError, OSError):
    """A result (a report, an exported file) could not be written where asked."""


class GraphvizNotFoundError(HeteroExploreError, RuntimeError):
    """Graphviz's ``dot`` executable is missing, so a graph cannot be rendered."""


class MissingDependencyError(HeteroExploreError, ImportError):
    """An optional dependency a feature needs is not installed (the message says which extra)."""


class RunBudgetExceeded(ExecutionError):
    """A run went over its budget of loop iterations or seconds (see
    :class:`~hetero_explore.ir.limits.RunLimits`); every buffer it held was freed."""


class RunCancelled(HeteroExploreError):
    """An execution was cancelled (between partitions) before it finished; every buffer it held was freed."""


def node_label(node, index: int | None = None) -> str:
    """How an error names a node: ``node 'name' (OpType)``, or ``node #index (OpType, unnamed)``
    when it has no name (an ``onnx.NodeProto`` or an IR ``Node``; ``index`` is its position in
    the graph's node list, an IR node's own id when not given)."""
    name = getattr(node, "name", "") or ""
    op = getattr(node, "op_type", "") or "?"
    dom = getattr(node, "domain", "") or ""
    op = f"{dom}::{op}" if dom not in ("", "ai.onnx") else op
    if name:
        shown = name if len(name) <= 80 else f"{name[:38]}...{name[-38:]}"
        return f"node {shown!r} ({op})"
    if index is None:
        index = getattr(node, "id", None)
    return f"node #{index} ({op}, unnamed)" if index is not None else f"an unnamed {op} node"
