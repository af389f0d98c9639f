"""Long fuzz run of hostile cases, each in a capped child process (run by hand).

    NUMBA_ENABLE_CUDASIM=1 python bench/fuzz.py                 # default size (~700 cases)
    NUMBA_ENABLE_CUDASIM=1 python bench/fuzz.py --cases 5000 --workers 4 --seed 7

Prints the counts per category (ok / unverified / typed / untyped / wrong /
crash / hang), per family, and every case that broke the contract (untyped,
wrong, crash, hang) with what happened. Exit status 1 when any did.
The case families and the contract are described in tests/fuzz_harness.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fuzz_harness as F  # noqa: E402

DEFAULT_CASES = 700


def build(n: int, seed: int, cuda: bool) -> list:
    """About ``n`` cases: every fixed case once (lying shapes, indices, external data, feeds,
    bombs) plus mutated real models and hostile names filling the rest."""
    fixed = F.cases(n_mutate=0, n_names_seeds=0, cuda=cuda, seed=seed)
    rest = max(0, n - len(fixed))
    names_seeds = max(1, rest // 6 // 10)
    return F.cases(n_mutate=max(0, rest - 10 * names_seeds), n_names_seeds=names_seeds, cuda=cuda, seed=seed)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=DEFAULT_CASES, help=f"about how many cases (default {DEFAULT_CASES})")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=F.DEFAULT_TIMEOUT, help="seconds per case")
    ap.add_argument("--memory-cap", type=float, default=F.DEFAULT_MEMORY_CAP / 2 ** 30, help="GiB per worker")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--family", action="append", help="only these families (repeatable)")
    ap.add_argument("--no-cuda", action="store_true", help="skip the CUDA provider's index cases")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case as it finishes")
    args = ap.parse_args(argv)
    cs = build(args.cases, args.seed, not args.no_cuda)
    if args.family:
        cs = [c for c in cs if c.family in args.family]
    print(f"{len(cs)} cases, {args.workers} workers, {args.timeout:.0f} s timeout, "
          f"{args.memory_cap:.1f} GiB address-space cap per worker", flush=True)
    done = [0]
    t0 = time.perf_counter()

    def progress(r):
        done[0] += 1
        if args.verbose or r.category in F.FAILURES:
            print(f"  [{done[0]}/{len(cs)}] {r.category:10s} {r.case.id}  {r.detail[:200]}", flush=True)
        elif done[0] % 50 == 0:
            print(f"  {done[0]}/{len(cs)} done in {time.perf_counter() - t0:.0f} s", flush=True)

    res = F.run_cases(cs, workers=args.workers, timeout=args.timeout,
                      memory_cap=int(args.memory_cap * 2 ** 30), progress=progress)
    s = F.summarize(res)
    print(f"\n{s['total']} cases in {time.perf_counter() - t0:.0f} s")
    print("  ".join(f"{c}: {s['counts'][c]}" for c in F.CATEGORIES))
    print("\nper family:")
    for fam, cnt in s["per_family"].items():
        print(f"  {fam:8s} " + "  ".join(f"{c}: {cnt[c]}" for c in F.CATEGORIES))
    bad = [r for r in res if r.category in F.FAILURES]
    if bad:
        print(f"\n{len(bad)} case(s) broke the contract:")
        for r in bad:
            print(f"  {r.category:8s} {r.case.id}: {r.detail[:300]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
