"""Which primitive ops block the ONNX backend cases that function expansion could claim.

    python bench/expansion_blockers.py              # CPU provider
    python bench/expansion_blockers.py --cuda       # also the CUDA simulator (size cap 256)

For every backend node case that is not claimed and holds an op that onnx defines
by a function body (``hetero_explore.load.expand``), the case is loaded as the
conformance runner does (constants folded, small integer inputs as constants),
its declined nodes are expanded, and every node the provider still declines is
listed, as well as the ops whose nodes constant folding could not compute
(their output shapes then stay unknown). Prints, per op type: the number of
cases it blocks (a case counts once per op), and the reasons seen.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuda", action="store_true", help="also the CUDA simulator")
    ap.add_argument("--pattern", action="append", help="fnmatch pattern on case names")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

    import fnmatch
    import warnings

    import numpy as np

    from hetero_explore.analysis.conformance import (_as_array, _attempts, _expand_declined, _load, node_cases,
                                            run_case)
    from hetero_explore.load.expand import has_function_body
    from hetero_explore.ir.context import node_context
    from hetero_explore.providers.cpu import NumbaCPUProvider

    provs = [("cpu", NumbaCPUProvider(), None)]
    if args.cuda:
        from hetero_explore.providers.cuda import NumbaCUDAProvider
        from hetero_explore.analysis.conformance import CUDA_SIMULATOR_MAX_ELEMENTS
        provs.append(("cuda-simulator", NumbaCUDAProvider(), CUDA_SIMULATOR_MAX_ELEMENTS))
    cases = [c for c in node_cases()
             if not args.pattern or any(fnmatch.fnmatchcase(c.name, p) for p in args.pattern)]

    def expandable_ops(m):
        ops = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in m.opset_import}
        return [n.op_type for n in m.graph.node
                if has_function_body(n.op_type, n.domain, ops.get("" if n.domain == "ai.onnx" else n.domain, 0))]

    for label, p, cap in provs:
        blocks: Counter = Counter()
        why: dict = defaultdict(Counter)
        n_cases = 0
        for case in cases:
            if not expandable_ops(case.model):
                continue
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                row = run_case(case, p, max_elements=cap)
                if row["claimed"] or row["status"] == "skipped: size cap":
                    continue
                ins = [_as_array(a) for a in case.data_sets[0][0]]
                if any(a is None for a in ins):
                    continue
                init = {t.name for t in case.model.graph.initializer}
                names = [vi.name for vi in case.model.graph.input if vi.name not in init]
                n_cases += 1
                found: dict = {}
                try:
                    g = _load(case, names, ins, _attempts(names, ins, True)[-1], True)
                    g, _ = _expand_declined(g, p)
                except Exception as e:  # noqa: BLE001 - a report, not a check
                    found[f"(load/expand: {type(e).__name__})"] = str(e)[:90]
                else:
                    for node in g.nodes:
                        m = p.supports(node_context(g, node))
                        if not m.supported:
                            found.setdefault(node.op_type, (m.reason or "")[:90])
                    for name, reason in g.info.get("fold_skipped", {}).items():
                        op = next((n.op_type for n in g.nodes if n.name == name), None)
                        if op and "kernel" in str(reason):
                            found.setdefault(f"{op} (folding)", str(reason)[:90])
                    if not found and g.symbolic_values:
                        found["(symbolic shapes)"] = ", ".join(g.symbolic_values[:2])[:90]
            for op, reason in found.items():
                blocks[op] += 1
                why[op][reason] += 1
        print(f"\n== {label}: {n_cases} unclaimed case(s) with an op onnx defines by a function body; "
              "ops that block them (cases):")
        for op, k in blocks.most_common(args.top):
            reason, _ = why[op].most_common(1)[0]
            print(f"  {k:4d}  {op:32s} {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
