"""The ``hetero-explore`` command.

    hetero-explore plan MODEL [--providers gpu,cpu] [--deny gpu:Softmax ...]
                              [--input-shape x=1,3,224,224 ...] [--dim batch=1] [--json] [--full]
                              [--progress | --quiet]
    hetero-explore report MODEL -o report.html [same options] [--execute [--inputs FILE.npz | --seed N]]
    hetero-explore demo [-o demo_report.html] [--no-execute] [--progress | --quiet]
    hetero-explore providers [--providers cpu,cuda,gpu]
    hetero-explore warmup [--providers cpu] [--progress | --quiet]
    hetero-explore sweep MODELS... [--providers gpu,cpu --providers cpu ...] [--mask gpu:Softmax;cpu:Erf ...]
                         [--execute] [--scheduler ADDRESS | --workers N | --in-process] -o results.parquet
                         [--html sweep.html] [--compare before.parquet] [--progress | --quiet]
    hetero-explore --version
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import time

from ..ir.errors import HeteroExploreError, OutputWriteError, UsageError

#: characters a terminal may act on or that reorder or hide what is shown: C0 controls but
#: tab (ESC starts CSI/OSC sequences; BS, CR, BEL, ...), DEL, C1 controls, soft hyphen,
#: bidi marks/embeddings/overrides/isolates, zero-width and invisible format characters,
#: line and paragraph separators, BOM, interlinear annotations, surrogates, non-characters
_UNSAFE_CLASS = (r"\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e"
                 r"\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\ufffe\uffff")
_UNSAFE = re.compile(f"[\\n{_UNSAFE_CLASS}]")
_UNSAFE_KEEP_LINES = re.compile(f"[{_UNSAFE_CLASS}]")


def _escape_char(m: re.Match) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def terminal_text(s, *, keep_newlines: bool = False) -> str:
    r"""``s`` made safe to print on a terminal: every character a terminal could act on
    (ESC and the CSI/OSC sequences it starts, backspace, carriage return, bell, other C0
    and C1 controls, DEL) or that reorders or hides text (bidi overrides and isolates,
    zero-width characters) is written as a visible ``\xNN`` / ``\uNNNN`` escape.
    Tabs are kept; newlines are kept only with ``keep_newlines`` (for text whose lines
    are ours, e.g. a table), else escaped too (a model string never starts a new line).

    The one escaping function of the command line: every model-controlled string
    passes through it before reaching the terminal."""
    text = "" if s is None else str(s)
    return (_UNSAFE_KEEP_LINES if keep_newlines else _UNSAFE).sub(_escape_char, text)


def _say(text="", file=None) -> None:
    """Print ``text`` escaped for the terminal, in the stream's encoding (what it cannot
    encode is backslash-escaped, never a UnicodeEncodeError)."""
    out = file or sys.stdout
    safe = terminal_text(text, keep_newlines=True)
    enc = getattr(out, "encoding", None) or "utf-8"
    try:
        safe.encode(enc)
    except LookupError:  # an encoding Python does not know: plain ASCII is safe everywhere
        safe = safe.encode("ascii", "backslashreplace").decode("ascii")
    except UnicodeEncodeError:
        safe = safe.encode(enc, "backslashreplace").decode(enc)
    print(safe, file=out)


def _one_line(msg: str) -> str:
    """A message on one line: its lines joined with ' | ' (then escaped by :func:`terminal_text`),
    options spelled as CLI flags."""
    lines = [ln.strip() for ln in str(msg).split("\n") if ln.strip()]
    return terminal_text(cli_hint(" | ".join(lines)))


#: rows of each table printed without --full
MAX_TABLE_ROWS = 40
#: columns said once above a table when every row has the same value
CONSTANT_SAID_ONCE = ("domain", "opset")


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
    if any(d >= 2 ** 63 for d in shape):
        raise argparse.ArgumentTypeError(f"--input-shape {text!r}: dims must be below 2**63")
    return name, shape


def _parse_dim(text: str) -> tuple[str, int]:
    name, sep, v = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--dim wants NAME=VALUE (got {text!r})")
    try:
        value = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--dim {text!r}: value must be an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--dim {text!r}: a dim is a size, so it must be non-negative "
                                         f"(got {value})")
    if value >= 2 ** 63:
        raise argparse.ArgumentTypeError(f"--dim {text!r}: value must be below 2**63")
    return name, value


def _parse_deny(text: str) -> tuple[str, list[str]]:
    prov, sep, ops = text.rpartition(":")     # provider names may hold ':' (ort:cpu); op types do not
    if not sep or not prov or not ops:
        raise argparse.ArgumentTypeError(f"--deny wants PROVIDER:OP[,OP...] (got {text!r})")
    return prov.strip(), [o.strip() for o in ops.split(",") if o.strip()]


def _warn(text: str) -> None:
    _say(f"warning: {text}", file=sys.stderr)


def _close(word: str, choices, n: int = 3) -> str:
    """`` (did you mean 'A', 'B'?)`` for the close matches of ``word`` among ``choices``, or ''."""
    choices = list(choices)
    folded = [c for c in choices if c.lower() == word.lower()]
    close = folded or difflib.get_close_matches(word, choices, n=n, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def _onnx_op_types() -> set[str]:
    import onnx.defs
    return {s.name for s in onnx.defs.get_all_schemas_with_history()}


def check_deny(deny: list[tuple[str, list[str]]], graph=None) -> None:
    """``--deny`` op types must be op types: an unknown one (``conv`` for ``Conv``) is an
    error naming the close matches; one the model does not have is a warning."""
    known = _onnx_op_types()
    model_ops = sorted({n.op_type for n in graph.nodes}) if graph is not None else []
    known |= set(model_ops)
    for prov, ops in deny:
        for op in ops:
            if op not in known:
                raise UsageError(f"--deny {prov}:{op}: {op!r} is no ONNX op type"
                                 f"{_close(op, model_ops + sorted(known - set(model_ops)))}; op types are "
                                 "case-sensitive")
            if graph is not None and op not in model_ops:
                from ..load.optimize import removed_op_types
                if op in removed_op_types(getattr(graph, "optimizations", ())):
                    _warn(f"--deny {prov}:{op}: the load-time optimisation removed the model's {op} node(s) "
                          "(--no-optimize keeps them), so this changes nothing")
                else:
                    _warn(f"--deny {prov}:{op}: the model has no {op} node, so this changes nothing")


def build_providers(names: str, deny: list[tuple[str, list[str]]], *, warn_unavailable: bool = True):
    from ..providers import mask, resolve_all
    provs = resolve_all([n for n in names.split(",") if n.strip()])
    by_name = {p.name: i for i, p in enumerate(provs)}
    for prov, ops in deny:
        if prov not in by_name:
            raise UsageError(f"--deny names provider {prov!r}, which is not in --providers "
                             f"({', '.join(by_name)}){_close(prov, by_name)}")
        i = by_name[prov]
        provs[i] = mask(provs[i], deny=ops)
    if warn_unavailable:
        for p in provs:
            ok, why = p.available()
            if not ok:
                _warn(f"provider {p.name!r} is unavailable ({why}): it plans, but the plan cannot execute on it")
    return provs


def _progress_flags(sp, quiet_help: str = "no progress bar"):
    sp.add_argument("--progress", action="store_true", help="draw the progress bar on stderr even when it is "
                    "not a terminal (default: only on a terminal)")
    sp.add_argument("--quiet", action="store_true", help=quiet_help)


def _providers_help(default: str) -> str:
    """The ``--providers`` help: every family this installation knows, from the registries."""
    from ..session.catalog import provider_families
    fams = "; ".join(f"{title}: {', '.join(names)}" for title, names in provider_families().items())
    return (f"providers in priority order, comma-separated (default: {default}). {fams}. "
            "For a first heterogeneous what-if try nnapi,cpu or coreml,cpu")


def _policy_arg(sp):
    from ..session.catalog import policy_names
    sp.add_argument("--policy", default="priority", choices=policy_names(), metavar="NAME",
                    help="placement policy (default: priority: each node on the first provider that takes "
                    "it), or ONNX Runtime's device selection policy (the EP devices it picks here become the "
                    f"providers, in its order): {', '.join(policy_names())}")


def _runs_arg(sp):
    from ..analysis.timing import BUDGET_SECONDS, WARM_RUNS
    sp.add_argument("--runs", type=int, default=WARM_RUNS, metavar="N",
                    help=f"with execution: time up to N warm runs (default {WARM_RUNS}, fewer when they take "
                    f"over {BUDGET_SECONDS:g} s; at least 3) and report their median and p90, the first run and "
                    "the compile time apart; 0: no warm runs")


def _load_flags(sp):
    """How a model is loaded: shapes and dims bound, folding and rewrites."""
    sp.add_argument("--input-shape", action="append", type=_parse_shape, default=[],
                    metavar="NAME=D1,D2,...", help="bind an input's shape (repeatable)")
    sp.add_argument("--dim", action="append", type=_parse_dim, default=[], metavar="NAME=VALUE",
                    help="bind a symbolic dim by name (repeatable)")
    sp.add_argument("--no-optimize", action="store_true", help="no load-time graph rewrites (Identity/Dropout "
                    "elimination, Conv+BatchNormalization folding, MatMul+Add -> Gemm)")


def _common(sp):
    sp.add_argument("--providers", default="gpu,cpu", help=_providers_help("gpu,cpu"))
    _policy_arg(sp)
    sp.add_argument("--deny", action="append", type=_parse_deny, default=[], metavar="PROVIDER:OP[,OP]",
                    help="deny op types on a provider (repeatable)")
    _load_flags(sp)
    sp.add_argument("--no-fold", action="store_true", help="do not fold constant shape subgraphs")
    sp.add_argument("--strict", action="store_true", help="fail when a node no provider supports (default: "
                    "place it on the unplaced lane, show the rest and list it as an execution blocker)")
    _progress_flags(sp)
    sp.add_argument("--full", action="store_true", help="print every table row (default: the first "
                    f"{MAX_TABLE_ROWS} of each); tables always fit the terminal's width, long cells wrapped")


class Progress:
    """A one-line progress bar on stderr for long work (loading, planning, executing, writing):
    ``[#####.......] 2/4 planning 2,013 nodes``, rewritten in place. Drawn when stderr is a
    terminal or when forced (``--progress``), never with ``--quiet``; otherwise silent, so
    piped output and logs stay clean."""

    WIDTH = 24

    def __init__(self, total: int, *, enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.total = max(1, total)
        self.step = 0
        self.label = ""
        self.drawn = False
        self._last = (0.0, "")

    @classmethod
    def for_args(cls, args, total: int) -> "Progress":
        if getattr(args, "quiet", False):
            return cls(total, enabled=False)
        return cls(total, enabled=True if getattr(args, "progress", False) else None)

    def stage(self, label: str) -> None:
        """The next step begins."""
        self.step = min(self.step + 1, self.total)
        self.label = label
        self._draw(self.step - 1, label)

    def detail(self, text: str) -> None:
        """What the current step is doing (``compiling kernels (3/40)``): the bar moves within it."""
        m = re.search(r"\((\d+)/(\d+)\)", text)
        frac = (int(m.group(1)) / max(1, int(m.group(2)))) if m else 0.0
        self._draw(self.step - 1 + min(1.0, frac), f"{self.label}: {text}")

    def say(self, text: str = "", file=None) -> None:
        """Print a line (on stdout, or ``file``) above the bar: the bar's line is cleared first
        and drawn again below it, so log lines and the bar never share a line."""
        redraw = self.enabled and self.drawn
        if redraw:
            self.stream.write("\r\033[K")
            self.stream.flush()
        _say(text, file=file)
        (file or sys.stdout).flush()
        if redraw:
            self._draw(*self._last)

    def _draw(self, done: float, label: str) -> None:
        if not self.enabled:
            return
        self._last = (done, label)
        fill = int(round(self.WIDTH * done / self.total))
        bar = "#" * fill + "." * (self.WIDTH - fill)
        text = terminal_text(f"[{bar}] {self.step}/{self.total} {label}")[:200]
        self.stream.write(f"\r{text}\033[K")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Clear the bar's line (what follows prints on a clean line)."""
        if self.enabled and self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
        self.drawn = False


def _load_and_plan(args, model=None, progress: Progress | None = None):
    from ..load.loader import load_model
    from ..planner import plan
    check_deny(args.deny)                 # before loading: a typo fails fast
    bar = progress or Progress(1, enabled=False)
    bar.stage("loading " + (args.model if model is None else "the model"))
    g = load_model(model if model is not None else args.model, input_shapes=dict(args.input_shape) or None,
                   dim_values=dict(args.dim) or None, fold_constants=not args.no_fold,
                   optimize=not getattr(args, "no_optimize", False))
    check_deny(args.deny, g)
    policy = getattr(args, "policy", "priority") or "priority"
    from ..providers.ort import is_device_policy
    if is_device_policy(policy):     # ORT picks the providers; the placement stays priority first-fit
        from ..providers.ort import graph_digest, policy_choice
        choice = policy_choice(graph_digest(g)[1], policy)
        if args.providers != "gpu,cpu":
            _warn(f"--policy {policy} chooses the providers itself: --providers {args.providers} is not used")
        args.providers = ",".join(choice.providers)
        _warn(choice.note)
        policy = "priority"
    else:
        from ..planner.policies import get_policy
        try:
            get_policy(policy)
        except Exception as e:
            raise UsageError(f"--policy: {e}; or an ONNX Runtime device policy such as PREFER_NPU") from None
    provs = build_providers(args.providers, args.deny)
    bar.stage(f"planning {len(g.nodes):,} node(s) on {args.providers}")
    p = plan(g, provs, strict=getattr(args, "strict", False), policy=policy)
    bar.close()  # what follows (warnings, tables) prints on a clean line
    if len(p.partitions) == 1 and len(p.providers) > 1 and args.providers == "gpu,cpu" and not args.deny:
        # the default list's virtual GPU takes every node of most real models: say how to see more
        _say(f"note: every node runs on {p.partitions[0].provider}, so this plan is one partition; for a "
             "heterogeneous what-if try a phone NPU's op table: --providers nnapi,cpu (or coreml,cpu); "
             "'hetero-explore providers' lists every family", file=sys.stderr)
    unplaced = p.placement_counts().get("unplaced", 0)
    if unplaced:
        _warn(f"{unplaced} node(s) no provider supports sit on the unplaced lane (see the execution blockers); "
              "the plan cannot execute")
    return g, p


#: what the library's messages call a Python argument, as the command line spells it
_CLI_SPELLING = (
    ("load_model(model, input_shapes={...}) or dim_values={...}", "--input-shape NAME=D1,D2,... or --dim NAME=VALUE"),
    ("load_model(model, input_shapes={...})", "--input-shape NAME=D1,D2,..."),
    ("dim_values={...}", "--dim NAME=VALUE"),
    ("fold_constants=False", "--no-fold"),
    ("optimize=False", "--no-optimize"),
)


def cli_hint(text: str) -> str:
    """``text`` with the library's Python spellings of options replaced by CLI flags."""
    for py, flag in _CLI_SPELLING:
        text = text.replace(py, flag)
    return text


def _cells_escaped(df):
    """A copy of ``df`` whose text cells (names, op types, lists of them) are escaped with
    :func:`terminal_text`, so a name cannot break a table's lines or drive the terminal."""
    df = df.copy()
    for c in df.columns:
        if df[c].dtype == object or str(df[c].dtype).startswith("str"):
            df[c] = [v if v is None or isinstance(v, (bool, int, float)) else terminal_text(v)
                     for v in df[c]]
    df.columns = [terminal_text(c) for c in df.columns]
    return df


def _table_text(df, full: bool = True, *, width: int | None = None) -> str:
    """``df`` as text fitted to the terminal's width (:mod:`.tables`: rich; long cells wrapped,
    never cut), every model string escaped by :func:`terminal_text`; without ``full``, the
    first :data:`MAX_TABLE_ROWS` rows, with a line saying what was left out."""
    from ..ir.units import format_frame
    from .tables import render_table
    n = len(df)
    if not full:
        df = df.head(MAX_TABLE_ROWS)
    empty = [c for c in df.columns if len(df) and all(_blank(v) for v in df[c])]
    df = df.drop(columns=empty)               # columns with nothing to say (no subgraphs, no expansions)
    same = [c for c in CONSTANT_SAID_ONCE if c in df.columns and len(df) > 1 and df[c].astype(str).nunique() == 1]
    head = ""
    if same:                                  # every row in one domain at one opset: said once
        head = "every row: " + ", ".join(f"{c} {terminal_text(df[c].iloc[0])}" for c in same) + "\n"
        df = df.drop(columns=same)
    shown = format_frame(df)
    units = [c for c in df.columns if shown[c].dtype != df[c].dtype]  # numbers now written with units
    text = head + render_table(shown, escape=terminal_text, numeric=units, width=width)
    if n > len(df):
        text += f"\n… {n - len(df):,d} more row(s) of {n:,d} (--full prints them all)"
    return text


def _blank(v) -> bool:
    if v is None or (isinstance(v, (str, list, tuple, dict)) and not v):
        return True
    return isinstance(v, float) and v != v


def ops_declined_first(df):
    """The per-op table with the op types some provider declined first (fewest on the first
    provider first), then the rest in the table's order: what stops a model from running on
    the first provider is on the first screen."""
    if "declined" not in df.columns or not len(df):
        return df
    declined = df["declined"].astype(str).str.len() > 0
    import pandas as pd
    first = df[declined].sort_values(["on_first", "nodes"], ascending=[True, False], kind="stable")
    return pd.concat([first, df[~declined]], ignore_index=True)


def _print_tables(p, out=None, full: bool = False):
    out = out or sys.stdout
    from ..viz.notes import placement_notes
    _say("\nOps (node counts per provider; op types a provider declined first):", file=out)
    _say(_table_text(ops_declined_first(p.ops_df()), full), file=out)
    _say("\nPlacement:", file=out)
    place = p.placement_df().drop(columns=["declined_by"])
    notes = placement_notes(p)
    if notes:  # a profile accepted a node on a condition its table states only in words
        place["note"] = [notes.get((sub, nid), "") for sub, nid in zip(place.get("subgraph", [""] * len(place)),
                                                                        place["node_id"])]
    _say(_table_text(place, full), file=out)
    _say("\nPartitions:", file=out)
    _say(_table_text(p.partitions_df(), full), file=out)
    _say("\nTransfers:", file=out)
    t = p.transfers_df()
    _say(_table_text(t, full) if len(t) else "(none)", file=out)
    if p.execution_blockers:
        _say("\nExecution blockers:", file=out)
        _say(_table_text(p.blockers_df(), full), file=out)


def cmd_plan(args) -> int:
    bar = Progress.for_args(args, 2)
    try:
        _, p = _load_and_plan(args, progress=bar)
    finally:
        bar.close()
    if args.json:
        _say(p.to_json())  # json.dumps escapes controls and non-ASCII already; _say is belt and braces
    else:
        _say(_summary_text(p, args.full))
        _print_tables(p, full=args.full)
    return 0


def _summary_text(p, full: bool = True) -> str:
    """The plan's summary, one clause a line (the first: partitions and devices), each wrapped to
    the terminal's width."""
    import textwrap

    from .tables import terminal_width
    width = terminal_width()
    clauses = [c for c in terminal_text(p.summary()).split("; ") if c]
    lines = []
    for i, c in enumerate(clauses):
        lines += textwrap.wrap(c, width=width, initial_indent="" if i == 0 else "  ",
                               subsequent_indent="    ", break_on_hyphens=False) or [""]
    return "\n".join(lines)


def load_inputs(path: str) -> dict:
    """Inputs from an ``.npz`` file (``numpy.savez``: one array per graph input name)."""
    import numpy as np
    from ..ir.errors import InputValidationError
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise InputValidationError(f"--inputs {path!r}: no such file") from None
    except (OSError, ValueError) as e:
        raise InputValidationError(f"--inputs {path!r}: not a readable .npz file of arrays "
                                   f"(numpy.savez(path, name=array, ...)): {e}") from None


class _CompileProgress:
    """Kernel-compilation progress as one line on stderr (rewritten in place on a terminal)."""

    def __init__(self, label: str, stream=None, bar: Progress | None = None):
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) and bar is None
        self.bar = bar
        self.last = ""

    def __call__(self, message: str) -> None:
        self.last = message
        if self.bar is not None:
            self.bar.detail(message)
        elif self.tty:
            self.stream.write(f"\r{self.label}: {message}\033[K")
            self.stream.flush()

    def done(self, seconds: float) -> None:
        if not self.last:
            return
        if self.bar is not None:
            self.bar.close()
        line = f"{self.label}: {self.last}, {seconds:.1f} s (not counted as run time)"
        self.stream.write(f"\r{line}\033[K\n" if self.tty else line + "\n")
        self.stream.flush()
        self.last = ""


