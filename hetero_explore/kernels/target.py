"""Targets: where a kernel runs, how it is compiled, launched and fed.

A :class:`Target` is the only place that knows a target's compiler and launch
convention. Op definitions never branch on a target's name: they generate a
:class:`KernelPair` (one CPU and one CUDA kernel from one statement, see
:func:`kernel_pair`), move metadata with :meth:`Target.to_device` and run with
:meth:`Target.launch`. A third executing target is one small subclass here
plus its template in :func:`kernel_pair`.

Two process-wide concerns are kept to this project's own code:

* **No FMA on CUDA.** NVVM contracts ``a*b+c`` into FMA unless asked not to
  (numba-cuda passes no such option without fastmath). The kernel contract
  needs separate roundings, so this project's CUDA compilations ask NVVM for
  ``-fma=0`` — only while :func:`own_compilation` is active (which
  :meth:`CUDATarget.launch` enters), so a notebook user's own CUDA kernels
  compile exactly as numba-cuda would compile them.
  ``HETERO_EXPLORE_ALLOW_FMA=1`` switches this off (the PTX tests check it).
* **A cache that cannot go stale.** numba's on-disk cache checks only the
  modification time of the function's own file, so a kernel that inlines an
  edited helper module (``pmath.py``) would keep stale numerics. Functions
  defined in this package's kernel modules are cached with a stamp that is the
  hash of *all* kernel sources instead: any edit to any kernel module
  recompiles every kernel, and nobody deletes ``__pycache__`` by hand.
* **Threads that sleep when idle.** The CPU fast paths run large kernels with
  ``prange`` (numba's threading layer; ``numba.set_num_threads`` or
  ``NUMBA_NUM_THREADS`` choose how many; results are the same bits for any
  count). With the OpenMP layer's default (active) wait policy, a parallel
  region on a machine whose cores are busy with other processes took 10-25 ms
  instead of 0.1-0.5 ms (measured here, 2 cores, load ~12); with
  ``OMP_WAIT_POLICY=PASSIVE`` it costs what one thread costs. So this module
  sets ``OMP_WAIT_POLICY=PASSIVE`` unless the environment already sets it
  (it takes effect if OpenMP is not loaded yet: numba loads it at the first
  parallel launch, but ``import torch`` loads it too, so a program that imports
  torch first should set the variable itself, as ``bench/models.py`` does).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import math
import os
import threading
from pathlib import Path

import numpy as np
from numba import njit

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see the module docs: threads that sleep when idle

THREADS_PER_BLOCK = 128
KERNEL_DIR = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------
# numba's on-disk cache, keyed on every kernel source
# --------------------------------------------------------------------------------------------


def _sources_hash() -> str:
    h = hashlib.sha256()
    for p in sorted(KERNEL_DIR.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


SOURCES_HASH = _sources_hash()


def _install_cache_locator() -> None:
    from numba.core import caching

    if any(getattr(c, "_hetero_explore", False) for c in caching.CacheImpl._locator_classes):
        return

    class _KernelSources:
        """Stamp this package's kernel modules with the hash of all kernel sources (see the
        module docs); other files are not ours to stamp."""

        _hetero_explore = True

        @classmethod
        def from_function(cls, py_func, py_file):
            try:
                if Path(py_file).resolve().parent != KERNEL_DIR:
                    return None
            except OSError:
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return ("hetero_explore-kernels", SOURCES_HASH)

    class KernelSourcesLocator(_KernelSources, caching.InTreeCacheLocator):
        """In-tree cache (``__pycache__`` beside the kernel modules)."""

    class KernelSourcesUserWideLocator(_KernelSources, caching.UserWideCacheLocator):
        """The user-wide cache directory, when the package directory is read-only."""

    caching.CacheImpl._locator_classes[:0] = [KernelSourcesLocator, KernelSourcesUserWideLocator]


_install_cache_locator()

# --------------------------------------------------------------------------------------------
# NVVM: -fma=0 for this project's compilations only
# --------------------------------------------------------------------------------------------
_OWN = contextvars.ContextVar("hetero_explore_own_compilation", default=False)


@contextlib.contextmanager
def own_compilation():
    """Mark CUDA compilations in this block as this project's (NVVM gets ``-fma=0``)."""
    cuda.load()  # imports numba.cuda and installs the NVVM option, if nothing has yet
    tok = _OWN.set(True)
    try:
        yield
    finally:
        _OWN.reset(tok)


