"""Models like the ones users run, built with the libraries they use: ours vs onnxruntime.

    python bench/real_models.py                       # every family, 1 and 2 threads
    python bench/real_models.py --quick               # 5 timed runs each
    python bench/real_models.py --only resnet50,lgbm --threads 1
    python bench/real_models.py --list                # the families and their groups

Models (seeded random weights, never downloaded; exported once and cached under
``bench/results/models/``, which git ignores, keyed by the library versions and a hash of this
family's model code):

* CNN: torchvision ResNet-50 at 224 (1x3x224x224); ultralytics YOLOv8n built from its yaml,
  at 320 and 640; timm ConvNeXt-Atto (224) and MobileViTv2-0.5 (256; GroupNorm(1) exported as
  InstanceNormalization).
* transformer: a BERT-base-shaped encoder (transformers ``BertModel``: hidden 768, 12 heads,
  FFN 3072, 2 layers, sequence 128); a Qwen2-style decoder step with a KV cache
  (hidden 256, 8 query / 2 key-value heads, 4 layers, RMSNorm, rotary, SwiGLU; one new token
  after 127 cached ones; written with torch.nn: transformers' Qwen2 with its KV cache does not
  pass the TorchScript exporter).
* audio: transformers wav2vec2 (the convolutional feature encoder with GroupNorm, 2 encoder
  layers of width 256; 1 s at 16 kHz) and the Whisper-tiny encoder (80 x 3000 log-mel
  frames); a Silero-style streaming VAD (TorchScript-scripted: an ``If`` on the sample rate
  between two STFT front ends, an LSTM cell in a ``Loop`` over the frames).
* classic ML: LightGBM classifier with 200 trees (onnxmltools), scikit-learn RandomForest
  (100 trees), SVC (RBF) and kNN classifiers (skl2onnx); batches of 64 rows.

The torch models are exported by the TorchScript exporter (``dynamo=False``, opset 17) as in
``bench/models.py``. Timing as there (``bench_family`` of ``bench/models.py``): per thread
count, ours and onnxruntime alternate in one process, medians of wall time and of the
calling thread's CPU time; outputs compared with onnxruntime (max relative difference; the
max ULP difference of every float output is printed too). Geometric means close the table,
overall and per group. Never run as a test.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import io
import json
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path

os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # CPU only
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # before torch: see bench/models.py
os.environ.setdefault("YOLO_OFFLINE", "1")            # ultralytics: no update checks, no downloads

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
OPSET = 17
CACHE = HERE / "results" / "models"
ROWS = 64   # classic-ML batch


# -- torch models ------------------------------------------------------------------------------
_TV_LIB = None


def _torchvision_ops():
    """torchvision's PyPI wheel is built for CUDA torch: beside the CPU torch its compiled ops do not
    load, and importing torchvision (which timm and transformers do) fails registering fake
    kernels for ``torchvision::nms``/``qnms``. Define those two schemas first (no model here calls
    them; detection models would need real kernels)."""
    global _TV_LIB
    import torch
    try:
        torch.ops.torchvision.nms
        return
    except (AttributeError, RuntimeError):
        pass
    _TV_LIB = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        _TV_LIB.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def _seed_norms(model):
    """Non-trivial BatchNorm statistics, as in a trained model."""
    import torch
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    return model


def _resnet50():
    import torch
    import torchvision
    return torchvision.models.resnet50(weights=None), (torch.randn(1, 3, 224, 224),), ["x"]


def _yolo(size):
    def make():
        import torch
        from ultralytics.nn.tasks import DetectionModel
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = DetectionModel("yolov8n.yaml", verbose=False)
        m.fuse(verbose=False) if hasattr(m, "fuse") else None
        det = m.model[-1]
        det.export, det.format = True, "onnx"   # the exporter's head: one (1, 84, anchors) tensor
        return m, (torch.randn(1, 3, size, size),), ["images"]
    return make


def _timm(name, size):
    def make():
        import timm
        import torch
        return timm.create_model(name, pretrained=False), (torch.randn(1, 3, size, size),), ["x"]
    return make


def _bert():
    import torch
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=8000, hidden_size=768, num_hidden_layers=2, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=512, attn_implementation="eager")
    model = BertModel(cfg)

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids, mask):
            out = self.m(input_ids=ids, attention_mask=mask, return_dict=False)
            return out[0], out[1]

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 8000, (1, 128), generator=g)
    return Wrap(), (ids, torch.ones(1, 128, dtype=torch.int64)), ["input_ids", "attention_mask"]


def _qwen2():
    """A Qwen2-style decoder step written with torch.nn (transformers' Qwen2 with a DynamicCache
    does not go through the TorchScript exporter: "unordered_map::at"): RMSNorm, rotary
    position embedding, grouped-query attention over the cached keys and values plus the new
    token's, a SwiGLU MLP, tied LM head; the new keys and values are outputs."""
    import torch
    from torch import nn
    L, P, H, KV, HD, D, FF, V = 4, 127, 8, 2, 32, 256, 704, 8000

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(D) + 0.1 * torch.randn(D))

        def forward(self, x):
            return self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    def rotate(x, cos, sin):
        x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(), RMSNorm()
            self.q = nn.Linear(D, H * HD)
            self.k = nn.Linear(D, KV * HD)
            self.v = nn.Linear(D, KV * HD)
            self.o = nn.Linear(H * HD, D, bias=False)
            self.gate = nn.Linear(D, FF, bias=False)
            self.up = nn.Linear(D, FF, bias=False)
            self.down = nn.Linear(FF, D, bias=False)

        def forward(self, x, cos, sin, pk, pv):
            B, S, _ = x.shape
            h = self.n1(x)
            q = rotate(self.q(h).view(B, S, H, HD).transpose(1, 2), cos, sin)
            k = rotate(self.k(h).view(B, S, KV, HD).transpose(1, 2), cos, sin)
            v = self.v(h).view(B, S, KV, HD).transpose(1, 2)
            k = torch.cat([pk, k], 2)
            v = torch.cat([pv, v], 2)
            kr = k.repeat_interleave(H // KV, 1)
            vr = v.repeat_interleave(H // KV, 1)
            a = torch.softmax((q @ kr.transpose(-1, -2)) * (HD ** -0.5), -1) @ vr
            x = x + self.o(a.transpose(1, 2).reshape(B, S, H * HD))
            h = self.n2(x)
            return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h)), k, v

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.layers = nn.ModuleList([Layer() for _ in range(L)])
            self.norm = RMSNorm()
            inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
            self.register_buffer("inv", inv)

        def forward(self, ids, pos, *past):
            x = self.emb(ids)
            f = pos.float()[..., None] * self.inv
            ang = torch.cat([f, f], -1)[:, None]
            cos, sin = ang.cos(), ang.sin()
            kv = []
            for i, layer in enumerate(self.layers):
                x, k, v = layer(x, cos, sin, past[2 * i], past[2 * i + 1])
                kv += [k, v]
            return (self.norm(x) @ self.emb.weight.t(), *kv)

    g = torch.Generator().manual_seed(1)
    past = [torch.randn(1, KV, P, HD, generator=g) for _ in range(2 * L)]
    ids = torch.randint(0, V, (1, 1), generator=g)
    names = ["input_ids", "position_ids"] + [f"past_{k}_{i}" for i in range(L) for k in "kv"]
    return Step(), (ids, torch.tensor([[P]]), *past), names