def _limits(args):
    """The run's limits from ``--max-loop-iterations`` / ``--max-seconds`` (0: no bound)."""
    from ..ir.limits import DEFAULT_MAX_LOOP_ITERATIONS, RunLimits
    n = getattr(args, "max_loop_iterations", DEFAULT_MAX_LOOP_ITERATIONS)
    s = getattr(args, "max_seconds", None)
    return RunLimits(max_loop_iterations=n or None, max_seconds=s or None)


def _limit_flags(sp):
    from ..ir.limits import DEFAULT_MAX_LOOP_ITERATIONS
    sp.add_argument("--max-loop-iterations", type=int, default=DEFAULT_MAX_LOOP_ITERATIONS, metavar="N",
                    help=f"stop a Loop node after N iterations with an error naming it (default "
                         f"{DEFAULT_MAX_LOOP_ITERATIONS:,}; 0: no bound)")
    sp.add_argument("--max-seconds", type=float, default=None, metavar="S",
                    help="stop a run whose loops are still iterating after S seconds (default: no bound)")


def _execute(p, inputs=None, seed=0, bar: Progress | None = None, runs: int = 0, limits=None):
    """Run ``p`` (the first run; kernels compile), the cpu reference, compare them
    (:func:`hetero_explore.run_and_compare`); with ``runs``, also time up to that many warm runs
    (:mod:`hetero_explore.analysis.timing`). Returns ``(run, diff, timings or None)``."""
    from ..analysis.check import run_and_compare
    from ..execution.inputs import random_inputs
    inputs = inputs if inputs is not None else random_inputs(p.graph, seed=seed)
    if bar is not None:
        bar.stage(f"executing {len(p.partitions):,} partition(s)")
    prog = _CompileProgress("heterogeneous run", bar=bar)
    ref_prog = _CompileProgress("cpu reference", bar=bar)

    def stage(name, run):
        if name == "reference":
            prog.done(run.compile_seconds)
            if bar is not None:
                bar.stage("cpu reference run")
        elif name == "timing" and bar is not None:
            bar.stage(f"timing up to {runs} warm run(s)")

    checked = run_and_compare(p, inputs, progress=prog, reference_progress=ref_prog, on_stage=stage, warm_runs=runs,
                              limits=limits)
    ref_prog.done(checked.reference.compile_seconds)
    return checked.run, checked.diff, checked.timings


