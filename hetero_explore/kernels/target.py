"""Targets: where a kernel runs, how it is compiled, launched and fed.

A :class:`Target` is the only place that knows a target's compiler and launch
convention. Op definitions never branch on a target's name: they generate a
:class:`KernelPair` (a kernel for every registered target from one statement, see
:func:`kernel_pair`), move metadata with :meth:`Target.to_device` and run with
:meth:`Target.launch`. Targets are a registry (:func:`register_target`): each
brings its kernel template (:attr:`Target.template`) and its compile functions
(:meth:`Target.compile` for kernels, :meth:`Target.compile_device` for ``@dual``
functions), and generation loops over the registry. A new executing target is
one :class:`Target` subclass with its template, registered; kernel pairs made
before it was registered generate its kernel on first use
(``tests/test_targets.py`` registers a toy one). Target-specific rules (the CPU
fast paths) are registered by key in :mod:`.overrides`.

Three process-wide concerns (the first two kept to this project's own code):

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
  defined in this package's kernel sources (``kernels/*.py`` and every kernel
  sub-package, such as ``kernels/cpu_fast/``; not ``kernels/host/``, whose
  host-value ops have no numba code) are cached with a stamp that is the hash
  of *all* kernel sources instead: any edit to any kernel source recompiles
  every kernel, and nobody deletes ``__pycache__`` by hand.
* **Threads that pay.** The CPU fast paths run large kernels with
  ``prange`` (numba's threading layer; ``numba.set_num_threads`` or
  ``NUMBA_NUM_THREADS`` choose how many; results are the same bits for any
  count). With the ``tbb`` package installed (the project depends on it), numba's TBB
  layer runs them: the calling thread executes every block that no worker has taken, so a
  region on a machine whose other cores are busy costs what one thread costs instead of
  waiting for a worker to be scheduled (OpenMP's static blocks wait for every thread). This
  module loads TBB's library from the environment's ``lib/`` (where pip puts it, off the
  loader's path) unless ``NUMBA_THREADING_LAYER`` names a layer. Without TBB numba uses
  OpenMP: with its default (active) wait policy, a parallel
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
import types
from pathlib import Path

import numpy as np
from numba import njit

from . import overrides

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see the module docs: threads that sleep when idle


def _load_tbb() -> bool:
    """Make numba's TBB threading layer loadable when the ``tbb`` wheel is installed (see the
    module docs: the calling thread runs every block no worker has taken, so a parallel region
    never waits for a thread that is not running). pip puts ``libtbb.so.12`` in the
    environment's ``lib/``, which the dynamic loader does not search; loading it by path
    first lets numba's ``tbbpool`` find it. Only when the user has not chosen a layer
    (``NUMBA_THREADING_LAYER``); True when TBB's library is loaded."""
    if os.environ.get("NUMBA_THREADING_LAYER", "default") != "default" or os.name != "posix":
        return False
    import ctypes
    import sys
    for lib in ("libtbb.so.12", "libtbb.12.dylib"):
        try:
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)     # already on the loader's path
            return True
        except OSError:
            pass
        p = Path(sys.prefix) / "lib" / lib
        if p.exists():
            try:
                ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                return False
    return False


TBB = _load_tbb()


def launch_threads() -> None:
    """Start numba's threading layer now; every module with parallel code calls it when it
    is imported.

    Parallel code finds the layer's functions (``numba_parallel_for``, ``get_num_threads``)
    as symbols that starting the layer registers. A function compiled with ``prange`` starts
    it when it is loaded from numba's disk cache, but one that only *calls* parallel code
    does not always: when its callee was itself loaded from the cache, numba forgets the
    callee's reload hook while linking the caller, so the caller's cache entry starts
    nothing and, run first in a new process, jumps to an unresolved symbol (a segmentation
    fault). Whether that happens depends on which signatures earlier processes compiled in
    which order (``tests/test_kernel_cache.py`` rebuilds such an entry), so the layer is
    started as soon as any parallel kernel can exist."""
    from numba.np.ufunc.parallel import _launch_threads
    _launch_threads()

THREADS_PER_BLOCK = 128
KERNEL_DIR = Path(__file__).resolve().parent
#: host-value ops without numba code: outside the stamp (editing them recompiles nothing)
HOST_DIR = KERNEL_DIR / "host"

# --------------------------------------------------------------------------------------------
# numba's on-disk cache, keyed on every kernel source
# --------------------------------------------------------------------------------------------


def is_kernel_source(path) -> bool:
    """Is ``path`` a kernel source: a ``.py`` file in ``kernels/`` or one of its sub-packages,
    except ``kernels/host/``?"""
    try:
        rel = Path(path).resolve().relative_to(KERNEL_DIR)
    except (OSError, ValueError):
        return False
    return rel.suffix == ".py" and rel.parts[0] != HOST_DIR.name and "__pycache__" not in rel.parts


