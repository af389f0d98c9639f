"""Control flow: If, Loop, Scan and SequenceMap, run with their subgraphs.

**Subgraphs are graphs.** A control node's subgraphs (``then_branch`` / ``else_branch``,
``body``) become child graphs (:mod:`hetero_explore.load.subgraphs`): the subgraph's own
inputs, plus one per value it reads from an enclosing scope (those are also the control
node's *implicit inputs* in the parent IR, so the parent's planner sees the edges and plans
their transfers to the control node's provider). The planner plans them as the parent's
children (:mod:`hetero_explore.planner.children`).

**A subgraph service is injected.** This module plans nothing, loads nothing and runs no
node itself: as onnx's reference evaluator hands its control ops the evaluator class, the
executor hands each :class:`ControlKernel` a :class:`SubgraphService`
(:meth:`ControlKernel.bind_service`; the executor's is
:class:`hetero_explore.execution.subgraphs.Subgraphs`). Through it the kernel gets a child
graph for the input types it is given, an executor of that graph -- the same executor as a
top-level plan, over the parent's providers and policy -- and a ledger for its buffers.

**Execution.** A control node runs on the provider it is placed on (its *home*). At run time
each subgraph is specialised to the actual shapes and dtypes of the values it is given, cached
per signature (a Loop whose carried values change shape from one iteration to the next is
planned once more with those dims symbolic and run with run-time shapes; outer-scope
constants up to ``CAPTURED_CONST_MAX_BYTES`` are bound as constants of the child), and run
partition by partition, moving values exactly as its plan says. The condition of an If, the
trip count and condition of a Loop, are read on the host (a D2H copy of a scalar when the
home is a device). Loop-carried values stay on the provider that produces them from one
iteration to the next; only the final values are copied into the Loop's outputs (on its
home). Scan outputs (of Loop and Scan) are written slice by slice into the node's output
buffer. A Scan whose body carries no state and reads its steps' slices through
elementwise ops and reductions only runs that body once over the stacked steps
(:mod:`.scan_vectorise`; the same bits). The subgraphs' buffers are recycled from one
iteration (and run) to the next through a pool the kernel keeps, so that the body's
nodes replay their recorded calls (:class:`~hetero_explore.runner.core.RecyclingLedger`).

The parent's output shapes are those load-time inference computed: a subgraph whose results
do not match them (a Loop whose carried value grows, a branch whose shape differs from the
other's) fails with :class:`ControlFlowError` naming the node, the planned and the actual
shape -- never a wrong buffer.

Each control kernel runs with a ledger of its own: every buffer its subgraphs allocate is
freed when it returns (or fails), and what it allocated on each provider is checked to be
all freed.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Protocol

import numpy as np
import onnx
from onnx import helper

from ...ir.budget import memory_budget
from ...ir.buffers import BufferPool, copy_into, host_array
from ...ir.context import ABSENT
from ...ir import limits as run_limits
from ...ir.errors import ExecutionError, HeteroExploreError, KernelError, MemoryBudgetError, node_label
from ...ir.graph import HOST_DTYPE, np_to_onnx_dtype, outer_names, shape_is_static
from ...ir.units import human_bytes as _human
from ..opdef import OpList, definitions, schema_version
from . import scan_vectorise

OPS = OpList()

CONTROL_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
#: subgraph signatures kept per control kernel
MAX_SPECIALISATIONS = 32
#: a Loop whose carried values change shape from one iteration to the next plans its body once
#: more with the changing dims left symbolic and runs that plan with run-time shapes (instead of
#: one plan per iteration); False: one specialisation per exact shape (tests compare the two)
GENERALISE_LOOPS = True
#: a Scan whose body carries no state and reads its steps' slices through batchable ops only runs
#: its body once over the stacked steps instead of once per step (:mod:`.scan_vectorise`;
#: bitwise the same); False: always step by step (tests compare the two)
VECTORISE_SCANS = True
#: the most bytes the stacked values of one vectorised run of a Scan body may take: more steps
#: than fit run in chunks of steps (each chunk one run of the stacked body)
VECTORISE_MAX_BYTES = 16 << 20
#: ops a subgraph may hold that folding removes before they would have to run
_FOLDED_AWAY = frozenset({"Constant"})
#: ops with host-only kernels that folding removes once the subgraph is specialised to concrete
#: input shapes (torch's exporters put Shape -> Gather into every branch); one whose input's
#: shape stays unknown inside the subgraph (data-dependent) is left to the child plan, which
#: places it on a host provider or fails closed naming the node
_FOLDED_AT_SPECIALISATION = frozenset({"Shape", "Size"})


class SubgraphService(Protocol):
    """What a :class:`ControlKernel` is given to run its subgraphs (see the module docs)."""

    def child_graph(self, parent, sub: onnx.GraphProto, types: dict | None, where: str):
        """The child graph of ``sub`` (a subgraph of a node of ``parent``) for the input types
        ``types`` (name → TypeProto; None: the declared ones), inferred and folded."""

    def executor(self, graph, where: str):
        """An executor of ``graph`` planned over the service's providers: ``run_nested(env,
        ledger, stats)`` runs it on buffers and returns its outputs as buffers; ``graph``,
        ``outputs`` as a plan's. Raises a HeteroExploreError when it cannot be planned or built."""

    def ledger(self, home, pool=None):
        """A ledger (a context manager) over the memory of every provider the subgraphs may use
        and of ``home``; with ``pool`` (a :class:`~hetero_explore.ir.buffers.BufferPool`, kept by
        the kernel across its runs) one that recycles host buffers through it."""


class ControlFlowError(ExecutionError):
    """A control node cannot run as planned (names the node, the subgraph and what differs)."""


# -- child graphs ---------------------------------------------------------------------------
def _buffer_type(buf, declared: onnx.TypeProto | None) -> onnx.TypeProto:
    """The TypeProto of a run-time buffer: a tensor's actual shape and dtype; a host value's
    declared type, with the element shape of a sequence whose elements all share one."""
    if buf.dtype == HOST_DTYPE:
        if declared is None:
            raise KernelError("a host value (sequence/optional/map) without a declared type")
        return _host_type(buf.data[()], declared)
    return helper.make_tensor_type_proto(np_to_onnx_dtype(buf.dtype), list(buf.shape))


def _host_sig(value):
    """What of a host value decides its type in a child graph (:func:`_host_type`): a sequence of
    arrays of one dtype and shape is typed by that element (not by its length: a sequence that
    grows by one element per iteration keeps its signature), any other sequence (empty, mixed)
    by its declaration; an optional's element likewise."""
    if isinstance(value, list):
        if value and all(isinstance(x, np.ndarray) for x in value):
            first = value[0]
            spec = (first.dtype, first.shape)
            if all(x.shape == spec[1] and x.dtype == spec[0] for x in value):
                return ("seq",) + spec
        return ("seq", None)
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return ("tensor", value.dtype, value.shape)
    return (type(value).__name__,)


