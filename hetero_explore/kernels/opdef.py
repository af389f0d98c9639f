"""``OpDef``: everything about one op, in one declaration.

An op definition says which op it implements (domain, op type), which
**schema versions** of it (onnx's schema history decides which version a
model at opset N runs: ``onnx.defs.get_schema(op, N, domain).since_version``).
A definition names the opsets it was written and checked against
(``since..until``); it implements the schema versions in force there, and so
claims every opset at which one of those versions is in force — a kernel
checked at opset 13 for ConstantOfShape (version 9) also runs opset-9 models,
derived from the schema history rather than typed by hand. Further, which
dtypes, how attributes and constant inputs become kernel parameters (the
``build`` function validates them and raises :class:`KernelError`), extra
support conditions (``check``), the output-shape functions where the op has its
own (``shape`` at load time, ``infer`` at run time; every other op's run-time
shapes come from onnx's per-node inference, :mod:`hetero_explore.runner.shapes`),
and a one-line semantics note for the provider's op table.

From a definition the code derives the provider's registry entry and op-table
row and the parameters of the tests; its kernels come from
:func:`.target.kernel_pair` (one per-item statement, compiled for every
target). Each kernel module lists its definitions in an :class:`OpList`
(``OPS``); :func:`.registry.build_registry` concatenates them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .target import TARGETS

#: the last opset whose schema versions the definitions were reviewed against; newer schema
#: versions (introduced after it) are not claimed unless a definition says so
MAX_VERSION = 21

FLOAT = ("float32",)
INDEX = ("int64", "int32")
NUMERIC = ("float32", "int64", "int32")
ALL = ("float32", "int64", "int32", "bool")


@functools.lru_cache(maxsize=None)
def schema_version(domain: str, op_type: str, opset: int) -> int | None:
    """The schema version a model at ``opset`` runs for this op (None: no such op then)."""
    import onnx.defs
    try:
        return onnx.defs.get_schema(op_type, int(opset), domain).since_version
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def claimed_opsets(domain: str, op_type: str, since: int, until: int, max_opset: int | None = None) -> tuple:
    """Opsets whose schema version of the op is in ``since..until`` (from onnx's history)."""
    import onnx.defs
    top = max_opset or (onnx.defs.onnx_opset_version() if domain in ("", "ai.onnx") else 5)
    out = []
    for n in range(1, top + 1):
        v = schema_version(domain, op_type, n)
        if v is not None and since <= v <= until:
            out.append(n)
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _versions(domain: str, op_type: str, since: int, until: int):
    lo = schema_version(domain, op_type, since)
    hi = schema_version(domain, op_type, until)
    if lo is None or hi is None:
        return None
    return lo, hi


class _EveryTarget:
    """``OpDef.targets`` of an op whose kernels are generated for every registered target
    (:func:`.target.register_target`): ``name in EVERY_TARGET`` asks the registry."""

    def __contains__(self, name) -> bool:
        return name in TARGETS

    def __iter__(self):
        return iter(tuple(TARGETS))

    def __repr__(self) -> str:
        return "EVERY_TARGET"


EVERY_TARGET = _EveryTarget()


@dataclass(frozen=True)
class OpDef:
    op_type: str
    """ONNX op type."""
    build: Callable
    """``build(ctx, target) -> fn(inputs, outputs)``: binds attributes and constant inputs to
    kernel parameters (raising KernelError on bad ones) and returns the run function."""
    domain: str = ""
    """Operator domain ("" is the default ONNX domain)."""
    since: int = 13
    """The first opset checked: the schema version in force there is the first implemented."""
    until: int = MAX_VERSION
    """The last opset checked: the schema version in force there is the last implemented."""
    dtypes: tuple = FLOAT
    """Accepted dtypes of the input at ``dtype_input``."""
    dtype_input: int = 0
    """Which input's dtype is checked against ``dtypes``."""
    targets: tuple = EVERY_TARGET
    """Names of the targets this op has kernels for (``("cpu",)``: host-only code); the
    default, :data:`EVERY_TARGET`, is every registered target (generated kernels)."""
    check: Callable | None = None
    """``check(ctx, target) -> None | reason``: extra support conditions (attributes, constants)."""
    shape: Callable | None = None
    """``shape(ctx) -> list of output shapes`` where the op computes its own (else inference's)."""
    infer: Callable | None = None
    """``infer(ctx, arrays) -> [(shape, dtype)]`` per present output: the output shapes computed
    from the run-time inputs (``ctx`` has the actual input shapes; ``arrays`` are host copies of
    the inputs in ``shape_inputs``, None elsewhere), for ops whose output size depends on their
    data (NonZero, Unique ...). None: onnx's per-node inference (:mod:`hetero_explore.runner.shapes`)."""
    shape_inputs: tuple | None = None
    """Indices of the inputs whose values decide the output shapes (read on the host at run time
    when they are not constants); None: :data:`hetero_explore.runner.shapes.SHAPE_INPUTS`."""
    may_alias_input: bool = False
    """The kernel may return a view of an input."""
    data_dependent_output: bool = False
    """Output size depends on input data."""
    bitwise_portable: bool = True
    """Honours the kernel contract (bitwise equal across targets)."""
    note: str = ""
    """One-line semantics note for the provider's op table."""
    family: str = ""
    """The generated family the kernels come from ("unary", "binary", ... ; "" for ops with
    kernels of their own): tests and tools read the kernels' argument layout from it."""
    kernels: tuple = field(default=(), compare=False)
    """The :class:`~.target.KernelPair` objects its build uses (for tests and warm-up)."""

    def versions(self) -> tuple[int, int] | None:
        """(first, last) schema version implemented; None when onnx has no schema for the op."""
        return _versions(self.domain, self.op_type, self.since, self.until)

    def claims(self, opset: int) -> bool:
        """Does this definition implement the op as a model at ``opset`` runs it?"""
        vs = self.versions()
        v = schema_version(self.domain, self.op_type, opset)
        if vs is None or v is None:  # not an onnx schema (custom domain): claim by opset range
            return self.since <= opset <= self.until
        return vs[0] <= v <= vs[1]

    def opsets(self) -> tuple:
        """Every opset this definition claims (from onnx's schema history)."""
        vs = self.versions()
        if vs is None:
            return tuple(range(self.since, self.until + 1))
        return claimed_opsets(self.domain, self.op_type, vs[0], vs[1])


class OpList(list):
    """A kernel module's op definitions, in declaration order."""

    def register(self, op_type: str | tuple, **kw):
        """Decorator: declare ``build`` as the definition of one or more op types."""
        ops = (op_type,) if isinstance(op_type, str) else tuple(op_type)

        def deco(build):
            for op in ops:
                self.append(OpDef(op, build, **kw))
            return build

        return deco

    def add(self, op_type: str, build: Callable, **kw) -> OpDef:
        d = OpDef(op_type, build, **kw)
        self.append(d)
        return d


def dtype_name(dt) -> str | None:
    return None if dt is None else np.dtype(dt).name


#: every op definition, once the registry is built (:func:`.registry.registry` publishes them
#: here), by (domain, op type): what a definition may ask about the others (control flow: does
#: the target have a kernel for each op of a subgraph? a contrib composition: which kernel runs
#: each step?) without importing the registry, which imports it
_PUBLISHED: dict = {}


def publish(defs) -> None:
    """Called by the registry once it is built."""
    global _PUBLISHED
    index: dict = {}
    for d in defs:
        index.setdefault((d.domain, d.op_type), []).append(d)
    _PUBLISHED = {k: tuple(v) for k, v in index.items()}


def definitions(domain: str, op_type: str, target: str) -> list:
    """The published definitions of ``domain::op_type`` with kernels for ``target``, in registry
    order (empty before the registry is built)."""
    return [d for d in _PUBLISHED.get((domain, op_type), ()) if target in d.targets]
