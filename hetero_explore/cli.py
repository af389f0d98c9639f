"""The ``hetero-explore`` command.

    hetero-explore plan MODEL [--providers gpu,cpu] [--deny gpu:Softmax ...]
                              [--input-shape x=1,3,224,224 ...] [--dim batch=1] [--json]
    hetero-explore report MODEL -o report.html [same options] [--execute]
    hetero-explore demo [-o demo_report.html] [--no-execute]
    hetero-explore providers [--providers cpu,cuda,gpu]
"""

from __future__ import annotations

import argparse
import sys
import time

from .errors import HeteroExploreError


def _parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--input-shape wants NAME=D1,D2,... (got {text!r})")
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip() != "") if dims.strip() else ()
    except ValueError:
        raise argparse.ArgumentTypeError(f"--input-shape {text!r}: dims must be integers") from None
    if any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"--input-shape {text!r}: dims must be non-negative")
    return name, shape


def _parse_dim(text: str) -> tuple[str, int]:
    name, sep, v = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--dim wants NAME=VALUE (got {text!r})")
    try:
        return name, int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--dim {text!r}: value must be an integer") from None


def _parse_deny(text: str) -> tuple[str, list[str]]:
    prov, sep, ops = text.partition(":")
    if not sep or not prov or not ops:
        raise argparse.ArgumentTypeError(f"--deny wants PROVIDER:OP[,OP...] (got {text!r})")
    return prov.strip(), [o.strip() for o in ops.split(",") if o.strip()]


def build_providers(names: str, deny: list[tuple[str, list[str]]]):
    from .providers import mask, resolve_all
    provs = resolve_all([n for n in names.split(",") if n.strip()])
    by_name = {p.name: i for i, p in enumerate(provs)}
    for prov, ops in deny:
        if prov not in by_name:
            raise HeteroExploreError(f"--deny names provider {prov!r}, which is not in --providers "
                                     f"({', '.join(by_name)})")
        i = by_name[prov]
        provs[i] = mask(provs[i], deny=ops)
    return provs


def _common(sp):
    sp.add_argument("--providers", default="gpu,cpu",
                    help="providers in priority order (default: gpu,cpu); names: cpu, cuda, gpu")
    sp.add_argument("--deny", action="append", type=_parse_deny, default=[], metavar="PROVIDER:OP[,OP]",
                    help="deny op types on a provider (repeatable)")
    sp.add_argument("--input-shape", action="append", type=_parse_shape, default=[],
                    metavar="NAME=D1,D2,...", help="bind an input's shape (repeatable)")
    sp.add_argument("--dim", action="append", type=_parse_dim, default=[], metavar="NAME=VALUE",
                    help="bind a symbolic dim by name (repeatable)")
    sp.add_argument("--no-fold", action="store_true", help="do not fold constant shape subgraphs")


def _load_and_plan(args, model=None):
    from .loader import load_model
    from .planner import plan
    g = load_model(model if model is not None else args.model, input_shapes=dict(args.input_shape) or None,
                   dim_values=dict(args.dim) or None, fold_constants=not args.no_fold)
    provs = build_providers(args.providers, args.deny)
    return g, plan(g, provs)


def _print_tables(p, out=None):
    out = out or sys.stdout
    import pandas as pd
    with pd.option_context("display.max_rows", 200, "display.max_columns", 20, "display.width", 160,
                           "display.max_colwidth", 60):
        print("\nPlacement:", file=out)
        print(p.placement_df().drop(columns=["declined_by"]).to_string(index=False), file=out)
        print("\nPartitions:", file=out)
        print(p.partitions_df().to_string(index=False), file=out)
        print("\nTransfers:", file=out)
        t = p.transfers_df()
        print(t.to_string(index=False) if len(t) else "(none)", file=out)
        if p.execution_blockers:
            print("\nExecution blockers:", file=out)
            print(p.blockers_df().to_string(index=False), file=out)


def cmd_plan(args) -> int:
    _, p = _load_and_plan(args)
    if args.json:
        print(p.to_json())
    else:
        print(p.summary())
        _print_tables(p)
    return 0


def _execute(p, inputs=None, seed=0):
    from .compare import compare
    from .executor import execute, execute_reference
    from .inputs import random_inputs
    from .providers import cpu
    inputs = inputs if inputs is not None else random_inputs(p.graph, seed=seed)
    run = execute(p, inputs)
    ref = execute_reference(p.graph, cpu(), inputs)
    return run, compare(run, ref)


def cmd_report(args) -> int:
    _, p = _load_and_plan(args)
    run = diff = None
    if args.execute:
        run, diff = _execute(p)
    path = p.to_html(args.output, run=run, diff=diff)
    print(p.summary())
    if diff is not None:
        print(diff.to_string(index=False))
    print(f"report written to {path}")
    return 0


def cmd_demo(args) -> int:
    from .demo import demo_inputs, demo_model, demo_shape_args
    args.input_shape = demo_shape_args()
    args.dim = []
    args.no_fold = False
    t0 = time.perf_counter()
    _, p = _load_and_plan(args, model=demo_model())
    print(f"demo model planned on {args.providers} in {1000 * (time.perf_counter() - t0):.1f} ms")
    print(p.summary())
    _print_tables(p)
    run = diff = None
    if not args.no_execute:
        print("\nexecuting heterogeneously and on the cpu reference (first run compiles kernels) ...",
              flush=True)
        t0 = time.perf_counter()
        run, diff = _execute(p, inputs=demo_inputs())
        print(f"done in {time.perf_counter() - t0:.1f} s")
        print("\nByte identity vs the cpu reference:")
        print(diff.to_string(index=False))
    path = p.to_html(args.output, run=run, diff=diff)
    print(f"\nreport written to {path}")
    if diff is not None and not bool(diff["byte_identical"].all()):
        print("error: heterogeneous outputs differ from the reference", file=sys.stderr)
        return 1
    return 0


def cmd_providers(args) -> int:
    import pandas as pd
    from .providers import resolve_all
    for p in resolve_all([n for n in args.providers.split(",") if n.strip()]):
        ok, why = p.available()
        print(f"\n{p.name} ({p.device}) — {'available' if ok else 'unavailable: ' + why}")
        with pd.option_context("display.max_rows", 500, "display.width", 160):
            print(p.support_df().to_string(index=False))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="hetero-explore",
                                 description="Explore heterogeneous execution of ONNX models.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("plan", help="place, partition and plan transfers; print the tables")
    sp.add_argument("model")
    _common(sp)
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    sp.set_defaults(fn=cmd_plan)
    sp = sub.add_parser("report", help="write a self-contained HTML report")
    sp.add_argument("model")
    _common(sp)
    sp.add_argument("-o", "--output", required=True, help="HTML file to write")
    sp.add_argument("--execute", action="store_true", help="execute and include the byte-identity diff")
    sp.set_defaults(fn=cmd_report)
    sp = sub.add_parser("demo", help="plan, execute and report the bundled demo model")
    sp.add_argument("--providers", default="gpu,cpu")
    sp.add_argument("--deny", action="append", type=_parse_deny, default=[])
    sp.add_argument("-o", "--output", default="demo_report.html")
    sp.add_argument("--no-execute", action="store_true")
    sp.set_defaults(fn=cmd_demo)
    sp = sub.add_parser("providers", help="print each provider's op table")
    sp.add_argument("--providers", default="cpu,cuda,gpu")
    sp.set_defaults(fn=cmd_providers)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except HeteroExploreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