def fma_allowed() -> bool:
    return os.environ.get("HETERO_EXPLORE_ALLOW_FMA") == "1"


def _install_nvvm_option() -> None:
    try:
        from numba.cuda.cudadrv import nvvm
    except Exception:  # pragma: no cover - numba-cuda missing or simulator-only install
        return
    original = nvvm.compile_ir
    if getattr(original, "_hetero_explore_no_fma", False):
        return

    def compile_ir(llvmir, **options):
        if _OWN.get() and not fma_allowed() and not options.get("fastmath", False):
            options.setdefault("fma", False)
        return original(llvmir, **options)

    compile_ir._hetero_explore_no_fma = True
    nvvm.compile_ir = compile_ir


class _CudaModule:
    """``numba.cuda``, imported on first use.

    Importing it costs about 0.4 s (numba-cuda's typing and driver modules), which a
    process that only plans or runs on the CPU never needs. Kernel sources name this
    object as ``cuda``; :func:`.common._retarget` hands ``cuda.jit`` the real module."""

    _module = None

    def load(self):
        if _CudaModule._module is None:
            from numba import cuda as module
            _install_nvvm_option()
            _CudaModule._module = module
        return _CudaModule._module

    def __getattr__(self, name):
        return getattr(self.load(), name)

    def __repr__(self) -> str:
        return "<numba.cuda, imported on first use>" if _CudaModule._module is None else repr(_CudaModule._module)


cuda = _CudaModule()

# --------------------------------------------------------------------------------------------
# lazily compiled kernels and the targets
# --------------------------------------------------------------------------------------------


class LazyKernel:
    """A Python kernel function compiled for one target on first use."""

    def __init__(self, fn, target: str, cache: bool = True):
        self.py = fn
        self.target = target
        self._cache = cache
        self._compiled = None

    @property
    def compiled(self):
        if self._compiled is None:
            from .common import _retarget
            f = _retarget(self.py, self.target)
            # nogil: a CPU kernel releases the GIL while it runs, so that a run in a worker
            # thread (the app's Execute) leaves the interpreter's other threads responsive
            self._compiled = (njit(cache=self._cache, error_model="numpy", nogil=True)(f) if self.target == "cpu"
                              else cuda.jit(f))
        return self._compiled

    def __call__(self, *args):
        return self.compiled(*args)

    def __getitem__(self, config):
        return self.compiled[config]

    def __repr__(self) -> str:
        return f"LazyKernel({self.py.__name__}, {self.target})"


class KernelPair:
    """One op's kernel on every target, generated from one definition.

    ``cpu_fast`` is an optional hand-tuned CPU kernel with the same arguments
    (an *override*, see ``fastpaths.py``): it must give bitwise the generated
    kernel's results, which the tests check over random shapes."""

    def __init__(self, name: str, cpu: LazyKernel, cuda_k: LazyKernel, cpu_fast=None):
        self.name = name
        self.cpu = cpu
        self.cuda = cuda_k
        self.cpu_fast = cpu_fast

    def for_target(self, target: "Target", generated: bool = False):
        if target.host:
            return self.cpu if (generated or self.cpu_fast is None) else self.cpu_fast
        return self.cuda

    def __repr__(self) -> str:
        return f"KernelPair({self.name})"


class _Recording(threading.local):
    """What a kernel's run function launches, per thread (see :class:`Recording`)."""

    calls = None      # the open recording's (compiled function, args) list, else None
    spoiled = False   # something was run that a replay would not repeat

    def spoil(self) -> None:
        if self.calls is not None:
            self.spoiled = True


RECORDING = _Recording()


class Recording:
    """Record the compiled calls a run function makes (``with Recording() as rec: run(...)``;
    then ``rec.calls``: ``(function, args)`` in call order, or None when the run did something
    a replay would not repeat: a launch on a target that does not record).

    A node whose run function is marked :func:`~.common.replayable` (its only effects are
    its launches, with arguments fixed by the arrays it is given) and whose arrays are the
    same at every run (the memory plan's views, held constants) is recorded once and then
    replayed: the same compiled functions on the same arguments, hence the same bits,
    without the run function's Python or numba's argument dispatch (see
    :func:`prepared_call`). Recordings do not nest."""

    __slots__ = ("calls",)

    def __enter__(self) -> "Recording":
        if RECORDING.calls is not None:
            raise RuntimeError("recordings do not nest")
        self.calls = RECORDING.calls = []
        RECORDING.spoiled = False
        return self

    def __exit__(self, *exc) -> None:
        if RECORDING.spoiled or exc[0] is not None:
            self.calls = None
        RECORDING.calls = None
        RECORDING.spoiled = False


