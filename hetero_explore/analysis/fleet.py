"""Fleet audit: plan (and optionally execute) many models × provider lists × deny masks, on
Dask, one DataFrame back.

    df = he.sweep("models/", providers=["gpu,cpu", "cpu"], masks=[{}, {"gpu": ["Softmax"]}])
    df = he.sweep(paths, providers=[["gpu", "cpu"]], execute=True, client="tcp://scheduler:8786")
    changes = he.compare_sweeps(before, after)   # per model: what moved, partitions, bytes

One row per (model, provider list, mask); a model that fails (to load, to plan, to run)
becomes a row with its typed error, never a failed sweep. The work runs on
``dask.distributed``: with no ``client`` a ``LocalCluster`` of worker *processes* sized to
the machine (numba's compiler holds the GIL, so threads would not help); given a
``Client`` or a scheduler address it runs unchanged on a real cluster, whose workers must
be able to read the model paths. ``client="in-process"`` runs the same task function in a
plain loop here (no Dask needed; what ``bench/sweep.py`` compares against).

Each row keeps the plan's :func:`~hetero_explore.planner.plandiff.plan_digest`, so two sweeps diff
per model with the explorer's own plan-vs-plan diff (:func:`compare_sweeps`).
"""

from __future__ import annotations

import glob as _glob
import os
import time
from pathlib import Path
from typing import Any, Callable

from ..ir.errors import ArgumentTypeError, ArgumentValueError, HeteroExploreError, MissingDependencyError

#: the columns of a sweep's DataFrame, in order
COLUMNS = ["model", "name", "providers", "mask", "ok", "stage", "error_type", "error",
           "nodes", "partitions", "transfers", "transfer_bytes", "placement", "share", "off_first",
           "share_off_first", "fallback_ops", "unplaced", "blockers", "executable", "plan_seconds",
           "byte_identical", "warm_seconds", "warm_p90_seconds", "warm_runs", "first_seconds",
           "compile_seconds", "peak_bytes", "digest", "worker_seconds", "ep_share", "max_ulp", "max_abs", "op_ulp"]

#: warm runs timed per executed row at most (after the first run, timed apart; see
#: :func:`hetero_explore.analysis.timing.measure`)
WARM_RUNS = 10
#: wall-clock budget of one row's warm runs (at least three run whatever it says)
WARM_BUDGET_SECONDS = 1.0

IN_PROCESS = "in-process"


# -- the task (runs on a worker) ----------------------------------------------------------------
def _mask_text(deny: dict) -> str:
    return "; ".join(f"{p}:{','.join(ops)}" for p, ops in deny.items() if ops)


def run_model(model, lists, masks, execute: bool = False, inputs=None, seed: int = 0,
              input_shapes: dict | None = None, optimize: bool = True, *, name: str | None = None,
              dim_values: dict | None = None) -> list[dict]:
    """The rows of one model (the unit of work a worker gets): loaded once, then planned on
    every provider list under every mask (see :func:`run_one`). ``name``: the row's short
    name (default: the file's stem; :func:`model_names` makes them unique over a sweep)."""
    t0 = time.perf_counter()
    graph = error = None
    try:
        from ..load.loader import load_model
        input_shapes, dim_values = bindings_for(model, input_shapes, dim_values)
        graph = load_model(model[1] if isinstance(model, tuple) else model, input_shapes=input_shapes,
                           dim_values=dim_values, optimize=optimize)
    except Exception as e:  # noqa: BLE001 - every row of this model carries the load error
        error = e
    load_seconds = time.perf_counter() - t0
    rows = [run_one(model, pl, mk, execute, inputs, seed, input_shapes, graph=graph, load_error=error,
                    optimize=optimize, name=name, dim_values=dim_values)
            for pl in lists for mk in masks]
    if rows and rows[0]["worker_seconds"] is not None:
        rows[0]["worker_seconds"] += load_seconds
    return rows


