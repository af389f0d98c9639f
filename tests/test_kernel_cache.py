"""numba's disk cache across processes: a cached kernel that calls parallel code must run
first in a new process (it segfaulted; see :func:`hetero_explore.kernels.target.launch_threads`).

The entry that broke is rebuilt here on a toy module shaped like the CPU fast paths (a
dispatcher that asks the thread count and calls a ``prange`` kernel): process 1 caches the
parallel callee; process 2 loads the callee from the cache and compiles the caller, whose
cache entry then lacks numba's reload hook of parallel code; process 3 runs the caller
first. Before the fix process 3 died with SIGSEGV (an unresolved ``get_num_threads``); the
same happened to the demo after the test suite had filled the cache in the order it does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TOY = textwrap.dedent("""
    import numpy as np
    from numba import njit, prange
    from hetero_explore.kernels.cpu_fast.llvm import num_threads

    @njit(parallel=True, cache=True)
    def par(a):
        for i in prange(a.shape[0]):
            a[i] += 1.0

    @njit(cache=True)
    def caller(a):
        if num_threads() > 0:
            par(a)
""")


def _run(tmp_path, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_a_cached_caller_of_parallel_code_runs_first_in_a_new_process(tmp_path):
    (tmp_path / "toyfast.py").write_text(TOY)
    steps = [
        "import numpy as np, toyfast; toyfast.par(np.zeros(8)); print('cached the callee')",
        "import numpy as np, toyfast; toyfast.par(np.zeros(8)); a = np.zeros(8); toyfast.caller(a); "
        "print('cached the caller', a[0])",
        "import numpy as np, toyfast; a = np.zeros(8); toyfast.caller(a); print('ran', a[0])",
    ]
    for code in steps:
        r = _run(tmp_path, code)
        assert r.returncode == 0, (code, r.returncode, r.stderr[-2000:])
    assert r.stdout.strip() == "ran 1.0"
    assert any(p.suffix == ".nbi" for p in (tmp_path / "__pycache__").iterdir())   # it did use the cache


@pytest.mark.parametrize("module", ["hetero_explore.kernels.cpu_fast", "hetero_explore.kernels.forest",
                                    "hetero_explore.kernels.mlrows"])
def test_modules_with_parallel_kernels_start_the_threading_layer(tmp_path, module):
    r = _run(tmp_path, f"import {module}; from numba.np.ufunc import parallel; print(parallel._is_initialized)")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "True"
