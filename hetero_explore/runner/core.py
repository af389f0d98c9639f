"""The node runner: the one run loop, a node sequence on one provider as a compiled program.

:class:`NodeRunner` runs a sequence of nodes (in topological order) on one provider, always
through a bound :class:`Program` (arena + replay). Every partition of a
:class:`~hetero_explore.execution.executor.HeterogeneousExecutor` -- so the reference run
(:func:`~hetero_explore.execution.executor.execute_reference`, ``run_graph``), subgraphs of
control flow (nested executors), the conformance runner and the kernel tests' harness --
and constant folding (:meth:`NodeRunner.run_once`) run through it, so what the tests check is
what users run.

When it is built, it asks the provider for **every** kernel (an unsupported
node or a bad attribute fails before anything runs or is allocated) and works
out, for each value the nodes produce, after which node it is freed. A run:

1. checks each input buffer of a node against what its kernel was built for
   (the :class:`~hetero_explore.providers.base.KernelContext`): shape and
   dtype must be equal, else :class:`ShapeMismatchError` names the node, op,
   input and both shapes; nothing is trusted;
2. when the kernel (or the runner) has an output-shape function
   ``infer_shapes(ctx, input_arrays) -> shapes`` (``input_arrays`` are the
   provider's arrays, numpy or device), computes the output shapes from the
   actual inputs and checks them against the plan before allocating;
3. allocates the outputs through the run's :class:`Ledger`, runs the kernel,
   frees each value it produced right after its last consumer (values it is
   asked to keep are returned instead).

**Run-time shapes.** A node whose output shapes the plan cannot promise is
*dynamic* (decided once, when the runner is built): a shape input
(:data:`hetero_explore.runner.shapes.SHAPE_INPUTS`: Reshape's ``shape``, Range's
bounds, Split's sizes ...) that is not a constant, a shape of the plan that is
symbolic or unknown, or a data-dependent op (``OpDef.infer``: NonZero,
Unique ...). For such a node the run reads the shape inputs on the host,
computes the output shapes and dtypes from the actual inputs
(:func:`hetero_explore.runner.shapes.infer_outputs`, onnx's per-node inference, or the
op's own function), checks them against every dim the plan knows (a mismatch is
a :class:`ShapeMismatchError` naming the node, the planned and the actual
shape), checks the memory budget, and only then allocates; its kernel is built
for the actual shapes (a context whose ``const`` answers the run-time shape
inputs) and cached by that signature. Its capability was checked when the
runner was built. Control flow (If/Loop/Scan) whose output shapes the plan
cannot promise is the exception: only running its subgraphs tells them, so its
kernel (built once) allocates its outputs itself through the run's ledger
(``kernel.run_allocating``) and the runner checks them against the plan after.
Every other node keeps the static path above: no per-run inference.

Conventions the kernels rely on:

* an absent optional input (empty name) is passed as ``None``;
* an absent optional output in the middle of a node's outputs gets a
  placeholder whose ``data`` is ``None`` (trailing absent outputs are dropped),
  and its shape/dtype in the context are ``None``;
* outputs are fresh allocations: a kernel never returns a view of an input.

A run's buffers are owned by its :class:`Ledger`: it frees whatever is left
when the run ends (successfully or not) and, through one
:class:`~hetero_explore.providers.base.AllocationMeter` per memory owner,
tells the run's leaks and peak bytes apart from those of other threads running
on the same providers at the same time.

**The static memory plan.** When the runner is built it also lays out, by
lifetime, every intermediate it can (:meth:`NodeRunner.arena_layout`): a value
produced by a static node with a plain kernel, not kept, a tensor (not a host
value) of non-zero size, read only by such nodes, gets an offset in one arena
(greedy best fit by size over live intervals, the way onnxruntime's and
TFLite's planners do; a node's outputs never share memory with its inputs, so
nothing is computed in place). :meth:`NodeRunner.bind` turns the layout and an
arena buffer into a :class:`Program`: per node, the kernel's function and the
lists of arrays it is called with, built once. :meth:`NodeRunner.run` with a
program then does, per node, one call (plus, for the few inputs and outputs
that are not in the arena — staged inputs, constants, values crossing a
partition, kept outputs — a check and a per-run allocation); dynamic nodes,
control-flow kernels and nodes with an output-shape function keep the per-run
path. A program is used by one run at a time (its lists are patched per run);
the executor keeps a pool of them (see :mod:`hetero_explore.execution.executor`).

**Replay.** A node of a program whose kernel is replayable (its run function is
marked ``@replayable``: launches only, with arguments fixed by its arrays) and
whose arrays are all the program's own (no input to patch, no output to
allocate) is recorded at the program's first run: the CPU target lists the
compiled calls the run function makes (:class:`~hetero_explore.kernels.target.Recording`).
From the next run on, the node replays them: numba's compiled entry point for
those argument types, called on the same arguments
(:func:`~hetero_explore.kernels.target.prepared_call`), without the run function's
Python or numba's dispatch. The same compiled code on the same arrays computes
the same bits. Consecutive replayed nodes become one segment (one call from the
run loop); a failure in it still names its node. A recording that something
spoils (a launch on a target that does not record) leaves the node calling its
function. ``REPLAY = False`` turns recording off for programs bound afterwards.

**Iterations.** A control-flow body runs once per iteration on buffers its control kernel's
:class:`RecyclingLedger` hands out again (the buffers a run frees, then the arrays of its
:class:`~hetero_explore.ir.buffers.BufferPool`), so its program is bound ``keyed``: a
replayable node that patches an input or allocates an output records its calls once per set
of arrays it is given and replays them when given the same arrays again (:class:`_Keyed`).
"""

from __future__ import annotations

import contextlib
import math

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..ir.errors import ExecutionError, KernelError, MemoryBudgetError, RunBudgetExceeded, RunCancelled
from ..ir.buffers import BufferPool
from ..ir.graph import shape_is_static
from ..ir.context import ABSENT, KernelContext, node_context, present_outputs  # noqa: F401  (ABSENT: re-exported)
from ..kernels.target import RECORDING, Recording, prepared_call

__all__ = ["NodeRunner", "Ledger", "NodeExecutionError", "ShapeMismatchError", "RuntimeShapeError",
           "AllocationLeak", "memory_owners", "Program", "plan_offsets", "instrument"]