def _write_report(p, output, run, diff, provenance=None, bar: Progress | None = None, timings=None) -> int:
    """Write the report; on failure say why and where the report was kept instead (exit 2)."""
    try:
        if bar is not None:
            bar.stage("writing the report")
        try:
            path = p.to_html(output, run=run, diff=diff, provenance=provenance, timings=timings)
        finally:
            if bar is not None:
                bar.close()
    except OutputWriteError as e:
        _say(f"error: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return 2
    _say(f"report written to {terminal_text(path)}")
    return 0


def cmd_report(args) -> int:
    from ..ir.errors import (ExecutionError, HeterogeneousExecutionUnsupported, InputValidationError,
                         ProviderUnavailableError)
    bar = Progress.for_args(args, (5 + (args.runs > 0)) if args.execute else 3)
    try:
        _, p = _load_and_plan(args, progress=bar)
    finally:
        bar.close()
    run = diff = timings = None
    rc_exec = 0
    prov = {"command": command_line(args), "reference": "cpu"}
    if args.execute:
        inputs = load_inputs(args.inputs) if args.inputs else None
        prov["inputs"] = (f"from {args.inputs}" if args.inputs else
                          f"seeded random inputs (hetero_explore.random_inputs, seed {args.seed})")
        try:
            try:
                run, diff, timings = _execute(p, inputs=inputs, seed=args.seed, bar=bar, runs=args.runs,
                                              limits=_limits(args))
            finally:
                bar.close()
        except (HeterogeneousExecutionUnsupported, ProviderUnavailableError, ExecutionError,
                InputValidationError) as e:
            # the report is still written: the plan is worth forwarding, and it says why nothing ran
            prov["not_run"] = f"{type(e).__name__}: {cli_hint(str(e))}"
            _warn(f"nothing was executed: {type(e).__name__}: {_one_line(e)}")
            rc_exec = 2
    _say(_summary_text(p, args.full))
    if timings is not None:
        _say("timings: " + timings.text())
    if diff is not None:
        _say(_table_text(diff))
    if run is not None and args.trace:
        try:
            run.to_chrome_trace(args.trace)
            _say(f"trace written to {terminal_text(args.trace)} (Perfetto: ui.perfetto.dev, or chrome://tracing)")
        except OSError as e:
            _warn(f"cannot write the trace to {args.trace!r}: {e.strerror or e}")
            rc_exec = rc_exec or 2
    rc = _write_report(p, args.output, run, diff, prov, bar=bar, timings=timings)
    return rc or rc_exec


def command_line(args) -> str:
    """The command line that is running, as a shell would take it back."""
    import shlex
    return "hetero-explore " + shlex.join(getattr(args, "argv", None) or [])


def cmd_demo(args) -> int:
    from ..data import sample_path
    from ..data.demo import demo_inputs, demo_model, demo_shape_args
    args.dim = []
    args.no_fold = False
    if args.model == "demo":
        args.input_shape = demo_shape_args()
        model, inputs, what = demo_model(), demo_inputs(), "the demo's bundled inputs (hetero_explore.data.demo.demo_inputs)"
    else:  # a bundled real export: seeded random inputs
        args.input_shape = []
        model, inputs, what = sample_path(args.model), None, "seeded random inputs (hetero_explore.random_inputs, seed 0)"
    bar = Progress.for_args(args, 3 if args.no_execute else 5 + (args.runs > 0))
    t0 = time.perf_counter()
    try:
        _, p = _load_and_plan(args, model=model, progress=bar)
    finally:
        bar.close()
    _say(f"{args.model} model planned on {terminal_text(args.providers)} in "
         f"{1000 * (time.perf_counter() - t0):.1f} ms")
    _say(_summary_text(p))
    _print_tables(p)
    run = diff = timings = None
    if not args.no_execute:
        _say("\nexecuting heterogeneously and on the cpu reference (first run compiles kernels) ...")
        sys.stdout.flush()
        t0 = time.perf_counter()
        try:
            run, diff, timings = _execute(p, inputs=inputs, bar=bar, runs=args.runs)
        finally:
            bar.close()
        _say(f"done in {time.perf_counter() - t0:.1f} s")
        if timings is not None:
            _say("timings: " + timings.text())
        _say("\nByte identity vs the cpu reference:")
        _say(_table_text(diff))
    _say()
    rc = _write_report(p, args.output, run, diff,
                       {"command": command_line(args), "reference": "cpu",
                        "inputs": what}, bar=bar, timings=timings)
    if diff is not None and not bool(diff["byte_identical"].all()):
        _say("error: heterogeneous outputs differ from the reference", file=sys.stderr)
        return 1
    return rc


def cmd_providers(args) -> int:
    import textwrap

    from ..providers import resolve_all
    from ..session.catalog import catalog_text
    from .tables import terminal_width
    if not args.providers:
        _say("Provider names, by family (write them comma-separated in --providers, first = highest "
             "priority):")
        _say(catalog_text(terminal_width()))
        _say("\nhetero-explore providers --providers NAME[,NAME] prints a provider's op table.")
        return 0
    for p in resolve_all([n for n in args.providers.split(",") if n.strip()]):
        ok, why = p.available()
        _say(f"\n{terminal_text(p.name)} ({terminal_text(p.device)}) — "
             f"{'available' if ok else 'unavailable: ' + terminal_text(why)}")
        df = p.support_df()
        # a column with one value on every row (the source URL, a note) is said once, above the table
        for c in [c for c in df.columns if len(df) > 1 and df[c].astype(str).nunique() == 1]:
            v = df[c].iloc[0]
            if v not in (None, "", True) and str(v) != "nan":
                _say(textwrap.fill(f"{terminal_text(c)}: {terminal_text(v)}", width=terminal_width(),
                                   subsequent_indent="    ", break_long_words=True, break_on_hyphens=False))
            df = df.drop(columns=[c])
        _say(_table_text(df))
    return 0


def cmd_warmup(args) -> int:
    from ..session.warmup import warmup
    t0 = time.perf_counter()
    providers = [n.strip() for n in args.providers.split(",") if n.strip()]
    bar = Progress.for_args(args, 1)
    bar.stage(f"compiling kernels on {', '.join(providers)}")

    def progress(text: str) -> None:  # each job's line above the bar; the bar moves with its (k/N)
        bar.say(text)
        bar.detail(text)

    try:
        warmup(progress=progress, providers=providers)
    finally:
        bar.close()
    _say(f"kernels compiled into numba's cache in {time.perf_counter() - t0:.1f} s")
    return 0


def version_text() -> str:
    from ..ir.about import versions
    v = versions()
    pkg = v.pop("hetero_explore")
    py = v.pop("Python")
    return f"hetero-explore {pkg} ({', '.join(f'{k} {x}' for k, x in v.items())}, Python {py})"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        _say(version_text())
        parser.exit(0)


def _parse_mask(text: str) -> dict:
    out: dict[str, list[str]] = {}
    for part in (p for p in text.split(";") if p.strip()):
        prov, ops = _parse_deny(part)
        out.setdefault(prov, []).extend(ops)
    if not out:
        raise argparse.ArgumentTypeError(f"--mask wants PROVIDER:OP[,OP][;PROVIDER:OP...] (got {text!r})")
    return out


def cmd_sweep(args) -> int:
    from ..analysis.fleet import IN_PROCESS, compare_sweeps, load_sweep, save_sweep, sweep
    masks = [{}] + args.mask if args.mask else None
    for m in args.mask:
        check_deny(list(m.items()))
    client = IN_PROCESS if args.in_process else args.scheduler
    bar = Progress.for_args(args, 3 if args.html else 2)
    bar.stage("sweeping" + (" (executing)" if args.execute else ""))

    def progress(done, total, row):
        if args.quiet:
            return
        state = "ok" if row["ok"] else f"{row['error_type']}"
        bar.say(f"[{done}/{total}] {row['name']} on {row['providers']}"
                + (f" [{row['mask']}]" if row["mask"] else "") + f": {state}", file=sys.stderr)
        bar.detail(f"rows done ({done}/{total})")

    try:
        df = sweep(args.models, providers=args.providers or ["gpu,cpu"], masks=masks, execute=args.execute,
                   client=client, workers=args.workers, seed=args.seed, progress=progress,
                   optimize=not args.no_optimize, input_shapes=dict(args.input_shape) or None,
                   dim_values=dict(args.dim) or None)
        # the rows' errors spell options as this command line does (--input-shape, not input_shapes=)
        df["error"] = [cli_hint(e) if isinstance(e, str) else e for e in df["error"]]
        bar.stage(f"writing {terminal_text(args.output)}")
        path = save_sweep(df, args.output)
    finally:
        bar.close()
    n_err = int((~df["ok"].astype(bool)).sum())
    _say(f"{len(df):,} row(s) ({n_err:,} failed) in {df.attrs['elapsed_seconds']:.1f} s on "
         f"{df.attrs['workers'] or 1} worker(s); written to {terminal_text(path)}")
    cols = ["name", "providers", "mask", "ok", "nodes", "partitions", "transfers", "transfer_bytes",
            "share_off_first", "byte_identical", "warm_seconds", "warm_p90_seconds", "warm_runs", "error_type"]
    if not args.execute:
        cols = [c for c in cols if c not in ("byte_identical", "warm_seconds", "warm_p90_seconds", "warm_runs")]
    _say(_table_text(df[cols], args.full))
    failed = df[~df["ok"].astype(bool)]
    if len(failed):
        _say("\nFailed rows:")
        _say(_table_text(failed[["name", "providers", "stage", "error_type", "error"]], args.full))
    comparison = None
    if args.compare:
        comparison = compare_sweeps(load_sweep(args.compare), df)
        _say("\nCompared with " + terminal_text(args.compare) + ":")
        _say(_table_text(comparison[["name", "providers", "mask", "status", "moved", "bytes_delta"]], args.full))
    if args.html:
        from ..viz.sweep_report import sweep_to_html
        try:
            bar.stage(f"writing {terminal_text(args.html)}")
            try:
                written = sweep_to_html(df, args.html, comparison=comparison, command=command_line(args))
            finally:
                bar.close()
        except OutputWriteError as e:
            _say(f"error: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
            return 2
        _say(f"sweep report written to {terminal_text(written)}")
    return 0


def _closed_pipe() -> int:
    """The reader of stdout went away (``plan … | head``): stop quietly. stdout is pointed at
    /dev/null so that the interpreter's last flush does not raise again; exit 0, as
    nothing the user asked for failed."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, with its messages (which quote what was typed) escaped for the terminal."""

    def _print_message(self, message, file=None):
        if message:
            _say(message.rstrip("\n"), file=file or sys.stderr)


def main(argv=None) -> int:
    """Run the command; returns the exit status. Every failure is one line on stderr,
    ``error: <ErrorType>: <message>``, never a traceback: 2 for what this package
    raises on purpose (a typed error), 3 for anything else (an internal error: please
    report it), 130 on Ctrl-C. argparse exits 2 on bad argument syntax."""
    from ..session.catalog import catalog_text
    ap = _Parser(prog="hetero-explore", formatter_class=argparse.RawDescriptionHelpFormatter,
                 description="Explore heterogeneous execution of ONNX models: place every node on the first "
                 "provider that takes it, partition, plan the transfers, execute and prove byte identity.",
                 epilog="provider names (--providers, first = highest priority):\n" + catalog_text(78)
                 + "\n\nA first what-if: hetero-explore plan MODEL --providers nnapi,cpu")
    ap.add_argument("--version", action=_VersionAction, help="print the versions and exit")
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
    sp.add_argument("--inputs", metavar="FILE.npz", help="inputs for --execute (numpy.savez, one array per "
                    "graph input); default: seeded random inputs")
    sp.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    _runs_arg(sp)
    sp.add_argument("--trace", metavar="RUN.json", help="with --execute: also write the run's timeline as a "
                    "Trace Event Format file (open it in Perfetto or chrome://tracing)")
    _limit_flags(sp)
    sp.set_defaults(fn=cmd_report)
    sp = sub.add_parser("demo", help="plan, execute and report a bundled model (a first what-if: "
                        "demo --model mobilenet --providers nnapi,cpu)")
    from ..data import SAMPLES
    sp.add_argument("--model", choices=list(SAMPLES), default="demo", help="which bundled model: demo (a small "
                    "CNN, the default) or mobilenet (a MobileNetV3-style network exported by torch)")
    sp.add_argument("--providers", default="gpu,cpu", help=_providers_help("gpu,cpu"))
    _policy_arg(sp)
    sp.add_argument("--deny", action="append", type=_parse_deny, default=[], metavar="PROVIDER:OP[,OP]",
                    help="deny op types on a provider (repeatable)")
    sp.add_argument("--no-optimize", action="store_true", help="no load-time graph rewrites")
    sp.add_argument("-o", "--output", default="demo_report.html")
    sp.add_argument("--no-execute", action="store_true")
    _runs_arg(sp)
    _progress_flags(sp)
    sp.set_defaults(fn=cmd_demo)
    sp = sub.add_parser("providers", help="list the provider names by family, or print providers' op tables")
    sp.add_argument("--providers", default="", help="providers whose op tables to print (default: list every "
                    "provider name by family instead)")
    sp.set_defaults(fn=cmd_providers)
    sp = sub.add_parser("warmup", help="compile the kernels into numba's on-disk cache (setup.sh runs this)")
    sp.add_argument("--providers", default="cpu", help="providers to warm (default cpu; add cuda on a GPU)")
    _progress_flags(sp)
    sp.set_defaults(fn=cmd_warmup)
    sp = sub.add_parser("sweep", help="plan (and execute) many models x provider lists on Dask; one table back")
    sp.add_argument("models", nargs="+", help="model files, globs or directories (searched for *.onnx; "
                    "rows are named by file, or by folder where file names repeat: <name>/model.onnx)")
    sp.add_argument("--providers", action="append", default=[], metavar="P1,P2",
                    help="a provider list in priority order (repeatable; default gpu,cpu). "
                    + _providers_help("gpu,cpu").split(". ", 1)[1])
    sp.add_argument("--input-shape", action="append", type=_parse_shape, default=[],
                    metavar="NAME=D1,D2,...", help="bind an input's shape in every model that has that input "
                    "(repeatable)")
    sp.add_argument("--dim", action="append", type=_parse_dim, default=[], metavar="NAME=VALUE",
                    help="bind a symbolic dim by name in every model (repeatable)")
    sp.add_argument("--mask", action="append", type=_parse_mask, default=[], metavar="PROVIDER:OP[,OP][;...]",
                    help="a deny mask to sweep besides no mask (repeatable)")
    sp.add_argument("--execute", action="store_true", help="execute, check byte identity, time warm runs")
    sp.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler to run on (default: a local "
                    "cluster of worker processes)")
    sp.add_argument("--workers", type=int, help="worker processes of the local cluster (default: the cores)")
    sp.add_argument("--in-process", action="store_true", help="no Dask: run the sweep here in a loop")
    sp.add_argument("--no-optimize", action="store_true", help="no load-time graph rewrites")
    sp.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    sp.add_argument("-o", "--output", required=True, help="results file: .parquet, .csv or .json")
    sp.add_argument("--html", metavar="FILE.html", help="also write a self-contained sweep report")
    sp.add_argument("--compare", metavar="BEFORE", help="an earlier sweep's results file to diff against")
    sp.add_argument("--full", action="store_true", help="print every row")
    _progress_flags(sp, "no progress bar and no per-row lines on stderr")
    sp.set_defaults(fn=cmd_sweep)
    try:
        args = ap.parse_args(argv)
    except BrokenPipeError:  # --help | head
        return _closed_pipe()
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return args.fn(args)
    except HeteroExploreError as e:
        if getattr(args, "json", False):     # a script reading --json gets JSON on failure too
            _say(json.dumps({"error": {"type": type(e).__name__, "message": cli_hint(str(e))}}))
        _say(f"error: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _say("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except MemoryError as e:
        _say(f"error: MemoryError: out of memory{': ' + _one_line(e) if str(e) else ''}; bind smaller "
             "shapes with --input-shape / --dim", file=sys.stderr)
        return 3
    except Exception as e:  # never a traceback: one line naming the type, and what to do
        _say(f"error: internal error ({type(e).__name__}): {_one_line(e)}; please report it with the "
             "command line that caused it", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
