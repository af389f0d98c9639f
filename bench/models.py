"""Whole-model benchmark: the model families users bring, ours vs onnxruntime.

    python bench/models.py              # every family, 1 and 2 threads, 20 timed runs each (~3-5 min)
    python bench/models.py --quick      # 5 timed runs, smaller budgets (about a minute when warm)
    python bench/models.py --only bert,gpt2 --threads 1

Models. Hand-written ``torch.nn`` modules with seeded random weights (no
download; torchvision and transformers are not needed), exported by torch's
TorchScript exporter as a user would (``torch.onnx.export(..., dynamo=False,
opset_version=17)``, constant folding on, fixed input shapes) and cached under
the temporary directory (``$HETERO_EXPLORE_BENCH_CACHE`` or
``<tmp>/hetero_explore_bench_models``), keyed by torch version and a hash of
this file's model code:

* ``resnet``: ResNet-style CNN (7x7/2 stem, max pool, three stages of basic
  blocks with 1x1/2 projections, global average pool, classifier), 1x3x112x112.
* ``mobilenet``: MobileNetV3-style (inverted residuals with depthwise 3x3/5x5
  convolutions, squeeze-excite, Hardswish/Hardsigmoid), 1x3x112x112.
* ``bert``: BERT-style encoder (token + position embeddings, post-norm blocks,
  GELU as erf, padding mask), 1x64 tokens, d=128, 4 heads, 2 layers.
* ``gpt2``: GPT-2-style decoder (pre-norm, causal mask as ``Where`` over a
  lower-triangular buffer, tanh GELU, tied LM head), 1x64 tokens, d=128, 2 layers.
* ``vit``: ViT (16x16 patch Conv, class token, pre-norm encoder), 1x3x96x96.
* ``mlp``: 4-layer MLP with ReLU, batch 32, 512 wide.
* ``detector``: a small detector head (FPN-style top-down over three feature
  maps: lateral 1x1, nearest Resize x2, 3x3 smoothing; class and box towers,
  sigmoid, outputs flattened per anchor and concatenated).

Timing. Per thread count T (``numba.set_num_threads(T)``; onnxruntime
``intra_op_num_threads=T``, ``inter_op_num_threads=1``, sequential, default
graph optimisations): one warm-up run each, then the median wall time of
``--repeat`` runs (default 20) of our ``HeterogeneousExecutor(plan(graph,
[cpu()])).run(feeds)`` and of ``InferenceSession.run``, alternating the two
so both see the same machine load; at more than one thread each timed run follows a
pause of ``SETTLE_S`` (onnxruntime's workers spin on after its run, and a run started at
once shares a core with them). The calling thread's CPU time (``time.thread_time``) of each run is
taken too, and its median ratio printed as "cpu ours/ort": on a machine whose
cores are shared it counts the time each side actually ran (at 1 thread both
compute on the calling thread; at more threads it leaves out the worker
threads' time, so read the wall ratio there). Our outputs are compared with
onnxruntime's (max |ours - ort| / max |ort|; "ok" under 1e-3). The geometric
mean of the ratios (ours/ort) closes each table.

A model whose nodes the CPU provider declines is reported (the node and the
reason) and left out of the geometric mean. Never run as a test.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # CPU only
# before torch is imported: torch loads OpenMP at import, which reads the wait policy then (see
# hetero_explore/kernels/target.py: actively spinning threads stall on a busy machine)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's hetero_explore, wherever it is run from
OPSET = 17
TOL = 1e-3


# -- the models (torch.nn, seeded) -----------------------------------------------------------
def _torch_models():
    import torch
    from torch import nn
    import torch.nn.functional as Fn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):
        def __init__(self, w=32, classes=100):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            self.body = nn.Sequential(Basic(w, w, 1), Basic(w, w, 1), Basic(w, 2 * w, 2), Basic(2 * w, 2 * w, 1),
                                      Basic(2 * w, 4 * w, 2), Basic(4 * w, 4 * w, 1))
            self.fc = nn.Linear(4 * w, classes)

        def forward(self, x):
            x = self.body(self.stem(x))
            return self.fc(torch.flatten(Fn.adaptive_avg_pool2d(x, 1), 1))

    class SE(nn.Module):
        def __init__(self, c, r=4):
            super().__init__()
            self.f1 = nn.Conv2d(c, max(c // r, 8), 1)
            self.f2 = nn.Conv2d(max(c // r, 8), c, 1)

        def forward(self, x):
            s = Fn.adaptive_avg_pool2d(x, 1)
            return x * Fn.hardsigmoid(self.f2(torch.relu(self.f1(s))))

    class InvRes(nn.Module):
        def __init__(self, cin, exp, cout, k, stride, se, hs):
            super().__init__()
            act = nn.Hardswish if hs else nn.ReLU
            layers = []
            if exp != cin:
                layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
            layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
            if se:
                layers.append(SE(exp))
            layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.f = nn.Sequential(*layers)
            self.res = stride == 1 and cin == cout

        def forward(self, x):
            y = self.f(x)
            return x + y if self.res else y

    class MobileNet(nn.Module):
        def __init__(self, classes=100):
            super().__init__()
            cfg = [(16, 16, 16, 3, 2, True, False), (16, 64, 24, 3, 2, False, False),
                   (24, 72, 24, 3, 1, False, False), (24, 96, 40, 5, 2, True, True),
                   (40, 240, 40, 5, 1, True, True), (40, 120, 48, 5, 1, True, True),
                   (48, 288, 96, 5, 2, True, True), (96, 576, 96, 5, 1, True, True)]
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
            self.body = nn.Sequential(*[InvRes(*c) for c in cfg])
            self.head = nn.Sequential(nn.Conv2d(96, 288, 1, bias=False), nn.BatchNorm2d(288), nn.Hardswish())
            self.fc = nn.Sequential(nn.Linear(288, 512), nn.Hardswish(), nn.Linear(512, classes))

        def forward(self, x):
            x = self.head(self.body(self.stem(x)))
            return self.fc(torch.flatten(Fn.adaptive_avg_pool2d(x, 1), 1))

    class Attn(nn.Module):
        def __init__(self, d, h, causal=0):
            super().__init__()
            self.h, self.dh = h, d // h
            self.qkv = nn.Linear(d, 3 * d)
            self.o = nn.Linear(d, d)
            if causal:
                self.register_buffer("mask", torch.tril(torch.ones(causal, causal, dtype=torch.bool)))
            else:
                self.mask = None

        def forward(self, x, bias=None):
            B, S, D = x.shape
            q, k, v = self.qkv(x).split(D, dim=-1)
            q = q.reshape(B, S, self.h, self.dh).transpose(1, 2)
            k = k.reshape(B, S, self.h, self.dh).transpose(1, 2)
            v = v.reshape(B, S, self.h, self.dh).transpose(1, 2)
            a = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.dh))
            if self.mask is not None:
                a = a.masked_fill(~self.mask[:S, :S], float("-inf"))
            if bias is not None:
                a = a + bias
            y = torch.softmax(a, dim=-1) @ v
            return self.o(y.transpose(1, 2).reshape(B, S, D))

    class Block(nn.Module):
        def __init__(self, d, h, ff, pre, causal=0, gelu="none"):
            super().__init__()
            self.pre = pre
            self.attn = Attn(d, h, causal)
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.f1, self.f2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.gelu = gelu

        def ff(self, x):
            return self.f2(Fn.gelu(self.f1(x), approximate=self.gelu))

        def forward(self, x, bias=None):
            if self.pre:
                x = x + self.attn(self.n1(x), bias)
                return x + self.ff(self.n2(x))
            x = self.n1(x + self.attn(x, bias))
            return self.n2(x + self.ff(x))

    class Bert(nn.Module):
        def __init__(self, vocab=1000, S=64, d=128, h=4, L=2, ff=512):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(S, d)
            self.norm = nn.LayerNorm(d)
            self.blocks = nn.ModuleList([Block(d, h, ff, pre=False) for _ in range(L)])
            self.pool = nn.Linear(d, d)
            self.S = S

        def forward(self, ids, mask):
            x = self.norm(self.tok(ids) + self.pos.weight[:self.S])
            bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * -10000.0
            for b in self.blocks:
                x = b(x, bias)
            return x, torch.tanh(self.pool(x[:, 0]))

    class GPT2(nn.Module):
        def __init__(self, vocab=1000, S=64, d=128, h=4, L=2):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(S, d)
            self.blocks = nn.ModuleList([Block(d, h, 4 * d, pre=True, causal=S, gelu="tanh") for _ in range(L)])
            self.norm = nn.LayerNorm(d)
            self.S = S

        def forward(self, ids):
            x = self.tok(ids) + self.pos.weight[:self.S]
            for b in self.blocks:
                x = b(x)
            return self.norm(x) @ self.tok.weight.t()

    class ViT(nn.Module):
        def __init__(self, image=96, patch=16, d=128, h=4, L=3, classes=100):
            super().__init__()
            n = (image // patch) ** 2
            self.patch = nn.Conv2d(3, d, patch, patch)
            self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
            self.blocks = nn.ModuleList([Block(d, h, 4 * d, pre=True) for _ in range(L)])
            self.norm = nn.LayerNorm(d)
            self.fc = nn.Linear(d, classes)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            for b in self.blocks:
                x = b(x)
            return self.fc(self.norm(x)[:, 0])

    class MLP(nn.Module):
        def __init__(self, d=512, L=4, classes=100):
            super().__init__()
            layers = []
            for _ in range(L):
                layers += [nn.Linear(d, d), nn.ReLU()]
            self.f = nn.Sequential(*layers, nn.Linear(d, classes))

        def forward(self, x):
            return torch.softmax(self.f(x), dim=-1)

    class Detector(nn.Module):
        def __init__(self, chans=(32, 64, 128), d=64, anchors=3, classes=20):
            super().__init__()
            self.lat = nn.ModuleList([nn.Conv2d(c, d, 1) for c in chans])
            self.smooth = nn.ModuleList([nn.Conv2d(d, d, 3, 1, 1) for _ in chans])
            self.cls_t = nn.Sequential(nn.Conv2d(d, d, 3, 1, 1), nn.ReLU(), nn.Conv2d(d, anchors * classes, 3, 1, 1))
            self.box_t = nn.Sequential(nn.Conv2d(d, d, 3, 1, 1), nn.ReLU(), nn.Conv2d(d, anchors * 4, 3, 1, 1))
            self.a, self.k = anchors, classes

        def forward(self, c3, c4, c5):
            p5 = self.lat[2](c5)
            p4 = self.lat[1](c4) + Fn.interpolate(p5, scale_factor=2.0, mode="nearest")
            p3 = self.lat[0](c3) + Fn.interpolate(p4, scale_factor=2.0, mode="nearest")
            cls, box = [], []
            for p, s in zip((p3, p4, p5), self.smooth):
                p = s(p)
                B = p.shape[0]
                cls.append(torch.sigmoid(self.cls_t(p)).permute(0, 2, 3, 1).reshape(B, -1, self.k))
                box.append(self.box_t(p).permute(0, 2, 3, 1).reshape(B, -1, 4))
            return torch.cat(cls, 1), torch.cat(box, 1)

    def ids(S, vocab=1000):
        return torch.randint(0, vocab, (1, S), generator=torch.Generator().manual_seed(1))

    return {
        "resnet": (ResNet, lambda: (torch.randn(1, 3, 112, 112),), ["x"]),
        "mobilenet": (MobileNet, lambda: (torch.randn(1, 3, 112, 112),), ["x"]),
        "bert": (Bert, lambda: (ids(64), torch.ones(1, 64, dtype=torch.int64)), ["input_ids", "attention_mask"]),
        "gpt2": (GPT2, lambda: (ids(64),), ["input_ids"]),
        "vit": (ViT, lambda: (torch.randn(1, 3, 96, 96),), ["x"]),
        "mlp": (MLP, lambda: (torch.randn(32, 512),), ["x"]),
        "detector": (Detector, lambda: (torch.randn(1, 32, 32, 32), torch.randn(1, 64, 16, 16),
                                        torch.randn(1, 128, 8, 8)), ["c3", "c4", "c5"]),
    }


FAMILIES = ("resnet", "mobilenet", "bert", "gpt2", "vit", "mlp", "detector")


def _cache_dir() -> Path:
    d = os.environ.get("HETERO_EXPLORE_BENCH_CACHE")
    p = Path(d) if d else Path(tempfile.gettempdir()) / "hetero_explore_bench_models"
    p.mkdir(parents=True, exist_ok=True)
    return p


def export(name: str) -> tuple[Path, dict]:
    """The family's ONNX file (exported once, cached) and its example inputs as numpy arrays."""
    import torch
    key = hashlib.sha256((inspect.getsource(_torch_models) + torch.__version__ + str(OPSET)).encode()).hexdigest()
    path = _cache_dir() / f"{name}-{key[:12]}.onnx"
    cls, make_inputs, in_names = _torch_models()[name]
    torch.manual_seed(0)
    model = cls().eval()
    with torch.no_grad():
        for m in model.modules():   # non-trivial BatchNorm statistics, as in a trained model
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    torch.manual_seed(1)
    inputs = make_inputs()
    if not path.exists():
        import warnings
        warnings.filterwarnings("ignore", category=DeprecationWarning)   # "legacy TorchScript exporter": the point
        tmp = path.with_suffix(".tmp")
        with torch.no_grad():
            torch.onnx.export(model, inputs, str(tmp), dynamo=False, opset_version=OPSET, input_names=in_names,
                              do_constant_folding=True)
        tmp.replace(path)
    return path, {n: t.numpy() for n, t in zip(in_names, inputs)}