#: numba's type of an array argument by what decides it (dtype, rank, layout, flags): its
#: ``typeof`` costs ~10 us a call, and a recording types every argument of every call
_ARRAY_TYPES: dict = {}


def _arg_type(fn, a):
    if type(a) is np.ndarray:
        f = a.flags
        key = (a.dtype, a.ndim, f.c_contiguous, f.f_contiguous, f.writeable, f.aligned)
        t = _ARRAY_TYPES.get(key)
        if t is None:
            t = _ARRAY_TYPES[key] = fn.typeof_pyval(a)
        return t
    return fn.typeof_pyval(a)


def prepared_call(fn, args):
    """A zero-argument callable running ``fn(*args)``: for a numba dispatcher, straight to the
    compiled overload its arguments select (its ``entry_point``: numba's argument typing and
    overload lookup are done once here, not at every call), else the function itself."""
    ep = None
    if isinstance(fn, LazyKernel):    # compiled by the recorded call
        fn = fn.compiled
    overloads = getattr(fn, "overloads", None)
    if overloads is not None:
        try:
            cres = overloads.get(tuple(_arg_type(fn, a) for a in args))
            ep = getattr(cres, "entry_point", None)
        except Exception:   # an argument numba cannot type here: the dispatcher will do it
            ep = None
    return functools.partial(ep if ep is not None else fn, *args)


class Target:
    """Compile, launch, to-device for one kind of kernel code."""

    name = "target"
    #: kernels run on host memory (and can read run-time values directly)
    host = True
    #: hand-tuned kernels (overrides) may replace the generated ones
    fast_paths = False

    def to_device(self, *arrays):
        raise NotImplementedError

    def to_host(self, a) -> np.ndarray:
        """A host (numpy) copy or view of an array this target's kernels use."""
        raise NotImplementedError

    def launch(self, pair: KernelPair, n: int, *args) -> None:
        """Run ``pair``'s kernel for this target over ``n`` items (output elements or rows).
        While a :class:`Recording` is open in this thread, a target that can be replayed
        (the CPU's) also appends the call it made to it; any other target spoils it."""
        raise NotImplementedError

    def call(self, fn, *args) -> None:
        """Call a compiled function of this target directly (``fn(*args)``: a hand-tuned CPU
        path that is not a kernel pair), recorded as :meth:`launch` records."""
        RECORDING.spoil()
        fn(*args)

    def __eq__(self, other):
        if isinstance(other, Target):
            return self.name == other.name
        return NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Target({self.name})"

    def __str__(self) -> str:
        return self.name


class CPUTarget(Target):
    name = "cpu"
    host = True

    def __init__(self, generated_only: bool = False):
        #: run the generated kernels even where a CPU fast path exists (tests use this)
        self.generated_only = generated_only
        self.fast_paths = not generated_only

    def to_device(self, *arrays):
        return arrays if len(arrays) != 1 else arrays[0]

    def to_host(self, a) -> np.ndarray:
        return a

    def launch(self, pair: KernelPair, n: int, *args) -> None:
        # pair.for_target(self, ...) inlined, straight to the compiled dispatcher: this runs
        # once per node per run, and small nodes cost little more than the call itself
        k = pair.cpu if (self.generated_only or pair.cpu_fast is None) else pair.cpu_fast
        f = k._compiled or k.compiled
        f(*args)
        calls = RECORDING.calls
        if calls is not None:
            calls.append((f, args))

    def call(self, fn, *args) -> None:
        calls = RECORDING.calls
        fn(*args)
        if calls is not None:
            calls.append((fn, args))

    def __eq__(self, other):
        if isinstance(other, CPUTarget):
            return self.generated_only == other.generated_only
        return NotImplemented

    def __hash__(self):
        return hash((self.name, self.generated_only))


