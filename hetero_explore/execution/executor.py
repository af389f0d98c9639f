"""Execution: run a plan's partitions on their providers, moving boundary
values exactly as planned; run a whole graph on one provider for reference.

Two layers:

* :class:`~hetero_explore.runner.core.NodeRunner` runs a set of nodes (one
  partition, or a whole graph) on one provider: every kernel is built when it
  is created, each input is checked against the shape and dtype its kernel was
  built for, intermediates live in the provider's arena at offsets laid out
  by lifetime (nodes whose shapes are computed at run time allocate theirs per run and
  free them right after their last consumer inside the set).
* :class:`HeterogeneousExecutor` runs a :class:`~hetero_explore.planner.Plan`:
  one node runner per partition (or, for a provider that runs whole partitions --
  ONNX Runtime's EPs -- the provider's own partition runner), in the plan's order. Each
  boundary value has **one authoritative allocation**, owned by the provider
  of its producing partition; a copy on another provider exists only for a
  transfer of the plan, is made right before its first consuming partition
  (H2D and D2D through the destination's async copy and a fence; D2H through
  the source's copy to host) and released after the last one. Graph inputs
  are staged by each consuming partition on its own provider at every run;
  initializers (constants) are staged once per (value, provider) when the
  executor is built and held until :meth:`HeterogeneousExecutor.close` (or
  until the executor is garbage-collected). Neither is a transfer.

Everything that could stop a run is checked when the executor is created,
before anything runs: execution blockers of the plan, providers that cannot
execute here, every kernel of every partition (a node whose output shapes are
computed at run time: its capability; its kernel is built for the actual
shapes when it runs), kernels that may return a view at a partition boundary,
and the plan's transfers against what the partitions read. Every buffer a run allocates is
freed when the run ends, successfully or not, and what the run allocated on
each provider (counted by a meter of the run's thread, see
:class:`~hetero_explore.runner.core.Ledger`) is checked to be all freed (the
constants the executor holds are not the run's: they were live before it
started; :meth:`~HeterogeneousExecutor.close` brings the providers' counters
back to where they were before the executor was built).

Threads: one executor (or one plan through :func:`execute`) may run in several
threads at once. Each run has its own ledger, meters, events and buffers; the
providers' shared counters are updated under a lock; the executor's held
constants are only read (do not :meth:`~HeterogeneousExecutor.close` it while
runs are in flight). A run keeps private read-only copies of its inputs, so a
caller reusing its input buffers changes neither ``RunResult.inputs`` nor
what ``rerun`` and ``compare(..., blame=True)`` recompute.

Kernels never write into their inputs. Staged constants are shared by every
run, so on host providers their arrays are marked read-only: a kernel that
writes into one fails loudly instead of corrupting the next run.

The memory plan: every partition's runner lays out its intermediates in an
arena by lifetime when it is built (see :mod:`hetero_explore.runner.core`); the
executor sizes one arena per memory owner (provider) as the largest of its
partitions' arenas (partitions run one after another and no arena value
crosses a partition, so they share it) and binds every runner to it once
(a *program*: prebuilt views and kernel calls, the held constants bound in).
With ``keep_constants`` one set of arenas is allocated with the constants when
the executor is built and held like them: a run takes it and gives it back
when it ends; a run that finds it in use by another thread's run allocates a
set of its own through its ledger (freed with it, counted in its
``arena_allocations``); :meth:`~HeterogeneousExecutor.close` frees the held
set. The one-shot :func:`execute` allocates its arenas through the run's
ledger. Graph outputs and values crossing partitions are never in an
arena (each run allocates them), so what a run returns never aliases another
run's memory. ``RunResult.peak_bytes`` counts the arenas (live for the whole
run) plus the run's own allocations; ``RunResult.arena_bytes`` says how much
of it the plan laid out.

Compile time: numba compiles a kernel the first time it is launched with a
signature that is neither compiled nor in its on-disk cache. The time spent in
such compilations during a run is measured (numba's ``numba:compile`` event)
and reported as ``RunResult.compile_seconds`` and per partition as
``Event.compile_s``; it is excluded from ``Event.seconds`` and
``RunResult.wall_seconds``. ``run(..., progress=callback)`` calls
``callback("compiling kernels (k/n)")`` when compilation ``k`` starts (``n``:
the plan's nodes, raised to ``k`` when one node compiles several functions).

Functions:

* :func:`execute` — ``execute(plan, inputs) -> RunResult``.
* :func:`execute_reference` — the whole graph on one provider, same result type.
* :func:`partition_model` — a partition as a standalone ONNX model.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import limits as run_limits
from ..ir.errors import (ExecutionError, HeteroExploreError, HeterogeneousExecutionUnsupported,
                     ProviderUnavailableError, TransferCountMismatch)
from ..planner import Plan, guard_heterogeneous_fallback
from ..providers import resolve
from .inputs import exact_feeds, input_specs, validate_inputs
from ..ir.buffers import copy_into
from ..kernels.host.sequences import host_outputs
from ..runner.core import AllocationLeak, Ledger, NodeExecutionError, NodeRunner, ShapeMismatchError, memory_owners
from .result import Event, Release, RunResult
from .subgraphs import Subgraphs

__all__ = ["execute", "execute_reference", "partition_model", "validate_inputs", "RunResult", "Event",
           "Release", "HeterogeneousExecutor", "NodeExecutionError", "ShapeMismatchError", "AllocationLeak"]


def _private_copies(feeds: dict) -> dict:
    """Read-only copies of the validated inputs: a caller who reuses its buffers cannot
    change what a run keeps (``RunResult.inputs``, used by ``rerun`` and blame)."""
    out = {}
    for name, a in feeds.items():
        c = np.array(a, copy=True, order="C")
        c.flags.writeable = False
        out[name] = c
    return out


@dataclass
class _Sched:
    stage: list = field(default_factory=list)          # graph inputs to stage at every run
    consts: list = field(default_factory=list)         # initializers (held by the executor, or staged per run)
    local: list = field(default_factory=list)          # values from the same provider
    remote: list = field(default_factory=list)         # (value, transfer index)
    transfers_in: list = field(default_factory=list)   # transfer indices to perform before
    readback: list = field(default_factory=list)       # graph outputs produced here
    release_auth: list = field(default_factory=list)   # (value, Release): authoritative buffers to free after
    release_real: list = field(default_factory=list)   # (transfer index, Release): realisations to free after
    device: str = ""                                   # the provider's device, for events
    sync: bool = False                                 # synchronize the provider after the partition


def _read_only(buf) -> None:
    """Mark a host buffer's array read-only (device arrays have no such flag)."""
    if isinstance(buf.data, np.ndarray):
        buf.data.flags.writeable = False


