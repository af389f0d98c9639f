"""The doc-table profiles, measured: each capability profile against the real EP it describes.

    python bench/profile_accuracy.py [--pairs openvino=ort:openvino,ort-cuda=ort:cuda] [--no-torch]

For every pair (profile, real EP) whose EP the installed onnxruntime offers here, every model
is planned with the profile's table alone (``profile_provider(name, execute=False)``) and
with the real EP (``ort:<EP>``: ORT's own assignment of the graph), each as the only
provider; the nodes each claims are compared with the EP as the truth:

* precision — of the nodes the table claims, the share the EP claims too;
* recall — of the nodes the EP claims, the share the table claims too;
* the op types where they disagree (table yes / EP no, table no / EP yes), with counts.

Pairs whose EP is not offered here are listed with the reason (e.g. the OpenVINO plugin on a
non-Intel CPU). Models: this project's generated families (``hetero_explore.data.models``)
and, with torch installed, the seeded exports of ``bench/models.py``. Output: a table per
pair and model, the totals, the top disagreeing ops; ``--json FILE`` writes the rows.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hetero_explore.planner.ortplan import PROFILE_EPS as PAIRS, claimed, compare_claims  # noqa: E402,F401


def models(use_torch: bool = True):
    """(name, loaded graph) of the models measured."""
    import hetero_explore as he
    from hetero_explore.data import models as gen
    out = [("gen-mlp", he.load_model(gen.mlp())), ("gen-cnn", he.load_model(gen.cnn())),
           ("gen-transformer", he.load_model(gen.transformer())), ("gen-resnet18", he.load_model(gen.resnet18_like()))]
    if use_torch:
        try:
            sys.path.insert(0, str(ROOT / "bench"))
            import models as bench_models
            for fam in bench_models.FAMILIES:
                path, feeds = bench_models.export(fam)
                out.append((fam, he.load_model(str(path), input_shapes={n: a.shape for n, a in feeds.items()})))
        except ImportError as e:
            print(f"# torch exports skipped: {e}", file=sys.stderr)
    return out


def run(pairs: dict, graphs) -> tuple[list, list]:
    """(rows per pair and model, pairs not measured with the reason)."""
    from hetero_explore.providers import resolve
    from hetero_explore.providers.profiles import profile_provider
    rows, skipped = [], []
    for prof, ep_name in pairs.items():
        ep = resolve(ep_name)
        ok, why = ep.available()
        if not ok:
            skipped.append({"profile": prof, "ep": ep_name, "reason": why})
            continue
        table = profile_provider(prof, execute=False)
        for name, g in graphs:
            t = time.perf_counter()
            r = compare_claims(g, table, ep)
            rows.append({"profile": prof, "ep": ep_name, "model": name, **r,
                         "seconds": round(time.perf_counter() - t, 2)})
    return rows, skipped


def totals(rows: list) -> dict:
    """Per profile: nodes, claims, precision, recall over every model; the top disagreeing ops."""
    out = {}
    for prof in dict.fromkeys(r["profile"] for r in rows):
        rs = [r for r in rows if r["profile"] == prof]
        t, e, b = (sum(r[k] for r in rs) for k in ("table", "ep", "both"))
        ops = collections.Counter()
        for r in rs:
            ops.update(r["disagree"])
        out[prof] = {"models": len(rs), "nodes": sum(r["nodes"] for r in rs), "table": t, "ep": e, "both": b,
                     "precision": b / t if t else None, "recall": b / e if e else None,
                     "top_disagreeing": ops.most_common(10)}
    return out


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default=",".join(f"{k}={v}" for k, v in PAIRS.items()),
                    help="profile=ort:EP pairs, comma-separated (default: every doc-table profile)")
    ap.add_argument("--no-torch", action="store_true", help="only the generated models (no torch exports)")
    ap.add_argument("--json", help="write the rows, totals and skipped pairs here")
    args = ap.parse_args(argv)
    pairs = {}
    for item in args.pairs.split(","):
        prof, sep, ep = item.partition("=")
        if not sep or not ep.startswith("ort:"):
            ap.error(f"--pairs takes profile=ort:EP items, got {item!r}")
        pairs[prof.strip()] = ep.strip()
    from hetero_explore.providers.profiles import PROFILE_NAMES
    bad = [p for p in pairs if p not in PROFILE_NAMES]
    if bad:
        ap.error(f"unknown profile(s) {bad}; known: {', '.join(PROFILE_NAMES)}")
    rows, skipped = run(pairs, models(not args.no_torch))
    for s in skipped:
        print(f"# {s['profile']} vs {s['ep']}: not measured here: {s['reason']}")
    if rows:
        print(f"{'profile':<10} {'model':<14} {'nodes':>6} {'table':>6} {'EP':>6} {'both':>6} {'precision':>9} "
              f"{'recall':>7}  disagreeing ops")
        for r in rows:
            top = "; ".join(f"{k}: {v}" for k, v in list(r["disagree"].items())[:4])
            print(f"{r['profile']:<10} {r['model']:<14} {r['nodes']:>6} {r['table']:>6} {r['ep']:>6} {r['both']:>6} "
                  f"{_pct(r['precision']):>9} {_pct(r['recall']):>7}  {top}")
    tot = totals(rows)
    for prof, t in tot.items():
        print(f"# {prof} in total: {t['models']} models, {t['nodes']} nodes; table claims {t['table']}, EP claims "
              f"{t['ep']}, both {t['both']}: precision {_pct(t['precision'])}, recall {_pct(t['recall'])}")
        print("#   top disagreeing ops: " + "; ".join(f"{k} ×{n}" for k, n in t["top_disagreeing"]))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "totals": tot, "skipped": skipped}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
