"""ONNX backend conformance per provider: the generated node cases and the on-disk folders.

    python bench/conformance_report.py                 # CPU: all cases; CUDA simulator: capped
    python bench/conformance_report.py --cap 1000 --pattern 'test_slice*'
    python bench/conformance_report.py --gpu           # CUDA on a real GPU (no simulator, no cap)
    python bench/conformance_report.py --csv out.csv   # every row, both providers
    python bench/conformance_report.py --write-manifest   # regenerate tests/conformance_manifest.json
    python bench/conformance_report.py --no-nodes --folder light   # one on-disk folder only

Prints, per provider: cases, claimed, passed, failed/errored, skipped by the size
cap; the claimed-and-failing cases with their errors; the ops most often
blocking a claim; and how the claims differ from the checked-in manifest
(``tests/conformance_manifest.json``, which the tests hold the providers to).
Then the on-disk folders (``simple``, ``pytorch-converted``, ``pytorch-operator``,
``light``): a table per folder and provider (cases, claimed, passed), every
unclaimed or failing folder case with its reason, and the manifest diff of the
folder claims.
``--write-manifest`` runs every case on the CPU and on the CUDA simulator (with
its size cap) and writes the manifest; review its diff before committing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "conformance_manifest.json"
sys.path.insert(0, str(ROOT))  # the checkout this script belongs to (its manifest describes it)


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
    ap.add_argument("--manifest", default=str(MANIFEST), help="the manifest to compare with / write")
    ap.add_argument("--no-nodes", action="store_true", help="skip the generated node cases")
    ap.add_argument("--no-folders", action="store_true", help="skip the on-disk folders")
    ap.add_argument("--folder", action="append",
                    help="on-disk folder(s) to run (repeatable; default: all of them)")
    ap.add_argument("--write-manifest", action="store_true",
                    help="write the claims of every case on cpu and the CUDA simulator to --manifest")
    args = ap.parse_args(argv)
    if args.write_manifest and (args.gpu or args.no_cuda or args.pattern or args.fold or args.cap != 256
                                or args.no_nodes or args.no_folders or args.folder):
        ap.error("--write-manifest runs every case with the defaults (CPU, and the CUDA simulator with "
                 "its size cap); drop --gpu/--no-cuda/--pattern/--fold/--cap/--no-nodes/--no-folders/--folder")
    if not args.gpu:
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # before numba is imported

    import pandas as pd

    from hetero_explore.analysis.conformance import (CUDA_SIMULATOR_MAX_ELEMENTS, FOLDERS, load_folder_manifest,
                                            load_manifest, manifest_entry, node_cases, run_conformance,
                                            run_folders, write_manifest)
    from hetero_explore.providers.cpu import NumbaCPUProvider
    from hetero_explore.providers.cuda import NumbaCUDAProvider, is_simulator

    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 120)
    t = time.perf_counter()
    cases = [] if args.no_nodes else node_cases()
    if not args.no_nodes:
        print(f"{len(cases)} ONNX backend node cases generated in {time.perf_counter() - t:.1f} s")

    runs = [("cpu", NumbaCPUProvider(), None)]  # (manifest key, provider, size cap)
    if not args.no_cuda:
        gpu = NumbaCUDAProvider()
        ok, why = gpu.available()
        if ok:
            if is_simulator():
                cap = None if args.cap == 0 else args.cap
                runs.append(("cuda-simulator", gpu, cap))
            else:
                runs.append(("cuda", gpu, None))
        else:
            print(f"cuda: unavailable ({why})")
    if args.write_manifest and [r[0] for r in runs] != ["cpu", "cuda-simulator"]:
        print("--write-manifest needs the CUDA simulator (NUMBA_ENABLE_CUDASIM=1 before numba is imported)",
              file=sys.stderr)
        return 2
    if args.write_manifest:
        runs[1] = ("cuda-simulator", runs[1][1], CUDA_SIMULATOR_MAX_ELEMENTS)
    try:
        manifest = load_manifest(args.manifest)
        folder_manifest = load_folder_manifest(args.manifest)
    except (OSError, ValueError, KeyError) as e:
        manifest, folder_manifest = {}, {}
        print(f"manifest {args.manifest}: not read ({type(e).__name__}: {e})")
    entries = {}
    folder_entries = {}

    frames = []
    summary = []
    for label, provider, cap in ([] if args.no_nodes else runs):
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
        entries[label] = entry = manifest_entry(df, cap)
        old = manifest.get(label)
        if old is not None and not args.pattern:
            if old["max_elements"] != cap:
                print(f"-- manifest: {label} was listed with size cap {old['max_elements']}, this run used {cap}")
            gone = sorted(old["claimed"] - set(entry["claimed"]))
            new = sorted(set(entry["claimed"]) - old["claimed"])
            capped = sorted(set(entry["size_capped"]) ^ old["size_capped"])
            print(f"-- manifest ({args.manifest}): {len(gone)} listed claim(s) gone, {len(new)} new claim(s), "
                  f"{len(capped)} change(s) in the size-capped list")
            for what, names in (("gone", gone), ("new", new), ("size cap changed", capped)):
                if names:
                    print(f"   {what}: " + ", ".join(names))

    if not args.no_nodes:
        print("\n== summary (node cases)")
        print(pd.DataFrame(summary).to_string(index=False))
    if not args.no_folders:
        frames += _folders(args, runs, folder_manifest, folder_entries, run_folders, manifest_entry, FOLDERS, pd)
    _contrib_claims()
    if args.write_manifest:
        write_manifest(args.manifest, entries, folder_entries)
        print(f"manifest written to {args.manifest}: " + ", ".join(
            f"{k}: {len(v['claimed'])} claimed, {len(v['size_capped'])} size-capped" for k, v in entries.items()))
    if args.csv:
        pd.concat(frames).to_csv(args.csv, index=False)
        print(f"rows written to {args.csv}")
    return 0


def _contrib_claims() -> None:
    """onnxruntime's contrib ops each provider's kernels claim (onnx generates no node cases for
    them: tests/test_kernels_contrib.py holds them to onnxruntime, one node at a time)."""
    from hetero_explore.kernels.registry import registry
    print("\n== onnxruntime contrib ops (com.microsoft, and SimplifiedLayerNormalization) per provider")
    for target in ("cpu", "cuda"):
        ops = sorted({d.op_type for d in registry() if target in d.targets
                      and (d.domain == "com.microsoft" or (d.domain, d.op_type) == ("", "SimplifiedLayerNormalization"))})
        print(f"{target}: {len(ops)} op types: {', '.join(ops)}")


def _folders(args, runs, manifest, entries, run_folders, manifest_entry, all_folders, pd) -> list:
    """Run the on-disk folders on every provider; print the per-folder table, every case not
    passing with its reason, and the manifest diff. Returns the frames (for --csv)."""
    folders = tuple(args.folder or all_folders)
    frames, table = [], []
    for label, provider, cap in runs:
        t = time.perf_counter()
        df = run_folders(provider, folders, pattern=args.pattern, max_elements=cap, fold_constants=args.fold)
        secs = time.perf_counter() - t
        df.insert(0, "provider", label)
        frames.append(df)
        for folder, g in df.groupby("folder", sort=False):
            table.append({"folder": folder, "provider": label, "cases": len(g), "claimed": int(g.claimed.sum()),
                          "passed": int(g.passed.sum()),
                          "failing": int((g.claimed & ~g.passed).sum()),
                          "skipped (size cap)": int((g.status == "skipped: size cap").sum()),
                          "seconds": round(float(g.seconds.sum()), 1)})
        print(f"\n== folders on {label}: {int(df.claimed.sum())} of {len(df)} claimed, "
              f"{int(df.passed.sum())} passed ({secs:.1f} s)")
        rest = df[df.status != "passed"]
        if len(rest):
            why = rest.reason.where(rest.reason != "", rest.error)
            print(pd.DataFrame({"case": rest.case, "status": rest.status, "reason": why.str.slice(0, 150)})
                  .to_string(index=False))
        entries[label] = entry = manifest_entry(df, cap)
        old = manifest.get(label)
        if old is not None and not args.pattern and not args.folder:
            gone = sorted(old["claimed"] - set(entry["claimed"]))
            new = sorted(set(entry["claimed"]) - old["claimed"])
            print(f"-- manifest (folders): {len(gone)} listed claim(s) gone, {len(new)} new claim(s)")
            for what, names in (("gone", gone), ("new", new)):
                if names:
                    print(f"   {what}: " + ", ".join(names))
        elif old is None and not args.pattern and not args.folder:
            print(f"-- manifest (folders): no {label} entry yet")
    print("\n== summary (on-disk folders)")
    print(pd.DataFrame(table).to_string(index=False))
    return frames


if __name__ == "__main__":
    sys.exit(main())