#: kernels (and output shapes) cached per dynamic node; the cache is emptied when it is full
DYNAMIC_CACHE_SIZE = 64
#: programs bound from now on record and replay their replayable nodes (see :class:`Program`);
#: False runs every node's function at every run (benchmarks compare the two)
REPLAY = True


class NodeExecutionError(ExecutionError):
    """A kernel failed while running. Names the partition, node, op and provider."""

    def __init__(self, message: str, *, partition: int | None = None, node: str = "", op_type: str = "",
                 provider: str = ""):
        super().__init__(message)
        self.partition = partition
        self.node = node
        self.op_type = op_type
        self.provider = provider


class ShapeMismatchError(NodeExecutionError):
    """A buffer reaching a kernel differs from what the kernel was built for (or an
    output-shape function disagrees with the plan). Names node, op, value, planned
    and actual shape and dtype."""

    def __init__(self, message: str, *, value: str = "", planned=None, actual=None, **kw):
        super().__init__(message, **kw)
        self.value = value
        self.planned = planned
        self.actual = actual


class RuntimeShapeError(NodeExecutionError):
    """A node's output shapes cannot be computed from its run-time inputs (invalid shape
    values, a shape onnx cannot infer). Names the node, op and provider."""


class AllocationLeak(ExecutionError):
    """A provider's live-allocation counter did not come back to its value before the run."""


@contextlib.contextmanager
def held(owners):
    """Allocations made in this block belong to no run that is open in this thread: they are
    held beyond it (the constants and arenas of a subgraph's executor, built during the control
    node's run that first needs it, and freed when that executor is closed). Each owner counts
    them on a meter of their own."""
    meters = [(o, o.open_meter()) for o in owners]
    try:
        yield
    finally:
        for o, m in meters:
            o.close_meter(m)


def memory_owners(providers) -> list:
    """Distinct objects that own memory counters (masks forward to the provider they wrap)."""
    from ..providers.virtual import unmask

    seen: dict[int, Any] = {}
    for p in providers:
        o = unmask(p)
        seen.setdefault(id(o), o)
    return list(seen.values())


class Ledger:
    """Every buffer one run allocates, so that none outlives it; and, per memory owner,
    a meter of what the run's thread allocated (leaks, peak bytes).

    Use it as a context manager in the thread that runs: on exit every buffer it
    still holds is freed and the meters are closed. Then :meth:`leaks` lists the
    owners whose allocations by this run are not all freed (a kernel or provider
    that kept a buffer it was not asked to) and :meth:`peak_bytes` the run's peak
    per device."""

    __slots__ = ("live", "allocations", "frees", "meters", "live_bytes", "devices")

    def __init__(self, owners: Iterable = ()):
        self.live: dict[int, Any] = {}
        self.allocations = 0
        self.frees = 0
        #: bytes of the buffers the ledger holds now (what a dynamic allocation is checked against)
        self.live_bytes = 0
        #: (owner, meter) per memory owner, opened when the ledger is entered
        self.meters: list = [(o, None) for o in owners]
        #: each owner's device, as peak_bytes names it
        self.devices = [str(o.device) for o, _ in self.meters]

    def __enter__(self) -> "Ledger":
        self.meters = [(o, o.open_meter()) for o, _ in self.meters]
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.free_all()
        finally:
            for o, m in self.meters:
                if m is not None:
                    o.close_meter(m)

    def allocate(self, provider, shape, dtype):
        buf = provider.allocate(shape, dtype)
        self.live[id(buf)] = buf
        self.allocations += 1
        self.live_bytes += buf.nbytes
        return buf

    def adopt(self, buf):
        """Take ownership of a buffer allocated elsewhere (freed with the run)."""
        self.live[id(buf)] = buf
        self.allocations += 1
        self.live_bytes += buf.nbytes
        return buf

    def free(self, buf) -> None:
        if self.live.pop(id(buf), None) is not None:
            self.frees += 1
            self.live_bytes -= buf.nbytes
            buf.provider.free(buf)

    def free_all(self) -> int:
        left = list(self.live.values())
        for buf in left:
            self.free(buf)
        return len(left)

    def leaks(self) -> list[str]:
        """``'name': +n allocation(s)`` for each owner the run left allocations on."""
        return [f"{o.name!r}: {m.live_allocations:+d} allocation(s)" for o, m in self.meters
                if m is not None and m.live_allocations != 0]

    def check_leaks(self) -> None:
        """Raise :class:`AllocationLeak` when :meth:`leaks` lists anything."""
        leaks = self.leaks()
        if leaks:
            raise AllocationLeak("live allocations changed across the run (a kernel or provider keeps "
                                 "buffers it was not asked to): " + "; ".join(leaks))

    def peak_bytes(self) -> dict[str, int]:
        """Device → peak bytes this run held live on it (summed over its owners)."""
        peaks: dict[str, int] = {}
        for dev, (o, m) in zip(self.devices, self.meters):
            peaks[dev] = peaks.get(dev, 0) + (m.peak_bytes if m is not None else 0)
        return peaks