class CUDATarget(Target):
    name = "cuda"
    host = False

    def to_device(self, *arrays):
        moved = tuple(cuda.to_device(np.ascontiguousarray(a)) for a in arrays)
        return moved if len(moved) != 1 else moved[0]

    def to_host(self, a) -> np.ndarray:
        return a.copy_to_host()

    def launch(self, pair: KernelPair, n: int, *args) -> None:
        RECORDING.spoil()   # a CUDA launch is not replayed (see Recording)
        if n <= 0:
            return
        threads = min(THREADS_PER_BLOCK, n)
        blocks = math.ceil(n / threads)
        with own_compilation(), _sim_errstate():
            pair.cuda[blocks, threads](*args)


def _sim_errstate():
    """In numba's CUDA simulator kernels run as Python on numpy scalars, which warn on
    overflow or division by zero where compiled code silently gives inf/NaN (the same
    IEEE results): keep the simulator as quiet as the hardware."""
    from numba import config
    if getattr(config, "ENABLE_CUDASIM", False):
        return np.errstate(all="ignore")
    return contextlib.nullcontext()


CPU = CPUTarget()
CUDA = CUDATarget()
TARGETS = {"cpu": CPU, "cuda": CUDA}


def get_target(t) -> Target:
    """A :class:`Target` from a target or its name."""
    if isinstance(t, Target):
        return t
    try:
        return TARGETS[t]
    except KeyError:
        raise ValueError(f"unknown kernel target {t!r}; known: {', '.join(TARGETS)}") from None


# --------------------------------------------------------------------------------------------
# one statement, every target: kernel generation
# --------------------------------------------------------------------------------------------
_CPU_TEMPLATE = """
def {name}({params}):
    for {index} in range({count}):
{body}
"""

_CUDA_TEMPLATE = """
def {name}({params}):
    {index} = cuda.grid(1)
    if {index} < {count}:
{body}
"""


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else line for line in text.strip("\n").splitlines())


def _dedent(text: str) -> str:
    import textwrap
    return textwrap.dedent(text).strip("\n")


#: every generated kernel by function name (``_<name>_cpu`` / ``_<name>_cuda``), for tools
#: that look kernels up by name (the PTX compile tests, warm-up)
GENERATED: dict = {}


def kernel_pair(name: str, params: str, body: str, *, count: str = "out.shape[0]", index: str = "i",
                cpu_body: str | None = None, module=None, **names) -> KernelPair:
    """Generate a CPU and a CUDA kernel from one per-item statement.

    Args:
        name: a unique name (used for the functions and numba's cache files).
        params: the kernel's parameter list, e.g. ``"x, out, alpha"``.
        body: the statement(s) run for each item ``index`` < ``count``, e.g.
            ``"out[i] = f(x[i], alpha)"``; the CPU kernel runs them in a loop,
            the CUDA kernel once per thread.
        count: the number of items (an expression over the parameters).
        cpu_body: optionally, the whole CPU function body instead of the loop
            (for loops that hoist work out of the per-item statement, such as
            broadcasting by stepping instead of dividing). It must run exactly the
            same per-item math as ``body``.
        module: the module the kernels belong to (its globals are visible and its
            file anchors numba's cache); defaults to this one.
        names: extra globals the statement refers to (scalar ``@njit`` functions,
            ``@dual`` functions: they resolve to each target's twin).
    """
    import sys
    mod = sys.modules[module] if isinstance(module, str) else module
    g = dict(vars(mod)) if mod is not None else {}
    g.update(np=np, cuda=cuda)
    g.update(names)
    filename = getattr(mod, "__file__", None) or __file__
    g["__name__"] = getattr(mod, "__name__", __name__)
    body = _dedent(body)
    out = []
    for target, tmpl in (("cpu", _CPU_TEMPLATE), ("cuda", _CUDA_TEMPLATE)):
        fname = f"_{name}_{target}"
        if target == "cpu" and cpu_body is not None:
            src = f"\ndef {fname}({params}):\n{_indent(_dedent(cpu_body), 4)}\n"
        else:
            src = tmpl.format(name=fname, params=params, index=index, count=count, body=_indent(body, 8))
        ns = dict(g)
        exec(compile(src, filename, "exec"), ns)
        fn = ns[fname]
        fn.__module__ = g["__name__"]
        fn.__source__ = src
        lk = LazyKernel(fn, target, cache=(target == "cpu"))
        if GENERATED.get(fname) is not None and GENERATED[fname].py.__source__ != src:
            raise ValueError(f"two different kernels named {fname!r}")
        GENERATED[fname] = lk
        out.append(lk)
    return KernelPair(name, out[0], out[1])
