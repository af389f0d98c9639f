"""Helpers the tests share: running one node (:mod:`.harness`), comparing bits with one NaN
rule (:mod:`.bits`), CPU ↔ CUDA-simulator runs (:func:`.harness.run_both`)."""
