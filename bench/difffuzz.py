"""Differential fuzzing on random valid ONNX models (issue 29; run by hand, a seeded sample runs in
tests/test_difffuzz.py).

    NUMBA_ENABLE_CUDASIM=1 python bench/difffuzz.py --models 1000 --seed 1 --workers 2
    NUMBA_ENABLE_CUDASIM=1 python bench/difffuzz.py --repro 4294967301 --max-nodes 200
    NUMBA_ENABLE_CUDASIM=1 python bench/difffuzz.py --models 300 --seed 7 --shrink --save tests/fuzz_regressions

Model ``i`` of a run with ``--seed S`` is generated from seed ``S << 32 | i``
(tests/support/modelgen.py: random DAGs of ``--min-nodes``..``--max-nodes`` nodes over the ops the
registry claims) and checked every way (tests/support/diffcheck.py: onnxruntime and onnx's
ReferenceEvaluator as oracles, CPU vs CUDA simulator bit for bit, heterogeneous runs under random
masks byte-identical to the reference, the plan's invariants), each in a capped child process
(tests/fuzz_harness.py's pool: a crash or a hang is a result). ``--shrink`` shrinks every failure
to a minimal model (tests/support/shrink.py) and, with ``--save DIR``, writes it there as a
regression case. The last line reads
``N models: N ok, N wrong, N crash, N hang, N untyped, N undefined``; the exit status is 1 when
any model was wrong, crashed, hung or raised an untyped error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

CATEGORIES = ("ok", "wrong", "crash", "hang", "untyped", "undefined")
FAILURES = ("wrong", "crash", "hang", "untyped")


def cases(n: int, seed: int, max_nodes: int, min_nodes: int, cuda: bool, masks: int):
    import fuzz_harness as F
    from support.diffcheck import model_seed
    return [F.Case("diff", str(model_seed(seed, i)), (model_seed(seed, i), max_nodes, min_nodes, cuda, masks))
            for i in range(n)]


def run(n: int, seed: int, *, workers: int = 2, max_nodes: int = 40, min_nodes: int = 5, cuda: bool = True,
        masks: int = 2, timeout: float = 300.0, progress=None):
    """Run ``n`` models; returns the pool's results (one per model, in order)."""
    import fuzz_harness as F
    cs = cases(n, seed, max_nodes, min_nodes, cuda, masks)
    return F.run_cases(cs, workers=workers, timeout=timeout, progress=progress)


def summary_line(results) -> str:
    counts = {c: 0 for c in CATEGORIES}
    for r in results:
        counts[r.category if r.category in counts else "untyped"] += 1
    return f"{len(results)} models: " + ", ".join(f"{counts[c]} {c}" for c in CATEGORIES)


def _info(r) -> dict:
    try:
        return json.loads(r.detail)
    except (ValueError, TypeError):
        return {"detail": r.detail}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-nodes", type=int, default=40, help="largest model (nodes; default 40, the issue's 200 "
                    "for the long run)")
    ap.add_argument("--min-nodes", type=int, default=5)
    ap.add_argument("--no-cuda", action="store_true", help="skip the CUDA provider (simulator) runs")
    ap.add_argument("--masks", type=int, default=2, help="heterogeneous runs under random masks per model")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per model before it is a hang")
    ap.add_argument("--repro", type=int, metavar="MODEL_SEED", help="check one model here, in this process")
    ap.add_argument("--shrink", action="store_true", help="shrink every failure to a minimal model")
    ap.add_argument("--save", metavar="DIR", help="with --shrink: write the shrunk models there")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    cuda = not args.no_cuda
    if args.repro is not None:
        from support.diffcheck import check, make
        m, feeds = make(args.repro, args.max_nodes, args.min_nodes)
        cat, detail, facts = check(m, feeds, seed=args.repro, cuda=cuda, masks=args.masks)
        print(f"model {args.repro}: {cat}: {detail}\n{facts}")
        return 1 if cat in FAILURES else 0
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    done = [0]

    def progress(r):
        done[0] += 1
        if args.verbose or r.category in FAILURES:
            info = _info(r)
            print(f"  [{done[0]}/{args.models}] {r.category:9s} seed {r.case.name} "
                  f"op={info.get('op')} {str(info.get('detail'))[:300]}", flush=True)
        elif done[0] % 100 == 0:
            el = time.perf_counter() - t0
            print(f"  {done[0]}/{args.models} in {el:.0f} s ({done[0] / el:.2f} models/s, load "
                  f"{os.getloadavg()[0]:.1f})", flush=True)

    print(f"{args.models} models (seed {args.seed}, {args.min_nodes}-{args.max_nodes} nodes, cuda={cuda}, "
          f"{args.masks} mask runs each), {args.workers} worker(s), load {load0[0]:.1f}", flush=True)
    res = run(args.models, args.seed, workers=args.workers, max_nodes=args.max_nodes, min_nodes=args.min_nodes,
              cuda=cuda, masks=args.masks, timeout=args.timeout, progress=progress)
    el = time.perf_counter() - t0
    bad = [r for r in res if r.category in FAILURES]
    undefined = [r for r in res if r.category == "undefined"]
    infos = [_info(r) for r in res if r.category not in ("crash", "hang")]
    both = sum(1 for i in infos if i.get("oracles") == [True, True])
    one = sum(1 for i in infos if i.get("oracles") in ([True, False], [False, True]))
    print(f"\noracles on the whole model: both {both}, one {one}, none {len(infos) - both - one}; checked node "
          f"by node: {sum(1 for i in infos if i.get('per_node'))}; onnxruntime crashed on "
          f"{sum(1 for i in infos if i.get('ort_crash'))} (in its own process)")
    if undefined:
        why: dict = {}
        for r in undefined:
            info = _info(r)
            key = f"{info.get('op')}: {str(info.get('detail'))[:90]}"
            why[key] = why.get(key, 0) + 1
        print(f"\nundefined (the spec or the oracles leave the result open), {len(undefined)}:")
        for k, c in sorted(why.items(), key=lambda kv: -kv[1])[:30]:
            print(f"  {c:5d}  {k}")
    if bad:
        print(f"\n{len(bad)} model(s) broke the contract:")
        for r in bad:
            info = _info(r)
            print(f"  {r.category:8s} seed {r.case.name} op={info.get('op')} node={info.get('node')}: "
                  f"{str(info.get('detail'))[:400]}")
        if args.shrink:
            from support.shrink import shrink_and_save
            for r in bad:
                out = shrink_and_save(int(r.case.name), r.category, _info(r), max_nodes=args.max_nodes,
                                      min_nodes=args.min_nodes, cuda=cuda, masks=args.masks, save=args.save)
                print(f"  shrunk seed {r.case.name}: {out}")
    print(f"\n{len(res)} models in {el:.0f} s ({len(res) / max(el, 1e-9):.2f} models/s), load average "
          f"{load0[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(summary_line(res))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
