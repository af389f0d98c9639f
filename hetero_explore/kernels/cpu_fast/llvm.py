"""The one LLVM-IR builder of the CPU micro-kernels.

A micro-kernel is a numba ``@intrinsic`` compiled inline into the fast path that calls it:
a block of accumulators held in vector registers for a whole k loop. :func:`micro_kernel`
turns an *emitter* (a Python function that writes the kernel's body through an :class:`IR`)
into such an intrinsic; the emitter gets the arguments as LLVM values, array arguments as
pointers to their first element. :class:`IR` holds what the emitters share: vector types,
pointer arithmetic, splats, zeroed accumulator slots and the multiply-add step.

The arithmetic rule of every micro-kernel: a multiply-accumulate ``acc = fma(a, b, acc)``
is one call of LLVM's ``llvm.fma.v<n>f32`` intrinsic (``vfmadd*ps``: the exact product plus
the accumulator, rounded once), lane for lane the scalar :func:`..fmadd.fma` of the
generated kernels (IEEE fma is correctly rounded, so a vector lane and a scalar call give
the same bits). Every other ``fmul``/``fadd`` stays two roundings: LLVM contracts nothing
without fast-math or ``contract`` flags, which these builders never set. Vectors run across
output elements, so no element's sequence is split or reordered. No bounds checks: the
callers guarantee the ranges.
"""

from __future__ import annotations

import contextlib
import inspect

from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

F32 = llvm_ir.FloatType()
I32 = llvm_ir.IntType(32)
I64 = llvm_ir.IntType(64)


def vec(n: int) -> llvm_ir.VectorType:
    """``<n x float>``."""
    return llvm_ir.VectorType(F32, n)


V8 = vec(8)


