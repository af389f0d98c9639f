"""Fleet audit (issue 15): sweep many models × provider lists × masks on Dask, one DataFrame back,
checked row by row against the same plan made in-process."""

from __future__ import annotations

import json
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

import hetero_explore as he
import hetero_explore.ir.errors  # noqa: E402,F401  (hx.ir.errors below)
import hetero_explore.session.explorer  # noqa: E402,F401
from hetero_explore.data import models
from hetero_explore.cli.main import main
from hetero_explore.analysis.fleet import COLUMNS, IN_PROCESS, compare_sweeps, load_sweep, save_sweep, sweep

PROVIDER_LISTS = ["gpu,cpu", "cpu"]
MASKS = [{}, {"gpu": ["Relu"]}]


def _unplaceable_model():
    n1 = h.make_node("Relu", ["x"], ["t"], name="relu")
    n2 = h.make_node("Mystery", ["t"], ["y"], name="mystery", domain="com.example")
    g = h.make_graph([n1, n2], "unplaceable", [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.example", 1)])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet")
    onnx.save(models.mlp("tiny"), str(d / "mlp.onnx"))
    onnx.save(models.cnn("tiny"), str(d / "cnn.onnx"))
    onnx.save(_unplaceable_model(), str(d / "unplaceable.onnx"))
    (d / "broken.onnx").write_bytes(b"\x08\x07 this is not a model")
    sub = d / "nested"
    sub.mkdir()
    onnx.save(models.chain("tiny"), str(sub / "chain.onnx"))
    return d


def _expected(path, providers, deny):
    """The same plan, made here without the sweep."""
    provs = he.providers.resolve_all(providers.split(","))
    names = [p.name for p in provs]
    for prov, ops in deny.items():
        if prov in names:
            provs[names.index(prov)] = he.mask(provs[names.index(prov)], deny=ops)
    return he.plan(he.load_model(str(path)), provs)


def _check_rows_against_in_process_plans(df, model_dir):
    files = sorted(str(p) for p in model_dir.rglob("*.onnx"))
    assert len(df) == len(files) * len(PROVIDER_LISTS) * len(MASKS)
    assert list(df.columns) == COLUMNS
    i = 0
    for f in files:
        for pl in PROVIDER_LISTS:
            for mk in MASKS:
                row = df.iloc[i]
                i += 1
                assert (row["model"], row["providers"]) == (f, pl)
                if f.endswith("broken.onnx"):
                    assert not row["ok"] and row["stage"] == "load" and row["error_type"] == "ModelLoadError"
                    continue
                assert row["ok"], row["error"]
                p = _expected(f, pl, mk)
                assert row["nodes"] == len(p.graph.nodes)
                assert row["partitions"] == len(p.partitions) and row["transfers"] == len(p.transfers)
                assert row["transfer_bytes"] == p.transfer_bytes
                assert row["placement"] == p.placement_counts()
                assert row["fallback_ops"] == p.fallback_ops()
                assert row["executable"] == p.executable
                assert row["digest"]["placement"] == {n.name: [n.op_type, p.providers[p.assignment[n.id]].name]
                                                      for n in p.graph.nodes}
                if f.endswith("unplaceable.onnx"):
                    assert row["unplaced"] == 1 and row["blockers"][0] == "unplaceable: mystery"
                    assert row["byte_identical"] is None or row["byte_identical"] != row["byte_identical"]


@pytest.mark.slow
def test_sweep_on_a_local_cluster_of_two_workers_matches_in_process_plans(model_dir):
    pytest.importorskip("distributed")
    seen = []
    df = sweep(model_dir, providers=PROVIDER_LISTS, masks=MASKS, workers=2, execute=True,
               progress=lambda done, total, row: seen.append((done, total)))
    assert df.attrs["workers"] == 2 and df.attrs["tasks"] == len(df)
    assert [d for d, _ in seen] == list(range(1, len(df) + 1))          # rows streamed back one by one
    _check_rows_against_in_process_plans(df, model_dir)
    ran = df[df["ok"] & df["executable"].astype(bool)]
    assert len(ran) and ran["byte_identical"].astype(bool).all()
    assert (ran["warm_seconds"] > 0).all() and all(isinstance(v, dict) and v for v in ran["peak_bytes"])


def test_in_process_sweep_matches_in_process_plans(model_dir):
    df = sweep(model_dir, providers=PROVIDER_LISTS, masks=MASKS, client=IN_PROCESS)
    _check_rows_against_in_process_plans(df, model_dir)
    assert df["byte_identical"].isna().all()          # nothing executed without execute=True


def test_without_dask_sweep_says_how_to_install_it(model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(he.MissingDependencyError, match=r"hetero_explore\[sweep\]"):
        sweep(model_dir, providers=["cpu"])


def test_arguments_are_checked():
    with pytest.raises(he.HeteroExploreError, match="provider names"):
        sweep([models.mlp("tiny")], providers=[[he.providers.cpu()]], client=IN_PROCESS)
    with pytest.raises(he.HeteroExploreError, match="a mask is a dict"):
        sweep([models.mlp("tiny")], providers=["cpu"], masks=["gpu:Relu"], client=IN_PROCESS)
    with pytest.raises(he.HeteroExploreError, match="paths, globs"):
        sweep([42], client=IN_PROCESS)


def test_compare_sweeps_diffs_each_model_with_the_explorers_plan_diff(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    onnx.save(models.mlp("tiny"), str(before / "mlp.onnx"))
    onnx.save(models.mlp("tiny"), str(after / "mlp.onnx"))               # unchanged
    onnx.save(models.cnn("tiny"), str(before / "net.onnx"))
    onnx.save(models.mlp("tiny", seed=3), str(after / "net.onnx"))       # "re-exported" as something else
    onnx.save(models.chain("tiny"), str(before / "gone.onnx"))
    kw = dict(providers=["gpu,cpu"], masks=[{"gpu": ["Relu"]}], client=IN_PROCESS)
    a, b = sweep(before, **kw), sweep(after, **kw)
    c = compare_sweeps(a, b).set_index("name")
    assert c.loc["mlp", "status"] == "same" and c.loc["mlp", "moved"] == 0
    assert c.loc["net", "status"] == "changed"
    assert c.loc["gone", "status"] == "only before"
    pa = _expected(before / "net.onnx", "gpu,cpu", {"gpu": ["Relu"]})
    pb = _expected(after / "net.onnx", "gpu,cpu", {"gpu": ["Relu"]})
    direct = he.session.explorer.compare_plans(pa, pb)
    assert c.loc["net", "summary"] == direct.summary() and c.loc["net", "bytes_delta"] == direct.bytes_delta


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".json"])
def test_results_round_trip_through_files(model_dir, tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    df = sweep(model_dir, providers=["gpu,cpu"], client=IN_PROCESS)
    back = load_sweep(save_sweep(df, tmp_path / f"r{suffix}"))
    assert list(back["name"]) == list(df["name"])
    assert [d for d in back["placement"]] == [d for d in df["placement"]]
    # a diff of a sweep with its own file copy: nothing changed
    assert set(compare_sweeps(df, back)["status"]) <= {"same", "error"}


def test_sweep_report_is_self_contained_and_escapes_model_strings(tmp_path):
    from hetero_explore.viz.sweep_report import sweep_to_html
    m = models.mlp("tiny")
    m.graph.name = "<script>alert(1)</script>"
    df = sweep([m, models.cnn("tiny")], providers=["gpu,cpu"], masks=[{"gpu": ["Relu"]}], client=IN_PROCESS)
    html = sweep_to_html(df)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert "<script" not in html.replace("&lt;script", "")               # no script at all
    assert "share of nodes off the first provider" in html and "<svg" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html


def test_cli_sweep_writes_results_and_a_report(model_dir, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["sweep", str(model_dir), "--providers", "gpu,cpu", "--providers", "cpu", "--mask", "gpu:Relu",
               "--in-process", "-o", str(out), "--html", str(tmp_path / "r.html")])
    o, e = capsys.readouterr()
    assert rc == 0, e
    df = load_sweep(out)
    assert len(df) == 5 * 2 * 2 and "[1/20]" in e and "written to" in o
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    rc = main(["sweep", str(model_dir), "--in-process", "--providers", "cpu", "-o", str(tmp_path / "s.json"),
               "--compare", str(out)])
    o, _ = capsys.readouterr()
    assert rc == 0 and "Compared with" in o and "only before" in o
    rc = main(["sweep", str(model_dir), "--in-process", "--mask", "gpu:relu", "-o", str(tmp_path / "t.json")])
    assert rc == 2 and "did you mean 'Relu'" in capsys.readouterr().err


def test_execute_rows_are_byte_identical_in_process(model_dir):
    df = sweep(model_dir / "mlp.onnx", providers=["gpu,cpu"], masks=[{"gpu": ["Relu"]}], execute=True,
               client=IN_PROCESS)
    row = df.iloc[0]
    assert row["ok"] and bool(row["byte_identical"]) and row["warm_seconds"] > 0
    assert json.dumps(row["peak_bytes"])
    assert np.isfinite(row["plan_seconds"])


def test_cli_sweep_progress_bar_forced_quiet_and_off(model_dir, tmp_path, capsys):
    import re
    out = str(tmp_path / "p.json")
    argv = ["sweep", str(model_dir / "mlp.onnx"), str(model_dir / "cnn.onnx"), "--providers", "gpu,cpu",
            "--in-process", "-o", out]
    rc = main(argv + ["--progress", "--html", str(tmp_path / "p.html")])
    o, e = capsys.readouterr()
    assert rc == 0, e
    frames = [f for f in e.split("\r") if f.startswith("[") and not f.startswith("[1/") and not f.startswith("[2/")]
    assert frames and all(re.match(r"\[[#.]{24}\] [1-3]/3 ", f) for f in frames), frames
    labels = " | ".join(frames)
    assert "1/3 sweeping" in labels and "rows done (2/2)" in labels and "2/3 writing" in labels
    assert "3/3 writing" in labels and "\r\x1b[K" in e
    assert "[1/2] " in e and "[2/2] " in e and "\r" not in o and "written to" in o  # the per-row lines stay
    rc = main(argv)                                       # not a terminal: the lines, no bar
    o, e = capsys.readouterr()
    assert rc == 0 and "[1/2] " in e and "\r" not in e
    rc = main(argv + ["--quiet", "--progress"])           # quiet: nothing on stderr
    o, e = capsys.readouterr()
    assert rc == 0 and e == "" and "written to" in o
