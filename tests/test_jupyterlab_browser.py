"""The quick-start notebook in a real JupyterLab, in headless Chromium.

JupyterLab runs on 127.0.0.1 with a private, token-less configuration in
temporary Jupyter directories (news and update checks off) and a kernelspec
that runs this interpreter. Debian's chromium is driven by Playwright's Python
package (``executable_path``; never a browser download). The test runs all
cells (a real torch export on NNAPI's and CoreML's tables), moves ``cpu`` to the top of
the provider order in the widget, sees the summary and the Graph tab show the new plan,
executes, sees "byte-identical" in the Diff tab, and saves screenshots under ``test-output/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"
OUT = ROOT / "test-output"
CHROMIUM = os.environ.get("HX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]
SERVER_START_S = 60
RUN_ALL_S = 240
STEP_MS = 60_000


def _requirements() -> str | None:
    if not Path(CHROMIUM).is_file() and shutil.which("chromium") is None:
        return f"Debian's chromium is not installed ({CHROMIUM}); `apt-get install -y chromium`"
    for mod, hint in (("playwright.sync_api", "pip install playwright"), ("jupyterlab", "pip install jupyterlab"),
                      ("ipykernel", "pip install ipykernel"), ("ipywidgets", "pip install ipywidgets")):
        try:
            __import__(mod)
        except ImportError:
            return f"{mod} is not installed ({hint})"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter_dirs(tmp: Path) -> dict:
    dirs = {k: tmp / k.lower() for k in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                                         "IPYTHONDIR")}
    for d in dirs.values():
        d.mkdir(parents=True)
    # the kernel is this interpreter
    spec = dirs["JUPYTER_DATA_DIR"] / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)", "language": "python"}))
    # no news, no update checks: as defaults (labconfig) and as user settings
    notif = {"fetchNews": "false", "checkForUpdates": False}
    labconfig = dirs["JUPYTER_CONFIG_DIR"] / "labconfig"
    labconfig.mkdir()
    (labconfig / "default_setting_overrides.json").write_text(json.dumps({
        "@jupyterlab/apputils-extension:notification": notif,
        # start the notebook's kernel without a "Select Kernel" dialog
        "@jupyterlab/notebook-extension:tracker": {"autoStartDefaultKernel": True}}))
    user = dirs["JUPYTER_CONFIG_DIR"] / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    user.mkdir(parents=True)
    (user / "notification.jupyterlab-settings").write_text(json.dumps(notif))
    # and the server neither fetches news nor checks for updates
    (dirs["JUPYTER_CONFIG_DIR"] / "jupyter_lab_config.json").write_text(json.dumps({"LabApp": {
        "news_url": None, "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate"}}))
    return {k: str(v) for k, v in dirs.items()}


def _wait_ready(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/api/status", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"jupyter lab did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # the server shuts its kernels down
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # our own child's process group
        proc.wait(timeout=10)


def test_quickstart_in_jupyterlab(tmp_path):
    why = _requirements()
    if why:
        pytest.skip(why)
    from playwright.sync_api import expect, sync_playwright

    work = tmp_path / "lab"
    work.mkdir()
    shutil.copy(NOTEBOOK, work / NOTEBOOK.name)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}  # the laptop story
    env.update(_jupyter_dirs(tmp_path / "jupyter"))
    env["JUPYTER_PATH"] = env["JUPYTER_DATA_DIR"]
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "jupyterlab.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip", "127.0.0.1",
           "--port", str(port), "--ServerApp.token=", "--ServerApp.password=",
           "--ServerApp.port_retries=0", f"--ServerApp.root_dir={work}"]
    OUT.mkdir(exist_ok=True)
    shot = OUT / "jupyterlab_quickstart.png"
    errors: list[str] = []
    requests: list[str] = []
    with open(log, "wb") as logf:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        _wait_ready(url, proc, log)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).is_file()
                                         else shutil.which("chromium"), headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(STEP_MS)
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
                page.on("request", lambda r: requests.append(r.url))
                try:
                    _drive(page, url, expect, OUT)
                finally:
                    page.screenshot(path=str(shot), full_page=False)
            finally:
                browser.close()
    finally:
        _stop(proc)
    assert shot.is_file() and shot.stat().st_size > 10_000
    outside = [u for u in requests if not u.startswith((url + "/", "ws://127.0.0.1:", "data:", "blob:"))]
    assert outside == [], outside  # nothing leaves the machine
    assert errors == [], errors


def _drive(page, url, expect, out: Path) -> None:
    page.goto(f"{url}/lab/tree/{NOTEBOOK.name}", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
    try:  # should not appear (autoStartDefaultKernel); accept the preferred kernel if it does
        dialog.wait_for(state="visible", timeout=3_000)
        dialog.locator("button", has_text="Select").click()
    except Exception:
        pass
    # Run → Run All Cells
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    # the last cell writes the report; the widget app is on the page
    expect(page.locator(".jp-OutputArea-output", has_text="wrote quickstart_report.html")).to_be_visible(
        timeout=RUN_ALL_S * 1000)
    app = page.locator(".hx-app").first
    expect(app).to_be_visible()
    # (text_content: JupyterLab may skip rendering cells outside the viewport, and innerText with them)
    n_nodes = int(re.search(r"(\d+) node\(s\)", app.locator(".hx-header").text_content()).group(1))
    summary = app.locator(".hx-summary")
    # the notebook left the app on coreml,cpu (or an ort EP): heterogeneous on a real export
    expect(summary).to_contain_text("across 2 device(s)")

    # move cpu to the top of the provider order
    select = app.locator(".hx-order select")
    labels = select.locator("option").all_text_contents()
    # ipywidgets writes the labels with non-breaking spaces
    cpu_label = next(lbl for lbl in labels if ". cpu (" in lbl.replace("\xa0", " "))
    select.select_option(label=cpu_label)
    app.locator("button.hx-order-up").click()
    expect(select.locator("option").first).to_contain_text("cpu")
    # the summary and the Graph tab show the new plan
    expect(summary).to_contain_text(f"1 partition(s) across 1 device(s); cpu: {n_nodes} node(s)")
    expect(app.locator(".hx-view-graph .hx-graph-caption")).to_contain_text("1 partition(s) on 1 device(s)")
    expect(app.locator(".hx-view-graph svg").first).to_be_visible()
    app.locator(".hx-tabs").scroll_into_view_if_needed()
    page.screenshot(path=str(out / "jupyterlab_quickstart_graph.png"))

    # execute, then read the Diff tab
    app.locator("button.hx-execute").click()
    expect(app.locator(".hx-status")).to_contain_text("byte-identical", timeout=120_000)
    app.locator(".hx-tabs .lm-TabBar-tab", has_text="Diff").first.click()
    expect(app.locator(".hx-view-diff .hx-verdict")).to_contain_text("byte-identical")
    app.locator(".hx-view-diff").scroll_into_view_if_needed()

    # the Run tab draws the run's timeline (the report's renderer)
    app.locator(".hx-tabs .lm-TabBar-tab", has_text="Run").first.click()
    timeline = app.locator(".hx-view-run svg.he-timeline")
    expect(timeline).to_be_visible()
    assert timeline.locator("rect.he-partition").count() >= 1
    page.screenshot(path=str(out / "jupyterlab_run_timeline.png"))
    # the Placement table sorts and filters (in the kernel: ipywidgets' HTML runs no script)
    app.locator(".hx-tabs .lm-TabBar-tab", has_text="Placement").first.click()
    app.locator(".hx-sort-placement select").select_option(label="name")
    app.locator("button.hx-desc-placement").click()
    page_note = app.locator(".hx-view-placement .hx-table-page")
    expect(page_note).to_contain_text("sorted by name descending")
    names = app.locator(".hx-view-placement tbody tr td:nth-child(2)").all_text_contents()
    assert len(names) == n_nodes and names == sorted(names, key=str.lower, reverse=True), names
    app.locator(".hx-filter-placement input").fill(names[-1])
    expect(page_note).to_contain_text(f"matching {names[-1]}")
    shown = app.locator(".hx-view-placement tbody tr td:nth-child(2)").all_text_contents()
    assert names[-1] in shown and len(shown) < len(names)
    page.screenshot(path=str(out / "jupyterlab_placement_sorted.png"))
    # the Graph tab finds a node by name: outlined, the view cut around it
    app.locator(".hx-tabs .lm-TabBar-tab", has_text="Graph").first.click()
    app.locator(".hx-level select").select_option(label="node")
    target = "/head/head.2/HardSwish"
    find = app.locator(".hx-find input")
    find.fill(target)
    find.press("Enter")
    # the node called so first, then the node reading its output tensor (/head/head.2/HardSwish_output_0)
    expect(app.locator(".hx-view-graph .hx-find-result")).to_contain_text("2 match(es)")
    found = app.locator(".hx-view-graph svg g.node.hx-found")
    expect(found).to_be_visible()
    assert "HardSwish" in found.text_content()
    page.screenshot(path=str(out / "jupyterlab_graph_find.png"))
