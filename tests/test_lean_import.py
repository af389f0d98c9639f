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
from hetero_explore import models
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
