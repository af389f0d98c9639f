"""The notebooks under notebooks/ run top to bottom, headless (nbclient), on this
interpreter's ipykernel, and are committed without outputs."""

import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["quickstart.ipynb", "whatif_transformer.ipynb", "fleet_sweep.ipynb"]
#: the notebooks that show the app (their widget state is stored)
APPS = {"quickstart.ipynb", "whatif_transformer.ipynb"}
CELL_TIMEOUT = 600


def kernel_env(tmp_path: Path) -> dict:
    """A kernelspec named python3 that runs *this* interpreter, in a private Jupyter path.

    The notebooks tell the laptop story (no GPU, no simulator): the kernel runs
    without NUMBA_ENABLE_CUDASIM, so their default providers are the virtual gpu and cpu."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (this venv)", "language": "python"}))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(JUPYTER_PATH=str(tmp_path / "jupyter"), JUPYTER_DATA_DIR=str(tmp_path / "jupyter"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), IPYTHONDIR=str(tmp_path / "ipython"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "config"), MPLBACKEND="Agg")
    return env


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}: a cell has outputs; clear them before committing"
            assert cell.execution_count is None, f"{name}: a cell has an execution count"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs(name, tmp_path, monkeypatch):
    env = kernel_env(tmp_path)
    for k in ("JUPYTER_PATH", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR"):
        monkeypatch.setenv(k, env[k])  # the kernelspec lookup happens in this process
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    # prove which interpreter ran it
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print('EXECUTABLE=' + sys.executable)"))
    work = tmp_path / "work"
    work.mkdir()
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT,
                                     resources={"metadata": {"path": str(work)}},
                                     store_widget_state=True)
    client.execute(env=env, cwd=str(work))
    out = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    assert f"EXECUTABLE={sys.executable}" in out
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # the widget was displayed and its state stored
    if name in APPS:
        assert "application/vnd.jupyter.widget-state+json" in nb.metadata.get("widgets", {})
    if name == "fleet_sweep.ipynb":
        report = work / "fleet_sweep.html"
        assert report.is_file() and "share of nodes off the first provider" in report.read_text(encoding="utf-8")
    if name == "quickstart.ipynb":
        report = work / "quickstart_report.html"
        assert report.is_file() and report.stat().st_size > 1000
