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

numba's cache: this package is a kernel sub-package, so :mod:`..target` stamps its modules with
the hash of every kernel source; an edit to ``pmath.py`` or to a module here recompiles them.
"""

from __future__ import annotations

MS = "com.microsoft"