def _free_constants(held: dict, arenas: list | None = None, pool: list | None = None) -> None:
    """Free the constants and arenas an executor holds (also its garbage-collection finalizer:
    it must not refer to the executor)."""
    bufs = list(held.values()) + list(arenas or ())
    held.clear()
    if arenas:
        arenas.clear()
    if pool:
        pool.clear()
    for buf in bufs:
        buf.provider.free(buf)


class _CompileWatch:
    """Kernel compilation seen by one thread's run (see the module docs)."""

    __slots__ = ("seconds", "count", "total", "depth", "t0", "progress")

    def __init__(self, total: int, progress):
        self.seconds = 0.0
        self.count = 0
        self.total = total
        self.depth = 0
        self.t0 = 0.0
        self.progress = progress


_watch = threading.local()
_listener_lock = threading.Lock()
_listener_installed = False


def _install_compile_listener() -> None:
    """Listen to numba's ``numba:compile`` events once per process (a no-op without numba)."""
    global _listener_installed
    if _listener_installed:
        return
    with _listener_lock:
        if _listener_installed:
            return
        try:
            from numba.core import event as nev
        except Exception:  # pragma: no cover - numba is a dependency
            _listener_installed = True
            return

        class Listener(nev.Listener):
            def on_start(self, event):
                w = getattr(_watch, "w", None)
                if w is None:
                    return
                w.depth += 1
                if w.depth == 1:
                    w.count += 1
                    if w.progress is not None:
                        w.progress(f"compiling kernels ({w.count}/{max(w.total, w.count)})")
                    w.t0 = time.perf_counter()

            def on_end(self, event):
                w = getattr(_watch, "w", None)
                if w is None or w.depth == 0:
                    return
                w.depth -= 1
                if w.depth == 0:
                    w.seconds += time.perf_counter() - w.t0

        nev.register("numba:compile", Listener())
        _listener_installed = True


