"""How live does the explorer feel?

0. **The interactive graph in a real browser at 2,000 and 10,000 nodes** (headless Chromium
   through Playwright, Debian's chromium; a ResNet-style chain whose nodes have no names, as
   in tests/ux_models.py, planned on a virtual GPU with Add denied so that it is
   heterogeneous): the self-contained report opened from disk (first draw from the page's
   navigation start; the draft layout first, then ELK's from its worker), a search by tensor
   name until the match is on screen, pan/zoom frame times, and a series of re-plans (deny,
   allow, reorder) each timed from the change in Python until the browser has recoloured the
   picture (the new placement is handed to the page as the kernel would hand it to the widget;
   no new layout). ``--skip-browser`` leaves it out.
1. **Re-plan + redraw on a ~2,000-node model** (a 61-layer transformer encoder,
   2,014 nodes): the app is built once (the first plan and the first redraw,
   reported apart), then a series of *new* what-if configurations is applied
   through the app's controls (deny an op, reorder, disable, allow); each is
   timed from the control change until the plan is made and the visible tab
   (Graph) is redrawn. Goal: <= 200 ms after the first. Re-applying a
   configuration seen before (served from the plan cache) is timed too, and so
   is opening each of the other tabs once.
2. **Cold ``explore(model).show()`` on a ResNet-18-sized model** (11.7 M
   parameters, 224x224 input) in a fresh interpreter: import, load (checker,
   shape inference), first plan, app construction with the first redraw.

    .venv/bin/python bench/responsiveness.py            # both
    .venv/bin/python bench/responsiveness.py --quick    # fewer repeats

Results are printed and written to ``bench/results/responsiveness.json``.
Never run as a test (timings are not assertions).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's package, not an installed one

# the laptop story: a virtual gpu and cpu, no simulator
os.environ.pop("NUMBA_ENABLE_CUDASIM", None)


def resnet18(seed: int = 0, batch: int = 1, image: int = 224, classes: int = 1000):
    """A ResNet-18-shaped ONNX model: Conv/BatchNormalization/Relu, basic blocks with
    1x1 downsampling, MaxPool, GlobalAveragePool, Flatten, Gemm (11.7 M parameters)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    count = {"n": 0}

    def name(base):
        count["n"] += 1
        return f"{base}_{count['n']}"

    def const(base, arr):
        n = name(base)
        inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float32), n))
        return n

    def conv_bn(x, cin, cout, k, stride, relu):
        w = const("w", rng.standard_normal((cout, cin, k, k)) * (2.0 / (cin * k * k)) ** 0.5)
        c = name("conv")
        nodes.append(helper.make_node("Conv", [x, w], [c], name=c, kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[k // 2] * 4))
        bn = name("bn")
        nodes.append(helper.make_node("BatchNormalization", [
            c, const("scale", np.ones(cout)), const("bias", np.zeros(cout)),
            const("mean", rng.standard_normal(cout) * 0.01), const("var", 1 + rng.random(cout) * 0.1)],
            [bn], name=bn))
        if not relu:
            return bn
        r = name("relu")
        nodes.append(helper.make_node("Relu", [bn], [r], name=r))
        return r

    x = conv_bn("input", 3, 64, 7, 2, True)
    p = name("maxpool")
    nodes.append(helper.make_node("MaxPool", [x], [p], name=p, kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    x, cin = p, 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if (stage > 0 and block == 0) else 1
            y = conv_bn(x, cin, cout, 3, stride, True)
            y = conv_bn(y, cout, cout, 3, 1, False)
            sc = conv_bn(x, cin, cout, 1, stride, False) if (stride != 1 or cin != cout) else x
            a = name("add")
            nodes.append(helper.make_node("Add", [y, sc], [a], name=a))
            r = name("relu")
            nodes.append(helper.make_node("Relu", [a], [r], name=r))
            x, cin = r, cout
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"))
    fw = const("fc_w", rng.standard_normal((classes, 512)) * (1 / 512) ** 0.5)
    fb = const("fc_b", np.zeros(classes))
    nodes.append(helper.make_node("Gemm", ["flat", fw, fb], ["logits"], name="fc", transB=1))
    g = helper.make_graph(nodes, "resnet18_like",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench")
    m.ir_version = 8
    return m


def _graph_state(html: str) -> str:
    if "hx-graph-interactive" in html:
        return "interactive (laid out in the browser)"
    if "hx-graph-drawing" in html:
        return "drawing"
    if "hx-graph-skipped" in html:
        return "asks first"
    if "<svg" in html:
        return "svg"
    return "error"


def bench_2000(repeats: int) -> dict:
    import hetero_explore as hx
    from hetero_explore.data import models

    model = models.transformer("tiny", layers=61)
    t0 = time.perf_counter()
    ex = hx.explore(model, providers=["gpu", "cpu"])
    t1 = time.perf_counter()
    app = ex.show()
    t2 = time.perf_counter()
    n_nodes = len(ex.graph.nodes)

    def deny(p, ops):
        return lambda: setattr(app.deny_selects[p], "value", tuple(ops))

    def order(names):
        return lambda: setattr(app, "order", list(names))

    def enabled(p, on):
        return lambda: setattr(app.enable_boxes[p], "value", on)

    steps = [
        ("deny Softmax on gpu", deny("gpu", ["Softmax"])),
        ("deny Softmax, Erf on gpu", deny("gpu", ["Erf", "Softmax"])),
        ("deny LayerNormalization on gpu", deny("gpu", ["LayerNormalization"])),
        ("deny MatMul on cpu", deny("cpu", ["MatMul"])),
        ("reorder: cpu first", order(["cpu", "gpu"])),
        ("allow all on gpu", deny("gpu", [])),
        ("disable cpu", enabled("cpu", False)),
        ("enable cpu", enabled("cpu", True)),
        ("reorder: gpu first", order(["gpu", "cpu"])),
        ("deny Transpose, Reshape on gpu", deny("gpu", ["Reshape", "Transpose"])),
        ("allow all on cpu", deny("cpu", [])),
        ("deny Div on gpu", deny("gpu", ["Div"])),
    ]
    rows = []
    for label, act in steps:
        h0 = len(ex.history)
        t = time.perf_counter()
        act()
        dt = time.perf_counter() - t
        step = ex.history[-1] if len(ex.history) > h0 else None
        plan = step.plan if step else None
        graph = _graph_state(app.views["Graph"].value)
        picture_ms = None
        if graph == "drawing":  # laid out in the background: time until it is on screen
            app.wait_for_graph(timeout=600)
            picture_ms = (time.perf_counter() - t) * 1e3
        rows.append({"change": label, "ms": dt * 1e3, "picture_ms": picture_ms,
                     "plan_ms": (step.seconds * 1e3) if step else None,
                     "redraw_ms": app.last_redraw_seconds * 1e3,
                     "partitions": len(plan.partitions) if plan is not None else None,
                     "transfers": len(plan.transfers) if plan is not None else None,
                     "graph_view": graph, "new_plan": step is not None})
    # the same configurations again: served from the plan cache (and the SVG cache)
    cached = []
    for _ in range(repeats):
        for _label, act in steps[:4]:
            t = time.perf_counter()
            act()
            cached.append((time.perf_counter() - t) * 1e3)
    tabs = {}
    for v in ("Placement", "Partitions", "Transfers", "Changes", "Graph"):
        t = time.perf_counter()
        app.select(v)
        tabs[v] = (time.perf_counter() - t) * 1e3
    # the node view (one box per node, 2,000+ boxes): first draw, then re-plan + redraw at node level
    node_view = {}
    app.select("Graph")
    t = time.perf_counter()
    app.level = "node"
    app.wait_for_graph(timeout=600)
    node_view["first_draw_s"] = time.perf_counter() - t
    node_view["graph_view"] = _graph_state(app.views["Graph"].value)
    node_view["svg_mb"] = len(app.views["Graph"].value) / 1e6
    redraws = []
    for label, act in steps[:4] + steps[9:]:
        t = time.perf_counter()
        act()
        ms = (time.perf_counter() - t) * 1e3
        app.wait_for_graph(timeout=600)
        redraws.append({"change": label, "ms": ms, "picture_ms": (time.perf_counter() - t) * 1e3,
                        "graph_view": _graph_state(app.views["Graph"].value)})
    node_view["what_ifs"] = redraws
    app.level = "auto"
    new_ms = [r["ms"] for r in rows]
    return {"model": f"transformer tiny x61 layers ({n_nodes} nodes)", "nodes": n_nodes,
            "explore_s": t1 - t0, "first_show_s": t2 - t1,
            "what_ifs": rows, "new_config_ms": {"median": statistics.median(new_ms), "max": max(new_ms),
                                                "min": min(new_ms)},
            "cached_config_ms": {"median": statistics.median(cached), "max": max(cached)},
            "open_tab_ms": tabs, "goal_ms": 200, "node_view": node_view}


COLD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import hetero_explore as hx
t1 = time.perf_counter()
import onnx
model = onnx.load(sys.argv[1])
t2 = time.perf_counter()
ex = hx.explore(model)
t3 = time.perf_counter()
plan = ex.plan
t4 = time.perf_counter()
app = ex.show()
t5 = time.perf_counter()
app.wait_for_graph(timeout=600)
t6 = time.perf_counter()
print(json.dumps({"picture_s": t6 - t4, "import_s": t1 - t0, "onnx_load_s": t2 - t1, "explore_s": t3 - t2, "first_plan_s": t4 - t3,
                  "show_s": t5 - t4, "explore_show_s": t5 - t2, "nodes": len(ex.graph.nodes),
                  "providers": ex.provider_names, "summary": plan.summary(),
                  "graph_view": "svg" if "<svg" in app.views["Graph"].value else "not drawn"}))
"""


def bench_cold() -> dict:
    import onnx
    m = resnet18()
    params = sum(int(__import__("numpy").prod(t.dims)) for t in m.graph.initializer)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "resnet18_like.onnx")
        onnx.save(m, path)
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", COLD, path], env=env, capture_output=True, text=True,
                             timeout=600)
        wall = time.perf_counter() - t
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res.update(parameters=params, process_wall_s=wall, model="ResNet-18-like (224x224, 1000 classes)")
    return res


CHROMIUM = os.environ.get("HX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-dev-shm-usage"]


def bench_browser(sizes=(2000, 10000), replans: int = 6) -> dict:
    """The interactive graph in Chromium at each size (see the module's docstring)."""
    import shutil as _shutil

    sys.path.insert(0, str(HERE.parent / "tests"))
    from playwright.sync_api import sync_playwright
    from ux_models import unnamed_resnet

    import hetero_explore as hx
    from hetero_explore.viz.graphdata import placement_data

    exe = CHROMIUM if Path(CHROMIUM).is_file() else _shutil.which("chromium")
    out = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            for n in sizes:
                blocks = max(1, round((n - 1) / 5))   # 5 nodes a block, and a stem
                t = time.perf_counter()
                ex = hx.explore(unnamed_resnet(blocks), providers=["gpu", "cpu"])
                ex.deny("gpu", ["Add"])
                plan = ex.plan
                t_plan = time.perf_counter() - t
                with tempfile.TemporaryDirectory() as d:
                    t = time.perf_counter()
                    path = plan.to_html(Path(d) / "report.html")
                    t_report = time.perf_counter() - t
                    report_mb = path.stat().st_size / 1e6
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    errors = []
                    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                    page.goto(path.as_uri(), wait_until="commit")
                    page.wait_for_selector(".hxg[data-drawn='1']", timeout=300_000)
                    page.wait_for_selector(".hxg[data-elk-draw-ms]", timeout=300_000)
                    st = page.eval_on_selector(".hxg", "e => Object.assign({}, e.dataset)")
                    page.locator(".hxg").scroll_into_view_if_needed()
                    target = f"b{blocks * 2 // 3}_relu1"
                    t = time.perf_counter()
                    page.fill(".hxg-search", target)
                    # (polled with evaluate: wait_for_function evals its string, which the page's CSP forbids)
                    while not page.evaluate("!!document.querySelector('.hxg').dataset.found && "
                                            "!document.querySelector('.hxg-status').textContent.includes('laying')"):
                        page.wait_for_timeout(20)
                    find_wall = (time.perf_counter() - t) * 1e3
                    st2 = page.eval_on_selector(".hxg", "e => Object.assign({}, e.dataset)")
                    frames = page.evaluate("document.querySelector('.hxg-mount').hxGraph.benchPanZoom(60)")
                    what_ifs = [("deny Relu on gpu", lambda e: e.deny("gpu", ["Relu"])),
                                ("allow Relu on gpu", lambda e: e.allow("gpu", ["Relu"])),
                                ("reorder: cpu first", lambda e: e.order(["cpu", "gpu"])),
                                ("reorder: gpu first", lambda e: e.order(["gpu", "cpu"])),
                                ("deny Conv on gpu", lambda e: e.deny("gpu", ["Conv"])),
                                ("allow all on gpu", lambda e: e.allow("gpu"))][:replans]
                    rows = []
                    for label, act in what_ifs:
                        t = time.perf_counter()
                        act(ex)
                        p2 = ex.replan()
                        t_pl = time.perf_counter()
                        data = placement_data(p2, ex.current.index)
                        payload = json.dumps(data)
                        t_data = time.perf_counter()
                        recolour = page.evaluate(
                            "d => { const el = document.querySelector('.hxg-mount'); el.hxModel.update('placement', "
                            "JSON.parse(d)); return el.hxGraph.stats.recolour_ms; }", payload)
                        rows.append({"change": label, "total_ms": (time.perf_counter() - t) * 1e3,
                                     "plan_ms": (t_pl - t) * 1e3, "placement_json_ms": (t_data - t_pl) * 1e3,
                                     "browser_recolour_ms": recolour, "partitions": len(p2.partitions),
                                     "payload_kb": len(payload) / 1024})
                    page.close()
                out[str(n)] = {
                    "nodes": len(ex.graph.nodes), "load_and_plan_s": t_plan, "report_write_s": t_report,
                    "report_mb": report_mb,
                    "first_draw_ms_from_navigation": float(st["firstDrawMs"]),
                    "draft_layout_ms": float(st.get("draftMs", "nan")),
                    "elk_ready_ms": float(st.get("elkReadyMs", "nan")),
                    "elk_draw_ms_from_navigation": float(st["elkDrawMs"]), "boxes_first": int(st["boxes"]),
                    "find_ms_in_page": float(st2["findMs"]), "find_wall_ms": find_wall,
                    "boxes_after_find": int(st2["boxes"]), "pan_zoom": frames, "replans": rows,
                    "console_errors": errors}
        finally:
            browser.close()
    return out


def _print_browser(res: dict) -> None:
    print("== the interactive graph in Chromium (report opened from disk) ==")
    for n, r in res.items():
        pz = r["pan_zoom"]
        print(f"{r['nodes']:,} nodes: first draw {r['first_draw_ms_from_navigation']:.0f} ms after navigation "
              f"(draft layout {r['draft_layout_ms']:.0f} ms, {r['boxes_first']} boxes); ELK's layout on screen at "
              f"{r['elk_draw_ms_from_navigation']:.0f} ms (worker ready after {r['elk_ready_ms']:.0f} ms); "
              f"find a tensor name and pan to it: {r['find_ms_in_page']:.0f} ms in the page "
              f"({r['find_wall_ms']:.0f} ms typed to shown, {r['boxes_after_find']} boxes); "
              f"pan/zoom frames median {pz['median_ms']:.1f} ms, p90 {pz['p90_ms']:.1f} ms over {pz['steps']}; "
              f"report {r['report_mb']:.1f} MB")
        for w in r["replans"]:
            print(f"   re-plan + redraw, {w['change']:22s} {w['total_ms']:7.1f} ms (plan {w['plan_ms']:.1f}, placement "
                  f"JSON {w['placement_json_ms']:.1f}, browser recolour {w['browser_recolour_ms']:.1f} ms; "
                  f"{w['partitions']} partitions, {w['payload_kb']:.0f} KiB)")
        if r["console_errors"]:
            print("   console errors:", r["console_errors"][:3])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--skip-browser", action="store_true", help="leave out the interactive graph in Chromium")
    ap.add_argument("--only-browser", action="store_true", help="only the interactive graph in Chromium")
    ap.add_argument("--sizes", default="2000,10000", help="node counts for the browser part (default 2000,10000)")
    args = ap.parse_args(argv)
    res = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    if not args.skip_browser:
        res["browser"] = bench_browser(tuple(int(x) for x in args.sizes.split(",")))
        _print_browser(res["browser"])
    if args.only_browser:
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "responsiveness.json").write_text(json.dumps(res, indent=2, default=str))
        return 0
    b = bench_2000(2 if args.quick else 5)
    res["replan_2000"] = b
    print(f"== re-plan + redraw, {b['model']} ==")
    print(f"explore(): {b['explore_s'] * 1e3:.0f} ms; first show() (first plan + redraw): "
          f"{b['first_show_s'] * 1e3:.0f} ms")
    print(f"{'change':34s} {'total ms':>9s} {'plan ms':>8s} {'redraw ms':>9s} {'parts':>6s} {'xfers':>6s}  "
          "graph (ms until the picture is on screen)")
    for r in b["what_ifs"]:
        pm = f"{r['plan_ms']:.1f}" if r["plan_ms"] is not None else "-"
        pic = f" ({r['picture_ms']:.0f} ms)" if r["picture_ms"] is not None else ""
        print(f"{r['change']:34s} {r['ms']:9.1f} {pm:>8s} {r['redraw_ms']:9.1f} "
              f"{str(r['partitions']):>6s} {str(r['transfers']):>6s}  {r['graph_view']}{pic}")
    n = b["new_config_ms"]
    print(f"new configurations: median {n['median']:.1f} ms, max {n['max']:.1f} ms (goal <= {b['goal_ms']} ms)")
    c = b["cached_config_ms"]
    print(f"configurations seen before: median {c['median']:.1f} ms, max {c['max']:.1f} ms")
    print("opening a tab: " + ", ".join(f"{k} {v:.1f} ms" for k, v in b["open_tab_ms"].items()))
    nv = b["node_view"]
    print(f"node view ({b['nodes']} boxes): first draw {nv['first_draw_s']:.2f} s until the picture is on "
          f"screen ({nv['graph_view']}, {nv['svg_mb']:.1f} MB of SVG; goal <= 2 s)")
    for r in nv["what_ifs"]:
        print(f"  node view, {r['change']:34s} {r['ms']:7.1f} ms (picture on screen after {r['picture_ms']:.0f} ms)")
    if not args.skip_cold:
        cold = bench_cold()
        res["cold_resnet18"] = cold
        print(f"== cold explore(model).show(), {cold['model']}, {cold['parameters'] / 1e6:.1f} M parameters, "
              f"{cold['nodes']} nodes ==")
        print(f"import hetero_explore {cold['import_s']:.2f} s; onnx.load {cold['onnx_load_s']:.2f} s; "
              f"explore() {cold['explore_s']:.2f} s; first plan {cold['first_plan_s']:.3f} s; "
              f"show() {cold['show_s']:.2f} s (picture on screen {cold['picture_s']:.2f} s after show() began); "
              f"explore+show {cold['explore_show_s']:.2f} s; "
              f"whole process {cold['process_wall_s']:.2f} s; graph: {cold['graph_view']}")
        print(f"plan: {cold['summary']}")
    outdir = HERE / "results"
    outdir.mkdir(exist_ok=True)
    (outdir / "responsiveness.json").write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
