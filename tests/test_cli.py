"""The hetero-explore command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hetero_explore.cli.main import main

DEMO = str(Path(__file__).resolve().parents[1] / "hetero_explore" / "data" / "demo.onnx")


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_plan_json_has_the_documented_keys(capsys):
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--input-shape", "image=1,3,16,16", "--json")
    assert rc == 0
    d = json.loads(out)
    for key in ("nodes", "partitions", "transfers", "transfer_bytes", "placement", "fallback_ops"):
        assert key in d
    assert d["placement"] == {"gpu": 14, "cpu": 1}          # 16 nodes; bn1 folded into conv1 at load
    assert d["fallback_ops"] == {"Clip": 1}
    assert d["transfer_bytes"] == sum(t["bytes"] for t in d["transfers"])
    assert {t["kind"] for t in d["transfers"]} == {"D2H", "H2D"}


def test_plan_deny_moves_ops_and_prints_tables(capsys):
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--input-shape", "image=1,3,16,16", "--deny", "gpu:Relu,Softmax")
    assert rc == 0
    first = out.split("\n\n")[0]   # the summary: one clause a line
    assert "ops forced onto a fallback provider: Clip, Relu, Softmax" in " ".join(first.split())
    assert "Placement:" in out and "Partitions:" in out and "Transfers:" in out


def test_plan_cpu_only_is_single_partition(capsys):
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--providers", "cpu", "--dim", "batch=2", "--json")
    d = json.loads(out)
    assert rc == 0 and len(d["partitions"]) == 1 and d["transfers"] == []


def test_unbound_symbolic_dims_plan_and_are_not_blockers(capsys):
    # symbolic dims execute (shapes are computed at run time), so they block nothing
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--json")
    d = json.loads(out)
    assert rc == 0 and d["execution_blockers"] == []


@pytest.mark.parametrize("argv, needle", [
    (["plan", "missing.onnx"], "model file not found"),
    (["plan", DEMO, "--providers", "tpu"], "unknown provider name"),
    (["plan", DEMO, "--deny", "npu:Relu"], "not in --providers"),
    (["plan", DEMO, "--input-shape", "nope=1,2"], "not a graph input"),
    # (gpu alone now plans the demo: its Clip is expanded into onnx's function body)
    (["plan", DEMO, "--providers", "gpu", "--deny", "gpu:GatherND", "--input-shape", "image=1,3,16,16",
      "--strict"], "no provider supports node"),
])
def test_errors_exit_2_with_a_message(capsys, argv, needle):
    rc, _, err = run_cli(capsys, *argv)
    assert rc == 2
    assert err.startswith("error: ") and needle in err


def test_bad_argument_syntax_is_rejected(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", DEMO, "--input-shape", "image"])
    assert e.value.code == 2
    assert "NAME=D1,D2" in capsys.readouterr().err


def test_console_script_runs_as_a_module():
    r = subprocess.run([sys.executable, "-m", "hetero_explore.cli.main", "plan", DEMO, "--providers", "cpu",
                        "--input-shape", "image=1,3,16,16"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("1 partition(s) across 1 device(s)\n  cpu: 15 node(s)")  # bn1 folded


# -- hostile input -------------------------------------------------------------------------------
#: names that attack a terminal: OSC (set the title), CSI (clear the screen, move the cursor),
#: backspaces and a carriage return (overwrite what was printed), C1 CSI, bell, bidi override
TERMINAL_ATTACKS = ["t\x1b]0;pwned title\x07", "c\x1b[2J\x1b[1;1H", "b\x08\x08\x08ok", "r\rSAFE",
                    "c1\x9b31m", "bidi\u202eexe.gnp", "nul\x00x", "nl\nfake line", "iso\u2066x\u2069"]
RAW = ["\x1b", "\x07", "\x08", "\r", "\x9b", "\u202e", "\x00", "\u2066"]


def _hostile_cli_model(path):
    import onnx
    from onnx import TensorProto, helper
    x = "in" + TERMINAL_ATTACKS[0]
    nodes, prev = [], x
    for i, h in enumerate(TERMINAL_ATTACKS):
        op = "Softmax" if i % 2 else "Relu"
        out = f"v{i}{h}"
        nodes.append(helper.make_node(op, [prev], [out], name=f"n{i}{h}"))
        prev = out
    g = helper.make_graph(nodes, "graph" + TERMINAL_ATTACKS[1], [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def _no_raw_controls(text):
    bad = [c for c in RAW if c in text]
    assert not bad, f"raw control characters reached the terminal: {bad!r}"


def test_plan_escapes_model_strings_for_the_terminal(capsys, tmp_path):
    model = _hostile_cli_model(tmp_path / "hostile.onnx")
    rc, out, err = run_cli(capsys, "plan", model, "--deny", "gpu:Softmax")
    assert rc == 0, err
    _no_raw_controls(out + err)
    assert "n0t\\x1b]0;pwned title\\x07" in out  # shown, visibly escaped
    assert "\\u202e" in out and "\\x08\\x08\\x08" in out
    assert "fake line" in out and "\nfake line" not in out  # a name never starts a line of its own
    rc, out, _ = run_cli(capsys, "plan", model, "--json")
    assert rc == 0
    _no_raw_controls(out)
    d = json.loads(out)
    assert d["node_placement"][0]["name"] == "n0" + TERMINAL_ATTACKS[0]  # exact, escaped as JSON


def test_error_path_escapes_model_strings(capsys, tmp_path):
    model = _hostile_cli_model(tmp_path / "hostile.onnx")
    rc, out, err = run_cli(capsys, "plan", model, "--providers", "gpu", "--deny", "gpu:Relu", "--strict")
    assert rc == 2
    _no_raw_controls(out + err)
    assert err.startswith("error: UnsupportedNodeError: ") and err.count("\n") == 1  # one line
    assert "\\x1b]0;pwned" in err
    missing = str(tmp_path / "no\x1b]0;x\x07pe.onnx")
    rc, _, err = run_cli(capsys, "plan", missing)
    assert rc == 2 and err.count("\n") == 1
    _no_raw_controls(err)


def test_argparse_messages_are_escaped_too(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", DEMO, "--dim", "b\x1b[2J=x"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    _no_raw_controls(err)
    assert "\\x1b[2J" in err


def test_terminal_text_escapes_every_unsafe_class():
    from hetero_explore.cli.main import terminal_text
    for c in [chr(i) for i in range(32) if i != 9] + ["\x7f"] + [chr(i) for i in range(0x80, 0xA0)] + \
            ["\u200b", "\u200e", "\u202a", "\u202e", "\u2066", "\u2069", "\u2028", "\ufeff", "\ud800"]:
        assert c not in terminal_text(f"a{c}b"), repr(c)
    assert terminal_text("x\ny", keep_newlines=True) == "x\ny" and terminal_text("x\ny") == "x\\x0ay"
    assert terminal_text("tab\tok é 中 ✓") == "tab\tok é 中 ✓"  # printable text is left alone


@pytest.mark.parametrize("dim", ["batch=-1", "batch=-5", f"batch={2 ** 64}"])
def test_negative_or_huge_dim_is_rejected(capsys, dim):
    with pytest.raises(SystemExit) as e:
        main(["plan", DEMO, "--dim", dim])
    assert e.value.code == 2
    assert "--dim" in capsys.readouterr().err


def test_huge_input_shape_with_execute_is_a_budget_error(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "report", DEMO, "-o", str(tmp_path / "r.html"), "--providers", "cpu",
                           "--input-shape", "image=100000000,3,16,16", "--execute")
    assert rc == 2
    assert err.startswith("error: MemoryBudgetError: random inputs would take") and err.count("\n") == 1
    assert "HETERO_EXPLORE_MEMORY_BUDGET" in err


def _bad_outputs(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("x")
    return {"directory": str(tmp_path), "dev-full": "/dev/full", "under-a-file": str(f / "r.html"),
            "empty": "", "256-byte-name": str(tmp_path / ("a" * 251 + ".html"))}


@pytest.mark.parametrize("case", ["directory", "dev-full", "under-a-file", "empty", "256-byte-name"])
def test_report_to_an_unwritable_path_keeps_the_result(capsys, tmp_path, case):
    target = _bad_outputs(tmp_path)[case]
    if case == "dev-full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    rc, out, err = run_cli(capsys, "report", DEMO, "-o", target, "--providers", "cpu",
                           "--input-shape", "image=1,3,16,16")
    assert rc == 2
    assert out.startswith("1 partition(s)")  # the plan was still printed
    assert err.startswith("error: OutputWriteError: cannot write the report to ") and err.count("\n") == 1
    assert "saved instead to " in err
    kept = err.split("saved instead to ")[1].split(";")[0].strip()
    try:
        assert Path(kept).is_file() and "<!DOCTYPE html>" in Path(kept).read_text(encoding="utf-8")
    finally:
        Path(kept).unlink(missing_ok=True)
    if case == "directory":
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # no temp file left behind


def test_report_replaces_an_existing_file_atomically(capsys, tmp_path):
    target = tmp_path / "r.html"
    target.write_text("old")
    rc, out, err = run_cli(capsys, "report", DEMO, "-o", str(target), "--providers", "cpu",
                           "--input-shape", "image=1,3,16,16")
    assert rc == 0, err
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # the temporary file was moved, not left


def test_an_unexpected_exception_is_one_line_not_a_traceback(capsys, monkeypatch):
    import hetero_explore.cli.main as cli
    monkeypatch.setattr(cli, "_load_and_plan", lambda args, model=None, **kw: (_ for _ in ()).throw(KeyError("boom\x1b")))
    rc, _, err = run_cli(capsys, "plan", DEMO)
    assert rc == 3 and err.startswith("error: internal error (KeyError): ") and err.count("\n") == 1
    _no_raw_controls(err)


def test_warmup_compiles_with_progress(capsys):
    rc, out, err = run_cli(capsys, "warmup")
    assert rc == 0, err
    assert "compiling kernels (1/" in out and "demo on cpu" in out
    assert "kernels compiled into numba's cache" in out


# -- issue 14: CLI quirks --------------------------------------------------------------------
def test_version_names_the_package_and_its_dependencies(capsys):
    import hetero_explore
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert out.startswith(f"hetero-explore {hetero_explore.__version__} (onnx ")
    assert "numba " in out and "numpy " in out and "Python " in out


@pytest.mark.parametrize("deny, close", [("gpu:conv", "'Conv'"), ("gpu:Relux", "'Relu'"), ("gpu:relu", "'Relu'")])
def test_deny_of_an_unknown_op_is_an_error_naming_close_matches(capsys, deny, close):
    rc, out, err = run_cli(capsys, "plan", DEMO, "--deny", deny)
    assert rc == 2 and out == ""
    assert err.startswith("error: UsageError: --deny ") and f"did you mean {close}" in err


def test_deny_of_an_op_the_model_lacks_warns_and_plans(capsys):
    rc, out, err = run_cli(capsys, "plan", DEMO, "--input-shape", "image=1,3,16,16", "--deny", "gpu:LSTM,Relu")
    assert rc == 0
    assert "warning: --deny gpu:LSTM: the model has no LSTM node" in err
    assert "Relu" in out.split("\n\n")[0]          # the Relu denial still applied (the summary)


def test_deny_of_an_unknown_provider_suggests_the_close_one(capsys):
    rc, _, err = run_cli(capsys, "plan", DEMO, "--deny", "gpx:Relu")
    assert rc == 2 and "did you mean 'gpu'" in err


def test_planning_on_an_unavailable_provider_warns(capsys, monkeypatch):
    import importlib
    cuda_mod = importlib.import_module("hetero_explore.providers.cuda")
    monkeypatch.setattr(cuda_mod.NumbaCUDAProvider, "available", lambda self: (False, "no CUDA device here"))
    rc, out, err = run_cli(capsys, "plan", DEMO, "--providers", "cuda,cpu", "--input-shape", "image=1,3,16,16")
    assert rc == 0 and "cuda: 14 node(s)" in out.split("\n\n")[0]      # it still plans
    assert "warning: provider 'cuda' is unavailable (no CUDA device here)" in err


def test_json_failure_is_a_json_error_object(capsys):
    rc, out, err = run_cli(capsys, "plan", "missing.onnx", "--json")
    assert rc == 2
    d = json.loads(out)
    assert d["error"]["type"] == "ModelLoadError" and "not found" in d["error"]["message"]
    assert err.startswith("error: ModelLoadError")


def test_report_execute_on_a_model_that_cannot_execute_still_writes_the_report(capsys, tmp_path):
    target = tmp_path / "r.html"
    rc, out, err = run_cli(capsys, "report", DEMO, "-o", str(target), "--execute")
    # (the demo's dims stay symbolic without --input-shape: nothing can run)
    assert rc == 2
    assert "warning: nothing was executed: " in err
    assert "--input-shape NAME=D1,D2,..." in err and "input_shapes={" not in err   # hints name CLI flags
    assert target.is_file() and "<!DOCTYPE html>" in target.read_text(encoding="utf-8")


def test_report_execute_with_inputs_from_npz_and_seed(capsys, tmp_path):
    import numpy as np
    import hetero_explore as he
    g = he.load_model(DEMO, input_shapes={"image": (1, 3, 16, 16)})
    feeds = he.random_inputs(g, seed=7)
    np.savez(tmp_path / "in.npz", **feeds)
    for extra in (["--inputs", str(tmp_path / "in.npz")], ["--seed", "7"], ["--seed", "8"]):
        rc, out, err = run_cli(capsys, "report", DEMO, "-o", str(tmp_path / "r.html"), "--execute",
                               "--input-shape", "image=1,3,16,16", *extra)
        assert rc == 0, err
        assert "True" in out       # the byte-identity table
    rc, _, err = run_cli(capsys, "report", DEMO, "-o", str(tmp_path / "r.html"), "--execute",
                         "--input-shape", "image=1,3,16,16", "--inputs", str(tmp_path / "nope.npz"))
    assert rc == 2 and "InputValidationError" in err and "no such file" in err


def test_tables_fit_a_terminal_unless_full(capsys, tmp_path):
    import onnx
    from hetero_explore.data import models
    path = tmp_path / "chain.onnx"
    onnx.save(models.chain("tiny", layers=60), str(path))
    rc, out, _ = run_cli(capsys, "plan", str(path), "--providers", "cpu")
    assert rc == 0
    assert "more row(s) of" in out and "--full prints them all" in out
    assert max(len(line) for line in out.splitlines()) <= 400
    rc, full, _ = run_cli(capsys, "plan", str(path), "--providers", "cpu", "--full")
    assert rc == 0 and "more row(s) of" not in full and len(full.splitlines()) > len(out.splitlines())


def test_units_are_formatted_in_one_place():
    from hetero_explore.ir.units import format_frame, human_bytes, human_seconds
    import pandas as pd
    assert human_bytes(16.0) == "16 B" and human_bytes(float("nan")) == "? B" and human_bytes(4096) == "4.0 KiB"
    assert human_seconds(6.1522e-05) == "61.5 µs" and human_seconds(1.5) == "1.50 s"
    assert human_seconds(0.0123) == "12.30 ms" and human_seconds(None) == "?"
    df = format_frame(pd.DataFrame({"bytes": [16.0, None], "seconds": [6.1522e-05, 2.0], "name": ["a", "b"]}))
    assert list(df["bytes"]) == ["16 B", "? B"] and list(df["seconds"]) == ["61.5 µs", "2.00 s"]
    assert list(df["name"]) == ["a", "b"]


def test_ops_table_counts_and_shares(capsys):
    import hetero_explore as he
    from hetero_explore.providers import resolve
    g = he.load_model(DEMO, input_shapes={"image": (1, 3, 16, 16)})
    p = he.plan(g, [he.mask(resolve("gpu"), deny=["Relu"]), "cpu"])
    df = p.ops_df()
    assert df["nodes"].sum() == len(g.nodes) and (df["gpu"] + df["cpu"] == df["nodes"]).all()
    relu = df[df.op_type == "Relu"].iloc[0]
    assert relu["gpu"] == 0 and relu["cpu"] == relu["nodes"] and relu["on_first"] == 0.0
    assert "gpu: " in relu["declined"]
    assert abs(df["share_of_nodes"].sum() - 100.0) < 1.0
    assert "(%.1f%%)" % (100.0 * p.placement_counts()["cpu"] / len(g.nodes)) in p.summary()


def test_a_node_no_provider_supports_is_shown_on_the_unplaced_lane(capsys):
    rc, out, err = run_cli(capsys, "plan", DEMO, "--providers", "gpu", "--deny", "gpu:GatherND",
                           "--input-shape", "image=1,3,16,16", "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["placement"] == {"gpu": 15, "unplaced": 1}     # (Clip expands into 2 nodes; bn1 folded)
    assert d["execution_blockers"][0]["kind"] == "unplaceable"
    assert "1 node(s) no provider supports sit on the unplaced lane" in err


# -- the progress bar ----------------------------------------------------------------------------
def test_progress_bar_is_off_when_stderr_is_not_a_terminal(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "plan", DEMO, "--input-shape", "image=1,3,16,16", "--json")
    assert rc == 0 and "\r" not in err and "[#" not in err and "[." not in err
    json.loads(out)  # stdout is untouched either way
    rc, _, err = run_cli(capsys, "report", DEMO, "--input-shape", "image=1,3,16,16", "-o", str(tmp_path / "r.html"))
    assert rc == 0 and "\r" not in err and "#" not in err


def test_progress_bar_forced_and_quiet(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "report", DEMO, "--input-shape", "image=1,3,16,16", "-o", str(tmp_path / "r.html"),
                           "--progress")
    assert rc == 0
    frames = [f for f in err.split("\r") if f.startswith("[")]
    assert frames and all(re.match(r"\[[#.]{24}\] [1-3]/3 ", f) for f in frames), frames
    labels = " | ".join(frames)
    assert "1/3 loading" in labels and "2/3 planning" in labels and "3/3 writing the report" in labels
    assert err.endswith("\r\x1b[K") or "\r\x1b[K" in err  # the bar clears its line when done
    assert "report written" in out and "\r" not in out
    rc, _, err = run_cli(capsys, "plan", DEMO, "--input-shape", "image=1,3,16,16", "--progress", "--quiet")
    assert rc == 0 and "\r" not in err and "[" not in err


def test_progress_bar_draws_on_a_terminal_and_moves_with_compile_counts():
    import io

    from hetero_explore.cli.main import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    bar = Progress(2, stream=s)
    assert bar.enabled and not Progress(2, stream=io.StringIO()).enabled
    bar.stage("planning")
    bar.detail("compiling kernels (5/10)")
    bar.stage("writing")
    bar.close()
    frames = [f for f in s.getvalue().split("\r") if f]
    assert frames[0].startswith("[" + "." * Progress.WIDTH + "] 1/2 planning")
    assert frames[1].startswith("[" + "#" * 6 + "." * 18 + "] 1/2 planning: compiling kernels (5/10)")
    assert frames[2].startswith("[" + "#" * 12 + "." * 12 + "] 2/2 writing")
    assert frames[-1] == "\x1b[K"


def _frames(err: str) -> list[str]:
    return [f for f in err.split("\r") if f.startswith("[")]


def test_demo_progress_bar_forced_quiet_and_off(capsys, tmp_path):
    out_html = str(tmp_path / "d.html")
    rc, out, err = run_cli(capsys, "demo", "--no-execute", "-o", out_html, "--progress")
    assert rc == 0, err
    frames = _frames(err)
    assert frames and all(re.match(r"\[[#.]{24}\] [1-3]/3 ", f) for f in frames), frames
    labels = " | ".join(frames)
    assert "1/3 loading the model" in labels and "2/3 planning" in labels and "3/3 writing the report" in labels
    assert "\r\x1b[K" in err and "report written" in out and "\r" not in out
    for extra in (["--quiet"], ["--progress", "--quiet"], []):  # not a terminal, or quiet: no bar
        rc, out, err = run_cli(capsys, "demo", "--no-execute", "-o", out_html, *extra)
        assert rc == 0 and "\r" not in err and "[#" not in err and "[." not in err, err
        assert "report written" in out


def test_demo_progress_bar_covers_execution(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "demo", "-o", str(tmp_path / "d.html"), "--progress")
    assert rc == 0, err
    labels = " | ".join(_frames(err))
    for want in ("1/6 loading", "2/6 planning", "3/6 executing", "4/6 cpu reference run", "5/6 timing up to",
                 "6/6 writing the report"):
        assert want in labels, labels
    assert "Byte identity" in out and "\r" not in out


def test_warmup_progress_bar_moves_with_the_jobs(capsys, monkeypatch):
    import hetero_explore.session.warmup as W

    def fake(progress=None, providers=("cpu",)):
        for k in (1, 2, 3, 4):
            progress(f"compiling kernels ({k}/4): job{k} on {providers[0]} 0.1 s")
        return {}

    monkeypatch.setattr(W, "warmup", fake)
    rc, out, err = run_cli(capsys, "warmup", "--progress")
    assert rc == 0
    frames = _frames(err)
    fills = [f.count("#") for f in frames if "compiling kernels (" in f]
    assert fills == sorted(fills) and list(dict.fromkeys(fills)) == [6, 12, 18, 24], frames  # moves with (k/N)
    assert frames[0].startswith("[" + "." * 24 + "] 1/1 compiling kernels on cpu")
    assert [x for x in out.splitlines() if x.startswith("compiling")] == [
        f"compiling kernels ({k}/4): job{k} on cpu 0.1 s" for k in (1, 2, 3, 4)]  # the log stays on stdout
    assert "kernels compiled into numba's cache" in out and "\r" not in out
    rc, out, err = run_cli(capsys, "warmup", "--quiet", "--progress")
    assert rc == 0 and err == "" and out.count("compiling kernels (") == 4
    rc, out, err = run_cli(capsys, "warmup")             # not a terminal: no bar
    assert rc == 0 and err == "" and out.count("compiling kernels (") == 4


def test_progress_say_prints_above_the_bar():
    import io

    from hetero_explore.cli.main import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    s, log = Tty(), io.StringIO()
    bar = Progress(1, stream=s)
    bar.stage("working")
    bar.say("a log line", file=log)
    assert log.getvalue() == "a log line\n"
    frames = s.getvalue().split("\r")
    assert frames[1].startswith("[" + "." * 24 + "] 1/1 working")
    assert frames[2] == "\x1b[K"                           # cleared before the line is printed ...
    assert frames[3] == frames[1]                          # ... and drawn again below it
    quiet = Progress(1, enabled=False, stream=s)
    quiet.say("plain", file=log)
    assert log.getvalue().endswith("plain\n") and s.getvalue().count("\r") == 3
