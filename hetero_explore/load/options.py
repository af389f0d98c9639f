"""What a load may do and how much: the options of one load (:class:`LoadOptions`) and the
bounds every load keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..ir.errors import ArgumentTypeError, ModelLoadError

#: the largest dim (and the largest element count of one tensor) a model may declare or infer;
#: 2**40 elements is 4 TiB of float32 -- anything beyond is a corrupt or hostile model
MAX_ELEMENTS = 1 << 40
#: default bound on the node count once every model-local function call is inlined
DEFAULT_MAX_INLINED_NODES = 1 << 20
#: default budget for the values that constant folding may create at load time (bytes)
DEFAULT_FOLD_LIMIT_BYTES = 1 << 30
#: the domains whose operator schemas onnx ships (their nodes are validated against them)
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training")


@dataclass(frozen=True)
class LoadOptions:
    """The options of one load (see :func:`hetero_explore.load.loader.load_model`). A loaded
    graph keeps them (``Graph.info["load_options"]``), so that what re-loads a graph later
    (function inlining, expansion into function bodies) treats it as it was loaded."""

    input_shapes: Mapping[str, tuple] | None = None
    """Graph input name → concrete shape, to bind symbolic dims."""
    dim_values: Mapping[str, int] | None = None
    """Symbolic dim name (``dim_param``) → value, bound wherever it appears."""
    fold_constants: bool = True
    """Fold every node whose inputs are all constant, with the CPU provider's kernels."""
    check: bool = True
    """Run ``onnx.checker`` first (the project's own validation runs always)."""
    fold_limit_bytes: int = DEFAULT_FOLD_LIMIT_BYTES
    """The most bytes that folding may create in all."""
    max_inlined_nodes: int = DEFAULT_MAX_INLINED_NODES
    """Refuse models whose model-local function calls expand to more nodes than this."""
    optimize: bool = True
    """Apply the load-time graph rewrites (:mod:`hetero_explore.load.optimize`)."""
    extra: dict = field(default_factory=dict, compare=False)
    """Options of passes added by callers (free-form, keyed by pass name)."""

    def __post_init__(self):
        for name in ("fold_constants", "check", "optimize"):
            if not isinstance(getattr(self, name), bool):
                raise ArgumentTypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        limit = self.fold_limit_bytes
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ModelLoadError(f"fold_limit_bytes must be a non-negative int, got {limit!r}")
