#!/usr/bin/env bash
# Run the whole test suite (after setup.sh). Installs the headless browser the
# browser tests use (Debian's chromium) when it is missing.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/python ]; then
  SKIP_DEMO=1 bash setup.sh
fi
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "[test] installing Debian's chromium for the browser tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
export NUMBA_ENABLE_CUDASIM="${NUMBA_ENABLE_CUDASIM:-1}"
exec .venv/bin/python -m pytest -q "$@"
