"""Cold start after warm-up: a fresh process's ``explore(model).execute()`` (issue: ≤ 3 s).

Each run is a new Python process (so nothing is imported or loaded yet) that times
``import hetero_explore``, ``explore(model)``, the first ``execute()`` (plan, load the
cached kernels, run, reference run, compare) and the whole process, and says which of
the slow optional imports (numba.cuda, pandas, scipy) it paid for. Run
``hetero-explore warmup`` first: with a cold numba cache the first execute compiles,
and ``compile_s`` says how long that took.

    python bench/cold_start.py                       # the ResNet-style model of bench/models.py
    python bench/cold_start.py --family bert --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
import hetero_explore as he
t1 = time.perf_counter()
ex = he.explore(sys.argv[1])
t2 = time.perf_counter()
c0 = time.process_time()
ex.execute()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "explore_s": t2 - t1, "execute_s": t3 - t2,
                  "execute_cpu_s": time.process_time() - c0, "whole_s": t3 - t0, "whole_cpu_s": time.process_time(),
                  "compile_s": float(ex.compile_seconds or 0.0), "byte_identical": ex.byte_identical,
                  "imported": {m: m in sys.modules for m in ("numba.cuda", "pandas", "scipy")}}))
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="resnet", help="a family of bench/models.py (default: resnet)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "bench"))
    import models   # bench/models.py: exports the family from torch with seeded weights (cached)
    path, _ = models.export(args.family)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    runs = []
    for _ in range(args.runs):
        r = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env,
                           cwd=str(ROOT), timeout=900)
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            return 1
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"family": args.family, "load": load, "runs": runs}))
        return 0
    print(f"cold start, {args.family}, {args.runs} fresh processes, load {load[0]:.1f}")
    print("| run | import | explore() | first execute (CPU) | whole process (CPU) | compile | numba.cuda / pandas / scipy |")
    print("|---|---|---|---|---|---|---|")
    for i, r in enumerate(runs, 1):
        imp = " / ".join("yes" if r["imported"][m] else "no" for m in ("numba.cuda", "pandas", "scipy"))
        print(f"| {i} | {r['import_s']:.2f} s | {r['explore_s']:.2f} s | {r['execute_s']:.2f} s "
              f"({r['execute_cpu_s']:.2f} s) | {r['whole_s']:.2f} s ({r['whole_cpu_s']:.2f} s) | {r['compile_s']:.1f} s "
              f"| {imp} |")
    print(f"median whole process {statistics.median(r['whole_s'] for r in runs):.2f} s, "
          f"median first execute {statistics.median(r['execute_s'] for r in runs):.2f} s; CPU time: whole "
          f"{statistics.median(r['whole_cpu_s'] for r in runs):.2f} s, first execute "
          f"{statistics.median(r['execute_cpu_s'] for r in runs):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