def run_one(model, providers: tuple, deny: dict, execute: bool = False, inputs=None, seed: int = 0,
            input_shapes: dict | None = None, *, graph=None, load_error: Exception | None = None,
            optimize: bool = True, name: str | None = None, dim_values: dict | None = None) -> dict:
    """Plan (and with ``execute`` run and check) one model on one provider list under one deny
    mask; a row of :data:`COLUMNS`. Never raises for the model's sake: a failure is the row's
    ``error_type`` / ``error`` and the ``stage`` it happened in (load, plan, execute). ``graph``:
    the model already loaded (``load_error``: loading it failed so); ``optimize``: the loader's
    load-time graph rewrites (see :func:`hetero_explore.load.loader.load_model`); ``input_shapes`` /
    ``dim_values``: bind symbolic dims when loading; ``name``: the row's short name."""
    t0 = time.perf_counter()
    label, stem = _label(model)
    name = name or stem
    row: dict[str, Any] = {c: None for c in COLUMNS}
    row.update(model=label, name=name, providers=",".join(providers), mask=_mask_text(deny), ok=False)
    stage = "load"
    try:
        from ..load.loader import load_model
        from ..planner import plan as make_plan
        from ..planner.plandiff import plan_digest
        from ..providers import mask as mask_provider
        from ..providers import resolve_all
        if load_error is not None:
            raise load_error
        g = graph if graph is not None else load_model(model[1] if isinstance(model, tuple) else model,
                                                       input_shapes=input_shapes, dim_values=dim_values,
                                                       optimize=optimize)
        stage = "plan"
        provs = resolve_all(list(providers))
        names = [p.name for p in provs]
        for prov, ops in deny.items():     # a mask's entries for providers not in this list do nothing
            if prov in names and ops:
                provs[names.index(prov)] = mask_provider(provs[names.index(prov)], deny=list(ops))
        p = make_plan(g, provs)
        counts = p.placement_counts()
        total = max(1, len(g.nodes))
        first = p.providers[0].name
        row.update(
            nodes=len(g.nodes), partitions=len(p.partitions), transfers=len(p.transfers),
            transfer_bytes=p.transfer_bytes, placement=dict(counts),
            share={k: round(100.0 * v / total, 2) for k, v in counts.items()},
            off_first=len(g.nodes) - counts.get(first, 0),
            share_off_first=round(100.0 * (len(g.nodes) - counts.get(first, 0)) / total, 2),
            fallback_ops=p.fallback_ops(), unplaced=counts.get("unplaced", 0),
            blockers=[f"{b.kind}: {b.where}" for b in p.execution_blockers], executable=p.executable,
            plan_seconds=p.plan_seconds, digest=plan_digest(p),
            # the real runtimes' share (ONNX Runtime EPs: measured, not proven)
            ep_share={k: round(100.0 * v / total, 2) for k, v in counts.items() if k.startswith("ort:")})
        if execute and p.executable:
            stage = "execute"
            from ..execution.inputs import random_inputs
            from .check import run_and_compare
            feeds = _inputs_for(inputs, label, name, g, seed, random_inputs)
            # the first run compiles what the kernel cache lacks; the warm runs are timed apart
            checked = run_and_compare(p, feeds, warm_runs=WARM_RUNS, warm_budget_seconds=WARM_BUDGET_SECONDS)
            run, ref, diff, t = checked.run, checked.reference, checked.diff, checked.timings
            ulps = diff["max_ulp"].dropna()
            abss = diff["max_abs"].dropna()
            row.update(byte_identical=bool(diff["byte_identical"].all()), warm_seconds=t.warm_median_seconds,
                       warm_p90_seconds=t.warm_p90_seconds, warm_runs=t.n, first_seconds=t.first_seconds,
                       compile_seconds=t.compile_seconds,
                       peak_bytes={str(k): int(v) for k, v in run.peak_bytes.items()},
                       max_ulp=int(ulps.max()) if len(ulps) else None,
                       max_abs=float(abss.max()) if len(abss) else None)
            if row["ep_share"]:   # per op type × ORT provider: the largest ULP of a node run alone
                from .divergence import op_ulp_df, op_ulp_table
                tab = op_ulp_table(op_ulp_df(run, ref))
                row["op_ulp"] = {f"{r.op_type}@{r.provider}": (None if r.max_ulp is None else int(r.max_ulp))
                                 for r in tab.itertuples()}
        row["ok"] = True
    except HeteroExploreError as e:
        row.update(stage=stage, error_type=type(e).__name__, error=str(e)[:4000])
    except Exception as e:  # noqa: BLE001 - a sweep never fails for one model: the row says what happened
        row.update(stage=stage, error_type=f"internal: {type(e).__name__}", error=str(e)[:4000])
    row["worker_seconds"] = time.perf_counter() - t0
    return row


