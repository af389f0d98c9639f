"""Which capability profile makes a first model heterogeneous?

    python bench/profile_pairs.py                       # every profile x the project's models, on [profile, cpu]
    python bench/profile_pairs.py --light               # + onnx's "light" model-zoo architectures (weights folded)
    python bench/profile_pairs.py --profiles coreml,nnapi --second gpu

For each profile and model it plans ``[profile, SECOND]`` (default ``cpu``) and
prints: nodes on the profile (and their share), partitions, transfers, the ops
that fell back (with counts) and the planning time. Planning only; nothing runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def project_models():
    from hetero_explore.data import models
    from hetero_explore.data.demo import demo_input_shapes, demo_model
    return [
        ("demo", demo_model(), demo_input_shapes()),
        ("mlp-small", models.mlp("small"), None),
        ("cnn-small", models.cnn("small"), None),
        ("transformer-small", models.transformer("small"), None),
        ("chain-small", models.chain("small"), None),
        ("resnet18_like-64", models.resnet18_like(image=64), None),
    ]


def light_models(names):
    import onnx
    d = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    out = []
    for n in names:
        p = d / f"light_{n}.onnx"
        if p.exists():
            out.append((f"light-{n}", onnx.load(str(p)), None))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", default=None, help="comma-separated profile names (default: all)")
    ap.add_argument("--second", default="cpu", help="the provider after the profile (default cpu)")
    ap.add_argument("--light", action="store_true", help="add onnx's light model-zoo architectures")
    ap.add_argument("--light-models", default="squeezenet,shufflenet,inception_v1,resnet50,densenet121")
    args = ap.parse_args(argv)

    import hetero_explore as he
    from hetero_explore.providers.profiles import PROFILE_NAMES

    names = args.profiles.split(",") if args.profiles else list(PROFILE_NAMES)
    todo = project_models() + (light_models(args.light_models.split(",")) if args.light else [])
    graphs = []
    for label, m, shapes in todo:
        t = time.perf_counter()
        try:
            g = he.load_model(m, input_shapes=shapes)
        except Exception as e:  # say which model could not be read, and go on
            print(f"# {label}: not loaded: {type(e).__name__}: {str(e)[:200]}")
            continue
        graphs.append((label, g))
        print(f"# {label}: {len(g.nodes)} nodes, loaded in {time.perf_counter() - t:.2f} s", flush=True)
    print(f"{'profile':17s} {'model':20s} {'nodes':>5s} {'on prof':>8s} {'parts':>5s} {'xfers':>5s} "
          f"{'plan ms':>7s}  fallback ops")
    for prof in names:
        for label, g in graphs:
            t = time.perf_counter()
            try:
                plan = he.plan(g, [prof, args.second])
            except Exception as e:
                print(f"{prof:17s} {label:20s} not planned: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                continue
            ms = (time.perf_counter() - t) * 1e3
            counts = plan.placement_counts()
            on = counts.get(prof, 0)
            n = sum(counts.values())
            fb = ", ".join(f"{op}x{c}" for op, c in sorted(plan.fallback_ops().items(), key=lambda kv: -kv[1]))
            print(f"{prof:17s} {label:20s} {n:5d} {on:4d} {100 * on / max(n, 1):3.0f}% {len(plan.partitions):5d} "
                  f"{len(plan.transfers):5d} {ms:7.1f}  {fb or '-'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
