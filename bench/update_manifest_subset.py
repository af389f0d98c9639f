"""Refresh tests/conformance_manifest.json for the cases a change can affect, without the full run.

    python bench/update_manifest_subset.py                       # the string/legacy/optional-output cases below
    python bench/update_manifest_subset.py --pattern 'test_linear_attention*' --no-folders

The full regeneration (``python bench/conformance_report.py --write-manifest``) runs every
node case on the CPU and the CUDA simulator; on a loaded machine that takes long. This
script re-runs only the node cases that (a) hold an op of the string module, (b) hold an
op of the legacy (opset 1-6) module at an opset one of its definitions claims, or (c) whose
model the loader's ``drop_unused_optional_outputs`` changes, plus every on-disk folder
case, and rewrites exactly those entries. With ``--pattern`` (fnmatch on case names, repeatable) it
re-runs the node cases that match instead; ``--no-folders`` skips the on-disk folders. It is a stop-gap: the full regeneration is the
reference and replaces what this writes.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def affected(case, legacy, string_ops) -> bool:
    import onnx

    from hetero_explore.load.validate import drop_unused_optional_outputs

    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in case.model.opset_import}
    for n in case.model.graph.node:
        dom = "" if n.domain == "ai.onnx" else n.domain
        if (dom, n.op_type) in string_ops:
            return True
        if any(d.op_type == n.op_type and d.domain == dom and d.claims(opsets.get(dom, 1)) for d in legacy):
            return True
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    drop_unused_optional_outputs(m)
    return m != case.model


def main() -> int:
    import argparse
    import fnmatch
    import json

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pattern", action="append", help="fnmatch pattern on node case names (repeatable)")
    ap.add_argument("--no-folders", action="store_true", help="leave the on-disk folder entries as they are")
    args = ap.parse_args()

    from hetero_explore.analysis.conformance import (CUDA_SIMULATOR_MAX_ELEMENTS, SIZE_CAP, folder_cases,
                                            manifest_entry, node_cases, run_conformance, run_folders)
    from hetero_explore.providers.cpu import NumbaCPUProvider
    from hetero_explore.providers.cuda import NumbaCUDAProvider
    from hetero_explore.kernels import legacy, strings

    path = ROOT / "tests" / "conformance_manifest.json"
    doc = json.loads(path.read_text())
    string_ops = {(d.domain, d.op_type) for d in strings.OPS}
    if args.pattern:
        sel = [c for c in node_cases() if any(fnmatch.fnmatch(c.name, p) for p in args.pattern)]
    else:
        sel = [c for c in node_cases() if affected(c, legacy.OPS, string_ops)]
    print(f"{len(sel)} node cases affected: {', '.join(c.name for c in sel)}", flush=True)
    runs = [("cpu", NumbaCPUProvider(), None), ("cuda-simulator", NumbaCUDAProvider(), CUDA_SIMULATOR_MAX_ELEMENTS)]
    folders = {}
    for key, prov, cap in runs:
        t = time.perf_counter()
        df = run_conformance(prov, sel, max_elements=cap)
        bad = df[df.claimed & ~df.passed]
        print(f"{key}: node subset {int(df.claimed.sum())} claimed, {int(df.passed.sum())} passed "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
        if len(bad):
            print(bad[["case", "status", "error"]].to_string(index=False), flush=True)
        names = set(df.case)
        e = doc["providers"][key]
        claimed = (set(e["claimed"]) - names) | set(df.loc[df.claimed.astype(bool), "case"])
        capped = (set(e["size_capped"]) - names) | set(df.loc[df.status == SIZE_CAP, "case"])
        e["claimed"], e["size_capped"] = sorted(claimed), sorted(capped)
        if args.no_folders:
            path.write_text(json.dumps(doc, indent=1) + "\n")
            print(f"{key}: manifest updated (node subset only)", flush=True)
            continue
        t = time.perf_counter()
        fd = run_folders(prov, max_elements=cap)
        bad = fd[fd.claimed & ~fd.passed]
        print(f"{key}: folders {int(fd.claimed.sum())} of {len(fd)} claimed, {int(fd.passed.sum())} passed "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
        for f, g in fd.groupby("folder", sort=False):
            print(f"   {f}: {len(g)} cases, {int(g.claimed.sum())} claimed, {int(g.passed.sum())} passed", flush=True)
        if len(bad):
            print(bad[["case", "status", "error"]].to_string(index=False), flush=True)
        folders[key] = manifest_entry(fd, cap)
        doc["folders"] = {k: folders[k] for k in sorted(folders)}
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{key}: manifest updated", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
