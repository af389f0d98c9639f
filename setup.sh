#!/usr/bin/env bash
# Set up a fresh machine and run the main job on the bundled demo model.
#   bash setup.sh            # venv in .venv, the package (user install: no test tooling), Graphviz's dot,
#                            # the kernel warm-up, then the demo; test.sh adds what the tests need
#   EXTRAS=jupyter bash setup.sh  # which extras to install (default: lab,cuda; EXTRAS= for the bare CLI)
#   SKIP_DEMO=1 bash setup.sh     # without the demo; SKIP_WARMUP=1 skips compiling the kernels ahead of time
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"

if ! command -v dot >/dev/null 2>&1; then
  echo "[setup] Graphviz 'dot' not found: installing it"
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq graphviz >/dev/null
  elif command -v brew >/dev/null 2>&1; then
    brew install graphviz
  else
    echo "[setup] please install Graphviz (https://graphviz.org/download/) or use environment.yml with conda" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
EXTRAS="${EXTRAS-lab,cuda}"
SPEC="."; [ -n "$EXTRAS" ] && SPEC=".[$EXTRAS]"
echo "[setup] installing hetero_explore ($SPEC) into .venv"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e "$SPEC"

if [ "${SKIP_WARMUP:-0}" != "1" ]; then
  echo "[setup] compiling the kernels into numba's cache: hetero-explore warmup"
  .venv/bin/hetero-explore warmup
fi

if [ "${SKIP_DEMO:-0}" != "1" ]; then
  echo "[setup] running the demo: hetero-explore demo"
  .venv/bin/hetero-explore demo -o demo_report.html
fi
