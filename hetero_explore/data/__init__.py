"""Bundled and generated models: the demo model (``demo.onnx``, :mod:`.demo`) and small
seeded models for tests, demos and benchmarks (:mod:`.models`). They import nothing of the
package, so every layer may use them."""