class RecyclingLedger(Ledger):
    """A :class:`Ledger` for a control kernel's runs of its subgraphs: a host buffer it frees is
    kept (still allocated) and handed out again for the next buffer of the same provider, shape
    and dtype this run asks for -- a Loop or Scan body's per-iteration outputs and staged slices
    are then the same buffers every iteration, and their allocation costs a dict lookup. When the
    ledger closes, the buffers it kept are freed and their arrays go to ``pool`` (a
    :class:`~hetero_explore.ir.buffers.BufferPool` the kernel keeps across its runs), from which
    the next run's first buffers are made (:meth:`~hetero_explore.providers.base.HostMemory.reuse`,
    a counted allocation). Code must not touch a buffer after freeing it (as with any ledger: a
    freed buffer's ``data`` is None); here the buffer may already hold another value."""

    __slots__ = ("pool", "spare", "spare_bytes")

    #: the most bytes of freed buffers one run keeps for reuse
    MAX_SPARE_BYTES = 16 << 20

    def __init__(self, owners: Iterable = (), pool: BufferPool | None = None):
        super().__init__(owners)
        self.pool = pool if pool is not None else BufferPool()
        #: (provider, shape, dtype) -> buffers freed by this run, still allocated
        self.spare: dict = {}
        self.spare_bytes = 0

    def allocate(self, provider, shape, dtype):
        if type(shape) is not tuple:
            shape = tuple(shape)
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        lst = self.spare.get((provider, shape, dtype))
        if lst:
            buf = lst.pop()
            self.spare_bytes -= buf.nbytes
        else:
            reuse = getattr(provider, "reuse", None)
            a = None if reuse is None else self.pool.take(reuse.__self__, shape, dtype)
            if a is None:
                return Ledger.allocate(self, provider, shape, dtype)
            buf = reuse(a)
        self.live[id(buf)] = buf
        self.allocations += 1
        self.live_bytes += buf.nbytes
        return buf

    def free(self, buf) -> None:
        if self.live.pop(id(buf), None) is None:
            return
        self.frees += 1
        self.live_bytes -= buf.nbytes
        data = buf.data
        if (type(data) is np.ndarray and data.base is None and self.spare_bytes + buf.nbytes <= self.MAX_SPARE_BYTES
                and data.flags.writeable):   # a host value's 0-d object array too (the pool keeps none)
            self.spare.setdefault((buf.provider, buf.shape, buf.dtype), []).append(buf)
            self.spare_bytes += buf.nbytes
            return
        buf.provider.free(buf)

    def free_all(self) -> int:
        n = super().free_all()
        spare, self.spare, self.spare_bytes = self.spare, {}, 0
        for lst in spare.values():
            for buf in lst:
                data, provider = buf.data, buf.provider
                provider.free(buf)
                if getattr(provider, "reuse", None) is not None:
                    self.pool.give(provider, data)
        return n


class NodeStep:
    """One node, ready to run: its kernel and everything the run checks."""

    __slots__ = ("node", "kernel", "ctx", "inputs", "outputs", "checks", "out_specs", "infer", "free",
                 "dynamic", "shape_inputs", "op_infer", "shape_cache", "kernel_cache", "known_in", "known_out",
                 "allocates")

    def __init__(self, ctx: KernelContext, kernel, infer, dynamic: bool = False):
        node = ctx.node
        self.node = node
        self.kernel = kernel
        self.ctx = ctx
        #: input names ("" for absent optional inputs)
        self.inputs: tuple[str, ...] = tuple(node.inputs)
        #: output names without trailing absent ones ("" for absent ones in the middle)
        self.outputs: tuple[str, ...] = tuple(present_outputs(node))[:len(ctx.out_shapes)]
        #: (input index, name, planned shape, planned dtype) of every present input
        self.checks = tuple((i, name, tuple(ctx.in_shapes[i]), ctx.in_dtypes[i])
                            for i, name in enumerate(self.inputs)
                            if name and i < len(ctx.in_shapes) and ctx.in_shapes[i] is not None)
        #: (name, planned shape, planned dtype) per output
        self.out_specs = tuple((name, None if s is None else tuple(s), d)
                               for name, s, d in zip(self.outputs, ctx.out_shapes, ctx.out_dtypes))
        #: the output-shape function, or None
        self.infer = infer
        #: values to free after this step
        self.free: tuple[str, ...] = ()
        #: output shapes computed at run time (see the module docs); ``kernel`` is then None
        self.dynamic = dynamic
        #: what the plan knows of each checked input's and each output's shape (see _known)
        self.known_in = tuple(_known(shape) for _, _, shape, _ in self.checks) if dynamic else ()
        self.known_out = tuple(_known(shape) for _, shape, _ in self.out_specs) if dynamic else ()
        #: indices of the inputs whose values decide the output shapes (read on the host)
        self.shape_inputs: tuple[int, ...] = ()
        #: the op definition with its own run-time shape function (data-dependent ops), or None
        self.op_infer = None
        #: (input signature, shape-input values) → (output specs, kernel, output bytes), checked
        self.shape_cache: dict = {}
        #: (input signature, shape-input values, output specs) → kernel built for them
        self.kernel_cache: dict = {}
        #: the kernel allocates its outputs (``kernel.run_allocating``): dynamic control flow
        self.allocates = False


def _same_dtype(a, b) -> bool:
    return a is b or a == b


def _known(planned):
    """What a planned shape promises: None (nothing) or (rank, ((axis, dim), ...) of its static dims)."""
    if planned is None:
        return None
    return len(planned), tuple((a, int(p)) for a, p in enumerate(planned)
                               if isinstance(p, (int, np.integer)) and p >= 0)


def _fits(known, actual) -> bool:
    """Does ``actual`` (a concrete shape) agree with what :func:`_known` says the plan knows?"""
    if known is None:
        return True
    rank, dims = known
    if len(actual) != rank:
        return False
    for a, d in dims:
        if actual[a] != d:
            return False
    return True


def _is_dynamic(ctx: KernelContext, outs) -> bool:
    """Must this node's output shapes be computed at run time? (see the module docs)"""
    from . import shapes
    node = ctx.node
    if any(n and (i >= len(ctx.in_shapes) or not shape_is_static(ctx.in_shapes[i]))
           for i, n in enumerate(node.inputs)):
        return True
    if any(n and (d is None or s is None or not shape_is_static(s))
           for n, s, d in zip(outs, ctx.out_shapes, ctx.out_dtypes)):
        return True
    if len(ctx.out_shapes) < sum(1 for _ in outs):
        return True
    d = shapes.op_infer(node)
    if d is not None and not getattr(d, "static", False):   # a static one: the planned shapes hold
        return True
    return any(ctx.const(i) is None for i in shapes.shape_inputs(node))


