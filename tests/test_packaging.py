"""The package builds as a wheel and an sdist (``python -m build``), carries its data (the
bundled models, the capability profiles, the vendored front-end code) and works when installed
from the wheel rather than from this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def test_wheel_and_sdist_build_and_carry_the_data(dist):
    wheels = list(dist.glob("hetero_explore-*-py3-none-any.whl"))
    sdists = list(dist.glob("hetero_explore-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    for want in ("hetero_explore/data/demo.onnx", "hetero_explore/data/mobilenet_v3_tiny.onnx",
                 "hetero_explore/providers/profiles/nnapi.json", "hetero_explore/viz/vendor/elk-worker.min.js",
                 "hetero_explore/viz/vendor/LICENSE-elkjs.md", "hetero_explore/viz/vendor/svg-pan-zoom.min.js",
                 "hetero_explore/viz/static/graphview.js"):
        assert want in names, want
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheels[0]).read(meta).decode()
    assert "Requires-Dist: rich" in text and "Provides-Extra: jupyter" in text and "Provides-Extra: lab" in text
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "hetero-explore = hetero_explore.cli.main:main" in zipfile.ZipFile(wheels[0]).read(entry).decode()


def test_the_installed_wheel_plans_the_bundled_model(dist, tmp_path):
    wheel = next(dist.glob("*.whl"))
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                        str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)     # the installed copy, not this checkout (dependencies: this environment's)
    code = ("import hetero_explore as he, hetero_explore.data as d; print(he.__file__); "
            "p = he.plan(he.load_model(d.sample_path('mobilenet')), ['nnapi', 'cpu']); print(len(p.partitions))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    where, parts = r.stdout.split()
    assert where.startswith(str(target)) and int(parts) > 1