def _host_type(value, declared: onnx.TypeProto) -> onnx.TypeProto:
    kind = declared.WhichOneof("value")
    if kind == "sequence_type" and isinstance(value, list) and value and all(
            isinstance(x, np.ndarray) for x in value):
        specs = {(x.dtype, x.shape) for x in value}
        if len(specs) == 1:
            dt, shape = specs.pop()
            return helper.make_sequence_type_proto(helper.make_tensor_type_proto(np_to_onnx_dtype(dt), list(shape)))
    if kind == "optional_type" and value is not None:
        inner = declared.optional_type.elem_type
        if isinstance(value, np.ndarray):
            return helper.make_optional_type_proto(
                helper.make_tensor_type_proto(np_to_onnx_dtype(value.dtype), list(value.shape)))
        return helper.make_optional_type_proto(_host_type(value, inner))
    return declared


#: integer inputs up to this many elements may be bound as constants of a subgraph whose shapes
#: depend on them (a Loop body slicing by its iteration number)
VALUE_SPECIALISE_MAX = 64


def _scalar(buf):
    a = np.asarray(host_array(buf))
    if a.size != 1:
        raise KernelError(f"expected a scalar, got shape {a.shape}")
    return a.reshape(()).item()


class _Stats:
    __slots__ = ("runs", "iterations", "transfers", "scalar_reads", "specialisations", "stacked_runs")

    def __init__(self):
        self.runs = self.iterations = self.transfers = self.scalar_reads = self.specialisations = 0
        #: runs of a Scan body over stacked steps (one per chunk; see scan_vectorise)
        self.stacked_runs = 0

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