class IR:
    """An ``llvmlite`` IR builder with the operations the micro-kernels share (``b``: the
    builder itself, for everything else)."""

    __slots__ = ("b",)

    def __init__(self, builder):
        self.b = builder

    # --- integers and pointers -----------------------------------------------------------
    @staticmethod
    def c64(v) -> llvm_ir.Constant:
        return llvm_ir.Constant(I64, v)

    def add(self, a, b):
        return self.b.add(a, b)

    def mul(self, a, b):
        return self.b.mul(a, b)

    def at(self, base, idx):
        """``&base[idx]``."""
        return self.b.gep(base, [idx])

    def load(self, base, idx):
        """``base[idx]`` (a scalar)."""
        return self.b.load(self.b.gep(base, [idx]))

    def nonzero(self, v):
        """``v != 0`` (an integer flag argument)."""
        return self.b.icmp_signed("!=", v, llvm_ir.Constant(v.type, 0))

    def for_range(self, n):
        """``with ir.for_range(n) as k:`` a loop over k = 0 .. n-1."""
        return _loop_index(cgutils.for_range(self.b, n))

    # --- vectors ---------------------------------------------------------------------------
    def vptr(self, base, idx, vt=V8):
        """``&base[idx]`` as a pointer to a ``vt`` vector."""
        return self.b.bitcast(self.b.gep(base, [idx]), vt.as_pointer())

    def load_vec(self, base, idx, vt=V8):
        """``base[idx : idx + vt.count]`` as one (unaligned) vector load."""
        return self.b.load(self.vptr(base, idx, vt), align=4)

    def store_vec(self, v, base, idx):
        """``base[idx : idx + n] = v`` as one (unaligned) vector store."""
        self.b.store(v, self.vptr(base, idx, v.type), align=4)

    @staticmethod
    def undef(vt):
        return llvm_ir.Constant(vt, llvm_ir.Undefined)

    def shuffle(self, a, b, idx):
        return self.b.shuffle_vector(a, b, llvm_ir.Constant(llvm_ir.VectorType(I32, len(idx)), idx))

    def splat(self, v, n: int):
        """A ``<n x float>`` of the scalar ``v`` in every lane."""
        undef = self.undef(vec(n))
        return self.shuffle(self.b.insert_element(undef, v, llvm_ir.Constant(I32, 0)), undef, [0] * n)

    def lane(self, v, i: int):
        return self.b.extract_element(v, llvm_ir.Constant(I32, i))

    # --- accumulators -----------------------------------------------------------------------
    def accumulators(self, vt, n: int) -> list:
        """``n`` accumulator vectors at 0.0f (allocas that mem2reg turns into registers)."""
        slots = []
        for _ in range(n):
            slot = cgutils.alloca_once(self.b, vt)
            self.b.store(llvm_ir.Constant(vt, [0.0] * vt.count), slot)
            slots.append(slot)
        return slots

    def fma(self, a, b, c):
        """``fma(a, b, c)`` lane by lane (``llvm.fma``: exact a*b + c, rounded once), for
        scalars or vectors of float."""
        t = a.type
        name = f"llvm.fma.v{t.count}f32" if isinstance(t, llvm_ir.VectorType) else "llvm.fma.f32"
        fn = cgutils.get_or_insert_function(self.b.module, llvm_ir.FunctionType(t, [t, t, t]), name)
        return self.b.call(fn, [a, b, c])

    def mac(self, slot, a, b) -> None:
        """``slot = fma(a, b, slot)``: the kernel contract's multiply-accumulate (one rounding)."""
        self.b.store(self.fma(a, b, self.b.load(slot)), slot)

    def add_to(self, slot, v) -> None:
        """``slot = slot + v``."""
        self.b.store(self.b.fadd(self.b.load(slot), v), slot)

    def register_tile(self, R: int, vt, K, a_of, b_of, out, orow, resume, finish=None) -> None:
        """The register tile the GEMM-like micro-kernels share: R accumulator vectors of type
        ``vt``, 0.0f or (``resume`` != 0: a later k block) loaded from ``out`` at ``orow(r)``;
        for k = 0 .. K-1 ascending, acc[r] = fma(splat(a(r)), b, acc[r]) with ``b = b_of(k)`` (a
        vector) and ``a = a_of(k)`` (row r's scalar of step k), one fma each;
        then ``finish(accs)`` (a bias, say) and the stores back to ``orow(r)``."""
        accs = self.accumulators(vt, R)
        with self.b.if_then(self.nonzero(resume)):
            for r in range(R):
                self.b.store(self.load_vec(out, orow(r), vt), accs[r])
        with self.for_range(K) as k:
            bv = b_of(k)
            a = a_of(k)
            for r in range(R):
                self.mac(accs[r], self.splat(a(r), vt.count), bv)
        if finish is not None:
            finish(accs)
        for r in range(R):
            self.store_vec(self.b.load(accs[r]), out, orow(r))

    def transpose8(self, rows: list) -> list:
        """Eight ``<8 x float>`` rows to their eight columns (unpck/shufps/perm2f128 shuffles:
        data movement only)."""
        t = []
        for i in range(0, 8, 2):
            t.append(self.shuffle(rows[i], rows[i + 1], [0, 8, 1, 9, 4, 12, 5, 13]))
            t.append(self.shuffle(rows[i], rows[i + 1], [2, 10, 3, 11, 6, 14, 7, 15]))
        s = [None] * 8
        for h, (a, b) in enumerate(((0, 2), (4, 6))):
            s[4 * h] = self.shuffle(t[a], t[b], [0, 1, 8, 9, 4, 5, 12, 13])
            s[4 * h + 1] = self.shuffle(t[a], t[b], [2, 3, 10, 11, 6, 7, 14, 15])
            s[4 * h + 2] = self.shuffle(t[a + 1], t[b + 1], [0, 1, 8, 9, 4, 5, 12, 13])
            s[4 * h + 3] = self.shuffle(t[a + 1], t[b + 1], [2, 3, 10, 11, 6, 7, 14, 15])
        cols = [None] * 8
        for j in range(4):
            cols[j] = self.shuffle(s[j], s[4 + j], [0, 1, 2, 3, 8, 9, 10, 11])
            cols[4 + j] = self.shuffle(s[j], s[4 + j], [4, 5, 6, 7, 12, 13, 14, 15])
        return cols

    def store_first(self, v, n: int, base, idx) -> None:
        """The first ``n`` (<= 8) lanes of an ``<8 x float>`` at ``base[idx : idx + n]`` (4-, 2-
        and 1-lane stores)."""
        off = 0
        for w in (4, 2, 1):
            while n - off >= w:
                at = self.add(idx, self.c64(off))
                if w == 1:
                    self.b.store(self.lane(v, off), self.at(base, at))
                else:
                    self.store_vec(self.shuffle(v, v, list(range(off, off + w))), base, at)
                off += w


