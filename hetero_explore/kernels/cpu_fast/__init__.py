"""CPU fast paths: hand-tuned rules that replace or prepare generated CPU kernels.

Each op's kernels are generated from one per-item statement (see
:func:`..target.kernel_pair`); the CUDA kernel runs that statement once per thread. Where a
plain loop over it is slow on a CPU, a function here computes the same values faster, and
:func:`register` registers it in :mod:`..overrides` under the kernel pair's name for the
``"cpu"`` target, JAX-style (the op modules never import this package):

* ``run`` rules replace a pair's generated CPU kernel with the same arguments:
  :mod:`.gemm` (a register-blocked GEMM), :mod:`.conv` and :mod:`.conv_packed` (Conv as
  register-blocked (indirect) GEMMs: pixel tiles x channel panels, pointwise row blocks x
  pixel panels, depthwise 8 pixels x 8 channels in an interleaved copy, padded phases or
  im2col where those do not fit; ConvTranspose as a GEMM and a scatter), :mod:`.pools`
  (rows of accumulators for AveragePool, shared row maxima for MaxPool), :mod:`.norms`
  (InstanceNormalization/GroupNormalization & co.: statistics of four groups side by side,
  the apply step per run of constant group, scale and bias), :mod:`.rows`
  (row-wise BatchNormalization/Softmax/LayerNormalization), :mod:`.elementwise` (Sigmoid and
  Erf from their near ranges' cheaper forms where the elements lie there; Add/Sub/Mul/Div;
  blocks in parallel), :mod:`.movement` (row-wise Resize/Pad, strided copies coalesced into
  contiguous rows or tiled transposes, gathers), :mod:`.rnn` (LSTM: the gate products of
  every gate row at once over transposed weights) and :mod:`.select` (TopK in one pass per row);
* ``prepare`` rules run when a node is built: MatMul/Gemm with a constant B pack it into
  the micro-kernel's panels (:func:`.gemm.mm_prepare`), Conv with a constant weight packs
  it for the path its geometry takes (:func:`.conv.conv_prepare`), LSTM transposes its
  constant weights and runs the whole node as one call (:func:`.rnn.lstm_prepare`).

The micro-kernels (register blocks held for a whole k loop) are written through one
LLVM-IR builder, :mod:`.llvm`. A fast path may reorder *which* output elements are
computed when (blocking, vectorising, threading across elements) but gives every element
exactly the sequence of float32 operations of the generated kernel (MaxPool: the same
selection; data movement: the same bits copied), so results are bit for bit the same:
``tests/test_fastpaths.py`` checks each rule against the generated kernel on random shapes,
and fails for a rule that has no cases there. ``CPUTarget(generated_only=True)`` runs the
generated kernels.

(The reductions' row and contiguous paths -- ReduceSum/Mean/Max, and on floats
ReduceSumSquare/L1/Prod/Min -- stay inline in ``reduce.py``, taken only when the target's
``fast_paths`` is on; the same test covers them.)
"""

from __future__ import annotations

from ..target import launch_threads

launch_threads()   # before any of this package's (parallel) kernels can load from the cache

from . import conv, elementwise, gemm, movement, norms, pools, rnn, rows, select  # noqa: E402


def register() -> None:
    """Register every CPU fast path in :mod:`..overrides` (called by
    :func:`..registry.build_registry`; importing this package registers nothing)."""
    for family in (gemm, conv, pools, rows, norms, movement, elementwise, rnn, select):
        family.register()
