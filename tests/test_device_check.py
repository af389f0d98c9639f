"""The GPU check (bench/device_check.py) works before a GPU is lent: its rehearsal runs
every step's code path on numba's CUDA simulator, on an image without the view
libraries (or torch), and its real mode without a GPU exits 2 with the reason."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "device_check.py"
BLOCKED = ("ipywidgets", "graphviz", "jupyterlab", "IPython", "torch")   # not on the device image
STEPS = ("ptx", "tests", "cases", "models", "peers", "ort")


def _blocking_path(tmp_path) -> str:
    """A directory of packages that fail to import, first on PYTHONPATH: every process the
    check starts (its case shards, pytest, the warm-up) sees them missing."""
    d = tmp_path / "blocked"
    for m in BLOCKED:
        (d / m).mkdir(parents=True)
        (d / m / "__init__.py").write_text(f"raise ImportError('{m} is not on the device image')\n")
    return os.pathsep.join([str(d)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def _run(tmp_path, *args, timeout=600):
    out = tmp_path / "out" / "not-yet-made"          # $OUT need not exist
    env = dict(os.environ, OUT=str(out), PYTHONPATH=_blocking_path(tmp_path))
    r = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                       timeout=timeout, cwd=ROOT)
    return r, out


def test_rehearsal_runs_every_step_without_view_libraries(tmp_path):
    r, out = _run(tmp_path, "--rehearse")
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    res = json.loads((out / "device_check.json").read_text())
    assert res["rehearse"] and res["simulator"]
    steps = res["steps"]
    assert set(steps) == set(STEPS)
    for name in STEPS:
        assert isinstance(steps[name].get("seconds"), (int, float)), name
    # every step's code path ran to its end: ok, or (peers) skipped for want of cupy only
    bad = {k: v for k, v in steps.items() if v["status"] != "ok"}
    try:
        import cupy  # noqa: F401
        has_cupy = True
    except Exception:  # noqa: BLE001
        has_cupy = False
    if not has_cupy:
        assert steps["peers"]["status"] == "skipped" and "cupy not installed" in steps["peers"]["reason"]
        assert all("ours_ms" in row and "error" not in row for row in steps["peers"]["rows"]), steps["peers"]
        bad.pop("peers")
    if steps["ort"]["status"] == "skipped":      # no onnxruntime-gpu here: the reason names the EP
        assert "CUDAExecutionProvider" in steps["ort"]["reason"], steps["ort"]
        bad.pop("ort")
    if steps["ptx"]["status"] == "skipped":      # as tests/ptx_tools.py skips: no libNVVM here
        assert "libNVVM/libdevice not available" in steps["ptx"]["reason"], steps["ptx"]
        bad.pop("ptx")
    else:
        assert steps["ptx"]["kernels"] == steps["ptx"]["of"] > 0 and steps["ptx"]["ptx_chars"] > 0
    assert not bad, json.dumps(bad, indent=1)[:4000]
    assert steps["tests"]["counts"].get("passed", 0) >= 1 and not steps["tests"]["counts"].get("failed")
    c = steps["cases"]
    assert c["claimed"] >= 3 and c["run"] == c["claimed"] == c["ok"] and c["not_run"] == 0
    m = steps["models"]["rows"]
    assert m and all(row["bitwise"] is True and row["cpu_ms"] > 0 for row in m), m
    assert all(w["rc"] == 0 for w in steps["models"]["warmup"]), steps["models"]["warmup"]
    md = (out / "device_check.md").read_text()
    for head in ("| step | status | seconds | note |", "## ptx", "## tests", "## cases", "## models", "## peers",
                 "| model | bitwise CPU=CUDA |", "| case | ours ms |"):
        assert head in md, head
    for name in STEPS:
        assert f"| {name} | {steps[name]['status']} |" in md


def test_markdown_and_json_keep_a_failed_step():
    """A step that raised or timed out is reported with its status and what it had."""
    import numpy as np
    dc = _module()
    res = {"started": "now", "rehearse": True, "steps": {
        "ptx": {"status": "error", "error": "Traceback ...\nRuntimeError: boom", "seconds": 1.0},
        "cases": {"status": "timed out", "claimed": 3, "run": 1, "not_run": 2, "cuda_passed": np.int64(1),
                  "bitwise_equal": 1, "ok": 1, "not_ok": [], "seconds": np.float32(2.5)}}}
    text = json.dumps(res, default=dc.to_json)
    assert json.loads(text)["steps"]["cases"]["cuda_passed"] == 1
    md = dc.markdown(res)
    assert "| ptx | error | 1.0 | RuntimeError: boom |" in md
    assert "| cases | timed out | 2.5 |" in md and "| 3 | 1 | 2 | 1 | 1 | 1 |" in md
    assert "| models | not started |" in md


def test_real_mode_without_a_gpu_exits_2_with_the_reason(tmp_path, monkeypatch):
    from hetero_explore.providers.cuda import _certainly_no_gpu_driver
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")     # the question is about the hardware
    no_gpu = _certainly_no_gpu_driver()
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")     # the script must turn the simulator off itself
    if not no_gpu:
        pytest.skip("this machine may have a GPU: the real check would run")
    r, out = _run(tmp_path, timeout=300)
    assert r.returncode == 2, (r.stdout[-2000:], r.stderr[-2000:])
    res = json.loads((out / "device_check.json").read_text())
    assert "no CUDA GPU" in res["error"] and not res["rehearse"] and not res["simulator"]
    assert "no CUDA GPU" in r.stderr
    assert "**not run**: no CUDA GPU" in (out / "device_check.md").read_text()


def _module():
    sys.modules.pop("device_check", None)     # a fresh import each time
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import device_check
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return device_check


def test_importing_the_script_leaves_the_environment_alone():
    before = os.environ.get("NUMBA_ENABLE_CUDASIM")
    _module()
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == before


def test_a_step_that_raises_or_overruns_keeps_its_part_and_the_next_runs(tmp_path):
    import time
    dc = _module()

    def raises(part, ctx):
        part["done"] = 1
        raise RuntimeError("boom")

    def overruns(part, ctx):
        part["rows"] = ["first"]
        time.sleep(30)
        part["rows"].append("never")
        return "ok"

    def fine(part, ctx):
        part["rows"] = [1]
        return "ok"
    res = {"steps": {}}
    ctx = {"t0": time.perf_counter(), "budget": {"a": 5, "b": 1, "c": 5}}
    t = time.perf_counter()
    dc.run_steps(res, ctx, [("a", raises), ("b", overruns), ("c", fine)], tmp_path, total=60)
    assert time.perf_counter() - t < 10
    a, b, c = (res["steps"][k] for k in "abc")
    assert a["status"] == "error" and a["done"] == 1 and "RuntimeError: boom" in a["error"]
    assert b["status"] == "timed out" and b["rows"] == ["first"]
    assert c["status"] == "ok" and c["rows"] == [1]
    on_disk = json.loads((tmp_path / "device_check.json").read_text())
    assert on_disk["steps"]["b"]["rows"] == ["first"]


def test_a_background_process_past_its_deadline_is_killed(tmp_path):
    import time
    dc = _module()
    p = dc._popen([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"],
                  tmp_path / "log")
    time.sleep(1.5)
    t = time.perf_counter()
    rc, log = dc._finish(p, time.perf_counter() + 0.5)
    assert rc is None and time.perf_counter() - t < 5 and "started" in log


def test_ort_step_arguments_and_its_skip_reason():
    """--ort-eps picks profile=EP pairs (typed complaints otherwise); without onnxruntime-gpu the ort
    step is skipped with the EPs' reasons, and the markdown says so."""
    dc = _module()
    assert dc.parse_ort_eps([]) == {"ort-cuda": "ort:cuda", "tensorrt": "ort:tensorrt"}
    assert dc.parse_ort_eps(["--ort-eps", "tensorrt=ort:tensorrt"]) == {"tensorrt": "ort:tensorrt"}
    for bad, why in (["--ort-eps"], "needs profile=ort:EP"), (["--ort-eps", "tensorrt"], "profile=ort:EP items"), \
            (["--ort-eps", "nope=ort:cuda"], "unknown profile 'nope'"):
        with pytest.raises(ValueError, match=why):
            dc.parse_ort_eps(bad)
    from hetero_explore.providers import resolve
    if resolve("ort:cuda").available()[0]:
        pytest.skip("onnxruntime-gpu's CUDA EP is offered here: the step would run")
    part = {}
    assert dc.step_ort(part, {"ort_eps": {"ort-cuda": "ort:cuda"}}) == "skipped"
    assert "CUDAExecutionProvider" in part["reason"]
    md = dc.markdown({"steps": {"ort": {**part, "status": "skipped", "seconds": 0.1}}})
    assert "| ort | skipped |" in md and "## ort" in md and "CUDAExecutionProvider" in md


def test_bad_ort_eps_exit_2_before_anything_runs(tmp_path):
    r, out = _run(tmp_path, "--rehearse", "--ort-eps", "nope=ort:cuda", timeout=120)
    assert r.returncode == 2 and "unknown profile 'nope'" in r.stderr