def kernel_sources() -> list[Path]:
    """Every kernel source (see :func:`is_kernel_source`), in a fixed order."""
    return sorted((p for p in KERNEL_DIR.rglob("*.py") if is_kernel_source(p)),
                  key=lambda p: p.relative_to(KERNEL_DIR).as_posix())


def _sources_hash() -> str:
    h = hashlib.sha256()
    for p in kernel_sources():
        h.update(p.relative_to(KERNEL_DIR).as_posix().encode())
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
            if not is_kernel_source(py_file):
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
    object as ``cuda``; :func:`_retarget` hands the compiler the real module."""

    _module = None

    def load(self):
        if _CudaModule._module is None:
            from numba import cuda as module
            _install_nvvm_option()
            _CudaModule._module = module
        return _CudaModule._module

    def __getattr__(self, name):
        return getattr(self.load(), name)

    def __retarget__(self, target: str):
        """What a function compiled for ``target`` sees under this name: the real module
        (the kernel calls ``cuda.grid`` & co.)."""
        return self.load()

    def __repr__(self) -> str:
        return "<numba.cuda, imported on first use>" if _CudaModule._module is None else repr(_CudaModule._module)


cuda = _CudaModule()

# --------------------------------------------------------------------------------------------
# lazily compiled kernels and the targets
# --------------------------------------------------------------------------------------------


class LazyKernel:
    """A Python kernel function compiled for one target on first use (by the target's
    :meth:`Target.compile`)."""

    def __init__(self, fn, target: str, cache: bool = True):
        self.py = fn
        self.target = target
        self._cache = cache
        self._compiled = None

    @property
    def compiled(self):
        if self._compiled is None:
            self._compiled = get_target(self.target).compile(_retarget(self.py, self.target), self._cache)
        return self._compiled

    def __call__(self, *args):
        return self.compiled(*args)

    def __getitem__(self, config):
        return self.compiled[config]

    def __repr__(self) -> str:
        return f"LazyKernel({self.py.__name__}, {self.target})"


class KernelPair:
    """One op's kernel on every registered target, generated from one definition
    (:func:`kernel_pair`): ``kernels[target name]``, and ``.cpu``/``.cuda`` for the two
    built-in targets. A target registered after the pair was made gets its kernel generated
    on first use. Target-specific replacements (the CPU fast paths) are not kept here: they
    are registered by the pair's name in :mod:`.overrides`."""

    __slots__ = ("name", "kernels", "_spec")

    def __init__(self, name: str, kernels: dict, spec=None):
        self.name = name
        #: target name -> LazyKernel
        self.kernels = kernels
        self._spec = spec     # what generates a kernel for a target registered later

    def kernel(self, target: str) -> LazyKernel:
        """The generated kernel for the target named ``target``."""
        k = self.kernels.get(target)
        if k is None:
            if self._spec is None or target not in TARGETS:
                raise KeyError(f"kernel pair {self.name!r} has no kernel for target {target!r} "
                               f"(it has: {', '.join(self.kernels)}; registered targets: {', '.join(TARGETS)})")
            k = self.kernels[target] = _generate(self._spec, TARGETS[target])
        return k

    @property
    def cpu(self) -> LazyKernel:
        return self.kernel("cpu")

    @property
    def cuda(self) -> LazyKernel:
        return self.kernel("cuda")

    def __repr__(self) -> str:
        return f"KernelPair({self.name})"


class Dual:
    """One Python function compiled for every target that calls it (see :mod:`.common`):
    ``.on(target name)`` (``.cpu``, ``.cuda``), by the target's :meth:`Target.compile_device`.
    Inside a kernel or another ``@dual`` function compiled for a target, the name of a
    ``Dual`` resolves to its twin for that target (:func:`_retarget`)."""

    def __init__(self, fn, cache: bool = True):
        self.py = fn
        self._cache = cache
        self._twins = {}
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def on(self, target: str):
        """This function compiled for the target named ``target``."""
        twin = self._twins.get(target)
        if twin is None:
            twin = self._twins[target] = get_target(target).compile_device(_retarget(self.py, target), self._cache)
        return twin

    @property
    def cpu(self):
        return self.on("cpu")

    @property
    def cuda(self):
        return self.on("cuda")

    def __retarget__(self, target: str):
        return self.on(target)

    def __call__(self, *args):
        return self.cpu(*args)


def _retarget(fn, target: str):
    """``fn`` with every global it names that knows how to (``__retarget__``: ``@dual``
    functions, the lazily imported ``cuda``) replaced by what it is on ``target``."""
    g = dict(fn.__globals__)
    for k in _referenced_names(fn.__code__):
        v = fn.__globals__.get(k)
        hook = getattr(type(v), "__retarget__", None)
        if hook is None or (isinstance(v, Dual) and v.py is fn):
            continue
        g[k] = hook(v, target)
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__module__ = fn.__module__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    return new


