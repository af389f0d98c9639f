"""The README's first screen and the documentation site (issue 30): the first 40 lines show a
picture of the app, the two commands and a first real what-if; ``docs/`` builds with mkdocs in
strict mode (a warning fails), its API pages generated from the docstrings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_readmes_first_screen_has_a_picture_the_two_commands_and_a_what_if():
    first = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40])
    pics = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", first)
    assert len(pics) == 1, pics
    img = ROOT / pics[0]
    assert img.is_file() and img.suffix == ".png" and img.stat().st_size < 400_000, img
    assert img.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "bash setup.sh" in first and "bash test.sh" in first
    assert "hetero-explore demo --model mobilenet --providers nnapi,cpu" in first
    assert "he.explore(" in first and "ex.show()" in first


def test_the_readme_is_short_and_links_only_to_files_that_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not link.startswith(("http://", "https://")):
            assert (ROOT / link).exists(), link


def test_the_docs_build_without_warnings(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("load_model", "explore", "set_providers", "measure", "sweep", "model_names", "plan_to_html"):
        assert name in api, name                     # generated from the docstrings
    assert "RESPONSIVENESS_TABLE" not in (tmp_path / "site" / "graph" / "index.html").read_text(encoding="utf-8")
