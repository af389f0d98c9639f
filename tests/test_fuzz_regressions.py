"""Every failure the differential fuzzer found, shrunk to a minimal model
(tests/fuzz_regressions/: ``NAME.onnx``, its feeds ``NAME.npz``, and ``index.json`` saying which
op, what was wrong and why), checked every way again: it must now pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.diffcheck import check
from support.shrink import REGRESSIONS, load

INDEX = json.loads((REGRESSIONS / "index.json").read_text()) if (REGRESSIONS / "index.json").exists() else {}


def test_every_case_is_listed_with_its_cause():
    files = {p.stem for p in REGRESSIONS.glob("*.onnx")}
    assert files == set(INDEX)
    for name, meta in INDEX.items():
        assert meta.get("cause") and "to be written" not in meta["cause"], name
        assert (REGRESSIONS / f"{name}.npz").is_file(), name


@pytest.mark.parametrize("name", sorted(INDEX))
def test_regression_case_passes(name):
    m, feeds = load(name)
    cat, detail, facts = check(m, feeds, seed=0, cuda=True, masks=3)
    meta = INDEX[name]
    assert cat == meta.get("expect", "ok"), f"{name} ({meta['op']}): {cat}: {detail}"
    assert meta.get("expect_detail", "") in detail, detail