def _referenced_names(code) -> set:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _referenced_names(c)
    return names


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
    """Compile, launch, to-device for one kind of kernel code.

    A subclass names the target (``name``), says whether its kernels run on host memory
    (``host``), gives the template every generated kernel is written in (``template``,
    with ``namespace``: the globals that template needs) and compiles kernels
    (:meth:`compile`) and ``@dual`` functions (:meth:`compile_device`); then it moves
    arrays (:meth:`to_device`, :meth:`to_host`) and runs a pair's kernel
    (:meth:`launch`). :func:`register_target` makes :func:`kernel_pair` generate for it."""

    name = "target"
    #: kernels run on host memory (and can read run-time values directly)
    host = True
    #: target-specific rules registered in :mod:`.overrides` may replace the generated kernels
    fast_paths = False
    #: the source of one generated kernel: ``def {name}({params}):`` that runs ``{body}``
    #: (indented 8 spaces) for every ``{index}`` below ``{count}``
    template = ""
    #: names the template's code uses beyond the kernel module's globals
    namespace: dict = {}

    def compile(self, fn, cache: bool):
        """``fn`` (a kernel, its ``@dual`` names already resolved for this target) compiled."""
        raise NotImplementedError

    def compile_device(self, fn, cache: bool):
        """``fn`` (a ``@dual`` function, resolved for this target) compiled to be called from
        this target's kernels."""
        raise NotImplementedError

    def kernel_source(self, fname: str, params: str, body: str, index: str, count: str,
                      host_body: str | None = None) -> str:
        """The source of the kernel ``fname`` generated from a per-item ``body`` (a host target
        runs ``host_body``, when given, as the whole function body instead)."""
        if self.host and host_body is not None:
            return f"\ndef {fname}({params}):\n{_indent(_dedent(host_body), 4)}\n"
        return self.template.format(name=fname, params=params, index=index, count=count, body=_indent(body, 8))

    def to_device(self, *arrays):
        raise NotImplementedError

    def to_host(self, a) -> np.ndarray:
        """A host (numpy) copy or view of an array this target's kernels use."""
        raise NotImplementedError

    def launch(self, pair: KernelPair, n: int, *args) -> None:
        """Run ``pair``'s kernel for this target over ``n`` items (output elements or rows).
        While a :class:`Recording` is open in this thread, a target that can be replayed
        (the CPU's) also appends the call it made to it; any other target spoils it."""
        RECORDING.spoil()
        if n > 0:
            pair.kernel(self.name)(*args)

    def call(self, fn, *args) -> None:
        """Call a compiled function of this target directly (``fn(*args)``: a hand-tuned CPU
        path that is not a kernel pair), recorded as :meth:`launch` records."""
        RECORDING.spoil()
        fn(*args)

    def prepared(self, key, *args, **kw):
        """The run function that the ``prepare`` rule registered for ``(key, this target)`` in
        :mod:`.overrides` builds from ``args`` (a build-time step: packing a constant weight),
        or None: no rule, fast paths off, or the rule declines these arguments (then the op
        builds its generic run). ``key``: a :class:`KernelPair` or its name."""
        if not self.fast_paths:
            return None
        r = overrides.rule(key, self.name)
        if r is None or r.prepare is None:
            return None
        return r.prepare(self, *args, **kw)

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
    """numba ``njit`` kernels on host memory; the CPU fast paths (:mod:`.overrides`) replace
    generated kernels unless ``generated_only``."""

    name = "cpu"
    host = True
    template = """
def {name}({params}):
    for {index} in range({count}):
{body}
"""

    def __init__(self, generated_only: bool = False):
        #: run the generated kernels even where a CPU fast path exists (tests use this)
        self.generated_only = generated_only
        self.fast_paths = not generated_only
        #: the fast paths' run kernels by pair name (the registry's live table; none when off)
        self._runs = {} if generated_only else overrides.runs(self.name)

    def compile(self, fn, cache: bool):
        # nogil: a CPU kernel releases the GIL while it runs, so that a run in a worker
        # thread (the app's Execute) leaves the interpreter's other threads responsive
        return njit(cache=cache, error_model="numpy", nogil=True)(fn)

    def compile_device(self, fn, cache: bool):
        return njit(cache=cache, error_model="numpy")(fn)

    def to_device(self, *arrays):
        return arrays if len(arrays) != 1 else arrays[0]

    def to_host(self, a) -> np.ndarray:
        return a

    def launch(self, pair: KernelPair, n: int, *args) -> None:
        # straight to the compiled dispatcher: this runs once per node per run, and small
        # nodes cost little more than the call itself
        k = self._runs.get(pair.name)
        if k is None:
            k = pair.kernels["cpu"]
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
    """numba-cuda kernels (one thread per item) on a GPU or numba's simulator."""

    name = "cuda"
    host = False
    template = """
def {name}({params}):
    {index} = cuda.grid(1)
    if {index} < {count}:
{body}
"""
    namespace = {"cuda": cuda}

    def compile(self, fn, cache: bool):
        return cuda.jit(fn)

    def compile_device(self, fn, cache: bool):
        return cuda.jit(device=True)(fn)

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
            pair.kernels["cuda"][blocks, threads](*args)


