"""The node runner: every path that executes nodes goes through it.

:class:`NodeRunner` runs a sequence of nodes (in topological order) on one
provider. The reference run (:func:`hetero_explore.runtime.run_graph` and
:func:`hetero_explore.executor.execute_reference`), every partition of a
:class:`~hetero_explore.executor.HeterogeneousExecutor`, the conformance runner
(:mod:`hetero_explore.conformance`) and the kernel tests' harness all use it,
so what the tests check is what users run.

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

The steps are plain data built once (kernel, input names, planned shapes,
what to free after), so a static memory plan (offsets in a per-provider
arena, by lifetime) can later replace the per-run allocations without
changing the callers.
"""

from __future__ import annotations

import math

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .errors import ExecutionError, KernelError
from .ir import shape_is_static
from .providers.base import KernelContext, node_context, present_outputs

__all__ = ["NodeRunner", "Ledger", "NodeExecutionError", "ShapeMismatchError", "AllocationLeak",
           "memory_owners"]


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


class AllocationLeak(ExecutionError):
    """A provider's live-allocation counter did not come back to its value before the run."""


class _Absent:
    """Stands in for an absent optional output (its ``data`` is None)."""

    data = None
    freed = True


ABSENT = _Absent()


def memory_owners(providers) -> list:
    """Distinct objects that own memory counters (masks forward to the provider they wrap)."""
    from .providers.virtual import unmask

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

    __slots__ = ("live", "allocations", "frees", "meters")

    def __init__(self, owners: Iterable = ()):
        self.live: dict[int, Any] = {}
        self.allocations = 0
        self.frees = 0
        #: (owner, meter) per memory owner, opened when the ledger is entered
        self.meters: list = [(o, None) for o in owners]

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
        return buf

    def adopt(self, buf):
        """Take ownership of a buffer allocated elsewhere (freed with the run)."""
        self.live[id(buf)] = buf
        self.allocations += 1
        return buf

    def free(self, buf) -> None:
        if self.live.pop(id(buf), None) is not None:
            self.frees += 1
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
        for o, m in self.meters:
            dev = str(o.device)
            peaks[dev] = peaks.get(dev, 0) + (m.peak_bytes if m is not None else 0)
        return peaks


class Step:
    """One node, ready to run: its kernel and everything the run checks."""

    __slots__ = ("node", "kernel", "ctx", "inputs", "outputs", "checks", "out_specs", "infer", "free")

    def __init__(self, ctx: KernelContext, kernel, infer):
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


def _same_dtype(a, b) -> bool:
    return a is b or a == b


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
        steps: list[Step] = []
        for ctx in contexts:
            node = ctx.node
            outs = present_outputs(node)
            if any(s is not None and not shape_is_static(s) for s in ctx.in_shapes) or any(
                    n and (d is None or s is None or not shape_is_static(s))
                    for n, s, d in zip(outs, ctx.out_shapes, ctx.out_dtypes)):
                raise KernelError(f"node {node.name!r} ({node.op_type}) has symbolic or unknown shapes or "
                                  "dtypes; bind them with load_model(model, input_shapes={...}) to execute")
            kernel = provider.get_kernel(ctx)
            steps.append(Step(ctx, kernel, getattr(kernel, "infer_shapes", None) or infer_shapes))
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

    def _check_memory(self) -> None:
        """Refuse, before anything is allocated, a run whose intermediates would exceed the
        memory budget (``$HETERO_EXPLORE_MEMORY_BUDGET``, default half the machine's memory):
        the schedule of allocations and frees is known, so its peak is too."""
        from .errors import MemoryBudgetError
        from .inputs import _human, memory_budget
        budget = memory_budget()
        live, peak, at = 0, 0, None
        sizes: dict[str, int] = {}
        for st in self.steps:
            for name, shape, dtype in st.out_specs:
                if name:
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

    @classmethod
    def for_graph(cls, graph, provider, node_ids: Iterable[int] | None = None, keep: Iterable[str] | None = None,
                  **kw) -> "NodeRunner":
        """A runner for ``node_ids`` of ``graph`` (default: every node; keep: the graph outputs)."""
        nodes = graph.nodes if node_ids is None else [graph.nodes[i] for i in node_ids]
        return cls(provider, [node_context(graph, n) for n in nodes],
                   graph.outputs if keep is None else keep, **kw)

    @property
    def kernels(self) -> list:
        return [st.kernel for st in self.steps]

    def _error(self, cls, message, st, **kw):
        node = st.node
        where = f"partition {self.partition}, " if self.partition is not None else ""
        return cls(f"{where}node {node.name!r} ({node.op_type}) on provider {self.provider.name!r} {message}",
                   partition=self.partition, node=node.name, op_type=node.op_type, provider=self.provider.name,
                   **kw)

    def _mismatch(self, st, what, name, planned, actual):
        return self._error(
            ShapeMismatchError,
            f"got {what} {name!r} as {_spec(*actual)}, but the kernel was built for {_spec(*planned)}; the plan's "
            "shapes do not hold at run time (re-load the model with the input shapes it is run with)",
            st, value=name, planned=planned, actual=actual)

    def run(self, env: Mapping[str, Any], ledger: Ledger, record: dict | None = None) -> dict[str, Any]:
        """Run every node on the buffers in ``env`` (value name → buffer); returns the kept
        buffers. With ``record``, each node output is also copied to the host into it."""
        provider = self.provider
        vals = dict(env)
        for st in self.steps:
            ins = [vals[n] if n else None for n in st.inputs]
            for i, name, shape, dtype in st.checks:
                b = ins[i]
                if b.shape != shape or not _same_dtype(b.dtype, dtype):
                    raise self._mismatch(st, "input", name, (shape, dtype), (b.shape, b.dtype))
            try:
                if st.infer is not None:
                    shapes = st.infer(st.ctx, [None if b is None else b.data for b in ins])
                    if shapes is not None:
                        for (name, shape, dtype), got in zip(st.out_specs, shapes):
                            if name and tuple(got) != shape:
                                raise self._mismatch(st, "output", name, (shape, dtype), (tuple(got), dtype))
                outs = []
                for name, shape, dtype in st.out_specs:
                    if not name:
                        outs.append(ABSENT)
                        continue
                    buf = ledger.allocate(provider, shape, dtype)
                    vals[name] = buf
                    outs.append(buf)
                st.kernel.run(ins, outs)
                if record is not None:
                    for name, buf in zip(st.outputs, outs):
                        if name:
                            record[name] = provider.copy_to_host(buf)
            except ShapeMismatchError:
                raise
            except Exception as e:
                raise self._error(NodeExecutionError, f"failed: {type(e).__name__}: {e}", st) from e
            for name in st.free:
                ledger.free(vals.pop(name))
        return {name: vals[name] for name in self.outputs}


def _spec(shape, dtype) -> str:
    name = getattr(dtype, "name", dtype)
    return f"{name} {tuple(shape) if shape is not None else '(?)'}"
