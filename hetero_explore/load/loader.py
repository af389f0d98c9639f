"""ONNX → IR: :func:`load_model` runs the load pipeline (:mod:`.passes`): read, check tensors,
onnx's checker, validate, bind symbolic dims, infer shapes (onnx's own, with data propagation,
checked), fold constants (with the CPU provider's kernels, through the node runner), check
inference, optimise, build the IR.

Every size that comes from the model is checked before anything of that size is read or
allocated; what is "static" is what ONNX itself infers."""

from __future__ import annotations

import dataclasses
import gc
from typing import Mapping

import onnx

from ..ir.errors import ArgumentTypeError, ModelLoadError
from ..ir.graph import Graph
from .fold import Fold
from .options import DEFAULT_FOLD_LIMIT_BYTES, DEFAULT_MAX_INLINED_NODES, MAX_ELEMENTS, LoadOptions  # noqa: F401
from .passes import (Bind, Build, CheckInference, Checker, CheckTensors, Infer, LoadState, Optimize, Read,
                     Validate, graph_from_model, run_passes)  # noqa: F401  (graph_from_model: re-exported)

#: the default load: every pass, in this order
PIPELINE = (Read(), CheckTensors(), Checker(), Validate(), Bind(), Infer(), Fold(), CheckInference(), Optimize(),
            Build())
#: a loaded graph rewritten after loading (functions inlined, nodes expanded into their bodies):
#: read again, re-validated, re-inferred and folded as it was loaded; not optimised again (its
#: rewrites were made when it was loaded) and not re-bound (its shapes are bound already)
RELOAD = (Read(), CheckTensors(), Validate(), Bind(), Infer(), Fold(), CheckInference(), Build())
#: loads of at least this many nodes are followed by one collection (see :func:`load_model`)
COLLECT_AFTER_NODES = 20_000


def load_model(model, input_shapes: Mapping[str, tuple] | None = None,
               dim_values: Mapping[str, int] | None = None, *, fold_constants: bool = True,
               check: bool = True, fold_limit_bytes: int = DEFAULT_FOLD_LIMIT_BYTES,
               max_inlined_nodes: int = DEFAULT_MAX_INLINED_NODES, optimize: bool = True,
               options: LoadOptions | None = None) -> Graph:
    """Load an ONNX model into the IR.

    Args:
        model: a path (a regular file), an ``onnx.ModelProto`` or serialized bytes.
        input_shapes: graph input name → concrete shape, to bind symbolic dims (declared
            ``-1`` / ``0`` input dims are symbolic too, named ``"<input>:<axis>"``).
        dim_values: symbolic dim name (``dim_param``) → value, bound wherever it appears.
        fold_constants: fold every node whose inputs are all constant, computed by the
            CPU provider's kernels (see :mod:`hetero_explore.load.fold`); folded node names are
            listed on ``Graph.folded_nodes``, nodes left unfolded and why on
            ``Graph.info["fold_skipped"]``.
        check: run ``onnx.checker`` first. The project's own validation (unique producers,
            attribute names and types against the op schemas, IR version, tensor sizes,
            shape inference errors, declared shapes that contradict inference) runs always.
        fold_limit_bytes: the most bytes that folding may create in all; a node whose
            outputs would exceed the rest of the budget is left unfolded (checked before
            anything is computed).
        max_inlined_nodes: refuse models whose model-local function calls expand to more
            nodes than this.
        optimize: after folding, apply the load-time graph rewrites of
            :mod:`hetero_explore.load.optimize` (Identity/Dropout elimination, Conv+BatchNormalization
            folding, MatMul+Add → Gemm where bitwise exact); what was applied is listed on
            ``Graph.optimizations``. ``optimize=False`` keeps the graph as it was written.
        options: all of the above as one :class:`~.options.LoadOptions` (the keyword arguments
            are then ignored).

    Values still symbolic afterwards are listed on ``Graph.symbolic_values``; the options and
    each pass's time are on ``Graph.info["load_options"]`` and ``Graph.info["load_passes"]``.
    """
    if options is None:
        options = LoadOptions(input_shapes=input_shapes, dim_values=dim_values, fold_constants=fold_constants,
                              check=check, fold_limit_bytes=fold_limit_bytes,
                              max_inlined_nodes=max_inlined_nodes, optimize=optimize)
    elif not isinstance(options, LoadOptions):
        raise ArgumentTypeError(f"options must be a LoadOptions, got {type(options).__name__}")
    return _run(LoadState(model, options), PIPELINE)


def reload(model: onnx.ModelProto, like: Graph) -> Graph:
    """``model`` (a rewrite of the loaded graph ``like``) through :data:`RELOAD`, with the
    options ``like`` was loaded with."""
    base = like.info.get("load_options") or LoadOptions()
    options = dataclasses.replace(base, check=False, optimize=False, input_shapes=None, dim_values=None)
    return _run(LoadState(model, options), RELOAD)


def _run(state: LoadState, passes) -> Graph:
    # a load allocates millions of long-lived objects for a large model; the cyclic collector
    # would traverse them all again and again while they are made (a sixth of a 10^5-node
    # load), then once more in whatever runs next (the first plan). It is paused while
    # loading, and a large load is collected once here instead.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            run_passes(state, passes)
        except MemoryError as e:
            raise ModelLoadError(f"ran out of memory while loading the model ({e or 'no detail'}); "
                                 "the model may be too large for this machine") from None
    finally:
        if was_enabled:
            gc.enable()
    g = state.graph
    g.info["load_options"] = state.options
    g.info["load_passes"] = list(state.log)
    if was_enabled and len(g.nodes) >= COLLECT_AFTER_NODES:
        gc.collect()
    return g


def prepare_model(model, input_shapes: Mapping[str, tuple] | None = None,
                  dim_values: Mapping[str, int] | None = None, *, check: bool = True,
                  max_inlined_nodes: int = DEFAULT_MAX_INLINED_NODES) -> onnx.ModelProto:
    """Read, validate, bind and infer: the checked, inferred ``ModelProto`` (not folded)."""
    options = LoadOptions(input_shapes=input_shapes, dim_values=dim_values, check=check,
                          max_inlined_nodes=max_inlined_nodes)
    state = run_passes(LoadState(model, options), PIPELINE[:PIPELINE.index(_INFER) + 1])
    return state.model


_INFER = next(p for p in PIPELINE if p.name == "infer")


def __getattr__(name: str):
    # FOLDABLE_OPS (op types constant folding can remove) comes from the CPU provider's op
    # table: computed when first asked for
    if name == "FOLDABLE_OPS":
        from .fold import foldable_op_types

        return foldable_op_types()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