def bindings_for(model, input_shapes: dict | None, dim_values: dict | None) -> tuple[dict | None, dict | None]:
    """The sweep's ``input_shapes`` / ``dim_values`` that apply to ``model``: those naming one of
    its graph inputs / symbolic dims (a sweep binds ``--dim batch=1`` in every model that has a
    ``batch`` dim; the loader itself refuses a binding that names nothing). Reads the model's
    header only when there is something to filter."""
    if not input_shapes and not dim_values:
        return input_shapes, dim_values
    import onnx
    try:
        m = (onnx.load_model_from_string(model[1]) if isinstance(model, tuple)
             else onnx.load(str(model), load_external_data=False))
    except Exception:  # noqa: BLE001 - unreadable: the loader says why, with the bindings as given
        return input_shapes, dim_values
    inits = {t.name for t in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in inits]
    names = {i.name for i in inputs}
    params = {d.dim_param for i in inputs for d in i.type.tensor_type.shape.dim if d.dim_param}
    shapes = {k: v for k, v in (input_shapes or {}).items() if k in names} or None
    dims = {k: v for k, v in (dim_values or {}).items() if k in params} or None
    return shapes, dims


def _inputs_for(inputs, label, name, graph, seed, random_inputs):
    if inputs is None:
        return random_inputs(graph, seed=seed)
    if callable(inputs):
        return inputs(label)
    if isinstance(inputs, dict) and (label in inputs or name in inputs):
        return inputs.get(label, inputs.get(name))
    if isinstance(inputs, dict) and all(hasattr(v, "dtype") for v in inputs.values()):
        return inputs                # one set of inputs for every model
    return random_inputs(graph, seed=seed)


def _label(model) -> tuple[str, str]:
    if isinstance(model, tuple):
        return model[0], model[0]
    return str(model), Path(str(model)).stem


def model_names(models) -> list[str]:
    """A short, unique name per model of a sweep: the file's stem (``resnet50`` for
    ``zoo/resnet50.onnx``); where stems collide, as in the usual zoo layout
    ``<name>/model.onnx``, the folder's name (``resnet50`` for ``zoo/resnet50/model.onnx``),
    then as many more folders as it takes (``a/resnet50``, ``b/resnet50``); the whole path when
    nothing shorter is unique. In-memory models keep their label."""
    labels = [_label(m)[0] for m in models]
    names = [_label(m)[1] for m in models]
    paths = [None if isinstance(m, tuple) else Path(os.path.abspath(str(m))) for m in models]

    def collisions(ns) -> set:
        seen: dict[str, int] = {}
        for x in ns:
            seen[x] = seen.get(x, 0) + 1
        return {x for x, k in seen.items() if k > 1}

    clash = collisions(names)
    depth = 1
    while clash and depth < 64:
        changed = False
        for i, p in enumerate(paths):
            if p is None or names[i] not in clash:
                continue
            parents = p.parent.parts[1:]              # without the root
            if depth <= len(parents):
                names[i] = "/".join(parents[len(parents) - depth:])
                changed = True
            else:
                names[i] = labels[i]
        clash = collisions(names)
        depth += 1
        if not changed:
            break
    if clash:                                          # two spellings of one path: number them
        seen: dict[str, int] = {}
        for i, x in enumerate(names):
            if x in clash:
                seen[x] = seen.get(x, 0) + 1
                names[i] = f"{x} #{seen[x]}"
    return names


def _warm_worker() -> str:
    """Run once per worker: import the package and run the bundled demo, so the worker's
    numba dispatchers are loaded from the on-disk cache before the first model arrives."""
    from ..data.demo import demo_inputs, demo_model, demo_shape_args
    from ..execution.executor import execute
    from ..load.loader import load_model
    from ..planner import plan
    g = load_model(demo_model(), input_shapes=dict(demo_shape_args()))
    execute(plan(g, ["cpu"]), demo_inputs())
    return "warm"


