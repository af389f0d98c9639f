"""ONNX backend node-case conformance per provider.

    python bench/conformance_report.py                 # CPU: all cases; CUDA simulator: capped
    python bench/conformance_report.py --cap 1000 --pattern 'test_slice*'
    python bench/conformance_report.py --gpu           # CUDA on a real GPU (no simulator, no cap)
    python bench/conformance_report.py --csv out.csv   # every row, both providers

Prints, per provider: cases, claimed, passed, failed/errored, skipped by the size
cap; the claimed-and-failing cases with their errors; and the ops most often
blocking a claim.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cap", type=int, default=256,
                    help="CUDA: skip cases with a tensor above this many elements (default 256; 0 = none)")
    ap.add_argument("--pattern", action="append", help="fnmatch pattern on case names (repeatable)")
    ap.add_argument("--gpu", action="store_true", help="use a real GPU instead of the CUDA simulator")
    ap.add_argument("--no-cuda", action="store_true", help="CPU only")
    ap.add_argument("--fold", action="store_true", help="load with constant folding on")
    ap.add_argument("--csv", help="write all rows to this CSV file")
    ap.add_argument("--top", type=int, default=15, help="how many blocking reasons to list")
    args = ap.parse_args(argv)
    if not args.gpu:
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # before numba is imported

    import pandas as pd

    from hetero_explore.conformance import node_cases, run_conformance
    from hetero_explore.providers.cpu import NumbaCPUProvider
    from hetero_explore.providers.cuda import NumbaCUDAProvider, is_simulator

    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 120)
    t = time.perf_counter()
    cases = node_cases()
    print(f"{len(cases)} ONNX backend node cases generated in {time.perf_counter() - t:.1f} s")

    runs = [("cpu", NumbaCPUProvider(), None)]
    if not args.no_cuda:
        gpu = NumbaCUDAProvider()
        ok, why = gpu.available()
        if ok:
            cap = None if args.gpu or args.cap == 0 else args.cap
            label = "cuda (simulator)" if is_simulator() else "cuda"
            runs.append((label, gpu, cap))
        else:
            print(f"cuda: unavailable ({why})")

    frames = []
    summary = []
    for label, provider, cap in runs:
        t = time.perf_counter()
        df = run_conformance(provider, cases, pattern=args.pattern, max_elements=cap,
                             fold_constants=args.fold)
        secs = time.perf_counter() - t
        df.insert(0, "provider", label)
        frames.append(df)
        bad = df[df.claimed & ~df.passed]
        summary.append({
            "provider": label, "cases": len(df), "claimed": int(df.claimed.sum()),
            "passed": int(df.passed.sum()), "failed": int((df.status == "failed").sum()),
            "errors": int((df.status == "error").sum()),
            "skipped (size cap)": int((df.status == "skipped: size cap").sum()),
            "cap": cap or "-", "seconds": round(secs, 1)})
        print(f"\n== {label}: {int(df.claimed.sum())} claimed, {int(df.passed.sum())} passed, "
              f"{len(bad)} failing ({secs:.1f} s)")
        if len(bad):
            print(bad[["case", "ops", "status", "error"]].to_string(index=False))
        unclaimed = df[df.status == "unclaimed"]
        if len(unclaimed):
            blockers = (unclaimed.reason.str.replace(r"opset \d+", "opset N", regex=True)
                        .str.slice(0, 100).value_counts().head(args.top))
            print(f"-- top reasons a case is not claimed on {label}:")
            print(blockers.to_string())

    print("\n== summary")
    print(pd.DataFrame(summary).to_string(index=False))
    if args.csv:
        pd.concat(frames).to_csv(args.csv, index=False)
        print(f"rows written to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
