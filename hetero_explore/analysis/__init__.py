"""Comparing runs (bytes, ULP, blame), conformance against onnx's cases, sweeps over many models."""
