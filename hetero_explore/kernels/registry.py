"""The kernel registry: every op definition, built explicitly.

:func:`build_registry` returns the op definitions of every kernel module, in a
fixed order, and registers the target-specific rules (the CPU fast paths,
:mod:`.cpu_fast`); providers derive their op tables from it, so "what does this
provider run?" is one grep over the modules' ``OPS`` lists and one DataFrame.
Nothing is registered as a side effect of an import.
"""

from __future__ import annotations

import functools

from .opdef import ALL, FLOAT, INDEX, MAX_VERSION, NUMERIC, OpDef, dtype_name, publish, schema_version  # noqa: F401


def op_modules() -> tuple:
    """The modules whose ``OPS`` make the registry, in registry order: for an op defined
    twice, the first definition whose check accepts a node runs it (TopK with a constant k
    in select, with a computed k in dynamic). The host-value ops with no numba kernels
    (sequences, optionals, maps, images: ``kernels/host/``; control flow) are kept out of the
    kernel sources, so that their edits do not change the kernel-source hash (see
    target.py). Imported here, on first use: building the registry generates every kernel
    pair, which a process that never asks for it does not pay."""
    from . import (activation, attention, data, dynamic, einsum, elementwise, image, legacy, ml, movement, nn, norm,
                   pool, quant, random, reduce, resize, rnn, select, signal, strings, training)
    from .contrib import activations as c_activations, attention as c_attention, matmul as c_matmul, \
        norms as c_norms, qlinear as c_qlinear, rnn as c_rnn, text as c_text
    from .host import control, image_decoder, sequences, string_moves
    return (elementwise, reduce, nn, pool, norm, activation, resize, data, movement, ml, legacy, strings,
            rnn, quant, signal, random, select, einsum, dynamic, image, training,
            attention, sequences, control, image_decoder, string_moves,
            # onnxruntime's contrib ops (com.microsoft), one module per family
            c_norms, c_activations, c_matmul, c_attention, c_qlinear, c_rnn, c_text)


def build_registry() -> tuple[OpDef, ...]:
    """All op definitions of all kernel modules; registers the CPU fast paths."""
    out = []
    for m in op_modules():
        out.extend(m.OPS)
    from . import cpu_fast
    cpu_fast.register()    # the CPU overrides (bitwise the generated kernels' results)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def registry() -> tuple[OpDef, ...]:
    """The registry (built once; published to :func:`.opdef.definitions`)."""
    out = build_registry()
    publish(out)
    return out


@functools.lru_cache(maxsize=None)
def _by_op(domain: str, op_type: str) -> tuple[OpDef, ...]:
    return tuple(d for d in registry() if d.op_type == op_type and d.domain == domain)


def find(domain: str, op_type: str, target: str) -> list[OpDef]:
    """The definitions of ``domain::op_type`` with kernels for ``target``."""
    return [d for d in _by_op(domain, op_type) if target in d.targets]