class NodeRunner:
    """Runs ``contexts`` (one :class:`KernelContext` per node, in topological order)
    on ``provider``; every kernel is built here.

    :meth:`run` takes provider buffers for every value the nodes read from outside
    the sequence and returns buffers for ``keep``. Values produced inside and not
    kept are freed after their last consumer inside; values in ``owned`` (inputs
    handed over by the caller, e.g. staged graph inputs) are freed after their last
    consumer too.

    ``infer_shapes``, when given, is the output-shape function for nodes whose
    kernel has none: ``infer_shapes(ctx, input_arrays) -> list of shapes`` (or
    None to skip the check). A kernel's own ``kernel.infer_shapes`` takes
    precedence."""

    def __init__(self, provider, contexts: Sequence[KernelContext], keep: Iterable[str] = (), *,
                 partition: int | None = None, owned: Iterable[str] = (),
                 infer_shapes: Callable | None = None):
        self.provider = provider
        self.partition = partition
        self.outputs = tuple(keep)
        from . import shapes
        steps: list[NodeStep] = []
        for ctx in contexts:
            node = ctx.node
            if _is_dynamic(ctx, present_outputs(node)) and shapes.runs_to_know(node):
                # control flow: its outputs' shapes are what its subgraphs produce (see module docs)
                st = NodeStep(ctx, provider.get_kernel(shapes.unshaped_context(ctx)), None, dynamic=True)
                st.allocates = True
                steps.append(st)
                continue
            if _is_dynamic(ctx, present_outputs(node)):
                # capability now (nothing runs before every node is known to be runnable); the
                # kernel is built for the actual shapes when the node runs
                m = provider.supports(ctx)
                if not m.supported:
                    raise KernelError(f"{provider.name}: cannot run node {node.name!r} ({node.op_type}, "
                                      f"opset {ctx.opset}): {m.reason}")
                st = NodeStep(ctx, None, None, dynamic=True)
                st.shape_inputs = shapes.shape_inputs(node)
                st.op_infer = shapes.op_infer(node)
                if st.op_infer is not None and st.op_infer.shape_inputs is not None:
                    st.shape_inputs = tuple(i for i in st.op_infer.shape_inputs
                                            if i < len(node.inputs) and node.inputs[i])
                steps.append(st)
                continue
            kernel = provider.get_kernel(ctx)
            steps.append(NodeStep(ctx, kernel, getattr(kernel, "infer_shapes", None) or infer_shapes))
        last: dict[str, int] = {}
        for pos, st in enumerate(steps):
            for name in st.inputs:
                if name:
                    last[name] = pos
        keep_set = set(self.outputs)
        frees: list[list[str]] = [[] for _ in steps]
        for pos, st in enumerate(steps):
            for name in st.outputs:
                if name and name not in keep_set:
                    frees[max(last.get(name, pos), pos)].append(name)
        for name in dict.fromkeys(owned):
            if name not in keep_set and name in last:
                frees[last[name]].append(name)
        for st, names in zip(steps, frees):
            st.free = tuple(dict.fromkeys(names))
        self.steps = steps
        self._check_memory()
        self._plan_arena(last, keep_set)

    # -- the static memory plan ------------------------------------------------------
    def _plan_arena(self, last: dict, keep_set: set) -> None:
        """Lay out the arena (see the module docs): ``self.layout`` (name → (offset, shape,
        dtype)) and ``self.arena_size`` in bytes (0: nothing in an arena)."""
        from ..providers.base import Kernel
        from ..providers.virtual import unmask
        owner = unmask(self.provider)
        self.align = int(getattr(owner, "arena_alignment", 0) or 0)
        self.layout: dict[str, tuple] = {}
        self.arena_size = 0
        if not self.align:          # the provider cannot hand out views of one allocation
            return
        host = np.dtype(object)

        def plain(st) -> bool:
            return (not st.dynamic and st.infer is None and type(st.kernel) is Kernel
                    and all(d is not None and np.dtype(d) != host for n, _, d in st.out_specs if n))

        ok_consumer: dict[str, bool] = {}
        for st in self.steps:
            p = plain(st)
            for name in st.inputs:
                if name:
                    ok_consumer[name] = ok_consumer.get(name, True) and p
        items = []
        for pos, st in enumerate(self.steps):
            if not plain(st):
                continue
            for name, shape, dtype in st.out_specs:
                if not name or name in keep_set or not ok_consumer.get(name, True):
                    continue
                nbytes = math.prod(shape) * np.dtype(dtype).itemsize
                if nbytes == 0:
                    continue
                items.append((name, nbytes, pos, max(last.get(name, pos), pos)))
        offsets, total = plan_offsets(items, self.align)
        self.layout = {name: (offsets[name], st_shape, st_dtype)
                       for name, st_shape, st_dtype in self._specs_of(offsets)}
        self.arena_size = total

    def _specs_of(self, names):
        for st in self.steps:
            for name, shape, dtype in st.out_specs:
                if name in names:
                    yield name, shape, np.dtype(dtype)

    def bind(self, arena, fixed: Mapping[str, Any] | None = None, record: bool = True,
             keyed: bool = False) -> "Program":
        """A :class:`Program` running this runner's nodes with its arena values in ``arena``
        (a buffer of at least :attr:`arena_size` bytes on the runner's provider, or None when
        the size is 0). ``fixed``: input buffers that stay the same for every run of the program
        (constants the executor holds), bound into the calls too; the caller then need not pass
        them in ``env``. Neither the arena nor ``fixed`` is owned by the program. ``record``: the
        program will run many times: its replayable nodes record their calls at its first run
        (see the module docs; a program used once would only pay for the recording). ``keyed``
        (a control-flow body's program, run once per iteration on buffers a :class:`BufferPool`
        hands out again): a replayable node whose inputs or outputs are not the program's own
        arrays also records its calls, once per set of arrays it is given (:class:`_Keyed`), and
        replays them when it is given the same arrays again."""
        from ..providers.base import Kernel
        from ..providers.virtual import unmask
        owner = unmask(self.provider)
        provider = self.provider
        layout = self.layout
        bufs = {}
        for name, (off, shape, dtype) in layout.items():
            view = owner.arena_view(arena, off, shape, dtype)
            b = DeviceBufferView(provider, shape, dtype, view)
            bufs[name] = b
        for name, b in (fixed or {}).items():
            bufs.setdefault(name, b)
        items = []
        for st in self.steps:
            frees = tuple(n for n in st.free if n not in layout)
            if st.dynamic or st.infer is not None or type(st.kernel) is not Kernel:
                items.append((st, None, None, None, None, None, frees, None))
                continue
            checks = {i: (shape, dtype) for i, _, shape, dtype in st.checks}
            ins_d, patch = [], []
            for i, name in enumerate(st.inputs):
                if not name:
                    ins_d.append(None)
                elif name in bufs:
                    b = bufs[name]
                    shape, dtype = checks.get(i, (None, None))
                    if shape is not None and (b.shape != shape or not _same_dtype(b.dtype, dtype)):
                        raise self._mismatch(st, "input", name, (shape, dtype), (b.shape, b.dtype))
                    ins_d.append(b.data)
                else:
                    ins_d.append(None)
                    shape, dtype = checks.get(i, (None, None))
                    patch.append((i, name, shape, dtype))
            outs_d, alloc = [], []
            for i, (name, shape, dtype) in enumerate(st.out_specs):
                if not name:
                    outs_d.append(None)
                elif name in bufs:
                    outs_d.append(bufs[name].data)
                else:
                    outs_d.append(None)
                    alloc.append((i, name, shape, dtype))
            # the same arrays at every run: record its calls at the first run, then replay them
            rec = _RECORD if record and REPLAY and st.kernel.replayable and not patch and not alloc else None
            fn = st.kernel._fn
            if keyed and REPLAY and st.kernel.replayable and (patch or alloc):
                fn = _Keyed(fn, [i for i, *_ in patch], [i for i, *_ in alloc])
            items.append((st, fn, ins_d, outs_d, tuple(patch), tuple(alloc), frees, rec))
        return Program(self, tuple(items), bufs)

    def _check_memory(self) -> None:
        """Refuse, before anything is allocated, a run whose intermediates would exceed the
        memory budget (``$HETERO_EXPLORE_MEMORY_BUDGET``, default half the machine's memory):
        the schedule of allocations and frees is known, so its peak is too."""
        from ..ir.budget import memory_budget
        from ..ir.units import human_bytes as _human
        self.budget = budget = memory_budget()
        live, peak, at = 0, 0, None
        sizes: dict[str, int] = {}
        for st in self.steps:
            for name, shape, dtype in st.out_specs:
                if name and dtype is not None and shape_is_static(shape):  # dynamic ones: when allocated
                    n = math.prod(shape) * np.dtype(dtype).itemsize
                    sizes[name] = n
                    live += n
            if live > peak:
                peak = live
                if at is None and live > budget:
                    at = st        # the first node whose outputs cross the budget
            for name in st.free:
                live -= sizes.pop(name, 0)
        if peak > budget:
            where = f"partition {self.partition}, " if self.partition is not None else ""
            raise MemoryBudgetError(
                f"{where}node {at.node.name!r} ({at.node.op_type}) on provider {self.provider.name!r}: the run would "
                f"need {_human(peak)} of intermediate buffers at its peak, over the memory budget of {_human(budget)}; nothing "
                "was allocated (raise the budget with $HETERO_EXPLORE_MEMORY_BUDGET if the machine has the memory)")

    def run_once(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once on host arrays: ``feeds`` holds every value the nodes read from outside
        (each staged on the provider), the nodes run through a one-shot :class:`Program`, and
        the kept values come back as host arrays. Every buffer is freed, and checked to be."""
        from ..providers.virtual import unmask
        provider = self.provider
        with Ledger(memory_owners([provider])) as ledger:
            env = {}
            for name, a in feeds.items():
                a = np.asarray(a)
                a = a if a.flags.c_contiguous else a.copy(order="C")   # a scalar stays 0-d
                env[name] = buf = ledger.allocate(provider, a.shape, a.dtype)
                provider.copy_from_host(a, buf)
            arena = ledger.allocate(unmask(provider), (self.arena_size,), np.uint8) if self.arena_size else None
            kept = self.run(env, ledger, program=self.bind(arena, record=False))
            provider.synchronize()
            out = {name: provider.copy_to_host(kept[name]) for name in self.outputs if name}
        ledger.check_leaks()
        return out

    @classmethod
    def for_graph(cls, graph, provider, node_ids: Iterable[int] | None = None, keep: Iterable[str] | None = None,
                  **kw) -> "NodeRunner":
        """A runner for ``node_ids`` of ``graph`` (default: every node; keep: the graph outputs)."""
        nodes = graph.nodes if node_ids is None else [graph.nodes[i] for i in node_ids]
        return cls(provider, [node_context(graph, n) for n in nodes],
                   graph.outputs if keep is None else keep, **kw)

    @property
    def kernels(self) -> list:
        """The kernels built so far (a dynamic node's: the last one it ran with, else None)."""
        return [st.kernel for st in self.steps]

    @property
    def dynamic_nodes(self) -> list[str]:
        """Names of the nodes whose output shapes are computed at run time."""
        return [st.node.name for st in self.steps if st.dynamic]

    def _error(self, cls, message, st, **kw):
        node = st.node
        where = f"partition {self.partition}, " if self.partition is not None else ""
        return cls(f"{where}node {node.name!r} ({node.op_type}) on provider {self.provider.name!r} {message}",
                   partition=self.partition, node=node.name, op_type=node.op_type, provider=self.provider.name,
                   **kw)

    def _mismatch(self, st, what, name, planned, actual, computed: bool = False):
        if computed:
            msg = (f"computes its {what} {name!r} from its run-time inputs as {_spec(*actual)}, but it was planned "
                   f"as {_spec(*planned)} (by load-time inference or the model's declared shapes); the "
                   "model's declaration does not hold for these inputs")
        else:
            msg = (f"got {what} {name!r} as {_spec(*actual)}, but the kernel was built for {_spec(*planned)}; "
                   "the plan's shapes do not hold at run time (re-load the model with the input shapes it is "
                   "run with)")
        return self._error(ShapeMismatchError, msg, st, value=name, planned=planned, actual=actual)

    def _host(self, buf) -> np.ndarray:
        data = buf.data
        return data if isinstance(data, np.ndarray) else self.provider.copy_to_host(buf)

    def _prepare(self, st: NodeStep, ins, ledger: Ledger):
        """A dynamic step's output specs and kernel, from its actual inputs (see the module docs)."""
        from . import shapes
        node = st.node
        for (i, name, shape, dtype), known in zip(st.checks, st.known_in):
            b = ins[i]
            if not _fits(known, b.shape) or (dtype is not None and not _same_dtype(b.dtype, dtype)):
                raise self._mismatch(st, "input", name, (shape, dtype), (b.shape, b.dtype))
        in_shapes = tuple(None if b is None else b.shape for b in ins)
        in_dtypes = tuple(None if b is None else b.dtype for b in ins)
        values = {node.inputs[i]: self._host(ins[i]) for i in st.shape_inputs if ins[i] is not None}
        try:
            static = st.op_infer is not None and getattr(st.op_infer, "static", False)
            if static:   # by the input signature alone (a sequence op's host-value output)
                hit = st.shape_cache.get((in_shapes, in_dtypes, ()))
                if hit is not None:
                    specs, kernel, need = hit
                    self._check_budget(st, specs, need, ledger)
                    st.kernel = kernel
                    return specs, kernel
            if st.op_infer is not None:   # data-dependent: counted from the data, every run
                arrays = [values.get(n) if n else None for n in node.inputs]
                ctx = shapes.RuntimeContext(st.ctx, in_shapes, in_dtypes, st.ctx.out_shapes,
                                            st.ctx.out_dtypes, {})
                got = [None if o is None else (tuple(int(d) for d in o[0]),
                                               np.dtype(o[1]) if o[1] is not None else None)
                       for o in st.op_infer.infer(ctx, arrays)]
                vkey = ()
                values = {}
            else:
                vkey = tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in values.items())
                key = (in_shapes, in_dtypes, vkey)
                hit = st.shape_cache.get(key)
                if hit is not None:   # the same signature as an earlier run: checked then
                    specs, kernel, need = hit
                    self._check_budget(st, specs, need, ledger)
                    st.kernel = kernel
                    return specs, kernel
                got = shapes.infer_outputs(node, in_shapes, in_dtypes, values)
        except KernelError:
            raise
        except ValueError as e:  # the op's own shape function rejected the data
            raise self._error(RuntimeShapeError, f"cannot compute its output shapes from the run-time "
                                                 f"inputs: {e}", st) from e
        except shapes.RuntimeShapeError as e:
            raise self._error(RuntimeShapeError, f"cannot compute its output shapes: {e}", st) from e
        specs = []
        for (name, pshape, pdtype), known, g in zip(st.out_specs, st.known_out,
                                                    list(got) + [None] * len(st.out_specs)):
            if not name:
                specs.append((name, None, None))
                continue
            if g is None:
                raise self._error(RuntimeShapeError, f"cannot compute the shape of its output {name!r}", st)
            shape, dtype = g
            dtype = pdtype if dtype is None else dtype
            if not _fits(known, shape) or (pdtype is not None and not _same_dtype(dtype, pdtype)):
                raise self._mismatch(st, "output", name, (pshape, pdtype), (shape, dtype), computed=True)
            specs.append((name, shape, np.dtype(dtype)))
        need = sum(math.prod(s) * d.itemsize for n, s, d in specs if n)
        self._check_budget(st, specs, need, ledger)
        kkey = (in_shapes, in_dtypes, vkey, tuple(specs))
        kernel = st.kernel_cache.get(kkey)
        if kernel is None:
            ctx = shapes.RuntimeContext(st.ctx, [s for s in in_shapes], [d for d in in_dtypes],
                                        [s for _, s, _ in specs], [d for _, _, d in specs], values)
            kernel = self.provider.get_kernel(ctx)
            if len(st.kernel_cache) >= DYNAMIC_CACHE_SIZE:
                st.kernel_cache.clear()
            st.kernel_cache[kkey] = kernel
        st.kernel = kernel
        if st.op_infer is None or static:
            if len(st.shape_cache) >= DYNAMIC_CACHE_SIZE:
                st.shape_cache.clear()
            st.shape_cache[key if st.op_infer is None else (in_shapes, in_dtypes, ())] = (specs, kernel, need)
        return specs, kernel

    def _check_budget(self, st: NodeStep, specs, need: int, ledger: Ledger) -> None:
        """Refuse, before allocating, outputs that would take the run's live bytes over the budget."""
        if ledger.live_bytes + need <= self.budget:
            return
        from ..ir.units import human_bytes as _human
        node = st.node
        where = f"partition {self.partition}, " if self.partition is not None else ""
        raise MemoryBudgetError(
            f"{where}node {node.name!r} ({node.op_type}) on provider {self.provider.name!r} would allocate "
            f"{_human(need)} for its outputs (shapes {[s for n, s, _ in specs if n]} computed at run time) with "
            f"{_human(ledger.live_bytes)} live, over the memory budget of {_human(self.budget)}; nothing was "
            "allocated (raise it with $HETERO_EXPLORE_MEMORY_BUDGET if the machine has the memory)")

    def run(self, env: Mapping[str, Any], ledger: Ledger, intermediates: dict | None = None,
            shapes: dict | None = None, program: "Program | None" = None) -> dict[str, Any]:
        """Run every node through ``program`` (from :meth:`bind`; one run uses a program at a
        time) on the buffers in ``env`` (value name → buffer); returns the kept buffers. Its arena
        values live in the program's arena and every plain node runs its prebuilt call (or its
        recorded replay). With ``intermediates``, each node output is also copied to the host into it
        (nodes then call their functions: nothing is recorded or replayed); with ``shapes``, the
        (shape, dtype) of every output a dynamic node produced goes into it. :meth:`run_once`
        runs once on host arrays with a program of its own."""
        if program is None:
            raise ExecutionError("a node runner runs a bound program: NodeRunner.bind(arena) (the executor "
                                 "binds them), or NodeRunner.run_once(feeds) for one run on host arrays")
        vals = dict(env)
        if program.slow:   # per-run-path nodes read arena values through their buffers
            vals.update(program.bufs)
        provider = self.provider
        allocate, free = ledger.allocate, ledger.free
        recorded = None
        keep_all = intermediates is not None
        for st, fn, ins_d, outs_d, patch, alloc, frees, rec in (program.nodes if keep_all else program.items):
            if rec is not None and rec is not _RECORD and not keep_all:   # replay: its recorded calls
                try:
                    rec()
                except _Failed as f:   # a segment of replays: the node whose call failed
                    e = f.error
                    raise self._error(NodeExecutionError, f"failed: {type(e).__name__}: {e}", f.step) from e
                except Exception as e:
                    raise self._error(NodeExecutionError, f"failed: {type(e).__name__}: {e}", st) from e
                for name in frees:
                    free(vals.pop(name))
                continue
            if fn is None:
                self._run_step(st, vals, ledger, intermediates, shapes, frees)
                continue
            try:
                for i, name, shape, dtype in patch:
                    b = vals[name]
                    if shape is not None and (b.shape != shape or not _same_dtype(b.dtype, dtype)):
                        raise self._mismatch(st, "input", name, (shape, dtype), (b.shape, b.dtype))
                    ins_d[i] = b.data
                for i, name, shape, dtype in alloc:
                    b = vals[name] = allocate(provider, shape, dtype)
                    outs_d[i] = b.data
                if rec is not _RECORD or keep_all:
                    fn(ins_d, outs_d)
                else:   # the first run of this program: record the node's calls
                    with Recording() as r:
                        fn(ins_d, outs_d)
                    if recorded is None:
                        recorded = {}
                    recorded[st] = _replay_of(r.calls)
                if keep_all:
                    for name, _shape, _dtype in st.out_specs:
                        if name:
                            intermediates[name] = provider.copy_to_host(vals[name] if name in vals else program.bufs[name])
            except (ShapeMismatchError, RunBudgetExceeded, RunCancelled):  # stops: as they are
                raise
            except Exception as e:
                raise self._error(NodeExecutionError, f"failed: {type(e).__name__}: {e}", st) from e
            for name in frees:
                free(vals.pop(name))
        if recorded is not None:   # the run succeeded: later runs replay (one run uses a program at a time)
            program.nodes = tuple(it[:7] + (recorded.get(it[0], it[7]),) if it[7] is _RECORD else it
                                  for it in program.items)
            program.items = _segments(program.nodes)
        return {name: vals[name] for name in self.outputs}

    def _run_step(self, st: NodeStep, vals: dict, ledger: Ledger, intermediates, shapes, frees) -> None:
        """One node on the per-run path: checks, run-time shapes, allocation, kernel, frees."""
        provider = self.provider
        ins = [vals[n] if n else None for n in st.inputs]
        if st.allocates:
            self._run_allocating(st, ins, vals, ledger, intermediates, shapes, frees)
            return
        if st.dynamic:
            specs, kernel = self._prepare(st, ins, ledger)
            if shapes is not None:
                for name, shape, dtype in specs:
                    if name:
                        shapes[name] = (shape, dtype)
        else:
            specs, kernel = st.out_specs, st.kernel
            for i, name, shape, dtype in st.checks:
                b = ins[i]
                if b.shape != shape or not _same_dtype(b.dtype, dtype):
                    raise self._mismatch(st, "input", name, (shape, dtype), (b.shape, b.dtype))
        try:
            if st.infer is not None:
                got_shapes = st.infer(st.ctx, [None if b is None else b.data for b in ins])
                if got_shapes is not None:
                    for (name, shape, dtype), got in zip(st.out_specs, got_shapes):
                        if name and tuple(got) != shape:
                            raise self._mismatch(st, "output", name, (shape, dtype), (tuple(got), dtype))
            outs = []
            for name, shape, dtype in specs:
                if not name:
                    outs.append(ABSENT)
                    continue
                buf = ledger.allocate(provider, shape, dtype)
                vals[name] = buf
                outs.append(buf)
            kernel.run(ins, outs)
            if intermediates is not None:
                for name, buf in zip(st.outputs, outs):
                    if name:
                        intermediates[name] = provider.copy_to_host(buf)
        except (ShapeMismatchError, RunBudgetExceeded, RunCancelled):  # stops: as they are
            raise
        except Exception as e:
            raise self._error(NodeExecutionError, f"failed: {type(e).__name__}: {e}", st) from e
        for name in frees:
            ledger.free(vals.pop(name))

    def _run_allocating(self, st: NodeStep, ins, vals, ledger: Ledger, intermediates, shapes, frees) -> None:
        """A step whose kernel allocates its outputs (see the module docs), checked after."""
        for (i, name, shape, dtype), known in zip(st.checks, st.known_in):
            b = ins[i]
            if not _fits(known, b.shape) or (dtype is not None and not _same_dtype(b.dtype, dtype)):
                raise self._mismatch(st, "input", name, (shape, dtype), (b.shape, b.dtype))
        try:
            outs = st.kernel.run_allocating(ins, st.outputs, ledger)
        except (ShapeMismatchError, MemoryBudgetError, RunBudgetExceeded, RunCancelled):  # stops: as they are
            raise
        except Exception as e:
            raise self._error(NodeExecutionError, f"failed: {type(e).__name__}: {e}", st) from e
        for (name, pshape, pdtype), known, buf in zip(st.out_specs, st.known_out, outs):
            if not name:
                continue
            vals[name] = buf
            if not _fits(known, buf.shape) or (pdtype is not None and not _same_dtype(buf.dtype, pdtype)):
                raise self._mismatch(st, "output", name, (pshape, pdtype), (buf.shape, buf.dtype), computed=True)
            if shapes is not None:
                shapes[name] = (buf.shape, buf.dtype)
            if intermediates is not None:
                intermediates[name] = self.provider.copy_to_host(buf)
        for name in frees:
            ledger.free(vals.pop(name))


#: a program item's last field before its first run: record this node's calls (then its replay)
_RECORD = object()


class _Keyed:
    """A replayable node's function in a ``keyed`` program (:meth:`NodeRunner.bind`): its calls
    recorded once per set of patched input and allocated output arrays (by identity: the entry
    holds them, so they stay alive and no other array can take their ids) and
    replayed when the run gives it the same arrays again. The last ``CAP`` sets are kept (a
    value read from the outer scope is a new array at every run of the control node, the same
    array at every iteration of that run); a node whose arrays total more than ``MAX_BYTES`` (its
    Python is not what costs), whose recording is spoiled, or that misses more often than it hits
    (arrays that are never given again) calls its function."""

    __slots__ = ("fn", "pi", "ai", "replays", "off", "hits", "misses")

    CAP = 8
    MAX_BYTES = 1 << 20
    #: misses before a node that hits less often than it misses stops recording
    PATIENCE = 16

    def __init__(self, fn, patched, allocated):
        self.fn = fn
        self.pi = tuple(patched)
        self.ai = tuple(allocated)
        self.replays: dict = {}
        self.off = False
        self.hits = self.misses = 0

    def __call__(self, ins_d, outs_d):
        if self.off:
            self.fn(ins_d, outs_d)
            return
        arrays = [ins_d[i] for i in self.pi] + [outs_d[i] for i in self.ai]
        key = tuple(map(id, arrays))
        r = self.replays.get(key)
        if r is not None:
            self.hits += 1
            r[0]()
            return
        self.misses += 1
        if RECORDING.calls is not None:   # inside another recording (recordings do not nest)
            self.fn(ins_d, outs_d)
            return
        if (self.misses >= self.PATIENCE and self.misses > self.hits) or \
                sum(getattr(a, "nbytes", self.MAX_BYTES + 1) for a in arrays) > self.MAX_BYTES:
            self.off = True
            self.replays.clear()
            self.fn(ins_d, outs_d)
            return
        with Recording() as rec:
            self.fn(ins_d, outs_d)
        replay = _replay_of(rec.calls)
        if replay is None:
            self.off = True
            self.replays.clear()
            return
        if len(self.replays) >= self.CAP:
            del self.replays[next(iter(self.replays))]   # the oldest set
        self.replays[key] = (replay, arrays)   # the arrays held: no other array can take their ids


def _replay_of(calls):
    """A zero-argument callable repeating ``calls`` (a :class:`Recording`'s), or None (run the
    node's function every time) when the recording was spoiled."""
    if calls is None:
        return None
    prepared = tuple(prepared_call(fn, args) for fn, args in calls)
    if len(prepared) == 1:
        return prepared[0]

    def replay():
        for c in prepared:
            c()

    return replay


class _Failed(Exception):
    """A call of a replayed segment failed: ``step`` is its node, ``error`` what it raised."""

    def __init__(self, step, error):
        super().__init__(step, error)
        self.step = step
        self.error = error


def _segment(parts):
    """One callable replaying ``parts`` (``(step, replay)`` of consecutive nodes) in order; a
    failing call raises :class:`_Failed` naming its node."""
    calls = tuple(c for _, c in parts)
    steps = tuple(st for st, _ in parts)

    def run():
        i = 0
        try:
            for c in calls:
                c()
                i += 1
        except Exception as e:
            raise _Failed(steps[i], e) from e

    return run


def _segments(nodes):
    """Program items with every run of consecutive replayed nodes that free nothing merged
    into one item (one call from the run loop instead of one per node)."""
    items, run = [], []

    def flush():
        if len(run) > 1:
            items.append(run[0][:7] + (_segment([(it[0], it[7]) for it in run]),))
        else:
            items.extend(run)
        run.clear()

    for it in nodes:
        if it[7] is not None and it[7] is not _RECORD and not it[6]:
            run.append(it)
            continue
        flush()
        items.append(it)
    flush()
    return tuple(items)


class Program:
    """A :class:`NodeRunner` bound to an arena (see the module docs): per node ``(step, fn,
    input arrays, output arrays, inputs to patch, outputs to allocate, values to free,
    replay)``; ``fn`` is None for a node on the per-run path. ``replay`` is None (call ``fn``),
    a marker (record ``fn``'s calls at the first run: a replayable kernel on arrays that are
    the same at every run) or, after that run, the prepared calls to repeat instead of ``fn``
    (see :class:`~hetero_explore.kernels.target.Recording`). ``bufs``: the arena values as
    buffers (views)."""

    __slots__ = ("runner", "items", "nodes", "bufs", "slow")

    def __init__(self, runner, items, bufs):
        self.runner = runner
        #: what a run goes through: ``nodes``, with consecutive replays merged once recorded
        self.items = items
        #: one item per node
        self.nodes = items
        self.bufs = bufs
        #: some node runs on the per-run path
        self.slow = any(it[1] is None for it in items)


def instrument(program: Program, wrap) -> None:
    """For benchmarks: wrap every prebuilt node call of ``program`` (run it once first, so that
    its replays are recorded). ``wrap(step, call)`` gets a zero-argument callable running the
    node (its replay, or its function on the program's arrays) and returns the callable to run
    instead. Nodes on the per-run path are left alone."""
    items = []
    for it in program.nodes:
        st, fn, ins_d, outs_d, rec = it[0], it[1], it[2], it[3], it[7]
        if rec is not None and rec is not _RECORD:
            items.append(it[:7] + (wrap(st, rec),))
        elif fn is not None:
            w = wrap(st, lambda fn=fn, i=ins_d, o=outs_d: fn(i, o))   # lists patched in place per run
            items.append((st, lambda i, o, w=w: w()) + it[2:7] + (None,))
        else:
            items.append(it)
    program.items = program.nodes = tuple(items)


class DeviceBufferView:
    """A value's place in an arena: a buffer-like (``provider``, ``shape``, ``dtype``,
    ``nbytes``, ``data``) that is never allocated nor freed by itself (the arena is)."""

    __slots__ = ("provider", "shape", "dtype", "nbytes", "data", "freed", "meter")

    def __init__(self, provider, shape, dtype, data):
        self.provider = provider
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self.data = data
        self.freed = False
        self.meter = None

    @property
    def device(self):
        return self.provider.device

    def __repr__(self) -> str:
        return f"DeviceBufferView({self.provider.name}, {self.shape}, {self.dtype})"


def plan_offsets(items, align: int) -> tuple[dict, int]:
    """Offsets for ``items`` = ``(name, nbytes, first, last)`` (live from step ``first`` through
    step ``last``, inclusive) in one arena: largest first, each at the best-fitting (smallest
    sufficient) gap among the values whose lifetimes overlap its own, else above them. Sizes are
    rounded up to ``align``. Returns (name → offset, arena bytes). The values live at each step
    are indexed, so the cost grows with the lifetimes' total length, not with the square of the
    number of values."""
    order = sorted(items, key=lambda it: (-it[1], it[2], it[0]))
    placed: list[tuple[int, int]] = []            # (offset, size) per placed value
    live_at: dict[int, list[int]] = {}            # step → indices of the placed values live then
    offsets: dict[str, int] = {}
    total = 0
    for name, nbytes, first, last in order:
        size = -(-nbytes // align) * align
        seen: set[int] = set()
        for t in range(first, last + 1):
            seen.update(live_at.get(t, ()))
        busy = sorted(placed[i] for i in seen)
        best, best_gap, end = None, None, 0
        for o, sz in busy:
            gap = o - end
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = end, gap
            end = max(end, o + sz)
        off = end if best is None else best
        idx = len(placed)
        placed.append((off, size))
        for t in range(first, last + 1):
            live_at.setdefault(t, []).append(idx)
        offsets[name] = off
        total = max(total, off + size)
    return offsets, total


def _spec(shape, dtype) -> str:
    name = "?" if dtype is None else np.dtype(dtype).name
    return f"{name} {tuple(shape) if shape is not None else '(?)'}"
