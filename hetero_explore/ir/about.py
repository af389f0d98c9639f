"""Versions of this package and of what it computes with (for ``--version``, reports and
bug reports)."""

from __future__ import annotations

#: this package's version (``hetero_explore.__version__``; keep equal to pyproject.toml's)
__version__ = "0.1.0"


def versions() -> dict[str, str]:
    """``{"hetero_explore": ..., "onnx": ..., "numba": ..., "numpy": ..., "pandas": ..., "Python": ...}``;
    a module that is missing is reported as ``"missing"``."""
    import platform

    out = {"hetero_explore": __version__}
    for mod in ("onnx", "numba", "numpy", "pandas"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - an optional module that is missing is reported as such
            out[mod] = "missing"
    out["Python"] = platform.python_version()
    return out
