"""Loading as named passes (onnx-ir's pass style): each pass says what the load must have
established before it runs (``requires``) and what holds after it (``ensures``), does one
thing to the :class:`LoadState`, and says whether it changed anything. :func:`run_passes`
checks the order, times each pass and records what it did (``Graph.info["load_passes"]``).

The default pipeline (:data:`PIPELINE`) is read → check tensors → onnx's checker →
validate → bind → infer → fold → check inference → optimise → build the IR (with its
arrays); :data:`RELOAD` is what a graph rewritten after loading (functions inlined, nodes
expanded into their bodies) goes through again."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

from ..ir.errors import HeteroExploreError
from ..ir.graph import Graph, build_graph, shape_is_static
from .bind import _bind, _check_input_dims, _normalize_declared_dims
from .infer import fill_inference_defaults, infer_checked
from .options import LoadOptions
from .read import _load_external_data, _tensors_to_check, check_tensor, read_model
from .validate import (_run_checker, check_inference_complete, check_inline_size, drop_unused_optional_outputs,
                       validate_structure)


class LoadPassOrderError(HeteroExploreError, RuntimeError):
    """A pipeline runs a pass before what it requires was established (a bug in the pipeline)."""


@dataclass
class LoadState:
    """What the passes of one load work on."""

    source: Any
    """What was given to load: a path, bytes or a ModelProto."""
    options: LoadOptions = field(default_factory=LoadOptions)
    """The load's options."""
    model: onnx.ModelProto | None = None
    """The model as the passes have made it so far."""
    base: Path | None = None
    """The folder external data is read from (None when not loaded from a path)."""
    facts: set = field(default_factory=set)
    """What the passes run so far ensure (``"read"``, ``"inferred"``, ``"folded"`` ...)."""
    folded: list = field(default_factory=list)
    """Names of the nodes folding replaced by constants."""
    info: dict = field(default_factory=dict)
    """What the passes report on the graph (``fold_skipped``, ``folded_bytes`` ...)."""
    optimizations: list = field(default_factory=list)
    """The load-time rewrites applied (dicts; see :mod:`.optimize`)."""
    graph: Graph | None = None
    """The IR, once built."""
    log: list = field(default_factory=list)
    """One entry per pass run: name, seconds, whether it changed anything."""


class LoadPass:
    """One step of loading (subclasses set ``name``, ``requires``, ``ensures`` and ``run``)."""

    name = "pass"
    requires: tuple = ()
    ensures: tuple = ()

    def enabled(self, options: LoadOptions) -> bool:
        """Whether this load runs the pass (an option may turn it off)."""
        return True

    def run(self, state: LoadState) -> bool:
        """Do the pass's work on ``state``; return whether anything changed."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class Read(LoadPass):
    """The model as a fresh ModelProto, and the folder of its external data."""
    name, ensures = "read", ("read",)

    def run(self, state):
        state.model, state.base = read_model(state.source)
        return True


class CheckTensors(LoadPass):
    """Every tensor's data against its declared dims, before and after external data is read."""
    name, requires, ensures = "check-tensors", ("read",), ("tensors-checked",)

    def run(self, state):
        m = state.model
        for t, what in _tensors_to_check(m):
            check_tensor(t, what)
        _load_external_data(m, state.base)
        for t, what in _tensors_to_check(m):  # external data now read: its length is checked too
            if t.data_location != TensorProto.EXTERNAL:
                check_tensor(t, what)
        return False


class Checker(LoadPass):
    """onnx's own checker (``LoadOptions.check``)."""
    name, requires, ensures = "checker", ("tensors-checked",), ("checked",)

    def enabled(self, options):
        return options.check

    def run(self, state):
        _run_checker(state.model)
        return False


class Validate(LoadPass):
    """The structural rules the IR relies on; unused optional outputs dropped; the size of
    inlined functions bounded."""
    name, requires, ensures = "validate", ("tensors-checked",), ("valid",)

    def run(self, state):
        m = state.model
        validate_structure(m)
        before = sum(len(n.output) for n in m.graph.node)
        drop_unused_optional_outputs(m)
        check_inline_size(m, limit=state.options.max_inlined_nodes)
        return sum(len(n.output) for n in m.graph.node) != before


class Bind(LoadPass):
    """Symbolic dims bound from ``input_shapes`` / ``dim_values``; inference defaults filled."""
    name, requires, ensures = "bind", ("valid",), ("bound",)

    def run(self, state):
        m = state.model
        _normalize_declared_dims(m)
        _bind(m, state.options.input_shapes, state.options.dim_values)
        _check_input_dims(m)
        fill_inference_defaults(m)
        return True


class Infer(LoadPass):
    """onnx's shape inference, checked (:func:`.infer.infer_checked`)."""
    name, requires, ensures = "infer", ("bound",), ("inferred",)

    def run(self, state):
        state.model = infer_checked(state.model)
        return True


class CheckInference(LoadPass):
    """No node that inference silently gave up on (:func:`.validate.check_inference_complete`)."""
    name, requires, ensures = "check-inference", ("inferred",), ("inference-complete",)

    def run(self, state):
        check_inference_complete(state.model)
        return False


class Optimize(LoadPass):
    """The load-time rewrites (``LoadOptions.optimize``; :mod:`.optimize`)."""
    name, requires, ensures = "optimize", ("inference-complete",), ("optimized",)

    def enabled(self, options):
        return options.optimize

    def run(self, state):
        from .optimize import optimize_model
        state.model, recs = optimize_model(state.model)
        state.optimizations = [r.to_dict() for r in recs]
        return bool(recs)


class Build(LoadPass):
    """The IR (:class:`~hetero_explore.ir.graph.Graph`) and its integer arrays."""
    name, requires, ensures = "build", ("inference-complete",), ("graph",)

    def run(self, state):
        state.graph = graph_from_model(state.model, state.folded, state.info, state.optimizations)
        return True


def graph_from_model(m: onnx.ModelProto, folded: list[str] | None = None, info: dict | None = None,
                     optimizations: list[dict] | None = None) -> Graph:
    """The IR of an inferred (and maybe folded and optimised) model, with ``symbolic_values``
    filled in and its integer arrays built."""
    g = build_graph(m, folded_nodes=folded or [])
    g.info.update(info or {})
    g.optimizations = list(optimizations or [])
    non_tensor = {vi.name for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)
                  if vi.type.WhichOneof("value") not in (None, "tensor_type")}
    g.symbolic_values = [name for name, v in g.values.items()
                         if v.kind != "initializer" and name not in non_tensor and not shape_is_static(v.shape)]
    # the arrays are part of the loaded graph (immutable from here on): built now from the slots
    # build_graph recorded, so that a first plan costs what a re-plan does
    g.arrays  # noqa: B018
    return g


def run_passes(state: LoadState, passes) -> LoadState:
    """Run ``passes`` in order on ``state`` (those the options disable are skipped); each one's
    ``requires`` must hold before it runs."""
    for p in passes:
        if not p.enabled(state.options):
            continue
        missing = [f for f in p.requires if f not in state.facts]
        if missing:
            raise LoadPassOrderError(f"load pass {p.name!r} requires {missing}, which no earlier pass of "
                                     f"this pipeline ensures ({[q.name for q in passes]})")
        t0 = time.perf_counter()
        changed = p.run(state)
        state.facts.update(p.ensures)
        state.log.append({"pass": p.name, "seconds": time.perf_counter() - t0, "changed": bool(changed)})
    return state
