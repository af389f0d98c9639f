#!/usr/bin/env bash
# Run the whole test suite. Uses the active environment when one is active and is not
# this checkout's .venv (a conda env from environment.yml, or another virtualenv);
# otherwise .venv, created by setup.sh when missing. Installs what the tests need
# (the package's [dev] extra) into that environment, and Debian's chromium for the
# browser tests when it is missing.
#   bash test.sh [pytest args]      (runs on every core, at most 4 workers; -n 0 for one process)
set -euo pipefail
cd "$(dirname "$0")"
ACTIVE="${CONDA_PREFIX:-${VIRTUAL_ENV:-}}"
if [ -n "$ACTIVE" ] && [ "$(cd "$ACTIVE" 2>/dev/null && pwd)" != "$(pwd)/.venv" ] && command -v python >/dev/null 2>&1; then
  PY="$(command -v python)"
  echo "[test] using the active environment: $ACTIVE"
  if ! "$PY" -c "import hetero_explore, pytest, hypothesis, onnxruntime" >/dev/null 2>&1; then
    if [ -n "${CONDA_PREFIX:-}" ]; then
      echo "[test] installing the package into it (conda provides the dependencies: environment.yml)"
      "$PY" -m pip install -q -e . --no-deps
    else
      echo "[test] installing the package with its test extras into it"
      "$PY" -m pip install -q -e '.[dev]'
    fi
  fi
else
  if [ ! -x .venv/bin/python ]; then
    SKIP_DEMO=1 bash setup.sh
  fi
  PY=.venv/bin/python
  echo "[test] installing the test tooling into .venv (the package's [dev] extra; quick when present)"
  "$PY" -m pip install -q -e '.[dev]'

fi
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "[test] installing Debian's chromium for the browser tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
export NUMBA_ENABLE_CUDASIM="${NUMBA_ENABLE_CUDASIM:-1}"
# One pytest worker per core (pytest-xdist), at most TEST_WORKERS (default 4); pass -n 0
# to run in one process (a later -n wins).
WORKERS=()
if "$PY" -c "import xdist" >/dev/null 2>&1; then
  # worksteal: a worker that runs out of tests takes half of another's remaining ones
  WORKERS=(-n auto --maxprocesses "${TEST_WORKERS:-4}" --dist worksteal)
fi
# --durations: the slowest tests in every run (CI keeps the suite under its time budget)
exec "$PY" -m pytest -q --durations=40 "${WORKERS[@]}" "$@"