# -- the control kernel -------------------------------------------------------------------------
class ControlKernel:
    """If / Loop / Scan / SequenceMap on its home provider; see the module docs. It runs on
    buffers (``runs_on_buffers``): the provider that builds it returns it as the node's kernel,
    and the executor gives it its subgraph service (:meth:`bind_service`)."""

    runs_on_buffers = True
    may_alias_input = False
    data_dependent_output = False
    bitwise_portable = True
    replayable = False

    def __init__(self, ctx, target):
        self.ctx = ctx
        self.node = node = ctx.node
        self.graph = ctx.graph
        if self.graph is None:
            raise KernelError(f"node {node.name!r} ({node.op_type}): a control node needs its graph")
        #: the provider it runs on (set by the provider that builds it)
        self.provider = None
        #: what runs its subgraphs (see :class:`SubgraphService`; given by the executor)
        self.service = None
        self.subs = dict(node.subgraphs)
        self.formal = node.formal_inputs
        self.implicit = node.implicit_inputs
        # a subgraph may read any of the node's inputs from the outer scope, a formal one too
        # (torch's exporter has Loop bodies read the constant it also passes as the condition)
        first = {}
        for i, x in enumerate(node.inputs):
            if x:
                first.setdefault(x, i)
        self._first = first
        self.captured = {attr: [(x, first[x]) for x in dict.fromkeys(outer_names(sg)) if x in first]
                         for attr, sg in self.subs.items()}
        self._cache: OrderedDict = OrderedDict()
        #: signatures whose shapes depend on the values of small integer inputs
        self._by_value: set = set()
        #: generalised signatures whose plan could not execute (specialised per shape instead)
        self._not_general: set = set()
        self._dd_message = ""
        self._lock = threading.Lock()
        self.stats = _Stats()
        self._runner = "_run_" + node.op_type
        if node.op_type == "Scan" and schema_version("", "Scan", ctx.opset) == 8:
            self._runner = "_run_Scan8"  # batch axis in front, sequence_lens
        #: why the body cannot run vectorised over the scan axis (None: it can, see
        #: :func:`scan_vectorise.static_check`; the run may still decline a specialisation)
        self.vectorise_declined = vectorise_declined(node, ctx.opset)
        #: per-step signature -> (attr of the stacked body, bytes per step, stacked scan outputs) or None
        self._vec_specs: dict = {}
        self._vec_ids = itertools.count()
        #: host arrays of the subgraphs' freed buffers, reused by later iterations and runs (their
        #: nodes then replay: see runner.BufferPool)
        self._pool = BufferPool()

    def bind_service(self, service: "SubgraphService", home=None) -> None:
        """Run the subgraphs with ``service`` (the executor's: it plans them over the executor's
        providers); ``home`` is the plan's provider the node is placed on (a mask or a virtual
        provider, whose kernels came from another provider)."""
        self.service = service
        if home is not None:
            self.provider = home
        self._cache.clear()
        self._by_value.clear()
        self._not_general.clear()
        self._vec_specs.clear()

    def close(self) -> None:
        """Close the subgraph executors it keeps (their held constants and arenas are freed)."""
        with self._lock:
            kept = list(self._cache.values())
            self._cache.clear()
        self._pool.clear()
        for ex in kept:
            close = getattr(ex, "close", None)
            if close is not None:
                close()

    def _service(self) -> "SubgraphService":
        if self.service is None:
            raise ControlFlowError(
                f"node {self.node.name!r} ({self.node.op_type}) runs its subgraphs through an executor: run "
                "the graph with hetero_explore.execute / execute_reference (a node runner alone cannot)")
        return self.service

    # -- specialisation --------------------------------------------------------------------
    def _where(self, attr):
        return f"node {self.node.name!r} ({self.node.op_type}) subgraph {attr!r}"

    def _signature(self, attr: str, env: dict) -> tuple:
        sig = [attr]
        for n, b in env.items():
            if b.dtype == HOST_DTYPE:
                sig.append((n, "host", _host_sig(b.data[()])))
            else:
                sig.append((n, b.shape, b.dtype))
        return tuple(sig)

    def _executor(self, attr: str, env: dict):
        """The subgraph specialised to the shapes (and, where its shapes depend on them, the values
        of the small integer inputs) it is given; cached per signature."""
        return self._lookup(attr, env)[0]

    def _lookup(self, attr: str, env: dict) -> tuple:
        """(executor, whether it was chosen by the values of small integer inputs, not by the
        shapes alone: a caller that caches executors by shapes must not keep it)."""
        sig = self._signature(attr, env)
        ex = self._cache.get(sig)
        if ex is not None:
            return ex, False
        if sig in self._by_value:  # shapes depend on small integer inputs: specialise on their values
            vals = self._small_ints(env)
            vsig = (sig, tuple((n, a.tobytes()) for n, a in vals.items()))
            ex = self._cache.get(vsig)
            if ex is None:
                ex = self._specialise(attr, env, vals, vsig)
            return ex, True
        try:
            return self._specialise(attr, env, {}, sig), False
        except _DataDependent:
            vals = self._small_ints(env)
            if not vals:
                raise ControlFlowError(self._dd_message) from None
            self._by_value.add(sig)
            return self._lookup(attr, env)

    def _small_ints(self, env: dict) -> dict:
        out = {}
        for n, b in env.items():
            if b.dtype != HOST_DTYPE and b.dtype.kind in "iub" and int(np.prod(b.shape)) <= VALUE_SPECIALISE_MAX:
                if not b.device.is_host:
                    self.stats.scalar_reads += 1
                out[n] = np.array(host_array(b), copy=True)
        return out

    def _specialise(self, attr: str, env: dict, values: dict, key):
        service = self._service()
        sub = self.subs[attr]
        types = self._types(attr, env)
        where = self._where(attr)
        if values:
            sub = _with_constants(sub, values)
            types = {k: v for k, v in types.items() if k not in values}
        try:
            g = service.child_graph(self.graph, sub, types, where=f"{self.node.name}/{attr}")
        except HeteroExploreError as e:
            raise ControlFlowError(str(e)) from e
        if g.symbolic_values and not values:
            # shapes that depend on values inside the subgraph: its node runners compute them at
            # run time (hetero_explore.runner.shapes), one specialisation for every value; only when that
            # plan cannot execute, the small integer inputs are bound to their values instead
            try:
                ex = service.executor(g, where)
            except HeteroExploreError:
                ex = None
            if ex is not None:
                return self._keep(key, ex)
        if g.symbolic_values:
            self._dd_message = (f"{where}: with inputs {_sig_text(env)} the shapes of "
                                f"{g.symbolic_values[:4]} are still unknown (data-dependent) inside "
                                "the subgraph" + (" even with its small integer inputs bound to their values"
                                                  if values else "") + "; such subgraphs are not executed yet")
            if values:
                raise ControlFlowError(self._dd_message)
            raise _DataDependent()
        try:
            ex = service.executor(g, where)
        except ControlFlowError:
            raise
        except HeteroExploreError as e:
            raise ControlFlowError(f"{where}: {e}") from e
        return self._keep(key, ex)

    def _types(self, attr: str, env: dict, free: dict | None = None) -> dict:
        """Input name → TypeProto of the buffers in ``env``; ``free`` (name → axes) leaves those
        dims symbolic (named ``<input>.d<axis>``)."""
        declared = {vi.name: vi.type for vi in self.subs[attr].input}
        types = {}
        for n, b in env.items():
            tp = declared.get(n)
            if tp is None and n in self.graph.values:
                tp = self.graph.values[n].type_proto
            if free and n in free:
                dims = [f"{n}.d{ax}" if ax in free[n] else int(d) for ax, d in enumerate(b.shape)]
                types[n] = helper.make_tensor_type_proto(np_to_onnx_dtype(b.dtype), dims)
            else:
                types[n] = _buffer_type(b, tp)
        return types

    def _general(self, attr: str, env: dict, free: dict, gkey: tuple):
        """The subgraph planned once with the dims in ``free`` (name → axes) left symbolic and
        run with run-time shapes (its node runners compute them, :mod:`hetero_explore.runner.shapes`):
        for a Loop whose carried values change shape every iteration. None when such a plan
        cannot execute (a host-only op on a run-time shape with a device alone, a data-dependent
        shape ...): the caller then specialises per exact shape."""
        service = self._service()
        sig = ("general",) + tuple((n, gkey[n], b.dtype) if n in gkey else e
                                   for n, b, e in zip(env, env.values(), self._signature(attr, env)[1:]))
        ex = self._cache.get(sig)
        if ex is not None or sig in self._not_general:
            return ex
        try:
            g = service.child_graph(self.graph, self.subs[attr], self._types(attr, env, free),
                                    where=f"{self.node.name}/{attr}")
            ex = service.executor(g, self._where(attr))
        except HeteroExploreError:
            self._not_general.add(sig)
            return None
        return self._keep(sig, ex)

    def _keep(self, key, ex):
        with self._lock:
            self._cache[key] = ex
            self.stats.specialisations += 1
            while len(self._cache) > MAX_SPECIALISATIONS:
                self._cache.popitem(last=False)
        return ex

    def _env(self, attr: str, inputs, formal_bufs: dict) -> dict:
        env = dict(formal_bufs)
        for name, i in self.captured[attr]:
            env[name] = inputs[i]
        return env

    # -- running ------------------------------------------------------------------------------
    def run(self, inputs, outputs) -> None:
        """Run the node: ``inputs`` and ``outputs`` are buffers (``outputs`` allocated by the
        runner at the planned shapes). Everything the subgraphs allocate goes through a ledger
        of this run's own, checked to be all freed when it returns."""
        with self._service().ledger(self.provider, pool=self._pool) as ledger:
            consts: dict = {}
            self.stats.runs += 1
            getattr(self, self._runner)(inputs, outputs, ledger, consts)
        ledger.check_leaks()

    def run_allocating(self, inputs, names, ledger) -> list:
        """Run with output shapes the plan could not promise (a carried value that grows, branches
        of different shapes, a run-time trip count): each output is staged on the host as the
        subgraphs produce it, then allocated on the home provider through the caller's
        ``ledger`` at its actual shape (``names``: the node's present outputs, "" for absent
        ones, which come back as the runner's placeholder). The runner checks the shapes against
        what the plan knows of them."""
        pend = [_Pending() if name else ABSENT for name in names]
        self.run(inputs, pend)
        arrays = []
        for name, p in zip(names, pend):
            if not name:
                continue
            if p.array is None:
                raise ControlFlowError(f"node {self.node.name!r} ({self.node.op_type}): output {name!r} was "
                                       "not produced")
            arrays.append(p.array)
        need = sum(a.nbytes for a in arrays)
        budget = memory_budget()
        if ledger.live_bytes + need > budget:
            raise MemoryBudgetError(
                f"node {self.node.name!r} ({self.node.op_type}) would allocate {_human(need)} for its outputs "
                f"(shapes {[a.shape for a in arrays]}, computed by running its subgraphs) with "
                f"{_human(ledger.live_bytes)} live, over the memory budget of {_human(budget)} (raise it with "
                "$HETERO_EXPLORE_MEMORY_BUDGET if the machine has the memory)")
        outs = []
        for p in pend:
            if p is ABSENT:
                outs.append(ABSENT)
                continue
            a = p.array
            buf = ledger.allocate(self.provider, a.shape, a.dtype)
            outs.append(buf)
            if a.dtype == HOST_DTYPE:
                buf.data[()] = a[()]
            else:
                self.provider.copy_from_host(a, buf)
        return outs

    def _read(self, buf):
        d = buf.data
        if isinstance(d, np.ndarray) and d.size == 1:
            return d.item()
        if not buf.device.is_host:
            self.stats.scalar_reads += 1
        return _scalar(buf)

    def _set_scalar(self, buf, value) -> None:
        """Write a scalar into a buffer of the home provider (in place on host memory)."""
        if isinstance(buf.data, np.ndarray):
            buf.data[()] = value
        else:
            self.provider.copy_from_host(np.asarray(value, dtype=buf.dtype).reshape(buf.shape), buf)

    def _host_scalar(self, ledger, value, dtype, shape=()):
        return self._stage(ledger, np.asarray(value, dtype=dtype).reshape(shape))

    def _stage(self, ledger, arr: np.ndarray):
        """A new buffer of the home provider holding a copy of the host array ``arr``."""
        buf = ledger.allocate(self.provider, arr.shape, arr.dtype)
        self.provider.copy_from_host(arr, buf)
        return buf

    def _deliver(self, src, dst, what: str) -> None:
        if isinstance(dst, _Pending):  # shapes left to the run: staged, allocated by run_allocating
            dst.array = np.array(host_array(src), copy=True)
            return
        if src.shape != dst.shape or src.dtype != dst.dtype:
            raise ControlFlowError(
                f"node {self.node.name!r} ({self.node.op_type}): {what} is {src.dtype} {src.shape} at run "
                f"time, but the plan allocated {dst.dtype} {dst.shape} (load-time shape inference); "
                "a declared or inferred shape that does not hold for these inputs")
        copy_into(src, dst)

    def _empty_scans(self, scans, out_names, body_names, attr, env, axis_default) -> None:
        """The shape of pending scan outputs when no iteration ran: the outer graph's shape with
        the scan axis 0, when every other dim is known there; else the body's (inferred for the
        inputs it would have been given), with the scan axis put in front."""
        vals = self.graph.values
        body = None
        for sc, name, bname in zip(scans, out_names, body_names):
            if not sc.pending:
                continue
            v = vals.get(name)
            shape = None if v is None else v.shape
            if shape is not None:
                rank = len(shape)
                ax = sc.axis + rank if sc.axis < 0 else sc.axis
                dims = [0 if a == ax else d for a, d in enumerate(shape)]
                if all(isinstance(d, (int, np.integer)) and d >= 0 for d in dims) and v.dtype is not None:
                    sc.empty = (tuple(int(d) for d in dims), np.dtype(v.dtype))
                    continue
            if env is None:
                continue
            try:
                if body is None:
                    body = self._lookup(attr, env)[0].graph
                bv = body.values[bname]
            except (HeteroExploreError, KeyError):
                continue
            if bv.shape is not None and shape_is_static(bv.shape) and bv.dtype is not None:
                el = [int(d) for d in bv.shape]
                ax = sc.axis + len(el) + 1 if sc.axis < 0 else sc.axis
                sc.empty = (tuple(el[:ax] + [0] + el[ax:]), np.dtype(bv.dtype))

    def _run_If(self, inputs, outputs, ledger, consts):
        attr = "then_branch" if bool(self._read(inputs[0])) else "else_branch"
        env = self._env(attr, inputs, {})
        ex = self._executor(attr, env)
        res = ex.run_nested(env, ledger, self.stats)
        for name, dst, o in zip(ex.outputs, outputs, self.node.outputs):
            if o:
                self._deliver(res[name], dst, f"output {o!r} (from {attr} output {name!r})")

    def _run_Loop(self, inputs, outputs, ledger, consts):
        node, sub = self.node, self.subs["body"]
        f = self.formal
        m_buf = inputs[0] if f and f[0] else None
        c_buf = inputs[1] if len(f) > 1 and f[1] else None
        carried = list(inputs[2:len(f)])
        n_c = len(carried)
        trip = None if m_buf is None else int(self._read(m_buf))
        cond = True if c_buf is None else bool(self._read(c_buf))
        names = [vi.name for vi in sub.input]
        outs = [o.name for o in sub.output]
        n_scan = len(outs) - 1 - n_c
        scans = [_ScanOut(dst, 0) for dst in outputs[n_c:n_c + n_scan]]
        # the iteration number and condition: two scalars on the home provider, rewritten in place
        # every iteration (kernels never write their inputs; a body that passes one through as a
        # carried value gets a copy, below)
        it_buf = self._host_scalar(ledger, 0, np.int64)
        cond_buf = self._host_scalar(ledger, True, np.bool_)
        fixed = {id(it_buf), id(cond_buf)}
        base = self._env("body", inputs, {names[0]: it_buf, names[1]: cond_buf})
        c_names = names[2:]
        # executors by the carried values' (shape, dtype), for this run: the captured values and
        # the two scalars keep theirs, so that is the signature (host values and value-specialised
        # bodies go through the kernel's cache every iteration)
        local: dict = {}
        #: executors planned with the carried dims that changed left symbolic:
        #: (shape pattern per carried value, None for a free dim; dtypes; executor)
        general: list = []
        prev_key = None
        stats = self.stats
        env = base
        cond_name, carried_names = outs[0], outs[1:1 + n_c]
        scan_names = outs[1 + n_c:1 + n_c + len(scans)]
        # host scalars are rewritten in place; device ones by a copy
        it_host = it_buf.data if isinstance(it_buf.data, np.ndarray) else None
        cond_host = cond_buf.data if isinstance(cond_buf.data, np.ndarray) else None
        const_ids: set = set()
        guard, where = run_limits.current(), node_label(node)
        it = 0
        while (trip is None or it < trip) and cond:
            guard.iteration(where, it, trip)
            if it_host is not None:
                it_host[()] = it
            else:
                self._set_scalar(it_buf, it)
            if cond_host is not None:
                cond_host[()] = cond
            else:
                self._set_scalar(cond_buf, cond)
            key = []
            for n_, b in zip(c_names, carried):
                env[n_] = b
                # a host value (a sequence) by what types it in the body, not by its length
                key.append((b.shape, b.dtype) if b.dtype != HOST_DTYPE else (("host", _host_sig(b.data[()])), b.dtype))
            key = tuple(key)
            ex = local.get(key)
            if ex is None and GENERALISE_LOOPS and general:
                ex = _match_general(general, key)
            if ex is None and GENERALISE_LOOPS and prev_key is not None:
                free = _changed_dims(prev_key, key)
                if free and all(b.dtype != HOST_DTYPE for b in carried):
                    gkey = {c_names[j]: tuple(None if ax in axes else d for ax, d in enumerate(key[j][0]))
                            for j, axes in free.items()}
                    ex = self._general("body", env, {c_names[j]: axes for j, axes in free.items()}, gkey)
                    if ex is not None:
                        general.append((tuple(gkey.get(n_, k_[0]) for n_, k_ in zip(c_names, key)),
                                        tuple(k_[1] for k_ in key), ex))
            if ex is None:
                ex, by_value = self._lookup("body", env)
                if not by_value:
                    local[key] = ex
            prev_key = key
            res = ex.run_nested(env, ledger, stats)
            cb = res[cond_name]
            d = cb.data
            cond = bool(d.item()) if isinstance(d, np.ndarray) and d.size == 1 else bool(self._read(cb))
            carried = [res[n] for n in carried_names]
            for j, b in enumerate(carried):
                if id(b) in fixed:  # the iteration number or condition carried out: keep a copy
                    carried[j] = c = ledger.allocate(b.provider, b.shape, b.dtype)
                    copy_into(b, c)
            for k, sc in enumerate(scans):
                sc.write(it, res[scan_names[k]], self, scan_names[k])
            # free what this iteration made, except the carried values and the staged constants
            if len(const_ids) != len(consts):
                const_ids = set(map(id, consts.values()))
            live = ledger.live
            kept = {id(b) for b in carried if id(b) in live}
            if len(live) > len(fixed) + len(const_ids) + len(kept - fixed):
                keep = fixed.union(const_ids, kept)
                for b in [b for k_, b in live.items() if k_ not in keep]:
                    ledger.free(b)
            it += 1
            stats.iterations += 1
        if it == 0 and any(sc.pending for sc in scans):
            for n_, b in zip(c_names, carried):
                env[n_] = b
            self._empty_scans(scans, node.outputs[n_c:], scan_names, "body", env, 0)
        for k, sc in enumerate(scans):
            sc.finish(it, self, f"scan output {node.outputs[n_c + k]!r}")
        for src, dst, o in zip(carried, outputs[:n_c], node.outputs):
            if o:
                self._deliver(src, dst, f"output {o!r} (final loop-carried value)")

    def _run_Scan(self, inputs, outputs, ledger, consts):
        node, sub = self.node, self.subs["body"]
        a = node.attributes
        n_in = len(self.formal)
        m = int(a["num_scan_inputs"])
        n_s = n_in - m
        states = list(inputs[:n_s])
        xs = [host_array(b) for b in inputs[n_s:n_in]]
        axes = list(a.get("scan_input_axes") or [0] * m)
        dirs = list(a.get("scan_input_directions") or [0] * m)
        names = [vi.name for vi in sub.input]
        outs = [o.name for o in sub.output]
        k_out = len(outs) - n_s
        oaxes = list(a.get("scan_output_axes") or [0] * k_out)
        odirs = list(a.get("scan_output_directions") or [0] * k_out)
        axes = [ax + x.ndim if ax < 0 else ax for ax, x in zip(axes, xs)]
        lens = {x.shape[ax] for x, ax in zip(xs, axes)}
        if len(lens) != 1:
            raise ControlFlowError(f"node {node.name!r} (Scan): the scan inputs have different lengths {sorted(lens)}")
        steps = lens.pop() if xs else 0
        scans = [_ScanOut(dst, ax) for dst, ax in zip(outputs[n_s:], oaxes)]
        guard, where = run_limits.current(), node_label(self.node)
        if (VECTORISE_SCANS and self.vectorise_declined is None and steps > 1
                and self._run_Scan_stacked(inputs, xs, axes, steps, scans, ledger, consts, guard, where)):
            steps_run = steps
            steps = 0   # every step ran stacked; the states passed through
        else:
            steps_run = None
        moved = [x if ax == 0 else np.moveaxis(x, ax, 0) for x, ax in zip(xs, axes)]
        s_names, x_names = names[:n_s], names[n_s:n_in]
        env = self._env("body", inputs, dict.fromkeys(names[:n_in]))
        # executors by the states' signature, for this run (the slices and the captured values keep
        # theirs); the slices staged into buffers that the ledger hands out again every step
        local: dict = {}
        const_ids: set = set()
        stats, home = self.stats, self.provider
        for t in range(steps):
            guard.check(where, t)
            key = []
            for n_, b in zip(s_names, states):
                env[n_] = b
                key.append((b.shape, b.dtype) if b.dtype != HOST_DTYPE else (("host", _host_sig(b.data[()])), b.dtype))
            key = tuple(key)
            for j, x in enumerate(moved):
                sl = x[steps - 1 - t if dirs[j] else t]
                buf = ledger.allocate(home, sl.shape, sl.dtype)
                if isinstance(buf.data, np.ndarray):
                    np.copyto(buf.data, sl, casting="no")
                else:
                    home.copy_from_host(np.ascontiguousarray(sl), buf)
                env[x_names[j]] = buf
            ex = local.get(key)
            if ex is None:
                ex, by_value = self._lookup("body", env)
                if not by_value:
                    local[key] = ex
            res = ex.run_nested(env, ledger, stats)
            states = [res[n] for n in outs[:n_s]]
            for k, sc in enumerate(scans):
                sc.write(steps - 1 - t if odirs[k] else t, res[outs[n_s + k]], self, outs[n_s + k])
            # free what this step made, except the states and the staged constants
            if len(const_ids) != len(consts):
                const_ids = set(map(id, consts.values()))
            live = ledger.live
            kept = {id(b) for b in states if id(b) in live}
            if len(live) > len(const_ids) + len(kept):
                keep = const_ids | kept
                for b in [b for k_, b in live.items() if k_ not in keep]:
                    ledger.free(b)
            stats.iterations += 1
        if steps_run is not None:
            steps = steps_run
        if steps == 0 and any(sc.pending for sc in scans):
            self._empty_scans(scans, node.outputs[n_s:], outs[n_s:], "body", None, 0)
        for k, sc in enumerate(scans):
            sc.finish(steps, self, f"scan output {node.outputs[n_s + k]!r}")
        for src, dst, o in zip(states, outputs[:n_s], node.outputs):
            if o:
                self._deliver(src, dst, f"output {o!r} (final state)")

    # -- a Scan body over the stacked steps (see scan_vectorise) ---------------------------------
    def _stacked_spec(self, inputs, xs, axes):
        """(attr, bytes per step, stacked flags of the scan outputs) of the body stacked over the
        steps for these inputs' per-step signature, or None (declined: iterate). Built once per
        signature: the body inferred for one step's types gives the ranks and constants."""
        sub = self.subs["body"]
        names = [vi.name for vi in sub.input]
        n_s = len(self.formal) - len(xs)
        per_step = {}
        for k, b in enumerate(inputs[:n_s]):
            per_step[names[k]] = (b.shape, b.dtype)
        for j, (x, ax) in enumerate(zip(xs, axes)):
            per_step[names[n_s + j]] = (x.shape[:ax] + x.shape[ax + 1:], x.dtype)
        for name, i in self.captured["body"]:
            per_step.setdefault(name, (inputs[i].shape, inputs[i].dtype))
        sig = tuple((n, s, d) for n, (s, d) in per_step.items())
        if sig in self._vec_specs:
            return self._vec_specs[sig]
        spec = None
        if all(d != HOST_DTYPE for _, d in per_step.values()):
            try:
                spec = self._build_stacked(sub, names, n_s, per_step)
            except (scan_vectorise.Declined, HeteroExploreError):
                spec = None
        self._vec_specs[sig] = spec
        return spec

    def _build_stacked(self, sub, names, n_s, per_step):
        types = {n: helper.make_tensor_type_proto(np_to_onnx_dtype(d), list(s)) for n, (s, d) in per_step.items()}
        g1 = self._service().child_graph(self.graph, sub, types, where=f"{self.node.name}/body")
        vals = g1.values

        def rank(name):
            v = vals.get(name)
            return None if v is None or v.shape is None else len(v.shape)

        def const(name):
            return np.asarray(g1.initializer(name)) if name in vals and g1.is_constant(name) else None

        vg, stacked = scan_vectorise.vectorised_body(sub, n_s, self.ctx.opset, rank, const)
        per = 0
        for name in stacked:
            v = vals.get(name)
            if v is None:
                continue   # an Unsqueeze of a stacked value: about its size again, counted below
            if v.dtype is None or not shape_is_static(v.shape) or np.dtype(v.dtype).kind not in "biuf":
                raise scan_vectorise.Declined(f"{name!r} is {v.dtype} {v.shape} per step")
            per += 2 * int(np.prod(v.shape, dtype=np.int64)) * np.dtype(v.dtype).itemsize
        attr = f"body/steps{next(self._vec_ids)}"   # unique even when two runs build at once
        self.subs[attr] = vg
        self.captured[attr] = [(x, self._first[x]) for x in dict.fromkeys(outer_names(vg)) if x in self._first]
        return attr, max(per, 1), [o.name in stacked for o in vg.output]

    def _run_Scan_stacked(self, inputs, xs, axes, steps, scans, ledger, consts, guard, where) -> bool:
        """Run every step at once (in chunks of steps of at most VECTORISE_MAX_BYTES of stacked
        values) through the stacked body, writing the scan outputs; False when this
        specialisation declines (nothing ran then)."""
        spec = self._stacked_spec(inputs, xs, axes)
        if spec is None:
            return False
        attr, per_step, stacked = spec
        sub = self.subs[attr]
        names = [vi.name for vi in sub.input]
        outs = [o.name for o in sub.output]
        n_s = len(names) - len(xs)
        chunk = max(1, min(steps, VECTORISE_MAX_BYTES // per_step))
        moved = [x if ax == 0 else np.moveaxis(x, ax, 0) for x, ax in zip(xs, axes)]
        states = list(inputs[:n_s])
        for c0 in range(0, steps, chunk):
            guard.check(where, c0)
            c1 = min(steps, c0 + chunk)
            formal = dict(zip(names[:n_s], states))
            for j, x in enumerate(moved):
                formal[names[n_s + j]] = self._stage(ledger, np.ascontiguousarray(x[c0:c1]))
            env = self._env(attr, inputs, formal)
            ex = self._executor(attr, env)
            res = ex.run_nested(env, ledger, self.stats)
            self.stats.stacked_runs += 1
            for k, sc in enumerate(scans):
                if stacked[k]:
                    sc.write_block(c0, c1 - c0, res[outs[k]], self, outs[k])
                else:   # the same value at every step
                    for t in range(c0, c1):
                        sc.write(t, res[outs[k]], self, outs[k])
            keep = {id(b) for b in consts.values()}
            for b in [b for k_, b in ledger.live.items() if k_ not in keep]:
                ledger.free(b)
        self.stats.iterations += steps
        return True

    def _run_Scan8(self, inputs, outputs, ledger, consts):
        """Scan-8: every input and output has a batch axis (0) in front, the scan axis is 1, and
        the optional first input ``sequence_lens`` (int64 [batch]) gives each batch entry its
        length. The body runs per batch entry for that entry's length; scan outputs past it are
        zeros (as onnxruntime writes them)."""
        node, sub = self.node, self.subs["body"]
        a = node.attributes
        f = self.formal
        n_in = len(f) - 1
        m = int(a["num_scan_inputs"])
        n_s = n_in - m
        where = f"node {node.name!r} (Scan-8)"
        states0 = [host_array(b) for b in inputs[1:1 + n_s]]
        xs = [host_array(b) for b in inputs[1 + n_s:1 + n_in]]
        dirs = list(a.get("directions") or [0] * m)
        if len(dirs) != m:
            raise ControlFlowError(f"{where}: {len(dirs)} directions for {m} scan inputs")
        shapes = {(x.shape[0], x.shape[1]) if x.ndim >= 2 else None for x in xs}
        if None in shapes or len(shapes) != 1:
            raise ControlFlowError(f"{where}: the scan inputs must share their batch and sequence axes "
                                   f"(0, 1); got shapes {[x.shape for x in xs]}")
        batch, steps = shapes.pop()
        if any(st.ndim < 1 or st.shape[0] != batch for st in states0):
            raise ControlFlowError(f"{where}: the initial states must have the batch axis {batch} in front; "
                                   f"got shapes {[st.shape for st in states0]}")
        if f[0]:
            lens = np.asarray(host_array(inputs[0])).reshape(-1)
            if lens.shape != (batch,) or lens.dtype.kind not in "iu" or (lens < 0).any() or (lens > steps).any():
                raise ControlFlowError(f"{where}: sequence_lens must be {batch} integers in 0..{steps}; got "
                                       f"{lens.dtype} {lens.tolist()}")
            lens = [int(v) for v in lens]
        else:
            lens = [steps] * batch
        names = [vi.name for vi in sub.input]
        outs = [o.name for o in sub.output]
        final = [[None] * batch for _ in range(n_s)]
        scan_rows = [[None] * batch for _ in outs[n_s:]]
        elem = [None] * len(outs[n_s:])  # (shape, dtype) of a scan output's element
        for b in range(batch):
            states = []
            for st in states0:
                buf = ledger.allocate(self.provider, st.shape[1:], st.dtype)
                self.provider.copy_from_host(np.ascontiguousarray(st[b]), buf)
                states.append(buf)
            rows = [[] for _ in outs[n_s:]]
            n = lens[b]
            for t in range(n):
                formal = dict(zip(names[:n_s], states))
                for j, (x, d) in enumerate(zip(xs, dirs)):
                    sl = np.array(x[b, n - 1 - t if d else t], order="C", copy=True)
                    formal[names[n_s + j]] = self._stage(ledger, sl)
                env = self._env("body", inputs, formal)
                ex = self._executor("body", env)
                res = ex.run_nested(env, ledger, self.stats)
                states = [res[k] for k in outs[:n_s]]
                for k, name in enumerate(outs[n_s:]):
                    r = np.array(host_array(res[name]), copy=True)
                    if elem[k] is not None and (r.shape, r.dtype) != elem[k]:
                        raise ControlFlowError(
                            f"{where}: scan output {name!r} is {r.dtype} {r.shape} at batch {b} step {t}, but "
                            f"{elem[k][1]} {elem[k][0]} before; every step must give the same shape")
                    elem[k] = (r.shape, r.dtype)
                    rows[k].append(r)
                keep = {id(x) for x in states} | {id(x) for x in consts.values()}
                for x in [x for k_, x in ledger.live.items() if k_ not in keep]:
                    ledger.free(x)
                self.stats.iterations += 1
            for k, st in enumerate(states):
                final[k][b] = np.array(host_array(st), copy=True)
            for k in range(len(rows)):
                scan_rows[k][b] = rows[k]
        results = [np.stack(v) if batch else np.empty((0,) + st.shape[1:], st.dtype)
                   for v, st in zip(final, states0)]
        for k, name in enumerate(outs[n_s:]):
            if elem[k] is None:  # no step ran in any batch entry: the element shape from the plan
                v = self.graph.values.get(node.outputs[n_s + k])
                shp = None if v is None else v.shape
                if shp is None or not shape_is_static(shp) or v.dtype is None:
                    raise ControlFlowError(f"{where}: scan output {name!r} ran 0 steps and its element shape "
                                           "is not known before the run")
                elem[k] = (tuple(int(d) for d in shp[2:]), np.dtype(v.dtype))
            shp, dt = elem[k]
            arr = np.zeros((batch, steps) + tuple(shp), dt)
            for b, rs in enumerate(scan_rows[k]):
                for t, r in enumerate(rs):
                    arr[b, t] = r
            results.append(arr)
        for arr, dst, o in zip(results, outputs, node.outputs):
            if isinstance(dst, _Pending):
                dst.array = arr
            elif not o or dst.data is None:  # an absent output
                continue
            elif arr.shape != dst.shape or arr.dtype != dst.dtype:
                raise ControlFlowError(
                    f"{where}: output {o!r} is {arr.dtype} {arr.shape} at run time, but the plan allocated "
                    f"{dst.dtype} {dst.shape} (load-time shape inference); the planned shape does not hold")
            else:
                dst.provider.copy_from_host(np.ascontiguousarray(arr), dst)

    def _run_SequenceMap(self, inputs, outputs, ledger, consts):
        node, sub = self.node, self.subs["body"]
        names = [vi.name for vi in sub.input]
        outs = [o.name for o in sub.output]
        vals = [b.data[()] if b.dtype == HOST_DTYPE else b for b in inputs[:len(self.formal)]]
        n = len(vals[0])
        for j, v in enumerate(vals):
            if isinstance(v, list) and len(v) != n:
                raise ControlFlowError(f"node {node.name!r} (SequenceMap): input {j} has {len(v)} elements, "
                                       f"the first sequence {n}")
        results = [[] for _ in outs]
        for i in range(n):
            formal = {}
            for name, v in zip(names, vals):
                if isinstance(v, list):
                    el = np.array(v[i], order="C", copy=True)
                    buf = ledger.allocate(self.provider, el.shape, el.dtype)
                    self.provider.copy_from_host(el, buf)
                    formal[name] = buf
                else:
                    formal[name] = v
            env = self._env("body", inputs, formal)
            ex = self._executor("body", env)
            res = ex.run_nested(env, ledger, self.stats)
            for k, name in enumerate(outs):
                results[k].append(np.array(host_array(res[name]), copy=True))
            keep = {id(b) for b in consts.values()}
            for b in [b for k_, b in ledger.live.items() if k_ not in keep]:
                ledger.free(b)
            self.stats.iterations += 1
        for dst, lst in zip(outputs, results):
            dst.data[()] = lst


def _changed_dims(prev: tuple, key: tuple) -> dict:
    """{carried index: axes} whose dims differ between two iterations' (shape, dtype) keys;
    empty when nothing changed or a rank or dtype did (those are specialised exactly)."""
    out = {}
    for j, ((s0, d0), (s1, d1)) in enumerate(zip(prev, key)):
        if d0 != d1 or len(s0) != len(s1):
            return {}
        axes = frozenset(ax for ax, (a, b) in enumerate(zip(s0, s1)) if a != b)
        if axes:
            out[j] = axes
    return out


def _match_general(general: list, key: tuple):
    for pattern, dtypes, ex in general:
        if all(d == k[1] for d, k in zip(dtypes, key)) and all(
                len(p) == len(k[0]) and all(a is None or a == b for a, b in zip(p, k[0]))
                for p, k in zip(pattern, key)):
            return ex
    return None


class _DataDependent(Exception):
    """The subgraph's shapes depend on the values of its inputs, not only on their shapes."""


def _with_constants(sub: onnx.GraphProto, values: dict) -> onnx.GraphProto:
    """``sub`` with the inputs in ``values`` turned into initializers (they stay named inputs of
    the executor's env, which then goes unused)."""
    from onnx import numpy_helper
    g = onnx.GraphProto()
    g.CopyFrom(sub)
    keep = [vi for vi in g.input if vi.name not in values]
    del g.input[:]
    g.input.extend(keep)
    for n, a in values.items():
        g.initializer.append(numpy_helper.from_array(a, n))
    return g


def _sig_text(env) -> str:
    return ", ".join(f"{n}: {b.dtype} {b.shape}" for n, b in env.items())


class _Pending:
    """An output whose shape the plan could not promise (see :meth:`ControlKernel.run_allocating`):
    the value is staged here, on the host, as the subgraph produces it."""

    __slots__ = ("array",)
    data = None

    def __init__(self):
        self.array = None


class _ScanOut:
    """Writes per-iteration slices into a scan output buffer (through a host staging array
    when the buffer lives on a device), and checks the count at the end. For a pending output
    (shapes left to the run) the slices are kept and stacked at the end: every iteration must
    give the same shape."""

    def __init__(self, dst, axis: int):
        self.dst = dst
        self.pending = isinstance(dst, _Pending)
        self.skip = not self.pending and dst.data is None  # an absent output
        self.parts: list = []
        #: (shape, dtype) of the empty result when no iteration runs (pending outputs)
        self.empty = None
        if self.pending or self.skip:
            self.axis = axis  # normalised in finish (the rank is the slices' + 1)
            self.host = None
        else:
            self.axis = axis + len(dst.shape) if axis < 0 else axis
            self.host = dst.data if isinstance(dst.data, np.ndarray) else np.empty(dst.shape, dst.dtype)

    def write(self, index: int, src, kernel, name: str) -> None:
        self._put(index, 1, src, kernel, name, False)

    def write_block(self, index: int, count: int, src, kernel, name: str) -> None:
        """Iterations ``index .. index + count - 1`` at once: ``src`` holds their slices stacked
        along a leading axis."""
        self._put(index, count, src, kernel, name, True)

    def _put(self, index: int, count: int, src, kernel, name: str, block: bool) -> None:
        if self.skip:
            return
        shape = tuple(src.shape)
        if block and shape[:1] != (count,):
            n = kernel.node
            raise ControlFlowError(f"node {n.name!r} ({n.op_type}): scan output {name!r} of iterations {index} .. "
                                   f"{index + count - 1} is {src.dtype} {shape}, not {count} stacked slices")
        el = shape[1:] if block else shape
        if self.pending:
            if self.parts and (el != self.parts[0][1].shape[1:] or src.dtype != self.parts[0][1].dtype):
                n = kernel.node
                first = self.parts[0][1]
                raise ControlFlowError(
                    f"node {n.name!r} ({n.op_type}): scan output {name!r} of iteration {index} is {src.dtype} "
                    f"{el}, but the first iteration's was {first.dtype} {first.shape[1:]}; every "
                    "iteration's slice of a scan output must have the same shape")
            a = np.array(host_array(src), copy=True)
            self.parts.append((index, a if block else a[None]))
            return
        view = self.host if self.axis == 0 else np.moveaxis(self.host, self.axis, 0)
        if index + count > view.shape[0] or el != view.shape[1:] or src.dtype != self.dst.dtype:
            n = kernel.node
            what = f"scan output {name!r}"
            raise ControlFlowError(
                f"node {n.name!r} ({n.op_type}): {what} of iteration {index} is {src.dtype} {el}, but "
                f"the plan allocated {self.dst.dtype} {self.dst.shape} for all iterations (load-time shape "
                "inference); the planned shape does not hold for these inputs")
        if block:
            view[index:index + count] = host_array(src)
        else:
            view[index] = host_array(src)

    def finish(self, count: int, kernel, what: str) -> None:
        n = kernel.node
        if self.skip:
            return
        if self.pending:
            if not self.parts and self.empty is not None:
                self.dst.array = np.empty(self.empty[0], self.empty[1])
                return
            if not self.parts:
                raise ControlFlowError(
                    f"node {n.name!r} ({n.op_type}): {what} ran 0 iterations and its element shape is not known "
                    "before the run (load-time inference left it open), so its empty result has no shape")
            blocks = [a for _, a in sorted(self.parts, key=lambda t: t[0])]
            rank = blocks[0].ndim
            ax = self.axis + rank if self.axis < 0 else self.axis
            if not 0 <= ax < rank:
                raise ControlFlowError(f"node {n.name!r} ({n.op_type}): {what}: axis {self.axis} is out of "
                                       f"range for rank {rank}")
            self.dst.array = np.ascontiguousarray(np.moveaxis(np.concatenate(blocks, axis=0), 0, ax))
            return
        n_planned = self.dst.shape[self.axis] if self.dst.shape else 0
        if count != n_planned:
            raise ControlFlowError(f"node {n.name!r} ({n.op_type}): {what} has {count} iteration(s) at run "
                                   f"time, but the plan allocated {n_planned} ({self.dst.shape})")
        if self.host is not self.dst.data:
            self.dst.provider.copy_from_host(self.host, self.dst)


# -- op definitions ------------------------------------------------------------------------
def _ops_of(sub: onnx.GraphProto):
    for n in sub.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _ops_of(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _ops_of(g)


def _control_check(ctx, target):
    """Decline host values on device targets, and subgraphs holding ops the target has no
    kernel for (a single-provider run must be able to run its children)."""

    node = ctx.node
    if ctx.graph is None:
        return "the control node's graph is not known"
    if not target.host:
        vals = ctx.graph.values
        for name in list(node.inputs) + list(node.outputs):
            v = vals.get(name) if name else None
            if v is not None and v.is_host_value:
                return f"{name!r} is a {v.type_str}: host values run on the CPU provider only"
    opsets = ctx.graph.opset_imports
    functions = ctx.graph.functions
    for attr, sub in node.subgraphs:
        for n in _ops_of(sub):
            dom = "" if n.domain in ("", "ai.onnx") else n.domain
            if n.op_type in _FOLDED_AWAY or (n.domain, n.op_type) in functions:
                continue
            if n.op_type in _FOLDED_AT_SPECIALISATION and dom == "":
                continue
            ks = [k for k in definitions(dom, n.op_type, target.name) if k.claims(opsets.get(dom, 1))]
            if not ks:
                return (f"its {attr} holds {(dom + '::') if dom else ''}{n.op_type}, which has no "
                        f"{target.name} kernel at opset {opsets.get(dom, 1)}")
    return None


#: reads no shapes (the subgraphs' ops only): runs even when the node's shapes are symbolic
_control_check.shape_free = True


def _static_elements(tp) -> bool:
    if tp is None or tp.WhichOneof("value") != "sequence_type":
        return True
    el = tp.sequence_type.elem_type
    if el.WhichOneof("value") != "tensor_type" or not el.tensor_type.HasField("shape"):
        return False
    return all(d.HasField("dim_value") for d in el.tensor_type.shape.dim)


def vectorise_declined(node, opset: int) -> str | None:
    """Why the Scan ``node`` (an IR node) does not run its body vectorised over its scan axis, or
    None when it does (for inputs whose per-step shapes are known: see :mod:`.scan_vectorise`);
    the placement table says so from this."""
    if node.op_type != "Scan" or (node.domain or "") not in ("", "ai.onnx"):
        return "not a Scan"
    if schema_version("", "Scan", opset) == 8:
        return "Scan-8 (a batch axis in front of the scan axis) iterates per batch entry"
    body = dict(node.subgraphs).get("body")
    if body is None:
        return "no body"
    m = int(node.attributes.get("num_scan_inputs", 0))
    n_s = len(node.formal_inputs) - m
    return scan_vectorise.static_check(node.attributes, body, n_s)


def _build(ctx, target):
    return ControlKernel(ctx, target)


_CONTROL_NOTE = ("children planned over the same providers, specialised per input signature; "
                 "versions after 21 only add element types")
OPS.add("If", _build, since=11, until=25, dtypes=("bool",), check=_control_check, note=_CONTROL_NOTE)
OPS.add("Loop", _build, since=11, until=25, dtypes=(), dtype_input=1 << 30, check=_control_check,
        note=_CONTROL_NOTE)
OPS.add("Scan", _build, since=9, until=25, dtypes=(), dtype_input=1 << 30, check=_control_check,
        note=_CONTROL_NOTE)
OPS.add("Scan", _build, since=8, until=8, dtypes=(), dtype_input=1 << 30, check=_control_check,
        note="Scan-8: batch axis 0 and scan axis 1 on every input and output, sequence_lens per batch "
             "entry (scan outputs past an entry's length are zeros); the body runs per batch entry")
OPS.add("SequenceMap", _build, since=17, until=21, dtypes=(), dtype_input=1 << 30, targets=("cpu",),
        check=_control_check, note="the body run per element on the host provider")


