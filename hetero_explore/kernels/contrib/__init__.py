"""onnxruntime's contrib ops (domain ``com.microsoft``, and the few it registers in the default
domain), one module per family:

* :mod:`.norms`: SkipLayerNormalization, SkipSimplifiedLayerNormalization,
  SimplifiedLayerNormalization, EmbedLayerNormalization, QEmbedLayerNormalization;
* :mod:`.activations`: Gelu, BiasGelu, FastGelu, QuickGelu, BiasAdd, FusedGemm, FusedConv;
* :mod:`.matmul`: FusedMatMul, MatMulNBits, GatherBlockQuantized, MatMulIntegerToFloat,
  DynamicQuantizeMatMul, QGemm;
* :mod:`.attention`: Attention, MultiHeadAttention, GroupQueryAttention, RotaryEmbedding,
  QAttention;
* :mod:`.qlinear`: QLinearAdd/Mul/Sigmoid/LeakyRelu/GlobalAveragePool/AveragePool/Concat/Softmax,
  QuantizeLinear and DequantizeLinear of ``com.microsoft``;
* :mod:`.rnn`: DynamicQuantizeLSTM.

The schemas are those of onnxruntime's ``docs/ContribOperators.md``. Most of these ops are
compositions of standard ops (:mod:`.compose`): their kernels are the standard kernels, step by
step, so they are as portable as those. Each module lists its definitions in ``OPS``;
:mod:`..registry` names the modules.

numba's cache: the kernel modules directly under ``kernels/`` are stamped with the hash of all
kernel sources (:mod:`..target`); the kernels compiled here are stamped the same way, with this
package's sources added (:func:`_install_cache_locator`), so an edit to ``pmath.py`` or to a
module here recompiles them too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

CONTRIB_DIR = Path(__file__).resolve().parent
MS = "com.microsoft"


def _sources_hash() -> str:
    from ..target import SOURCES_HASH
    h = hashlib.sha256(SOURCES_HASH.encode())
    for p in sorted(CONTRIB_DIR.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _install_cache_locator() -> None:
    from numba.core import caching

    if any(getattr(c, "_hetero_explore_contrib", False) for c in caching.CacheImpl._locator_classes):
        return
    stamp = ("hetero_explore-contrib-kernels", _sources_hash())

    class _ContribSources:
        _hetero_explore_contrib = True

        @classmethod
        def from_function(cls, py_func, py_file):
            try:
                if Path(py_file).resolve().parent != CONTRIB_DIR:
                    return None
            except OSError:
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return stamp

    class ContribSourcesLocator(_ContribSources, caching.InTreeCacheLocator):
        """In-tree cache beside these modules."""

    class ContribSourcesUserWideLocator(_ContribSources, caching.UserWideCacheLocator):
        """The user-wide cache directory, when the package directory is read-only."""

    caching.CacheImpl._locator_classes[:0] = [ContribSourcesLocator, ContribSourcesUserWideLocator]


_install_cache_locator()