class HeterogeneousExecutor:
    """Validates a plan, builds every kernel once and stages every initializer
    once; :meth:`run` executes it.

    Create one to run the same plan many times (``execute`` builds a new one
    each call). With ``keep_constants`` (the default) the initializers each
    partition reads are copied onto its provider here, once per (value,
    provider), and shared by every run until :meth:`close` (or garbage
    collection) frees them; use the executor as a context manager to close it.
    With ``keep_constants=False``, and after :meth:`close`, each run stages
    them itself and frees them when the partition ends (what the one-shot
    :func:`execute` does: nothing outlives its run)."""

    def __init__(self, plan: Plan, *, kind: str = "heterogeneous", keep_constants: bool = True,
                 nested: bool = False, where: str = ""):
        if not isinstance(plan, Plan):
            from ..ir.errors import ArgumentTypeError
            raise ArgumentTypeError(f"expected a Plan (from hetero_explore.plan(graph, providers)), got "
                            f"{type(plan).__name__}; to run a graph on one provider use execute_reference()")
        self.plan = plan
        self.kind = kind
        #: runs as a subgraph of a control node (:meth:`run_nested`); ``where`` names it in errors
        self.nested = nested
        self.where = where or plan.graph.name
        graph = plan.graph
        guard_heterogeneous_fallback(plan)  # execution blockers fail closed
        #: the graph inputs' dtypes and shapes: a run's inputs in the common case are checked quickly
        self._input_specs = input_specs(graph)
        #: some graph output is a sequence, map or optional (returned as a Python value)
        self._host_outputs = any(graph.values[n].is_host_value for n in graph.outputs if n in graph.values)
        used = list(dict.fromkeys(p.provider_index for p in plan.partitions))
        for i in used:
            p = plan.providers[i]
            ok, why = p.available()
            if not ok or not p.can_execute:
                raise ProviderUnavailableError(f"provider {p.name!r} ({p.device}) cannot execute here: "
                                               f"{why or 'it only plans (give it kernels to execute)'}")
        # every kernel of the plan, before anything runs
        self.parts = [_part_runner(graph, plan.providers[p.provider_index], p) for p in plan.partitions]
        # control flow: its kernels run their subgraphs with this plan's providers and policy,
        # through executors like this one (the subgraph service is injected, see .subgraphs)
        subgraphs = None
        for r in self.parts:
            for st in getattr(r, "steps", ()):
                if hasattr(st.kernel, "bind_service"):
                    if subgraphs is None:
                        subgraphs = Subgraphs(plan.providers, plan.policy, HeterogeneousExecutor,
                                              hold=keep_constants)
                    st.kernel.bind_service(subgraphs, home=r.provider)
        self._check_boundaries()
        self._schedule()
        self.owners = memory_owners([plan.providers[i] for i in used])
        # the memory plan: one arena per memory owner, as large as its largest partition's
        from ..providers.virtual import unmask
        self._owner_of = [id(unmask(ex.provider)) for ex in self.parts]
        sizes: dict[int, int] = {}
        for ex, oid in zip(self.parts, self._owner_of):
            if ex.arena_size:
                sizes[oid] = max(sizes.get(oid, 0), ex.arena_size)
        self._arena_sizes = [(o, sizes[id(o)]) for o in self.owners if id(o) in sizes]
        self._arena_bytes = None
        #: what a nested run reads of the plan, made by its first (see _run_nested)
        self._nest = None
        #: free program sets (one per concurrent run), and every arena they hold
        self._pool: list = []
        self._arenas: list = []
        self._pool_lock = threading.Lock()
        #: (initializer, provider index) → the buffer every run reads; empty when not kept
        self._constants: dict[tuple[str, int], Any] = {}
        self._constant_bytes = None
        self._kept = False
        self._finalizer = None
        if keep_constants:
            self._stage_constants()

    @property
    def graph(self):
        """The plan's graph."""
        return self.plan.graph

    @property
    def inputs(self) -> tuple:
        """The graph's input names."""
        return tuple(self.plan.graph.inputs)

    @property
    def outputs(self) -> tuple:
        """The graph's output names, in order."""
        return tuple(self.plan.graph.outputs)

    # -- constants held across runs ----------------------------------------------------
    def _stage_constants(self) -> None:
        plan, graph = self.plan, self.plan.graph
        held = self._constants
        try:
            for part, s in zip(plan.partitions, self.sched):
                prov = plan.providers[part.provider_index]
                for name in s.consts:
                    key = (name, part.provider_index)
                    if key in held:
                        continue
                    arr = graph.initializer(name)
                    buf = prov.allocate(arr.shape, arr.dtype)
                    held[key] = buf
                    prov.copy_from_host(arr, buf)
                    _read_only(buf)
        except HeteroExploreError:
            _free_constants(held)
            raise
        except Exception as e:
            _free_constants(held)
            raise ExecutionError(f"staging initializer {name!r} on provider {prov.name!r} ({prov.device}) for "
                                 f"partition {part.id} failed: {type(e).__name__}: {e}") from e
        try:   # the first set of arenas and programs (more only if runs overlap, see _take_programs)
            self._pool.append(self._programs(None))
        except BaseException:
            _free_constants(held, self._arenas, self._pool)
            raise
        self._kept = True
        self._finalizer = weakref.finalize(self, _free_constants, held, self._arenas, self._pool)
        self._finalizer.atexit = False  # at exit the process releases everything anyway

    @property
    def holds_constants(self) -> bool:
        """True while the executor holds staged initializers (until :meth:`close`)."""
        return self._kept

    @property
    def constant_bytes(self) -> dict[str, int]:
        """Device → bytes of the initializers this executor holds."""
        key = len(self._constants)
        if self._constant_bytes is None or self._constant_bytes[0] != key:
            out: dict[str, int] = {}
            for buf in self._constants.values():
                dev = str(buf.device)
                out[dev] = out.get(dev, 0) + buf.nbytes
            self._constant_bytes = (key, out)
        return dict(self._constant_bytes[1])

    @property
    def arena_bytes(self) -> dict[str, int]:
        """Device → bytes of one run's arenas (the memory plan; a run holds them throughout)."""
        if self._arena_bytes is None:
            out: dict[str, int] = {}
            for o, n in self._arena_sizes:
                out[str(o.device)] = out.get(str(o.device), 0) + n
            self._arena_bytes = out
        return dict(self._arena_bytes)

    @property
    def held_arenas(self) -> int:
        """Arena allocations the executor holds (one per provider with an arena; 0 after close)."""
        return len(self._arenas)

    def _take_programs(self):
        """A free program set from the pool, or None when every set is in use by another run."""
        with self._pool_lock:
            return self._pool.pop() if self._pool else None

    def _programs(self, ledger: Ledger | None):
        """One program per partition, bound to a new set of arenas: held by the executor
        (``ledger`` None; also bound to its held constants) or allocated through ``ledger``
        (freed with the run)."""
        arenas = {}
        try:
            for o, n in self._arena_sizes:
                arenas[id(o)] = ledger.allocate(o, (n,), np.uint8) if ledger is not None else o.allocate((n,), np.uint8)
                if ledger is None:
                    with self._pool_lock:
                        self._arenas.append(arenas[id(o)])
        except HeteroExploreError:
            raise
        except Exception as e:
            raise ExecutionError(f"allocating the memory plan's arena(s) ({self.arena_bytes} bytes) failed: "
                                 f"{type(e).__name__}: {e}") from e
        held = self._constants if ledger is None else {}
        # held programs run many times: they record and replay (see runner.Program); a run's own do
        # not; a subgraph's also replay nodes on the buffers its control kernel's pool hands out
        # again (runner.BufferPool, NodeRunner.bind's keyed)
        progs = []
        for ex, oid, part, s in zip(self.parts, self._owner_of, self.plan.partitions, self.sched):
            kw = {"keyed": True} if self.nested and ledger is None and isinstance(ex, NodeRunner) else {}
            progs.append(ex.bind(arenas.get(oid), {n: held[(n, part.provider_index)] for n in s.consts
                                                   if (n, part.provider_index) in held}, record=ledger is None, **kw))
        return progs

    def close(self) -> None:
        """Free the staged initializers and the held arenas, and close the executors of the
        subgraphs its control kernels keep (idempotent). Later runs stage them per run."""
        for r in self.parts:
            for st in getattr(r, "steps", ()):
                if hasattr(st.kernel, "bind_service"):
                    st.kernel.close()
        if self._finalizer is not None:
            self._finalizer()  # calls _free_constants once, then detaches
            self._finalizer = None
        self._kept = False

    def __enter__(self) -> "HeterogeneousExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_boundaries(self) -> None:
        plan, vals = self.plan, self.plan.graph.values
        problems = []
        for part, ex in zip(plan.partitions, self.parts):
            members = set(part.node_ids)
            crossing = {o for o in part.outputs if any(c not in members for c in vals[o].consumers)}
            for st in ex.steps:
                # data-dependent output sizes may cross: the runner computes them before it
                # allocates and transfers copy the buffer's actual shape
                k = st.kernel if st.kernel is not None else ex.provider
                hit = [o for o in st.outputs if o in crossing]
                if not hit:
                    continue
                if getattr(k, "may_alias_input", False):
                    problems.append(f"node {st.node.name!r} ({st.node.op_type}) on {ex.provider.name} may "
                                    f"return a view of its input, and its output {hit[0]!r} crosses from "
                                    f"partition {part.id} to another partition")
        if problems:
            raise HeterogeneousExecutionUnsupported(
                "the heterogeneous executor cannot honour these partition boundaries:\n  - "
                + "\n  - ".join(problems) + "\nplace the node together with its consumers (mask the op on the "
                "other providers) or run the model on one provider")

    def _schedule(self) -> None:
        plan = self.plan
        graph = plan.graph
        vals = graph.values
        index_of = {p.name: i for i, p in enumerate(plan.providers)}
        tindex: dict[tuple[str, int], int] = {}
        for ti, t in enumerate(plan.transfers):
            key = (t.value, index_of.get(t.dst_provider, -1))
            if key in tindex:
                raise TransferCountMismatch(f"the plan lists the transfer of {t.value!r} to {t.dst_provider!r} "
                                            "twice; transfers are one per (value, destination): re-plan")
            tindex[key] = ti
        sched = [_Sched() for _ in plan.partitions]
        graph_inputs = set(graph.inputs)
        last_auth: dict[str, int] = {}
        first_use: dict[int, int] = {}
        last_use: dict[int, int] = {}
        for part in plan.partitions:
            s = sched[part.id]
            for name in part.inputs:
                v = vals[name]
                if v.producer is None:
                    if name not in graph_inputs and graph.is_constant(name):
                        s.consts.append(name)
                    else:
                        s.stage.append(name)
                    continue
                src = plan.partitions[plan.node_partition[v.producer]]
                if src.provider_index == part.provider_index:
                    s.local.append(name)
                    last_auth[name] = max(last_auth.get(name, src.id), part.id)
                    continue
                ti = tindex.get((name, part.provider_index))
                dst_name = plan.providers[part.provider_index].name
                if ti is None:
                    raise TransferCountMismatch(
                        f"partition {part.id} on {dst_name!r} reads {name!r} from partition {src.id} on "
                        f"{src.provider!r}, but the plan lists no transfer for it; the plan is inconsistent: "
                        "re-plan")
                if plan.transfers[ti].src_provider != src.provider:
                    raise TransferCountMismatch(
                        f"the plan moves {name!r} from {plan.transfers[ti].src_provider!r}, but partition "
                        f"{src.id} on {src.provider!r} produces it: re-plan")
                s.remote.append((name, ti))
                first_use.setdefault(ti, part.id)
                last_use[ti] = part.id
        unused = [plan.transfers[ti] for ti in range(len(plan.transfers)) if ti not in first_use]
        if unused:
            raise TransferCountMismatch(
                f"the plan lists {len(plan.transfers)} transfer(s) but the partitions read only "
                f"{len(first_use)}; unused: " + ", ".join(f"{t.value!r} → {t.dst_provider!r}" for t in unused))
        for ti in sorted(first_use):
            t = plan.transfers[ti]
            sched[first_use[ti]].transfers_in.append(ti)
            sched[last_use[ti]].release_real.append((ti, Release(t.value, t.dst_provider, last_use[ti],
                                                                 "transfer")))
            name = t.value
            src_pid = plan.node_partition[vals[name].producer]
            last_auth[name] = max(last_auth.get(name, src_pid), first_use[ti])
        graph_outputs = set(graph.outputs)
        for part in plan.partitions:
            prov = plan.providers[part.provider_index]
            sched[part.id].device = str(prov.device)
            sched[part.id].sync = not prov.device.is_host
            for o in part.outputs:
                last = last_auth.get(o, part.id)
                sched[last].release_auth.append((o, Release(o, part.provider, last, "authoritative")))
                if o in graph_outputs:
                    sched[part.id].readback.append(o)
        self.sched = sched
        self.copies = [(plan.providers[index_of[t.src_provider]], plan.providers[index_of[t.dst_provider]])
                       for t in plan.transfers]

    def _copy(self, ti: int, src_buf, ledger: Ledger):
        t = self.plan.transfers[ti]
        src, dst = self.copies[ti]
        out = ledger.allocate(dst, src_buf.shape, src_buf.dtype)
        if t.kind == "D2H":  # the source provider's copy into a host buffer
            dst.copy_from_host(src.copy_to_host(src_buf), out)
        elif t.kind == "H2D":  # the destination's async copy, then a fence
            host = src_buf.data if isinstance(src_buf.data, np.ndarray) else src.copy_to_host(src_buf)
            dst.fence(dst.copy_from_host_async(host, out))
        else:  # D2D, H2H, same-device
            dst.fence(dst.copy_device_async(src_buf, out))
        return out

    def run(self, inputs, *, keep_intermediates: bool = False, progress=None, limits=None) -> RunResult:
        """Execute the plan on ``inputs``; see :func:`execute`. ``progress``: called with
        ``"compiling kernels (k/n)"`` when a kernel compilation starts (see the module docs);
        ``limits``: the run's :class:`~hetero_explore.ir.limits.RunLimits` (default: those of
        an enclosing run, else the defaults)."""
        with run_limits.running(limits):
            return self._run_limited(inputs, keep_intermediates, progress)

    def _run_limited(self, inputs, keep_intermediates, progress) -> RunResult:
        plan = self.plan
        graph = plan.graph
        feeds = exact_feeds(self._input_specs, inputs)
        feeds = _private_copies(feeds if feeds is not None else validate_inputs(graph, inputs))
        kept, held = self._kept, self._constants
        _install_compile_listener()
        outer = getattr(_watch, "w", None)
        watch = _watch.w = _CompileWatch(len(graph.nodes), progress)
        progs = None
        try:
            if kept and not keep_intermediates:
                progs = self._take_programs()
            return self._run(feeds, keep_intermediates, kept, held, progs, watch)
        finally:
            _watch.w = outer
            if outer is not None:   # a run inside a run (control flow): the outer one sees it too
                outer.seconds += watch.seconds
                outer.count += watch.count
            if progs is not None and self._kept:
                with self._pool_lock:
                    self._pool.append(progs)

    def _run(self, feeds, keep_intermediates, kept, held, progs, watch) -> RunResult:
        plan = self.plan
        graph = plan.graph
        pooled = progs is not None
        auth: dict[str, Any] = {}
        real: dict[int, Any] = {}
        host_out: dict[str, np.ndarray] = {}
        events: list[Event] = []
        releases: list[Release] = []
        record = {} if keep_intermediates else None
        trec = {} if keep_intermediates else None
        srec = {} if keep_intermediates else None
        dyn_shapes: dict = {}
        performed = 0
        clock = time.perf_counter
        t_run = clock()
        c_run = watch.seconds
        # the run's own ledger and meters: runs in other threads on the same providers are not counted
        with Ledger(self.owners) as ledger:
            n_arenas = 0
            if progs is None:   # one-shot, keeping intermediates, or every held set is busy
                n0 = ledger.allocations
                progs = self._programs(ledger)
                n_arenas = ledger.allocations - n0
            for part, ex, s, prog in zip(plan.partitions, self.parts, self.sched, progs):
                prov = ex.provider
                pdev = s.device
                try:
                    for ti in s.transfers_in:
                        t = plan.transfers[ti]
                        t0 = clock()
                        real[ti] = buf = self._copy(ti, auth[t.value], ledger)
                        t1 = clock()
                        performed += 1
                        events.append(Event("transfer", t.dst_provider,
                                            t.src_device if t.kind == "D2H" else t.dst_device,
                                            t0 - t_run, t1 - t0, part.id, None, t.value, t.kind, buf.nbytes,
                                            t.src_provider))
                        if trec is not None:
                            trec[ti] = self.copies[ti][1].copy_to_host(buf)
                    t0 = clock()
                    c0 = watch.seconds
                    env = {}
                    transient = []
                    for name in s.stage:
                        arr = feeds[name] if name in feeds else graph.initializer(name)
                        env[name] = buf = ledger.allocate(prov, arr.shape, arr.dtype)
                        transient.append(buf)
                        prov.copy_from_host(arr, buf)
                        if srec is not None:
                            srec[(name, part.id)] = prov.copy_to_host(buf)
                    self._partition_env(env, part, s, ledger, transient, pooled, auth, real, srec)
                    auth.update(ex.run(env, ledger, record, dyn_shapes, prog))
                    if s.sync:
                        prov.synchronize()
                    for buf in transient:
                        ledger.free(buf)
                    t1 = clock()
                    comp = watch.seconds - c0
                    events.append(Event("partition", prov.name, pdev, t0 - t_run, t1 - t0 - comp,
                                        part.id, part.n_nodes, compile_s=comp))
                    for name in s.readback:
                        t2 = clock()
                        host_out[name] = prov.copy_to_host(auth[name])
                        events.append(Event("readback", prov.name, pdev, t2 - t_run, clock() - t2, part.id,
                                            value=name, bytes=auth[name].nbytes))
                    for ti, rel in s.release_real:
                        ledger.free(real.pop(ti))
                        releases.append(rel)
                    for name, rel in s.release_auth:
                        ledger.free(auth.pop(name))
                        releases.append(rel)
                except HeteroExploreError:
                    raise
                except Exception as e:
                    raise ExecutionError(f"partition {part.id} on provider {prov.name!r} ({pdev}) failed: "
                                         f"{type(e).__name__}: {e}") from e
        compile_s = watch.seconds - c_run
        wall = clock() - t_run - compile_s
        if performed != len(plan.transfers):
            raise TransferCountMismatch(f"the run performed {performed} transfer(s), the plan lists "
                                        f"{len(plan.transfers)}")
        ledger.check_leaks()
        peaks = ledger.peak_bytes()
        arena = self.arena_bytes if progs and progs[0] is not None else {}
        if pooled:   # held arenas are not the run's allocations, but it holds them throughout
            for dev, n in arena.items():
                peaks[dev] = peaks.get(dev, 0) + n
        outputs: dict[str, np.ndarray] = {}
        for name in graph.outputs:
            if name in host_out:
                outputs[name] = host_out[name]
            elif name in feeds:
                outputs[name] = np.array(feeds[name], copy=True)
            elif graph.is_constant(name):
                outputs[name] = np.array(graph.initializer(name), copy=True)
            else:  # pragma: no cover - the planner lists every produced graph output
                raise ExecutionError(f"graph output {name!r} was not produced by the run")
        if self._host_outputs:  # sequences/maps/optionals as Python values
            outputs = host_outputs(graph, outputs)
        return RunResult(outputs=outputs, kind=self.kind, plan=plan, events=events, peak_bytes=peaks,
                         transfers_performed=performed, releases=releases,
                         allocations=ledger.allocations - n_arenas, arena_allocations=n_arenas,
                         wall_seconds=wall, inputs=feeds, constant_bytes=self.constant_bytes if kept else {},
                         intermediates=record, transfer_values=trec, staged_values=srec,
                         value_shapes=dyn_shapes, compile_seconds=compile_s, arena_bytes=arena,
                         _executor=self)


    def _partition_env(self, env, part, s, ledger, transient, pooled, auth, real, srec=None) -> None:
        """The rest of partition ``part``'s inputs into ``env``: its constants (held by the
        executor, bound into pooled programs, or staged for this run and freed with
        ``transient``), the values of earlier partitions on its provider, its transfers' copies."""
        prov = self.plan.providers[part.provider_index]
        held = self._constants if self._kept else {}
        for name in (() if pooled else s.consts):   # pooled programs hold them bound
            buf = held.get((name, part.provider_index))
            if buf is None:
                arr = self.plan.graph.initializer(name)
                buf = ledger.allocate(prov, arr.shape, arr.dtype)
                transient.append(buf)
                prov.copy_from_host(arr, buf)
                _read_only(buf)
            env[name] = buf
            if srec is not None:
                srec[(name, part.id)] = prov.copy_to_host(buf)
        for name in s.local:
            env[name] = auth[name]
        for name, ti in s.remote:
            env[name] = real[ti]

    # -- as a subgraph ----------------------------------------------------------------
    def run_nested(self, env, ledger: Ledger, stats=None) -> dict:
        """Run as the subgraph of a control node: ``env`` holds a buffer for every graph input,
        on any provider (one on another provider than a partition's is copied there, once per run
        and provider); every buffer comes from and goes back to the caller's ``ledger``, and a
        buffer for every graph output is returned, left live (an input passed straight through
        is returned as given). ``stats`` (a control kernel's counters) counts the copies."""
        progs = self._take_programs() if self._kept else None
        try:
            return self._run_nested(env, ledger, stats, progs)
        finally:
            if progs is not None and self._kept:
                with self._pool_lock:
                    self._pool.append(progs)

    def _run_nested(self, env, ledger: Ledger, stats, progs) -> dict:
        plan = self.plan
        graph = plan.graph
        pooled = progs is not None
        auth: dict[str, Any] = {}
        real: dict[int, Any] = {}
        moved: dict = {}
        performed = 0
        arenas = []
        if progs is None:   # every held set is in use (or none is held): this run's own
            before = set(ledger.live)
            progs = self._programs(ledger)
            arenas = [b for k, b in ledger.live.items() if k not in before]
        nest = self._nest
        if nest is None:   # what every nested run reads of the plan (a loop body runs per iteration)
            nest = self._nest = (tuple(zip(plan.partitions, self.parts, self.sched, self._owner_of)),
                                 frozenset(graph.outputs), tuple(graph.outputs), len(plan.transfers))
        zipped, outputs, out_names, n_transfers = nest
        try:
            for (part, ex, s, oid), prog in zip(zipped, progs):
                prov = ex.provider
                try:
                    for ti in s.transfers_in:
                        real[ti] = self._copy(ti, auth[plan.transfers[ti].value], ledger)
                        performed += 1
                    penv = {}
                    transient = []
                    for name in s.stage:
                        buf = env.get(name)
                        if buf is None and graph.is_constant(name):   # an input with a default
                            arr = graph.initializer(name)
                            buf = ledger.allocate(prov, arr.shape, arr.dtype)
                            transient.append(buf)
                            prov.copy_from_host(arr, buf)
                        if buf is None:
                            raise ExecutionError(f"{self.where}: value {name!r} was not given to the subgraph")
                        if id(buf.provider) != oid:   # not in this partition's memory: copied there once
                            got = moved.get((name, oid))
                            if got is None:
                                got = moved[(name, oid)] = ledger.allocate(prov, buf.shape, buf.dtype)
                                copy_into(buf, got)
                            buf = got
                        penv[name] = buf
                    if not pooled or s.local or s.remote:
                        self._partition_env(penv, part, s, ledger, transient, pooled, auth, real)
                    auth.update(ex.run(penv, ledger, None, None, prog))
                    if s.sync:
                        prov.synchronize()
                    for buf in transient:
                        ledger.free(buf)
                    for ti, _rel in s.release_real:
                        ledger.free(real.pop(ti))
                    for name, _rel in s.release_auth:
                        if name not in outputs:
                            ledger.free(auth.pop(name))
                except HeteroExploreError:
                    raise
                except Exception as e:
                    raise ExecutionError(f"{self.where}: partition {part.id} on provider {prov.name!r} failed: "
                                         f"{type(e).__name__}: {e}") from e
        finally:
            for buf in moved.values():
                ledger.free(buf)
            for buf in arenas:
                ledger.free(buf)
        if performed != n_transfers:
            raise TransferCountMismatch(f"{self.where}: the run performed {performed} transfer(s), the plan "
                                        f"lists {n_transfers}")
        if stats is not None:
            stats.transfers += performed + len(moved)
        out = {}
        for name in out_names:
            buf = auth.get(name)
            if buf is None:
                buf = env.get(name)
            if buf is None and graph.is_constant(name):
                arr = graph.initializer(name)
                p0 = plan.providers[0]
                buf = ledger.allocate(p0, arr.shape, arr.dtype)
                p0.copy_from_host(arr, buf)
            if buf is None:
                raise ExecutionError(f"{self.where}: output {name!r} was not produced")
            out[name] = buf
        return out