# -- arguments ----------------------------------------------------------------------------------
def find_models(models) -> list:
    """Model paths (directories are searched for ``*.onnx``, globs expanded, sorted) and
    in-memory models (``onnx.ModelProto`` → ``(name, bytes)``), in the order given."""
    import onnx
    if isinstance(models, (str, os.PathLike, onnx.ModelProto)):
        models = [models]
    out: list = []
    for i, m in enumerate(models):
        if isinstance(m, onnx.ModelProto):
            name = m.graph.name or f"model{i}"
            out.append((f"<memory:{name}#{i}>", m.SerializeToString()))
            continue
        if not isinstance(m, (str, os.PathLike)):
            raise ArgumentTypeError(f"models must be paths, globs, directories or onnx.ModelProto; got "
                                    f"{type(m).__name__}")
        text = os.fspath(m)
        if os.path.isdir(text):
            out += sorted(str(p) for p in Path(text).rglob("*.onnx"))
        elif any(c in text for c in "*?["):
            out += sorted(_glob.glob(text, recursive=True))
        else:
            out.append(text)            # a missing file becomes a row with its load error
    return list(dict.fromkeys(out)) if all(isinstance(o, str) for o in out) else out


def provider_lists(providers) -> list[tuple[str, ...]]:
    """``"gpu,cpu"`` / ``["gpu", "cpu"]`` (one list) or ``["gpu,cpu", "cpu"]`` /
    ``[["gpu", "cpu"], ["cpu"]]`` (several) → tuples of provider names."""
    if isinstance(providers, str):
        providers = [providers]
    items = list(providers)
    if items and all(isinstance(x, str) for x in items) and not any("," in x for x in items):
        items = [items]                  # ["gpu", "cpu"]: one list
    out = []
    for x in items:
        names = [n.strip() if isinstance(n, str) else n for n in (x.split(",") if isinstance(x, str) else x)]
        if not all(isinstance(n, str) and n for n in names):
            raise ArgumentTypeError("a sweep's provider lists hold provider names (workers resolve them), "
                                    f"e.g. ['gpu,cpu', 'cpu']; got {x!r}")
        out.append(tuple(names))
    if not out:
        raise ArgumentValueError("give at least one provider list, e.g. providers=['gpu,cpu']")
    return out


def mask_list(masks) -> list[dict]:
    """None → one empty mask; a dict (provider → op types to deny) or a list of them."""
    if masks is None:
        return [{}]
    if isinstance(masks, dict):
        masks = [masks]
    out = []
    for m in masks:
        if not isinstance(m, dict):
            raise ArgumentTypeError(f"a mask is a dict provider → op types to deny, e.g. {{'gpu': ['Softmax']}}; "
                                    f"got {type(m).__name__}")
        out.append({str(k): tuple([v] if isinstance(v, str) else v) for k, v in m.items()})
    return out


# -- the sweep ----------------------------------------------------------------------------------
def _dask():
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as e:
        raise MissingDependencyError(
            "sweep() runs on Dask, which is not installed: pip install 'hetero_explore[sweep]' (or "
            "'dask[distributed]'), or pass client='in-process' to run the sweep here in a loop") from e
    return Client, LocalCluster, as_completed


