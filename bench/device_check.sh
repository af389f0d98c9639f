#!/usr/bin/env bash
# The GPU check for a lent device machine: bash bench/device_check.sh  (results under $OUT;
# --rehearse: the same steps on numba's CUDA simulator with tiny subsets, no GPU needed)
cd "$(dirname "$0")/.." && timeout 470 "${PYTHON:-python}" bench/device_check.py "$@"
