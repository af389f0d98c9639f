"""One rule for messages (issue 29), checked over a corpus of invalid models
(:mod:`support.bad_models`): a typed error whose first line names the node (its name, or its
index and op type when it has none), the input or attribute at fault and what would be valid;
onnx's own text, whole, after it."""

from __future__ import annotations

import re

import onnx
import pytest

import hetero_explore as he
from hetero_explore.execution.inputs import random_inputs
from support.bad_models import CORPUS


def _first_error(m):
    """(stage, error) of the first typed error loading, planning and executing ``m``."""
    stage = "load"
    try:
        g = he.load_model(m)
        stage = "plan"
        p = he.plan(g, ["cpu"], strict=True)
        stage = "execute"
        he.execute(p, random_inputs(g, seed=0))
    except he.HeteroExploreError as e:
        return stage, e
    except Exception as e:  # noqa: BLE001 - the point: nothing untyped
        pytest.fail(f"untyped {type(e).__name__} at {stage}: {e}")
    pytest.fail("the invalid model ran")


@pytest.mark.parametrize("named", [True, False], ids=["named", "unnamed"])
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_every_error_names_the_node_the_culprit_and_what_is_valid(case, named):
    build, (kind, which) = CORPUS[case]
    m = build(named)
    op = next(n.op_type for n in m.graph.node if n.name == "bad") if named else m.graph.node[-1].op_type
    stage, e = _first_error(m)
    text = str(e)
    first = text.split("\n", 1)[0]
    # the node: its name, or (at load, before the IR names it) its index and op type
    if named:
        assert "'bad'" in first, first
    elif stage == "load":
        assert f"#{len(m.graph.node) - 1} ({op}, unnamed)" in first, first
    else:   # after loading, an unnamed node has the name the IR gave it
        assert f"'{op}_" in first or f"({op}, unnamed)" in first, first
    # the input, attribute or output at fault: quoted in the first line at load; named in the
    # reason a provider (plan) or kernel (execute) gives otherwise
    node = m.graph.node[-1]
    if kind == "attribute":
        ok = f"'{which}'" in first if stage == "load" else re.search(rf"\b{which}\b", text)
    elif kind == "input":
        schema = onnx.defs.get_schema(node.op_type, m.opset_import[0].version)
        formal = schema.inputs[min(which, len(schema.inputs) - 1)].name
        ok = (f"'{node.input[which]}'" in first if stage == "load"
              else f"'{node.input[which]}'" in text or re.search(rf"\b{formal}\b", text))
    else:
        ok = f"'{which}'" in first
    assert ok, text
    # what would be valid (load-time validation; a provider's refusal at plan time gives its reason)
    if stage == "load":
        assert "valid" in first, first
        assert not first.startswith(("ONNX shape inference rejected", "onnx.checker rejected")), first
    # onnx's own text after the first line, whole (the corpus' texts end in a word or a period)
    if "Inference error" in text or "onnx.checker:" in text or "typestr" in text:
        rest = text.split("\n", 1)[1]
        assert re.search(r"(^|\n|: )(ONNX shape inference|onnx\.checker): ", rest), rest
        assert not re.search(r"\w\.\.\.$", rest), rest


def test_the_corpus_covers_load_plan_and_execute():
    stages = {}
    for case, (build, _) in CORPUS.items():
        stages.setdefault(_first_error(build(True))[0], []).append(case)
    assert len(stages.get("load", [])) >= 30 and set(stages) >= {"load", "plan"}, stages


def test_the_cli_prints_the_rules_first_line_first(tmp_path, capsys):
    from hetero_explore.cli.main import main
    p = tmp_path / "bad.onnx"
    onnx.save(CORPUS["softmax-axis"][0](False), str(p))
    rc = main(["plan", str(p), "--providers", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("error: InvalidModelError: node #0 (Softmax, unnamed): attribute 'axis' = 7 is invalid"), err
    assert "valid: an int in [-2, 1]" in err and " | ONNX shape inference: [ShapeInferenceError]" in err