def sweep(models, providers=("gpu,cpu",), masks=None, execute: bool = False, inputs=None, client=None, *,
          input_shapes: dict | None = None, dim_values: dict | None = None, seed: int = 0,
          workers: int | None = None, progress: Callable[[int, int, dict], None] | None = None,
          optimize: bool = True):
    """Plan every model on every provider list under every mask; one row each.

    Args:
        models: paths, globs or directories (searched for ``*.onnx``), or ``onnx.ModelProto``.
        providers: provider lists of names (see :func:`provider_lists`).
        masks: None, or a dict / list of dicts provider → op types to deny (entries naming a
            provider that is not in a row's provider list do nothing for that row).
        execute: also execute each executable plan, check it byte for byte against the cpu
            reference, and time it: the first run (``first_seconds``, ``compile_seconds``) apart
            from up to :data:`WARM_RUNS` warm runs (``warm_seconds``: their median,
            ``warm_p90_seconds``, ``warm_runs``: how many).
        inputs: for ``execute``: None (seeded random), one dict of arrays for every model,
            a dict model path/name → dict, or a callable path → dict.
        client: None (a ``LocalCluster`` of ``workers`` processes, closed afterwards), a
            ``distributed.Client``, a scheduler address, or ``"in-process"``.
        input_shapes: bind input shapes when loading, in every model that has an input of that
            name (:func:`bindings_for`).
        dim_values: bind symbolic dims by name when loading, in every model that has such a dim.
        seed: seed of the random inputs.
        optimize: the loader's load-time graph rewrites (``optimize=False``: none).
        workers: worker processes of the local cluster (default: the machine's cores, at most
            the number of models).
        progress: ``progress(done, total, row)`` after each row arrives (a worker gets one
            model at a time, loads it once and sends its rows back when they are done);
            default: none.

    Returns:
        A pandas DataFrame of :data:`COLUMNS`, one row per task in the order (model,
        provider list, mask); ``attrs`` hold ``elapsed_seconds``, ``workers`` and ``tasks``.
        ``model`` is the path (or in-memory label), ``name`` a short name unique within the
        sweep (:func:`model_names`: the folder's name for ``<name>/model.onnx`` layouts).
    """
    import pandas as pd

    found = find_models(models)
    lists = provider_lists(providers)
    mks = mask_list(masks)
    per_model = len(lists) * len(mks)
    n_tasks = len(found) * per_model
    t0 = time.perf_counter()
    rows: list[dict | None] = [None] * n_tasks
    n_workers = 0
    args = (lists, mks, execute, inputs, seed, input_shapes, optimize)
    names = model_names(found)
    kw = {"dim_values": dim_values}

    def arrived(k: int, got: list[dict], done: int) -> int:
        for j, r in enumerate(got):
            rows[k * per_model + j] = r
            done += 1
            if progress is not None:
                progress(done, n_tasks, r)
        return done

    if client == IN_PROCESS:
        done = 0
        for k, m in enumerate(found):
            done = arrived(k, run_model(m, *args, name=names[k], **kw), done)
    elif found:
        Client, LocalCluster, as_completed = _dask()
        own_cluster = own_client = None
        if client is None:
            n = workers or min(os.cpu_count() or 1, len(found))
            own_cluster = LocalCluster(n_workers=max(1, n), threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
            client = own_client = Client(own_cluster)
        elif isinstance(client, str):
            client = own_client = Client(client)
        try:
            client.run(_warm_worker)       # each worker warms its numba cache once
            n_workers = len(client.scheduler_info().get("workers", {}))
            stamp = time.time_ns()
            index = {}
            futures = []
            for k, m in enumerate(found):
                f = client.submit(run_model, m, *args, name=names[k], **kw, pure=False,
                                  key=f"hetero-sweep-{stamp}-{k}")
                index[f.key] = k
                futures.append(f)
            done = 0
            for f in as_completed(futures):
                k = index[f.key]
                try:
                    got = f.result()
                except Exception as e:  # noqa: BLE001 - a worker died: the rows say so
                    label, name = _label(found[k])[0], names[k]
                    got = []
                    for pl in lists:
                        for mk in mks:
                            r = {c: None for c in COLUMNS}
                            r.update(model=label, name=name, providers=",".join(pl), mask=_mask_text(mk),
                                     ok=False, stage="worker", error_type=f"worker: {type(e).__name__}",
                                     error=str(e)[:4000])
                            got.append(r)
                done = arrived(k, got, done)
        finally:
            if own_client is not None:
                own_client.close()
            if own_cluster is not None:
                own_cluster.close()
    df = pd.DataFrame(rows, columns=COLUMNS)
    df.attrs.update(elapsed_seconds=time.perf_counter() - t0, workers=n_workers, tasks=n_tasks)
    return df


# -- two sweeps diffed --------------------------------------------------------------------------
def compare_sweeps(before, after):
    """Per (model name, provider list, mask): what changed from sweep ``before`` to ``after``
    (say, before and after a re-export), with the explorer's plan-vs-plan diff
    (:func:`~hetero_explore.planner.plandiff.compare_digests`). ``status`` is ``same``, ``changed``,
    ``only before``, ``only after`` or ``error`` (either side failed).

    Rows are matched by their unique ``name`` (:func:`model_names`). A sweep whose names are
    not unique (written before names were made unique: every ``<name>/model.onnx`` named
    ``model``) is renamed from its ``model`` paths first, so no row is ever merged into another."""
    import pandas as pd

    from ..planner.plandiff import compare_digests

    def keyed(df):
        recs = df.to_dict("records")
        key = lambda r, name: (name, r["providers"], r["mask"])  # noqa: E731
        if len({key(r, r["name"]) for r in recs}) < len(recs):
            paths = list(dict.fromkeys(str(r["model"]) for r in recs))
            renamed = dict(zip(paths, model_names(paths)))
            names = [renamed[str(r["model"])] for r in recs]
            if len({key(r, n) for r, n in zip(recs, names)}) < len(recs):
                names = [str(r["model"]) for r in recs]      # the same path twice: keep both rows apart
                seen: dict = {}
                for i, r in enumerate(recs):
                    k = key(r, names[i])
                    seen[k] = seen.get(k, 0) + 1
                    if seen[k] > 1:
                        names[i] = f"{names[i]} #{seen[k]}"
            for r, n in zip(recs, names):
                r["name"] = n
        return {key(r, r["name"]): r for r in recs}

    kb, ka = keyed(before), keyed(after)
    out = []
    for key in list(dict.fromkeys([*kb, *ka])):
        b, a = kb.get(key), ka.get(key)
        rec = {"name": key[0], "providers": key[1], "mask": key[2], "status": None, "summary": "",
               "moved": 0, "partitions_before": None, "partitions_after": None, "bytes_before": None,
               "bytes_after": None, "bytes_delta": None}
        if b is None or a is None:
            rec["status"] = "only after" if b is None else "only before"
        elif not (b["ok"] and a["ok"]) or b["digest"] is None or a["digest"] is None:
            rec["status"] = "error"
            rec["summary"] = "; ".join(f"{side}: {r['error_type']}: {str(r['error'])[:200]}"
                                       for side, r in (("before", b), ("after", a)) if r["error_type"])
        else:
            c = compare_digests(_digest(b["digest"]), _digest(a["digest"]))
            rec.update(status="changed" if c.changed else "same", summary=c.summary(), moved=len(c.moved),
                       partitions_before=b["partitions"], partitions_after=a["partitions"],
                       bytes_before=c.bytes_before, bytes_after=c.bytes_after, bytes_delta=c.bytes_delta)
        out.append(rec)
    return pd.DataFrame(out, columns=["name", "providers", "mask", "status", "summary", "moved",
                                      "partitions_before", "partitions_after", "bytes_before",
                                      "bytes_after", "bytes_delta"])


def _digest(d):
    import json
    return json.loads(d) if isinstance(d, str) else d


# -- files --------------------------------------------------------------------------------------
_JSON_COLUMNS = ("placement", "share", "fallback_ops", "blockers", "peak_bytes", "digest", "ep_share", "op_ulp")


def save_sweep(df, path) -> Path:
    """Write a sweep to ``.parquet`` (needs pyarrow), ``.csv`` or ``.json``; nested columns
    (placement, digest, ...) are stored as JSON text. :func:`load_sweep` reads it back."""
    import json
    path = Path(path)
    out = df.copy()
    for c in _JSON_COLUMNS:
        out[c] = [None if v is None else json.dumps(v, sort_keys=True) for v in out[c]]
    suffix = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".parquet":
        try:
            out.to_parquet(path, index=False)
        except ImportError as e:
            raise MissingDependencyError("writing .parquet needs pyarrow: pip install 'hetero_explore[parquet]', "
                                         "or write .csv / .json") from e
    elif suffix == ".csv":
        out.to_csv(path, index=False)
    elif suffix == ".json":
        out.to_json(path, orient="records", indent=1)
    else:
        raise ArgumentValueError(f"write a sweep to .parquet, .csv or .json, not {path.suffix or 'no suffix'!r}")
    return path


def load_sweep(path):
    """A sweep written by :func:`save_sweep`, with its nested columns parsed back."""
    import json

    import pandas as pd
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df = pd.read_parquet(path)
    elif suffix == ".csv":
        df = pd.read_csv(path)
    elif suffix == ".json":
        df = pd.read_json(path, orient="records")
    else:
        raise ArgumentValueError(f"read a sweep from .parquet, .csv or .json, not {path.suffix!r}")
    for c in _JSON_COLUMNS:
        if c in df.columns:
            df[c] = [json.loads(v) if isinstance(v, str) else None for v in df[c]]
    for c in ("model", "name", "providers", "mask"):     # a CSV reads an empty mask back as NaN
        if c in df.columns:
            df[c] = ["" if not isinstance(v, str) else v for v in df[c]]
    return df