# -- timing ---------------------------------------------------------------------------------
def _session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _rel_diff(ours: dict, theirs: list, names: list) -> float:
    worst = 0.0
    for n, t in zip(names, theirs):
        a = np.asarray(ours[n], dtype=np.float64)
        t = np.asarray(t, dtype=np.float64)
        worst = max(worst, float(np.max(np.abs(a - t)) / max(np.max(np.abs(t)), 1e-30)))
    return worst


def _max_ulp(ours: dict, theirs: list, names: list) -> int:
    """The largest float32 ULP distance between our and onnxruntime's float outputs (finite
    elements; -1 when no output is float32)."""
    worst = -1
    for n, t in zip(names, theirs):
        a, t = np.asarray(ours[n]), np.asarray(t)
        if a.dtype != np.float32 or t.dtype != np.float32:
            continue
        ok = np.isfinite(a) & np.isfinite(t)
        ia = a[ok].view(np.int32).astype(np.int64)
        it = t[ok].view(np.int32).astype(np.int64)
        ia = np.where(ia < 0, -(2**31) - ia, ia)   # the float line as one monotone integer line
        it = np.where(it < 0, -(2**31) - it, it)
        worst = max(worst, int(np.max(np.abs(ia - it))) if ia.size else 0)
    return worst


#: at more than one thread, the pause before each timed run (ours and onnxruntime's alike):
#: onnxruntime's intra-op workers keep spinning after a run ends (measured here: ~35 ms of CPU
#: after a 2-thread YOLO run, none with its allow_spinning off; numba's TBB workers sleep within
#: ~0.3 ms), so a run timed right after one of onnxruntime's shared a core with its spinning
#: worker: our 2-thread runs measured up to 2x slower that way than after a pause
SETTLE_S = 0.06


