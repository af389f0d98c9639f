"""The execution path works without the view libraries (a GPU machine's image has numba,
numba-cuda, numpy, onnx, onnxruntime and pandas, but not ipywidgets, graphviz or jupyterlab):
``import hetero_explore`` imports the views lazily."""

import os
import subprocess
import sys

SCRIPT = r'''
import sys
for m in ("ipywidgets", "graphviz", "jupyterlab", "IPython"):
    sys.modules[m] = None            # an import of any of them now fails
import hetero_explore as he
from hetero_explore.data import models
g = he.load_model(models.mlp("tiny"))
p = he.plan(g, ["gpu", "cpu"])
run = he.execute(p, he.random_inputs(g))
ref = he.execute_reference(g, "cpu", run.inputs)
assert bool(he.compare(run, ref)["byte_identical"].all())
print("ok")
'''


def test_execution_path_without_view_libraries():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM=os.environ.get("NUMBA_ENABLE_CUDASIM", "1"))
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]



CPU_ONLY = r'''
import sys
import hetero_explore as he
from hetero_explore.data import models
from hetero_explore.providers.cuda import _certainly_no_gpu_driver
g = he.load_model(models.mlp("tiny"))
p = he.plan(g, ["gpu", "cpu"])                 # a virtual GPU: planning needs no CUDA
run = he.execute(p, he.random_inputs(g))       # ... and its partitions run on CPU kernels
ex = he.explore(g)                             # default providers: asks whether there is a GPU
print("no driver" if _certainly_no_gpu_driver() else "maybe a driver")
print("cuda imported" if "numba.cuda" in sys.modules else "cuda not imported")
from hetero_explore.kernels.target import cuda
cuda.to_device                                 # the first use imports it
print("cuda imported" if "numba.cuda" in sys.modules else "cuda not imported")
'''


def test_cpu_only_work_does_not_import_numba_cuda():
    """numba.cuda costs ~0.4 s to import; planning and CPU runs must not pay it, nor
    explore()'s question "is there a GPU?" on a machine without an NVIDIA driver."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    r = subprocess.run([sys.executable, "-c", CPU_ONLY], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    driver, before, after = r.stdout.strip().splitlines()[-3:]
    assert after == "cuda imported", r.stdout
    if driver == "no driver":
        assert before == "cuda not imported", r.stdout


def test_no_driver_check_reads_the_device_files(monkeypatch):
    import importlib
    cuda_mod = importlib.import_module("hetero_explore.providers.cuda")
    monkeypatch.setattr(cuda_mod.sys, "platform", "linux")
    monkeypatch.delenv("NUMBA_CUDA_DRIVER", raising=False)
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")
    present: set = set()
    monkeypatch.setattr(cuda_mod.os.path, "exists", lambda p: p in present)
    monkeypatch.setattr(cuda_mod.glob, "glob", lambda pat: sorted(p for p in present if p.startswith("/dev/nvidia")))
    assert cuda_mod._certainly_no_gpu_driver()
    assert cuda_mod.cuda_status()[0] is False and "no NVIDIA driver" in cuda_mod.cuda_status()[1]
    for dev in ("/dev/nvidia0", "/proc/driver/nvidia", "/dev/dxg"):
        present = {dev}
        assert not cuda_mod._certainly_no_gpu_driver(), dev
    present = set()
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")    # the simulator: numba.cuda must be asked
    assert not cuda_mod._certainly_no_gpu_driver()
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")
    monkeypatch.setattr(cuda_mod.sys, "platform", "darwin")  # elsewhere: no shortcut
    assert not cuda_mod._certainly_no_gpu_driver()