@contextlib.contextmanager
def _loop_index(loop_cm):
    with loop_cm as loop:
        yield loop.index


def micro_kernel(name: str, params: str, emit, **consts):
    """A numba intrinsic ``name(params...)`` (no result) whose body ``emit(ir, *args,
    **consts)`` writes; ``args`` are the call's arguments as LLVM values, an array argument as
    the pointer to its first element. ``name`` is unique per kernel (one intrinsic per
    ``consts``: a row count, a vector width)."""
    names = [p.strip() for p in params.split(",")]

    def typer(typingctx, *argtys):
        def codegen(context, builder, signature, args):
            vals = [context.make_array(ty)(context, builder, v).data if isinstance(ty, types.Array) else v
                    for ty, v in zip(signature.args, args)]
            emit(IR(builder), *vals, **consts)
            return context.get_dummy_value()

        return types.void(*argtys), codegen

    # numba reads the parameter names from the typer's signature
    P = inspect.Parameter
    typer.__signature__ = inspect.Signature([P(n, P.POSITIONAL_OR_KEYWORD) for n in ["typingctx"] + names])
    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = emit.__doc__
    return intrinsic(typer)


@intrinsic
def num_threads(typingctx):
    """numba.get_num_threads() through the threading layer's symbol, as numba's own
    parallel code calls it (numba.get_num_threads in a kernel reads a ctypes pointer, which
    keeps the kernel out of the disk cache). The threading layer registers the symbol: this
    package starts it when it is imported (:func:`..target.launch_threads`; numba's reload
    hook of parallel code does not always, see there). The Conv, MatMul/Gemm and Softmax
    dispatchers run their parallel loop only with more than one thread (a parallel region on
    one thread costs a few microseconds for nothing); the blocking never depends on it, so
    neither do the results."""
    from numba.np.ufunc.parallel import _launch_threads
    _launch_threads()

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(I64, []), "get_num_threads")
        return builder.call(fn, [])

    return types.intp(), codegen


@intrinsic
def parallel_chunks(typingctx, n):
    """numba.set_parallel_chunksize(n) through the threading layer's symbol (as
    :func:`num_threads`: the Python function reads a ctypes pointer, which keeps a kernel out of
    the disk cache); returns the previous value. Every parallel kernel of the fast paths sets
    :func:`shares` of its loop's iteration count before its ``prange`` loop and restores the
    previous value after it (a thread-local setting): numba then cuts the loop into PAR_SHARES
    chunks per thread instead of one contiguous share per thread, and TBB hands them out by
    work stealing. With one share per thread, a worker that starts late (woken for the region)
    or is preempted (the machine's other processes) holds half of the region and the calling
    thread waits for it; with chunks, the calling thread takes every chunk no worker has, so a
    region costs at most one chunk more than the work the running threads do. Chunks of one
    iteration did that too but cost memory-bound loops ~20-30% (a Relu over 2**18-2**20
    elements: 16 us static, 20 us one by one, 17 us in 4 chunks per thread, 2 threads): the
    stealing splits ranges and contiguous chunks keep each core on neighbouring data. The
    blocking itself never depends on the thread count, so neither do the results."""
    from numba.np.ufunc.parallel import _launch_threads
    _launch_threads()
    if not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(I64, [I64]),
                                            "set_parallel_chunksize")
        v = context.cast(builder, args[0], signature.args[0], types.intp)
        return builder.call(fn, [v])      # uintp set_parallel_chunksize(uintp): the previous value

    return types.intp(n), codegen


#: chunks per thread of a parallel loop (see :func:`parallel_chunks`)
PAR_SHARES = 4


@njit(cache=True, inline="always")
def shares(n):
    """The chunk size that cuts a parallel loop of ``n`` iterations into PAR_SHARES chunks
    per thread (at least one iteration each)."""
    return max(1, n // (PAR_SHARES * num_threads()))

