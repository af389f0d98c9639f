#!/usr/bin/env bash
# The GPU check for a lent device machine: bash bench/device_check.sh  (results under $OUT)
cd "$(dirname "$0")/.." && NUMBA_ENABLE_CUDASIM=0 timeout 480 python bench/device_check.py "$@"
