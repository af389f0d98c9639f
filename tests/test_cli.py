"""The hetero-explore command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hetero_explore.cli import main

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
    assert d["placement"] == {"gpu": 15, "cpu": 1}
    assert d["fallback_ops"] == {"Clip": 1}
    assert d["transfer_bytes"] == sum(t["bytes"] for t in d["transfers"])
    assert {t["kind"] for t in d["transfers"]} == {"D2H", "H2D"}


def test_plan_deny_moves_ops_and_prints_tables(capsys):
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--input-shape", "image=1,3,16,16", "--deny", "gpu:Relu,Softmax")
    assert rc == 0
    first = out.splitlines()[0]
    assert "ops forced onto a fallback provider: Clip, Relu, Softmax" in first
    assert "Placement:" in out and "Partitions:" in out and "Transfers:" in out


def test_plan_cpu_only_is_single_partition(capsys):
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--providers", "cpu", "--dim", "batch=2", "--json")
    d = json.loads(out)
    assert rc == 0 and len(d["partitions"]) == 1 and d["transfers"] == []


def test_unbound_symbolic_dims_are_blockers_not_crashes(capsys):
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--json")
    d = json.loads(out)
    assert rc == 0 and [b["kind"] for b in d["execution_blockers"]] == ["symbolic-shape"]


@pytest.mark.parametrize("argv, needle", [
    (["plan", "missing.onnx"], "model file not found"),
    (["plan", DEMO, "--providers", "tpu"], "unknown provider name"),
    (["plan", DEMO, "--deny", "npu:Relu"], "not in --providers"),
    (["plan", DEMO, "--input-shape", "nope=1,2"], "not a graph input"),
    (["plan", DEMO, "--providers", "gpu", "--input-shape", "image=1,3,16,16"], "no provider supports node"),
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
    r = subprocess.run([sys.executable, "-m", "hetero_explore.cli", "plan", DEMO, "--providers", "cpu",
                        "--input-shape", "image=1,3,16,16"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("1 partition(s) across 1 device(s); cpu: 16 node(s)")