def bench_family(name, threads, repeat, budget_s):
    import numba
    import hetero_explore as he
    from hetero_explore.execution.executor import HeterogeneousExecutor
    from hetero_explore.providers import cpu

    path, feeds = export(name)
    # the feeds' shapes bind the model's symbolic dims (a classifier's batch), as a user would
    graph = he.load_model(str(path), input_shapes={k: np.shape(v) for k, v in feeds.items()})
    plan = he.plan(graph, [cpu()])
    row = dict(family=name, nodes=len(graph.nodes), threads=threads)
    if plan.execution_blockers:
        row["declined"] = [f"{b.where}: {b.detail}" for b in plan.execution_blockers[:3]]
        return row
    ex = HeterogeneousExecutor(plan)
    res = {}
    for t in threads:
        numba.set_num_threads(t)
        sess_t = _session(path, t)
        out_names = [o.name for o in sess_t.get_outputs()]
        ours = ex.run(feeds).outputs   # warm-up (compiles what the cache lacks)
        theirs = sess_t.run(None, feeds)
        walls_o, walls_r, cpus_o, cpus_r = [], [], [], []
        t_end = time.perf_counter() + budget_s
        tt = time.thread_time
        while len(walls_o) < repeat and (len(walls_o) < 5 or time.perf_counter() < t_end):
            if t > 1:
                time.sleep(SETTLE_S)   # onnxruntime's workers still spin after its run (see SETTLE_S)
            c0, w0 = tt(), time.perf_counter()
            ex.run(feeds)
            c1, w1 = tt(), time.perf_counter()
            if t > 1:
                time.sleep(SETTLE_S)
            c2, w2 = tt(), time.perf_counter()
            sess_t.run(None, feeds)
            c3, w3 = tt(), time.perf_counter()
            walls_o.append(w1 - w0)
            walls_r.append(w3 - w2)
            cpus_o.append(c1 - c0)
            cpus_r.append(c3 - c2)
        o, r = statistics.median(walls_o), statistics.median(walls_r)
        co, cr = statistics.median(cpus_o), statistics.median(cpus_r)
        res[t] = dict(ours_ms=o * 1e3, ort_ms=r * 1e3, ratio=o / r, runs=len(walls_o),
                      max_rel_diff=_rel_diff(ours, theirs, out_names), max_ulp=_max_ulp(ours, theirs, out_names),
                      ours_cpu_ms=co * 1e3, ort_cpu_ms=cr * 1e3, ratio_cpu=co / cr if cr > 0 else float("nan"))
    row["by_threads"] = res
    ex.close()
    return row


