"""The single-provider sequential run: a whole graph on one provider.

:func:`run_graph` is the smallest complete use of the node runner
(:class:`hetero_explore.runner.core.NodeRunner`, which also runs every partition of
the heterogeneous executor and the kernel tests):

1. build every kernel before anything runs, so that an unsupported node or a
   bad attribute fails before any work or allocation;
2. copy the graph inputs and the initializers that are used to the provider;
3. run the nodes in their (topological) order, each input checked against the
   shape and dtype its kernel was built for; free each value right after its
   last consumer (graph outputs are kept);
4. copy the graph outputs back (in ``graph.outputs`` order).

Every buffer is freed on success and on failure alike, so the provider's
``live_allocations`` is back to its starting value afterwards (a kernel that
keeps an allocation raises :class:`~hetero_explore.runner.core.AllocationLeak`).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir.errors import ExecutionError, ProviderUnavailableError
from .inputs import validate_inputs
from ..ir.graph import Graph
from ..runner.core import Ledger, NodeRunner, memory_owners

__all__ = ["run_graph", "validate_inputs"]


def run_graph(graph: Graph, provider, inputs: Mapping[str, np.ndarray], *,
              keep_intermediates: bool = False) -> dict[str, np.ndarray]:
    """Run every node of ``graph`` on ``provider``, sequentially.

    Args:
        graph: a loaded graph (:func:`hetero_explore.load.loader.load_model`) whose
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
        NodeExecutionError: a kernel failed (names the node); ShapeMismatchError
            (a NodeExecutionError) when a buffer differs from the planned shape.
        AllocationLeak: a kernel or the provider kept an allocation.
    """
    ok, why = provider.available()
    if not provider.can_execute or not ok:
        raise ProviderUnavailableError(f"provider {provider.name!r} cannot execute: "
                                       f"{why or 'it only plans'}")
    feeds = validate_inputs(graph, inputs)
    used = {n for node in graph.nodes for n in node.inputs if n}
    staged = [n for n in graph.inputs if n in used or n in graph.outputs]
    staged += [n for n in graph.initializer_protos if n in used or n in graph.outputs]
    # 1. every kernel first: failures surface before any work
    runner = NodeRunner.for_graph(graph, provider, owned=staged)
    produced = {o for node in graph.nodes for o in node.outputs if o}
    for name in graph.outputs:
        if name not in produced and name not in staged:
            raise ExecutionError(f"graph output {name!r} is produced by no node and is "
                                 f"neither an input nor an initializer")
    inter: dict[str, np.ndarray] | None = {} if keep_intermediates else None
    results: dict[str, np.ndarray] = {}
    with Ledger(memory_owners([provider])) as ledger:
        # 2. graph inputs and used initializers onto the provider
        env = {}
        for name in staged:
            a = np.asarray(feeds[name] if name in feeds else graph.initializer(name))
            a = a if a.flags.c_contiguous else a.copy(order="C")
            # allocate with the exact shape first: copy_from_host(a) alone may reshape scalars
            env[name] = ledger.allocate(provider, a.shape, a.dtype)
            provider.copy_from_host(a, env[name])
        # 3. run
        bufs = runner.run(env, ledger, inter)
        # 4. outputs back to the host
        provider.synchronize()
        for name in graph.outputs:
            results[name] = provider.copy_to_host(bufs[name])
    ledger.check_leaks()
    if any(graph.values[n].is_host_value for n in results):  # sequences/maps/optionals as Python values
        from ..kernels.host.sequences import host_outputs
        results = host_outputs(graph, results)
    for name, arr in (inter or {}).items():
        results.setdefault(name, arr)
    return results
