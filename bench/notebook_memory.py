"""Notebook memory: what re-running a cell costs a real kernel (run by hand; a short version runs in
tests/test_trust_holes.py).

    python bench/notebook_memory.py --times 100

The cell ``ex = he.explore(model); ex.execute(); ex.export_html(...); ex.show()`` (the app as
the cell's value, as a notebook displays it) runs ``--times`` times in one ipykernel, started
through jupyter_client as JupyterLab starts it; after every ``--every`` runs the kernel reports
its resident memory and how many widgets ipywidgets still holds. Also ``--same``: one explorer,
``show()`` again and again. Prints the growth per run (MB) fitted over the second half.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

SETUP = """
import gc, os, warnings
warnings.simplefilter("ignore")
import hetero_explore as he
from hetero_explore.data import models
model = models.cnn("tiny")
from ipywidgets.widgets import widget as _wmod
def _probe():
    gc.collect()
    rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    reg = getattr(_wmod, "_instances", None)
    print("PROBE", rss, len(reg if reg is not None else _wmod.Widget.widgets), flush=True)
"""

CELL_NEW = """
ex = he.explore(model, providers=["gpu", "cpu"])
ex.execute()
ex.export_html(os.path.join(WORK, "r.html"))
ex.show()
"""

CELL_SAME = """
if "ex" not in globals():
    ex = he.explore(model, providers=["gpu", "cpu"]); ex.execute()
ex.export_html(os.path.join(WORK, "r.html"))
ex.show()
"""


def _run(kc, code: str, timeout: float = 600.0) -> str:
    """Execute ``code``; its stdout (errors raise)."""
    msg_id = kc.execute(code, store_history=True)
    out = []
    t0 = time.monotonic()
    while True:
        msg = kc.get_iopub_msg(timeout=max(1.0, timeout - (time.monotonic() - t0)))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        t, c = msg["msg_type"], msg["content"]
        if t == "stream":
            out.append(c["text"])
        elif t == "error":
            raise RuntimeError("the kernel raised: " + "\n".join(c["traceback"])[-3000:])
        elif t == "status" and c["execution_state"] == "idle":
            return "".join(out)


def measure(times: int = 100, every: int = 10, same: bool = False, env: dict | None = None) -> list:
    """[(runs so far, RSS MB, widgets held)] from a fresh kernel."""
    from jupyter_client.manager import start_new_kernel
    work = tempfile.mkdtemp(prefix="hx-nbmem-")
    kenv = dict(os.environ if env is None else env)
    kenv.pop("NUMBA_ENABLE_CUDASIM", None)          # the laptop story: virtual gpu + cpu
    kenv["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    # a kernelspec that runs this interpreter, in a private Jupyter path
    spec = Path(work) / "jupyter" / "kernels" / "hxmem"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hx", "language": "python"}))
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "JUPYTER_RUNTIME_DIR")}
    os.environ["JUPYTER_PATH"] = str(Path(work) / "jupyter")
    os.environ["JUPYTER_RUNTIME_DIR"] = str(Path(work) / "runtime")
    kenv.update(JUPYTER_PATH=os.environ["JUPYTER_PATH"], JUPYTER_RUNTIME_DIR=os.environ["JUPYTER_RUNTIME_DIR"],
                IPYTHONDIR=str(Path(work) / "ipython"), MPLBACKEND="Agg")
    try:
        km, kc = start_new_kernel(kernel_name="hxmem", env=kenv)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        _run(kc, SETUP + f"\nWORK = {work!r}\n")
        rows = []
        cell = CELL_SAME if same else CELL_NEW
        for i in range(1, times + 1):
            _run(kc, cell)
            if i % every == 0 or i == 1:
                line = [ln for ln in _run(kc, "_probe()").splitlines() if ln.startswith("PROBE")][-1]
                _, rss, n = line.split()
                rows.append((i, float(rss), int(n)))
        return rows
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def slope(rows) -> float:
    """MB per run over the second half (least squares)."""
    import numpy as np
    half = [r for r in rows if r[0] >= rows[-1][0] / 2] or rows
    x = np.array([r[0] for r in half], float)
    y = np.array([r[1] for r in half], float)
    return float(np.polyfit(x, y, 1)[0]) if len(half) > 1 else 0.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--times", type=int, default=100)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--same", action="store_true", help="one explorer, shown again and again")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = measure(args.times, args.every, args.same)
    for i, rss, n in rows:
        print(f"after {i:4d} runs: RSS {rss:8.1f} MB, widgets held {n}")
    print(json.dumps({"runs": args.times, "same": args.same, "mb_per_run": round(slope(rows), 3),
                      "widgets_at_end": rows[-1][2], "seconds": round(time.perf_counter() - t0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
