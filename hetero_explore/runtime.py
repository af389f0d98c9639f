"""The single-provider sequential interpreter: run a whole graph on one provider.

:func:`run_graph` is deliberately small. It is the reference path (every node
on one provider) and the building block the heterogeneous executor wraps:

1. build one :class:`~hetero_explore.providers.base.KernelContext` per node
   from the graph's static shapes and dtypes (:func:`~hetero_explore.providers.base.node_context`) and ask the
   provider for **every** kernel before anything runs, so that an unsupported
   node or a bad attribute fails before any work or allocation;
2. copy the graph inputs and the initializers that are used to the provider;
3. walk the nodes in their (topological) order: allocate the outputs, run the
   kernel, free each value right after its last consumer (graph outputs are
   kept);
4. copy the graph outputs back (in ``graph.outputs`` order).

Every buffer is freed on success and on failure alike, so the provider's
``live_allocations`` is back to its starting value afterwards.

Conventions the kernels rely on:

* an absent optional input (empty name) is passed as ``None``;
* an absent optional output in the middle of a node's outputs gets a
  placeholder whose ``data`` is ``None`` (trailing absent outputs are dropped),
  and its shape/dtype in the context are ``None``;
* outputs are fresh allocations: a kernel never returns a view of an input.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .errors import ExecutionError, ProviderUnavailableError
from .inputs import validate_inputs
from .ir import Graph
from .providers.base import node_context, present_outputs

__all__ = ["run_graph", "validate_inputs"]


class _Absent:
    """Stands in for an absent optional output (its ``data`` is None)."""

    data = None
    freed = True


_ABSENT = _Absent()


def run_graph(graph: Graph, provider, inputs: Mapping[str, np.ndarray], *,
              keep_intermediates: bool = False) -> dict[str, np.ndarray]:
    """Run every node of ``graph`` on ``provider``, sequentially.

    Args:
        graph: a loaded graph (:func:`hetero_explore.loader.load_model`) whose
            shapes are static (bind symbolic dims with ``input_shapes=``).
        provider: an executing provider (``provider.can_execute``).
        inputs: graph input name → numpy array (exact dtype and shape).
        keep_intermediates: also return every node output (in execution order).

    Returns:
        graph output name → numpy array, in ``graph.outputs`` order, followed by
        the intermediates when asked for.

    Raises:
        InputValidationError: inputs do not match the graph.
        KernelError: the provider cannot run some node (raised before anything runs).
        ProviderUnavailableError: the provider cannot execute on this machine.
    """
    ok, why = provider.available()
    if not provider.can_execute or not ok:
        raise ProviderUnavailableError(f"provider {provider.name!r} cannot execute: "
                                       f"{why or 'it only plans'}")
    feeds = validate_inputs(graph, inputs)

    # 1. every kernel first: failures surface before any work
    kernels = []
    for node in graph.nodes:
        ctx = node_context(graph, node)
        kernels.append(provider.get_kernel(ctx))

    # last position at which each value is read; graph outputs live to the end
    last_use: dict[str, int] = {}
    for pos, node in enumerate(graph.nodes):
        for name in node.inputs:
            if name:
                last_use[name] = pos
    keep = set(graph.outputs)
    end = len(graph.nodes)
    for name in keep:
        last_use[name] = end

    results: dict[str, np.ndarray] = {}
    inter: dict[str, np.ndarray] = {}
    bufs: dict = {}
    try:
        # 2. graph inputs and used initializers onto the provider
        host = [(n, feeds[n]) for n in graph.inputs if n in last_use]
        host += [(n, graph.initializer(n)) for n in graph.initializer_protos if n in last_use]
        for name, a in host:
            a = np.asarray(a)
            a = a if a.flags.c_contiguous else a.copy(order="C")
            # allocate with the exact shape first: copy_from_host(a) alone may reshape scalars
            bufs[name] = provider.allocate(a.shape, a.dtype)
            provider.copy_from_host(a, bufs[name])

        # 3. run
        for pos, (node, kernel) in enumerate(zip(graph.nodes, kernels)):
            ins = [bufs[n] if n else None for n in node.inputs]
            outs = []
            for name, shape, dtype in zip(present_outputs(node), kernel.ctx.out_shapes,
                                          kernel.ctx.out_dtypes):
                if not name:
                    outs.append(_ABSENT)
                    continue
                buf = provider.allocate(shape, dtype)
                bufs[name] = buf
                outs.append(buf)
            kernel.run(ins, outs)
            if keep_intermediates:
                for name, buf in zip(present_outputs(node), outs):
                    if name:
                        inter[name] = provider.copy_to_host(buf)
            for name in dict.fromkeys(list(node.inputs) + list(present_outputs(node))):
                if name and last_use.get(name, -1) <= pos and name in bufs:
                    provider.free(bufs.pop(name))

        # 4. outputs back to the host
        provider.synchronize()
        for name in graph.outputs:
            if name not in bufs:
                raise ExecutionError(f"graph output {name!r} is produced by no node and is "
                                     f"neither an input nor an initializer")
            results[name] = provider.copy_to_host(bufs[name])
    finally:
        for buf in bufs.values():
            provider.free(buf)
        bufs.clear()
    for name, arr in inter.items():
        results.setdefault(name, arr)
    return results