def _wav2vec2():
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    cfg = Wav2Vec2Config(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024,
                         feat_extract_norm="group", do_stable_layer_norm=False, attn_implementation="eager")
    model = Wav2Vec2Model(cfg)

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            return self.m(x, return_dict=False)[0]

    return Wrap(), (torch.randn(1, 16000),), ["input_values"]


def _whisper():
    import torch
    from transformers import WhisperConfig, WhisperModel
    cfg = WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, decoder_layers=1,
                        decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536, num_mel_bins=80,
                        attn_implementation="eager")
    enc = WhisperModel(cfg).encoder

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = enc

        def forward(self, x):
            return self.m(x, return_dict=False)[0]

    return Wrap(), (torch.randn(1, 80, 3000),), ["input_features"]


def _silero():
    import torch
    from torch import nn

    class Front(nn.Module):
        """An STFT as a strided Conv1d, magnitudes, a conv encoder."""

        def __init__(self, n_fft: int):
            super().__init__()
            self.bins = n_fft // 2 + 1
            self.stft = nn.Conv1d(1, 2 * self.bins, n_fft, stride=n_fft // 4, bias=False)
            self.enc = nn.Sequential(nn.Conv1d(self.bins, 128, 3, padding=1), nn.ReLU(),
                                     nn.Conv1d(128, 64, 3, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv1d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv1d(64, 128, 3, padding=1), nn.ReLU())

        def forward(self, x):
            s = self.stft(x.unsqueeze(1))
            re, im = s[:, :self.bins], s[:, self.bins:]
            return self.enc(torch.sqrt(re * re + im * im))

    class SileroLike(nn.Module):
        def __init__(self):
            super().__init__()
            self.f16 = Front(256)
            self.f8 = Front(128)
            self.cell = nn.LSTMCell(128, 128)
            self.dec = nn.Conv1d(128, 1, 1)

        def forward(self, x, h, c, sr):
            if bool(sr == 16000):
                f = self.f16(x)
            else:
                f = self.f8(x[:, ::2])
            outs = []
            for t in range(f.shape[2]):
                h, c = self.cell(f[:, :, t], (h, c))
                outs.append(h)
            y = torch.sigmoid(self.dec(torch.stack(outs, 2))).mean(2)
            return y, h, c

    m = torch.jit.script(SileroLike().eval())
    return m, (torch.randn(1, 4096), torch.zeros(1, 128), torch.zeros(1, 128), torch.tensor(16000)), \
        ["input", "h", "c", "sr"]


# -- classic ML ---------------------------------------------------------------------------------
def _ml_data(n_features=20, classes=3, n=2000):
    from sklearn.datasets import make_classification
    x, y = make_classification(n_samples=n, n_features=n_features, n_informative=10, n_classes=classes,
                               random_state=0)
    return x.astype(np.float32), y


def _skl(kind):
    def make():
        from skl2onnx import to_onnx
        x, y = _ml_data()
        if kind == "rf":
            from sklearn.ensemble import RandomForestClassifier
            est = RandomForestClassifier(n_estimators=100, max_depth=10, random_state=0).fit(x, y)
        elif kind == "svc":
            from sklearn.svm import SVC
            est = SVC(kernel="rbf", random_state=0).fit(x[:500], y[:500])
        else:
            from sklearn.neighbors import KNeighborsClassifier
            est = KNeighborsClassifier(n_neighbors=5).fit(x[:1000], y[:1000])
        onx = to_onnx(est, x[:1], options={id(est): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
        return onx, {"X": x[:ROWS]}
    return make


def _lgbm():
    import lightgbm
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType
    x, y = _ml_data()
    est = lightgbm.LGBMClassifier(n_estimators=200, num_leaves=31, random_state=0, verbose=-1).fit(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onx = convert_lightgbm(est, initial_types=[("X", FloatTensorType([None, x.shape[1]]))], target_opset=15,
                               zipmap=False)
    return onx, {"X": x[:ROWS]}


#: family -> (group, maker): a torch maker returns (module, example inputs, input names); a
#: classic-ML maker returns (onnx model, feeds)
FAMILIES = {
    "resnet50": ("cnn", _resnet50),
    "yolov8n_320": ("cnn", _yolo(320)),
    "yolov8n_640": ("cnn", _yolo(640)),
    "convnext": ("cnn", _timm("convnext_atto", 224)),
    "mobilevit": ("cnn", _timm("mobilevitv2_050", 256)),
    "bert_base": ("transformer", _bert),
    "qwen2_step": ("transformer", _qwen2),
    "wav2vec2": ("audio", _wav2vec2),
    "whisper_enc": ("audio", _whisper),
    "silero": ("audio", _silero),
    "lgbm": ("classic", _lgbm),
    "rf": ("classic", _skl("rf")),
    "svc": ("classic", _skl("svc")),
    "knn": ("classic", _skl("knn")),
}
GROUPS = ("cnn", "transformer", "audio", "classic")


def _versions() -> str:
    import importlib.metadata as md
    vs = []
    for p in ("torch", "torchvision", "timm", "ultralytics", "transformers", "lightgbm", "onnxmltools",
              "scikit-learn", "skl2onnx"):
        try:
            vs.append(f"{p}={md.version(p)}")
        except md.PackageNotFoundError:
            vs.append(f"{p}=-")
    return ",".join(vs)


def export(name: str) -> tuple[Path, dict]:
    """The family's ONNX file (exported once, cached under bench/results/models/) and its feeds."""
    group, make = FAMILIES[name]
    src = "".join(inspect.getsource(f) for f in (make, _ml_data, _seed_norms, export))
    key = hashlib.sha256((src + _versions() + name + str(OPSET) + str(ROWS)).encode()).hexdigest()[:12]
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}-{key}.onnx"
    feeds_path = path.with_suffix(".npz")
    if path.exists() and feeds_path.exists():
        with np.load(feeds_path) as z:
            return path, {k: z[k] for k in z.files}
    if group == "classic":
        onx, feeds = make()
        path.write_bytes(onx.SerializeToString())
    else:
        import onnx
        import torch
        _torchvision_ops()
        torch.manual_seed(0)
        model, inputs, names = make()
        if not isinstance(model, torch.jit.ScriptModule):
            _seed_norms(model.eval())
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            buf = io.BytesIO()
            torch.onnx.export(model, inputs, buf, dynamo=False, opset_version=OPSET, input_names=names,
                              do_constant_folding=True)
        m = onnx.load_from_string(buf.getvalue())
        del m.metadata_props[:]
        path.write_bytes(m.SerializeToString())
        feeds = {n: t.numpy() for n, t in zip(names, inputs)}
    np.savez(feeds_path, **feeds)
    return path, feeds


def _ulp(a, b) -> int:
    """The largest difference in float32 units in the last place between two arrays."""
    a = np.asarray(a, np.float32).ravel()
    b = np.asarray(b, np.float32).ravel()
    ok = np.isfinite(a) & np.isfinite(b)
    ia = a[ok].view(np.int32).astype(np.int64)
    ib = b[ok].view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, np.int64(-2**31) - ia, ia)
    ib = np.where(ib < 0, np.int64(-2**31) - ib, ib)
    return int(np.max(np.abs(ia - ib))) if ia.size else 0


def main(argv=None):
    import models as mb
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 timed runs per model, short budgets")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default=None, help="comma-separated families: " + ",".join(FAMILIES))
    ap.add_argument("--skip", default=None, help="comma-separated families to leave out")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    if args.list:
        for f, (g, _) in FAMILIES.items():
            print(f"{f:14s} {g}")
        return
    threads = [int(t) for t in args.threads.split(",")]
    repeat = args.repeat or (5 if args.quick else 20)
    budget = 3.0 if args.quick else 20.0
    fams = args.only.split(",") if args.only else list(FAMILIES)
    if args.skip:
        fams = [f for f in fams if f not in args.skip.split(",")]
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        ap.error(f"unknown families {bad}; known: {', '.join(FAMILIES)}")
    import numba
    import onnxruntime as ort
    import torch
    torch.set_num_threads(1)
    ort.set_default_logger_severity(3)
    print(f"python {platform.python_version()}, cores {os.cpu_count()}, numba {numba.__version__}, "
          f"onnxruntime {ort.__version__}, {_versions()}, load {os.getloadavg()}", flush=True)
    t0 = time.perf_counter()
    rows = []
    for f in fams:
        try:
            path, feeds = export(f)
        except Exception as e:   # a library that cannot build or export the model here: say so
            print(f"  {f}: not exported ({type(e).__name__}: {str(e)[:300]})", flush=True)
            rows.append(dict(family=f, nodes=0, declined=[f"export failed: {type(e).__name__}: {str(e)[:200]}"]))
            continue
        mb.export = lambda name, _p=path, _f=feeds: (_p, _f)
        try:
            r = mb.bench_family(f, threads, repeat, budget)
        except Exception as e:
            print(f"  {f}: failed ({type(e).__name__}: {str(e)[:300]})", flush=True)
            rows.append(dict(family=f, nodes=0, declined=[f"run failed: {type(e).__name__}: {str(e)[:200]}"]))
            continue
        r["group"] = FAMILIES[f][0]
        rows.append(r)
        if "declined" in r:
            print(f"  {f}: declined {r['declined']}", flush=True)
        else:
            print(f"  {f}: " + ", ".join(f"{t}t x{b['ratio']:.2f} ({b['ours_ms']:.2f} vs {b['ort_ms']:.2f} ms, "
                                         f"cpu x{b['ratio_cpu']:.2f}, ulp {b.get('max_ulp', '-')})"
                                         for t, b in r["by_threads"].items()), flush=True)
    text, gm = mb.table(rows, threads)
    print("\n## Real models, ours / onnxruntime (median wall; > 1: ours slower)\n")
    print(text)
    print("\n| group | " + " | ".join(f"geomean wall ({t}t) | geomean cpu ({t}t)" for t in threads) + " |")
    print("|---|" + "---|---|" * len(threads))
    for g in GROUPS + ("all",):
        sel = [r for r in rows if "by_threads" in r and (g == "all" or r.get("group") == g)]
        cells = []
        for t in threads:
            cells.append(f"{mb._geomean([r['by_threads'][t]['ratio'] for r in sel]):.2f}")
            cells.append(f"{mb._geomean([r['by_threads'][t]['ratio_cpu'] for r in sel]):.2f}")
        print(f"| {g} ({len(sel)}) | " + " | ".join(cells) + " |")
    print(f"\ntotal bench time {time.perf_counter() - t0:.0f} s, load {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(rows=rows, geomean=gm), indent=2, default=str))


if __name__ == "__main__":
    main()
