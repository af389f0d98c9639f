"""What the HTML report tells a colleague (issue 14): date, how it was made, versions, the
inputs and their seed, the reference provider, the per-op table, what the diff means, and
why nothing ran when nothing could."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import hetero_explore as he
from hetero_explore.cli.main import main

DEMO = str(Path(__file__).resolve().parents[1] / "hetero_explore" / "data" / "demo.onnx")


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture(scope="module")
def executed():
    ex = he.explore(DEMO, providers=["gpu", "cpu"], input_shapes={"image": (1, 3, 16, 16)}, seed=3)
    ex.deny("gpu", ["Relu"])
    ex.execute()
    return ex


def test_report_says_when_what_and_with_which_versions(executed, tmp_path):
    import numba
    import onnx
    path = executed.export_html(tmp_path / "r.html")
    text = _text(Path(path).read_text(encoding="utf-8"))
    assert re.search(r"date \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text)
    assert "export_html" in text                                       # how it was made
    assert f"onnx version {onnx.__version__}" in text and f"numba version {numba.__version__}" in text
    assert f"numpy version {np.__version__}" in text and "Python version" in text
    assert "seed 3" in text                                            # the inputs' seed
    assert "reference run single provider cpu" in text
    inp = executed.inputs["image"]
    assert f"image float32 {tuple(inp.shape)} {inp.size}" in text      # the inputs table
    assert "Ops per provider" in text and "Relu ai.onnx" in text
    assert "not merely close within a tolerance" in text               # what the verdict means


def test_report_from_the_cli_names_its_command_line_and_why_nothing_ran(capsys, tmp_path):
    target = tmp_path / "r.html"
    rc = main(["report", DEMO, "-o", str(target), "--execute"])
    capsys.readouterr()
    assert rc == 2
    text = _text(target.read_text(encoding="utf-8"))
    assert f"made by hetero-explore report {DEMO} -o {target} --execute" in text
    assert "execution nothing was executed: InputValidationError" in text


def test_seconds_and_bytes_are_formatted_in_report_tables(executed, tmp_path):
    html = Path(executed.export_html(tmp_path / "r.html")).read_text(encoding="utf-8")
    timings = html[html.find('id="he-timings"'):]
    timings = timings[:timings.find("</table>")]
    assert timings and not re.search(r">\d\.\d+e-0\d<", timings)      # no 6.1522e-05
    assert re.search(r">[\d.]+ (µs|ms|s)<", timings)


def test_report_has_a_timeline_of_the_run(executed, tmp_path):
    html = Path(executed.export_html(tmp_path / "r.html")).read_text(encoding="utf-8")
    svg = html[html.find('<svg xmlns="http://www.w3.org/2000/svg" class="he-timeline"'):]
    svg = svg[:svg.find("</svg>")]
    run = executed.run
    assert svg and svg.count('class="he-step he-partition"') == len(run.plan.partitions)
    assert svg.count('class="he-step he-transfer"') == sum(1 for e in run.events if e.kind == "transfer")
    for dev in {e.device for e in run.events}:
        assert f">{dev}</text>" in svg                      # one lane per device


def test_cli_trace_is_perfetto_json(capsys, tmp_path):
    import json
    trace = tmp_path / "run.json"
    rc = main(["report", DEMO, "-o", str(tmp_path / "r.html"), "--execute", "--input-shape", "image=1,3,16,16",
               "--deny", "gpu:Relu", "--trace", str(trace)])
    capsys.readouterr()
    assert rc == 0
    doc = json.loads(trace.read_text())
    steps = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert any(e["cat"] == "partition" for e in steps) and any(e["cat"] == "transfer" for e in steps)
    assert all(e["dur"] >= 0 for e in steps)


def test_timing_stats_give_p50_and_p90_per_step(executed):
    from hetero_explore.viz.timeline import timing_stats
    runs = [executed.run.rerun(keep_intermediates=False) for _ in range(5)]
    df = timing_stats(runs)
    assert (df["runs"] == 5).all() and (df["p90_seconds"] >= df["p50_seconds"]).all()
    assert {"partition", "transfer", "run"} <= set(df["kind"])


def test_model_explorer_node_data_lines_up_with_the_models_outputs(executed, tmp_path):
    import json
    plan, run = executed.plan, executed.run
    paths = plan.to_model_explorer(tmp_path / "me", run=run, stem="demo")
    assert sorted(p.name for p in paths) == ["demo.partition.json", "demo.partition_seconds.json",
                                            "demo.provider.json"]
    assert {p.parent for p in paths} == {tmp_path / "me"}
    prov = json.loads((tmp_path / "me" / "demo.provider.json").read_text())
    (gid, data), = prov.items()
    assert gid == plan.graph.name
    results = data["results"]
    for n in plan.graph.nodes:                      # every node, keyed by each of its output tensors
        for out in n.outputs:
            if out:
                assert results[out]["value"] == plan.assignment[n.id]
                assert results[out]["bgColor"].startswith("#")
    part = json.loads((tmp_path / "me" / "demo.partition.json").read_text())[gid]["results"]
    assert {v["value"] for v in part.values()} == {p.id for p in plan.partitions}
    secs = json.loads((tmp_path / "me" / "demo.partition_seconds.json").read_text())[gid]
    assert all(v["value"] >= 0 for v in secs["results"].values()) and secs["gradient"][0]["stop"] == 0
