"""What each install of hetero_explore weighs on disk: the core and every extra, with their
dependencies, measured from the distributions installed in this environment.

    python bench/install_weight.py            # a table (MB on disk, distributions)
    python bench/install_weight.py --json     # the same as JSON

For each extra (read from this checkout's ``pyproject.toml``) the requirement closure is resolved
from the installed distributions' own metadata (``importlib.metadata``: ``Requires-Dist`` with
its extras and markers) and the sizes
of the files each distribution's RECORD lists are added up, so the figures are what ``pip
install`` put on this disk (Python 3.11, Linux x86-64 wheels). A distribution shared by two
extras counts in both; the "on top of the core" column counts what an extra adds. Nothing is
downloaded; a requirement not installed here is listed as missing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement

PROJECT = "hetero_explore"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist(name: str):
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def _size(dist) -> int:
    total = 0
    for f in dist.files or ():
        if f.size is not None:
            total += int(f.size)
        else:
            try:
                total += f.locate().stat().st_size
            except OSError:
                pass
    return total


def closure(name: str, extras=(), seen=None, missing=None) -> tuple[dict, set]:
    """``({normalised name: distribution}, {missing requirement names})`` of ``name[extras]``."""
    seen = {} if seen is None else seen
    missing = set() if missing is None else missing
    dist = _dist(name)
    if dist is None:
        missing.add(_norm(name))
        return seen, missing
    key = _norm(dist.metadata["Name"])
    first = key not in seen
    seen[key] = dist
    env = default_environment()
    for text in dist.requires or ():
        req = Requirement(text)
        wanted = [""] + list(extras)
        if req.marker is not None and not any(req.marker.evaluate(dict(env, extra=e)) for e in wanted):
            continue
        if req.marker is None and not first:
            continue  # its unconditional requirements were walked already
        if _norm(req.name) == _norm(name):  # name[extra] requiring name[other]: walk those extras too
            closure(name, tuple(req.extras), seen, missing)
            continue
        if _norm(req.name) in seen and not req.extras:
            continue
        closure(req.name, tuple(req.extras), seen, missing)
    return seen, missing


def _project() -> tuple[list[str], dict[str, list[str]]]:
    """The core requirements and the extras, from this checkout's ``pyproject.toml``."""
    import tomllib
    from pathlib import Path
    data = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    proj = data["project"]
    return list(proj.get("dependencies", [])), dict(proj.get("optional-dependencies", {}))


def _requirements_closure(reqs: list[str], extras: dict[str, list[str]], seen=None, missing=None, done=None):
    seen = {} if seen is None else seen
    missing = set() if missing is None else missing
    done = set() if done is None else done
    for text in reqs:
        req = Requirement(text)
        if _norm(req.name) == _norm(PROJECT):        # the project's own extras (dev = jupyter + ...)
            for e in req.extras:
                if e not in done:
                    done.add(e)
                    _requirements_closure(extras.get(e, []), extras, seen, missing, done)
            continue
        if req.marker is not None and not req.marker.evaluate(default_environment()):
            continue
        closure(req.name, tuple(req.extras), seen, missing)
    return seen, missing


def weights() -> list[dict]:
    core_reqs, extras = _project()
    core, _ = _requirements_closure(core_reqs, extras)
    core_keys = set(core)
    rows = []
    for extra in [""] + list(extras):
        got, miss = _requirements_closure(core_reqs + (extras[extra] if extra else []), extras)
        size = sum(_size(d) for d in got.values())
        added = sum(_size(d) for k, d in got.items() if k not in core_keys)
        top = sorted(((k, _size(d)) for k, d in got.items() if not extra or k not in core_keys),
                     key=lambda x: -x[1])[:4]
        rows.append({"install": f"{PROJECT}[{extra}]" if extra else PROJECT, "mb": round(size / 2**20, 1),
                     "mb_over_core": round(added / 2**20, 1), "distributions": len(got),
                     "largest": ", ".join(f"{k} {s / 2**20:.0f}" for k, s in top), "missing": sorted(miss)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = weights()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'install':34} {'MB':>7} {'+MB over core':>14} {'dists':>6}  largest (MB; for an extra: what it adds)")
    for r in rows:
        print(f"{r['install']:34} {r['mb']:7.1f} {r['mb_over_core']:14.1f} {r['distributions']:6d}  {r['largest']}"
              + (f"  [missing here: {', '.join(r['missing'])}]" if r["missing"] else ""))
    print(f"(Python {sys.version.split()[0]}, measured from this environment's installed files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
