"""Bundled and generated models: the demo model (``demo.onnx``, :mod:`.demo`) and small
seeded models for tests, demos and benchmarks (:mod:`.models`). They import nothing of the
package, so every layer may use them."""

from pathlib import Path as _Path

#: bundled model files by short name: ``demo`` (a small CNN whose Clip bound is computed at run
#: time) and ``mobilenet`` (a MobileNetV3-style network exported by torch with seeded weights:
#: 86 nodes named by module scope; bench/export_bundled.py re-exports it)
SAMPLES = {"demo": "demo.onnx", "mobilenet": "mobilenet_v3_tiny.onnx"}


def sample_path(name: str = "mobilenet") -> str:
    """The path of a bundled model (:data:`SAMPLES`): ``he.explore(sample_path("mobilenet"))``."""
    if name not in SAMPLES:
        raise KeyError(f"no bundled model {name!r}; bundled: {', '.join(SAMPLES)}")
    return str(_Path(__file__).with_name(SAMPLES[name]))