def _part_runner(graph, provider, part):
    """The provider's own runner for a whole partition (ONNX Runtime's EPs), else a node runner."""
    f = getattr(provider, "partition_runner", None)
    r = f(graph, part.node_ids, part.outputs, partition=part.id) if f is not None else None
    if r is None:
        r = NodeRunner.for_graph(graph, provider, part.node_ids, part.outputs, partition=part.id)
    return r


# -- public entry points --------------------------------------------------------------
def execute(plan: Plan, inputs, *, keep_intermediates: bool = False, progress=None, limits=None) -> RunResult:
    """Run ``plan`` on ``inputs`` (name → numpy array, or a list in graph-input order).

    Every kernel is built and every boundary checked before anything runs.
    Initializers are staged by the run and freed with it (build a
    :class:`HeterogeneousExecutor` to stage them once for many runs). With
    ``keep_intermediates`` every node output, staged input and transfer is
    also copied to the host (what :func:`hetero_explore.analysis.compare` uses to blame).
    ``progress``: called with ``"compiling kernels (k/n)"`` when numba compiles a kernel
    during the run (that time is reported as ``compile_seconds``, not as run time).
    ``limits``: a :class:`~hetero_explore.ir.limits.RunLimits` (loop iterations, seconds, a cancel
    callback; default :data:`~hetero_explore.ir.limits.DEFAULT_MAX_LOOP_ITERATIONS` per Loop).

    Raises:
        InputValidationError: missing, unexpected or mismatched inputs (all named).
        HeterogeneousExecutionUnsupported: execution blockers, or a boundary the
            executor cannot honour (nothing ran).
        ProviderUnavailableError, KernelError: a provider or kernel is missing (nothing ran).
        ExecutionError: a failure midway (names the partition and node); every
            buffer is freed first.
        TransferCountMismatch: copies performed differ from the plan's transfers.
        RunBudgetExceeded / RunCancelled: a loop went over ``limits`` or was cancelled (names the node).
    """
    return HeterogeneousExecutor(plan, keep_constants=False).run(inputs, keep_intermediates=keep_intermediates,
                                                                 progress=progress, limits=limits)


