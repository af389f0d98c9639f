#!/usr/bin/env bash
# The GPU check for a lent device machine: bash bench/device_check.sh  (results under $OUT;
# --rehearse: the same steps on numba's CUDA simulator with tiny subsets, no GPU needed)
cd "$(dirname "$0")/.." && timeout 470 "${PYTHON:-$(command -v python || command -v python3)}" bench/device_check.py "$@"