def _sim_errstate():
    """In numba's CUDA simulator kernels run as Python on numpy scalars, which warn on
    overflow or division by zero where compiled code silently gives inf/NaN (the same
    IEEE results): keep the simulator as quiet as the hardware."""
    from numba import config
    if getattr(config, "ENABLE_CUDASIM", False):
        return np.errstate(all="ignore")
    return contextlib.nullcontext()


#: the registered targets by name, in registration order (kernel_pair generates for each)
TARGETS: dict[str, Target] = {}


def register_target(target: Target) -> Target:
    """Register an executing target: every kernel pair gets a kernel for it (generated at
    once for pairs made from now on, on first use for earlier ones). Returns ``target``."""
    if not target.template:
        raise ValueError(f"target {target.name!r} has no kernel template")
    old = TARGETS.get(target.name)
    if old is not None and type(old) is not type(target):
        raise ValueError(f"a different target is already registered as {target.name!r}: {old!r}")
    TARGETS[target.name] = target
    return target


def unregister_target(name: str) -> None:
    """Remove a target registered with :func:`register_target` (a test's toy target); the
    kernels already generated for it stay with their pairs."""
    if name in ("cpu", "cuda"):
        raise ValueError(f"the built-in target {name!r} cannot be unregistered")
    TARGETS.pop(name, None)
    for fname in [f for f, k in GENERATED.items() if k.target == name]:
        del GENERATED[fname]


CPU = register_target(CPUTarget())
CUDA = register_target(CUDATarget())


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


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else line for line in text.strip("\n").splitlines())


def _dedent(text: str) -> str:
    import textwrap
    return textwrap.dedent(text).strip("\n")


#: every generated kernel by function name (``_<name>_<target>``: ``_<name>_cpu``,
#: ``_<name>_cuda``), for tools that look kernels up by name (the PTX compile tests, warm-up)
GENERATED: dict = {}


class _Spec:
    """What :func:`kernel_pair` was given: enough to generate the pair's kernel for any target."""

    __slots__ = ("name", "params", "body", "count", "index", "host_body", "globals", "filename")

    def __init__(self, name, params, body, count, index, host_body, g, filename):
        self.name, self.params, self.body, self.count, self.index = name, params, body, count, index
        self.host_body, self.globals, self.filename = host_body, g, filename


def _generate(spec: _Spec, target: Target) -> LazyKernel:
    fname = f"_{spec.name}_{target.name}"
    src = target.kernel_source(fname, spec.params, spec.body, spec.index, spec.count, spec.host_body)
    ns = dict(spec.globals)
    ns.update(target.namespace)
    exec(compile(src, spec.filename, "exec"), ns)
    fn = ns[fname]
    fn.__module__ = spec.globals["__name__"]
    fn.__source__ = src
    lk = LazyKernel(fn, target.name, cache=target.host)
    if GENERATED.get(fname) is not None and GENERATED[fname].py.__source__ != src:
        raise ValueError(f"two different kernels named {fname!r}")
    GENERATED[fname] = lk
    return lk


def kernel_pair(name: str, params: str, body: str, *, count: str = "out.shape[0]", index: str = "i",
                host_body: str | None = None, module=None, **names) -> KernelPair:
    """Generate a kernel for every registered target from one per-item statement.

    Args:
        name: a unique name (used for the functions and numba's cache files).
        params: the kernel's parameter list, e.g. ``"x, out, alpha"``.
        body: the statement(s) run for each item ``index`` < ``count``, e.g.
            ``"out[i] = f(x[i], alpha)"``; the CPU kernel runs them in a loop,
            the CUDA kernel once per thread (each target's :attr:`Target.template`).
        count: the number of items (an expression over the parameters).
        host_body: optionally, the whole body of a host target's function instead of
            the loop (for loops that hoist work out of the per-item statement, such as
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
    g.update(np=np)
    g.update(names)
    filename = getattr(mod, "__file__", None) or __file__
    g["__name__"] = getattr(mod, "__name__", __name__)
    spec = _Spec(name, params, _dedent(body), count, index, host_body, g, filename)
    return KernelPair(name, {t.name: _generate(spec, t) for t in TARGETS.values()}, spec)