def execute_reference(graph, provider, inputs, *, keep_intermediates: bool = False, progress=None,
                      limits=None) -> RunResult:
    """Run the whole graph on one ``provider`` (an object or ``"cpu"``/``"cuda"``/``"gpu"``).

    ``graph`` is a loaded :class:`Graph`, a :class:`Plan` (its graph is used) or
    anything :func:`hetero_explore.load_model` accepts. Same result type as :func:`execute`."""
    from ..planner import plan as make_plan

    if isinstance(graph, Plan):
        graph = graph.graph
    p = make_plan(graph, [resolve(provider)], strict=True)   # a reference runs every node, or nothing
    if len(p.partitions) > 1:  # pragma: no cover - one provider is always one convex partition
        raise ExecutionError(f"a one-provider plan has {len(p.partitions)} partitions")
    return HeterogeneousExecutor(p, kind="reference", keep_constants=False).run(
        inputs, keep_intermediates=keep_intermediates, progress=progress, limits=limits)


def partition_model(plan: Plan, partition: int):
    """Partition ``partition`` of ``plan`` as a standalone ``onnx.ModelProto``: its nodes, its
    boundary inputs as graph inputs, the initializers it reads, and its outputs."""
    import onnx
    from onnx import helper

    graph = plan.graph
    part = plan.partitions[partition]
    vals = graph.values

    def vi(name):
        v = vals[name]
        shape = None if v.shape is None else list(v.shape)
        return helper.make_tensor_value_info(name, v.elem_type, shape)

    members = set(part.node_ids)
    inner = [o for i in part.node_ids for o in graph.nodes[i].outputs
             if o and o not in part.outputs]
    g = helper.make_graph(
        [graph.nodes[i].proto for i in part.node_ids], f"{graph.name}_partition{part.id}_{part.provider}",
        [vi(n) for n in part.inputs if not graph.is_constant(n)], [vi(n) for n in part.outputs],
        initializer=[graph.initializer_protos[n] for n in part.inputs if graph.is_constant(n)],
        value_info=[vi(n) for n in inner if vals[n].elem_type])
    m = graph.model
    model = helper.make_model(g, opset_imports=list(m.opset_import), producer_name="hetero_explore",
                              doc_string=f"partition {part.id} of {graph.name!r} on {part.provider} "
                                         f"({part.device}), {len(members)} node(s)")
    model.ir_version = m.ir_version
    model.functions.extend(m.functions)
    onnx.checker.check_model(model)
    return model