def _geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def table(rows, threads):
    head = "| family | nodes | " + " | ".join(
        f"ours ms ({t}t) | ort ms ({t}t) | ours/ort ({t}t) | cpu ours/ort ({t}t)" for t in threads) + \
        " | outputs vs ort |"
    lines = [head, "|" + "---|" * (3 + 4 * len(threads))]
    gm = {t: [] for t in threads}
    gmc = {t: [] for t in threads}
    for r in rows:
        if "declined" in r:
            lines.append(f"| {r['family']} | {r['nodes']} | declined: {r['declined']} |")
            continue
        cells = []
        worst = 0.0
        for t in threads:
            b = r["by_threads"][t]
            cells.append(f"{b['ours_ms']:.2f} | {b['ort_ms']:.2f} | {b['ratio']:.2f} | {b['ratio_cpu']:.2f}")
            gm[t].append(b["ratio"])
            gmc[t].append(b["ratio_cpu"])
            worst = max(worst, b["max_rel_diff"])
        ok = "ok" if worst < TOL else "DIFFERS"
        lines.append(f"| {r['family']} | {r['nodes']} | " + " | ".join(cells) + f" | {ok} ({worst:.1e}) |")
    lines.append("| **geomean** | | " + " | ".join(f" | | **{_geomean(gm[t]):.2f}** | **{_geomean(gmc[t]):.2f}**"
                                                 for t in threads) + " | |")
    return "\n".join(lines), {t: _geomean(gm[t]) for t in threads}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 timed runs per model, short budgets")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per model and thread count (default 20)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--only", default=None, help="comma-separated families (default: all): " + ",".join(FAMILIES))
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    repeat = args.repeat or (5 if args.quick else 20)
    budget = 2.0 if args.quick else 15.0
    fams = args.only.split(",") if args.only else list(FAMILIES)
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        ap.error(f"unknown families {bad}; known: {', '.join(FAMILIES)}")
    import numba
    import onnxruntime as ort
    import torch
    if max(threads) > numba.config.NUMBA_NUM_THREADS:
        ap.error(f"--threads {max(threads)} exceeds NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    print(f"python {platform.python_version()}, cores {os.cpu_count()}, numba {numba.__version__}, "
          f"onnxruntime {ort.__version__}, torch {torch.__version__}, load {os.getloadavg()}", flush=True)
    rows = []
    for f in fams:
        r = bench_family(f, threads, repeat, budget)
        rows.append(r)
        if "declined" in r:
            print(f"  {f}: declined {r['declined']}", flush=True)
        else:
            print(f"  {f}: " + ", ".join(f"{t}t x{b['ratio']:.2f} ({b['ours_ms']:.2f} vs {b['ort_ms']:.2f} ms)"
                                         for t, b in r["by_threads"].items()), flush=True)
    text, gm = table(rows, threads)
    print("\n## Whole models, ours / onnxruntime (median wall; > 1: ours slower)\n")
    print(text)
    print(f"\ntotal bench time {time.perf_counter() - t0:.0f} s, load {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(rows=rows, geomean=gm), indent=2, default=str))


if __name__ == "__main__":
    main()
