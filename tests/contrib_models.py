"""Models as onnxruntime's own tools write them, generated here (never downloaded).

Each builder makes tiny models with seeded random weights -- torch modules and Hugging Face
configurations of 1 layer, hidden 32 (64 where onnxruntime's kernels want head sizes of 16) --
exports them with torch's TorchScript exporter and passes them through one of onnxruntime's
tools:

* ``onnxruntime.transformers.optimizer`` (BERT with Attention or MultiHeadAttention, GPT-2,
  ViT, a Llama decoder, a CLIP text encoder);
* ``onnxruntime.quantization``: ``quantize_dynamic`` (a fused BERT: QAttention,
  QEmbedLayerNormalization; a raw BERT; an LSTM: DynamicQuantizeLSTM), ``quantize_static``
  with a small calibration reader (a CNN as QOperator, QDQ, and QDQ int16 with
  com.microsoft's Q/DQ), and ``matmul_nbits_quantizer`` (4-bit MatMulNBits, with zero points
  on BERT, symmetric with GatherBlockQuantized on the Llama decoder);
* onnxruntime's session graph optimiser at the extended level (``optimized_model_filepath``:
  FusedMatMul, QuickGelu, FusedGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul);
* onnxruntime-genai's model builder (``onnxruntime_genai.models.builder``) on a randomly
  initialised local Hugging Face model directory (an int4 Qwen2 and an fp32 Llama: GroupQuery
  Attention with rotary, MatMulNBits with accuracy_level 4) -- when onnxruntime-genai is
  installed.

:func:`build` writes one model and returns a :class:`Case` (the path, feeds, bindings and the
comparison tolerance); the test module caches them per session.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Case:
    name: str
    path: Path
    feeds: dict
    input_shapes: dict
    dim_values: dict = field(default_factory=dict)
    atol: float = 1e-5
    """Largest absolute difference allowed against onnxruntime (float outputs)."""
    ops: tuple = ()
    """com.microsoft (and onnxruntime default-domain) op types the tool wrote."""
    ort_options: dict = field(default_factory=dict)
    """onnxruntime session settings for the comparison (``graph_optimization_level``)."""


def _torch():
    import torch
    # torchvision's PyPI wheel is a CUDA build whose ops (nms, roi_align) the CPU torch lacks; when
    # it is installed, transformers imports it from its model modules and fails. These models need
    # no torchvision: transformers is told it is absent
    import transformers.utils.import_utils as iu
    iu._torchvision_available = False
    # transformers 4.57's masks are built with torch.vmap, which the TorchScript tracer cannot
    # follow; its pre-2.6 code path builds the same masks with plain tensor ops
    import transformers.masking_utils as mu
    mu.sdpa_mask = mu.sdpa_mask_older_torch
    mu._is_torch_greater_or_equal_than_2_6 = False
    return torch


def _export(model, args, names, path, opset=17, dynamic=None):
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), input_names=names, opset_version=opset, dynamo=False,
                          dynamic_axes=dynamic)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _bert_export(d: Path) -> Path:
    torch = _torch()
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    m = BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=32, attn_implementation="eager")).eval()
    ids = torch.randint(0, 100, (1, 8))
    p = d / "bert.onnx"
    if not p.exists():
        _export(m, (ids, torch.ones(1, 8, dtype=torch.int64), torch.zeros(1, 8, dtype=torch.int64)),
                ["input_ids", "attention_mask", "token_type_ids"], p,
                dynamic={k: {0: "batch", 1: "seq"} for k in ("input_ids", "attention_mask", "token_type_ids")})
    return p


def _bert_feeds(B=2, S=8):
    r = _rng(1)
    mask = np.ones((B, S), np.int64)
    mask[-1, S - 2:] = 0          # one padded sequence: the masks are exercised
    return {"input_ids": r.integers(0, 100, (B, S)).astype(np.int64), "attention_mask": mask,
            "token_type_ids": (r.integers(0, 2, (B, S))).astype(np.int64)}


def _optimize(src: Path, dst: Path, model_type, heads, hidden, **fusion):
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model
    fo = FusionOptions(model_type)
    for k, v in fusion.items():
        setattr(fo, k, v)
    with _quiet():
        opt = optimize_model(str(src), model_type=model_type, num_heads=heads, hidden_size=hidden,
                             optimization_options=fo)
        opt.save_model_to_file(str(dst))
    return dst


@contextlib.contextmanager
def _quiet():
    import logging
    old = logging.root.level
    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)
            logging.root.setLevel(old)


def _ort_extended(src: Path, dst: Path) -> Path:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    return dst


def _bert_case(name, p, ops, atol=1e-5, **kw):
    f = _bert_feeds()
    return Case(name, p, f, {k: v.shape for k, v in f.items()}, ops=ops, atol=atol, **kw)


# -- the builders -------------------------------------------------------------------------------
def bert_attention(d):
    p = _optimize(_bert_export(d), d / "bert_opt.onnx", "bert", 2, 32)
    return _bert_case("bert_attention", p, ("Attention", "EmbedLayerNormalization", "SkipLayerNormalization",
                                            "BiasGelu"))


def bert_mha(d):
    p = _optimize(_bert_export(d), d / "bert_mha.onnx", "bert", 2, 32, use_multi_head_attention=True)
    return _bert_case("bert_mha", p, ("MultiHeadAttention", "EmbedLayerNormalization", "SkipLayerNormalization"))


def bert_quantize_dynamic(d):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    src = d / "bert_opt.onnx"
    if not src.exists():
        bert_attention(d)
    p = d / "bert_qdyn.onnx"
    with _quiet():
        quantize_dynamic(str(src), str(p), weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": 1})
    return _bert_case("bert_quantize_dynamic", p, ("QAttention", "QEmbedLayerNormalization"))


def bert_nbits(d):
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    src = d / "bert_opt.onnx"
    if not src.exists():
        bert_attention(d)
    p = d / "bert_nbits.onnx"
    with _quiet():
        q = MatMulNBitsQuantizer(onnx.load(str(src)), block_size=16, is_symmetric=False)
        q.process()
        q.model.save_model_to_file(str(p))
    return _bert_case("bert_nbits", p, ("MatMulNBits",))


def bert_ort_extended(d):
    p = _ort_extended(_bert_export(d), d / "bert_ortx.onnx")
    return _bert_case("bert_ort_extended", p, ("FusedGemm", "BiasGelu"))


def bert_quantize_dynamic_ort(d):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    q = d / "bert_raw_qdyn.onnx"
    with _quiet():
        quantize_dynamic(str(_bert_export(d)), str(q), weight_type=QuantType.QInt8)
    p = _ort_extended(q, d / "bert_raw_qdyn_ortx.onnx")
    return _bert_case("bert_quantize_dynamic_ort", p, ("MatMulIntegerToFloat", "DynamicQuantizeMatMul", "Gelu"))


def gpt2(d):
    torch = _torch()
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    m = GPT2Model(GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2, n_positions=32, use_cache=False,
                             attn_implementation="eager")).eval()
    src = d / "gpt2.onnx"
    _export(m, (torch.randint(0, 100, (1, 8)), None, None, None, torch.ones(1, 8, dtype=torch.int64)),
            ["input_ids", "attention_mask"], src)
    p = _optimize(src, d / "gpt2_opt.onnx", "gpt2", 2, 32)
    f = {"input_ids": _rng(2).integers(0, 100, (1, 8)).astype(np.int64), "attention_mask": np.ones((1, 8), np.int64)}
    return Case("gpt2", p, f, {k: v.shape for k, v in f.items()}, ops=("FastGelu", "SkipLayerNormalization"))


def vit(d):
    torch = _torch()
    from transformers import ViTConfig, ViTModel
    torch.manual_seed(0)
    m = ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                           image_size=16, patch_size=8, attn_implementation="eager")).eval()
    src = d / "vit.onnx"
    _export(m, (torch.randn(1, 3, 16, 16),), ["pixel_values"], src)
    p = _optimize(src, d / "vit_opt.onnx", "vit", 2, 32)
    f = {"pixel_values": _rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    return Case("vit", p, f, {"pixel_values": (1, 3, 16, 16)}, ops=("Gelu", "SkipLayerNormalization"))


class _Wrap:
    """A torch module calling a Hugging Face model with keyword arguments."""

    @staticmethod
    def of(m, **fixed):
        torch = _torch()

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, *args):
                out = self.m(*args, **fixed)
                return out.last_hidden_state
        return W()


def _llama_export(d):
    torch = _torch()
    from transformers import LlamaConfig, LlamaModel
    torch.manual_seed(0)
    m = LlamaModel(LlamaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                               num_key_value_heads=2, intermediate_size=64, max_position_embeddings=32,
                               attn_implementation="eager")).eval()
    src = d / "llama.onnx"
    if not src.exists():
        _export(_Wrap.of(m, use_cache=False), (torch.randint(0, 100, (1, 8)), torch.ones(1, 8, dtype=torch.int64)),
                ["input_ids", "attention_mask"], src)
    return src


def _llama_feeds():
    return {"input_ids": _rng(4).integers(0, 100, (1, 8)).astype(np.int64), "attention_mask": np.ones((1, 8), np.int64)}


def llama(d):
    p = _optimize(_llama_export(d), d / "llama_opt.onnx", "gpt2", 4, 32)
    f = _llama_feeds()
    return Case("llama", p, f, {k: v.shape for k, v in f.items()},
                ops=("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"))


def llama_nbits_gather(d):
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    src = d / "llama_opt.onnx"
    if not src.exists():
        llama(d)
    p = d / "llama_nbits.onnx"
    with _quiet():
        q = MatMulNBitsQuantizer(onnx.load(str(src)), block_size=16, is_symmetric=True,
                                 op_types_to_quantize=("MatMul", "Gather"),
                                 quant_axes=(("MatMul", 0), ("Gather", 1)))
        q.process()
        q.model.save_model_to_file(str(p))
    f = _llama_feeds()
    return Case("llama_nbits_gather", p, f, {k: v.shape for k, v in f.items()},
                ops=("GatherBlockQuantized", "MatMulNBits"))


def clip_ort_extended(d):
    torch = _torch()
    from transformers import CLIPTextConfig, CLIPTextModel
    torch.manual_seed(0)
    m = CLIPTextModel(CLIPTextConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=2, max_position_embeddings=16,
                                     attn_implementation="eager")).eval()
    src = d / "clip.onnx"
    _export(_Wrap.of(m), (torch.randint(0, 100, (1, 8)),), ["input_ids"], src)
    p = _ort_extended(src, d / "clip_ortx.onnx")
    f = {"input_ids": _rng(5).integers(0, 100, (1, 8)).astype(np.int64)}
    return Case("clip_ort_extended", p, f, {"input_ids": (1, 8)}, ops=("FusedMatMul", "QuickGelu"))


def _cnn_export(d):
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(0)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            self.c3 = nn.Conv2d(8, 8, 1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            a = nn.functional.leaky_relu(self.c1(x), 0.1)
            b = torch.sigmoid(self.c2(a))
            c = a + b
            e = nn.functional.avg_pool2d(c * torch.sigmoid(self.c3(c)), 2)
            g = torch.cat([e, nn.functional.relu(e)], 1)
            return torch.softmax(self.fc(nn.functional.adaptive_avg_pool2d(g, 1).flatten(1)), -1)

    src = d / "cnn.onnx"
    if not src.exists():
        _export(CNN().eval(), (torch.randn(1, 3, 8, 8),), ["x"], src, opset=13)
    return src


def _calibration():
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": _rng(10 + i).standard_normal((1, 3, 8, 8)).astype(np.float32)} for i in range(4)])

        def get_next(self):
            return next(self.it, None)
    return Reader()


def _cnn_case(name, p, ops, atol, **kw):
    f = {"x": _rng(6).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    return Case(name, p, f, {"x": (1, 3, 8, 8)}, ops=ops, atol=atol, **kw)


def cnn_qoperator(d):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    p = d / "cnn_qop.onnx"
    with _quiet():
        quantize_static(str(_cnn_export(d)), str(p), _calibration(), quant_format=QuantFormat.QOperator,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    # outputs are a softmax quantised in steps of 1/255: onnxruntime's integer shortcuts may land
    # one step away where a value sits on a rounding boundary
    return _cnn_case("cnn_qoperator", p, ("QLinearLeakyRelu", "QLinearSigmoid", "QLinearAdd", "QLinearMul",
                                          "QLinearAveragePool", "QLinearConcat", "QLinearGlobalAveragePool",
                                          "QGemm", "QLinearSoftmax"), atol=1 / 255 + 1e-6)


def cnn_qdq(d):
    from onnxruntime.quantization import QuantFormat, quantize_static
    p = d / "cnn_qdq.onnx"
    with _quiet():
        quantize_static(str(_cnn_export(d)), str(p), _calibration(), quant_format=QuantFormat.QDQ)
    # compared with onnxruntime running the graph as written (its default level fuses the QDQ
    # pairs into QLinear kernels, whose integer shortcuts may land one quantisation step away)
    return _cnn_case("cnn_qdq", p, (), atol=1e-6, ort_options={"graph_optimization_level": "disable"})


def cnn_qdq_int16_contrib(d):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    p = d / "cnn_qdq16.onnx"
    with _quiet():
        quantize_static(str(_cnn_export(d)), str(p), _calibration(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt16, weight_type=QuantType.QInt8,
                        extra_options={"UseQDQContribOps": True})
    return _cnn_case("cnn_qdq_int16_contrib", p, ("QuantizeLinear", "DequantizeLinear"), atol=1e-6,
                     ort_options={"graph_optimization_level": "disable"})


def lstm_quantize_dynamic(d):
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(0)

    class L(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 16, batch_first=True)
            self.fc = nn.Linear(16, 4)

        def forward(self, x):
            return self.fc(self.lstm(x)[0])

    src = d / "lstm.onnx"
    _export(L().eval(), (torch.randn(1, 5, 8),), ["x"], src, opset=14)
    from onnxruntime.quantization import QuantType, quantize_dynamic
    p = d / "lstm_qdyn.onnx"
    with _quiet():
        quantize_dynamic(str(src), str(p), weight_type=QuantType.QInt8)
    f = {"x": _rng(7).standard_normal((1, 5, 8)).astype(np.float32)}
    return Case("lstm_quantize_dynamic", p, f, {"x": (1, 5, 8)}, ops=("DynamicQuantizeLSTM",))


# -- onnxruntime-genai's model builder ---------------------------------------------------------
def genai_available() -> str | None:
    """None when onnxruntime-genai's builder can run here, else why not."""
    try:
        import importlib.util
        if importlib.util.find_spec("onnxruntime_genai") is None:
            return "onnxruntime-genai is not installed (pip install onnxruntime-genai)"
    except Exception as e:  # noqa: BLE001
        return str(e)
    return None


def _genai_builder():
    """onnxruntime-genai's builder module. Its 0.18 release imports model classes that
    transformers 4.57 lacks (Qwen3.5, ...); those names get placeholder classes first (they are
    used only for those model families), so that the builder runs for Llama and Qwen2."""
    import importlib.util
    import transformers
    base = Path(importlib.util.find_spec("onnxruntime_genai").origin).parent / "models" / "builders" / "base.py"
    m = re.search(r"from transformers import \((.*?)\)", base.read_text(), re.S)
    for name in (x.strip() for x in (m.group(1).split(",") if m else [])):
        if name and not hasattr(transformers, name):
            setattr(transformers, name, type(name, (), {}))
    from onnxruntime_genai.models import builder
    return builder


def _genai(d: Path, kind: str, precision: str) -> Path:
    torch = _torch()
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = dict(vocab_size=128, hidden_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
               intermediate_size=96, max_position_embeddings=64, rope_scaling={"rope_type": "default"})
    hf = d / f"hf_{kind}"
    if kind == "qwen2":
        m = Qwen2ForCausalLM(Qwen2Config(**cfg))
    else:
        m = LlamaForCausalLM(LlamaConfig(**cfg))
    m.save_pretrained(hf)
    tk = Tokenizer(models.WordLevel({f"t{i}": i for i in range(128)}, unk_token="t0"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="t0", bos_token="t1", eos_token="t2",
                            pad_token="t0").save_pretrained(hf)
    b = _genai_builder()
    out = d / f"genai_{kind}_{precision}"
    with _quiet(), contextlib.redirect_stdout(open(os.devnull, "w")):
        opts = b.parse_extra_options(None, str(hf), str(out), precision, "cpu", str(d / "hf_cache"), [])
        b.create_model(None, str(hf), str(out), precision, "cpu", str(d / "hf_cache"), **opts)
    return out / "model.onnx"


def _genai_case(name, p, S, P, ops):
    r = _rng(8)
    f = {"input_ids": r.integers(0, 128, (1, S)).astype(np.int64), "attention_mask": np.ones((1, S + P), np.int64)}
    for k in ("key", "value"):
        f[f"past_key_values.0.{k}"] = r.standard_normal((1, 2, P, 16)).astype(np.float32)
    return Case(name, p, f, {k: v.shape for k, v in f.items()}, dim_values={"kv_cache_dim": 16}, ops=ops)


def genai_qwen2_int4(d):
    p = _genai(d, "qwen2", "int4")
    return _genai_case("genai_qwen2_int4", p, 8, 0, ("GroupQueryAttention", "MatMulNBits",
                                                     "SkipSimplifiedLayerNormalization",
                                                     "SimplifiedLayerNormalization"))


def genai_llama_fp32_decode(d):
    p = _genai(d, "llama", "fp32")
    return _genai_case("genai_llama_fp32_decode", p, 1, 7, ("GroupQueryAttention",))


BUILDERS = {f.__name__: f for f in (
    bert_attention, bert_mha, bert_quantize_dynamic, bert_nbits, bert_ort_extended, bert_quantize_dynamic_ort,
    gpt2, vit, llama, llama_nbits_gather, clip_ort_extended, cnn_qoperator, cnn_qdq, cnn_qdq_int16_contrib,
    lstm_quantize_dynamic, genai_qwen2_int4, genai_llama_fp32_decode)}
GENAI = ("genai_qwen2_int4", "genai_llama_fp32_decode")


def build(name: str, d: Path) -> Case:
    d.mkdir(parents=True, exist_ok=True)
    return BUILDERS[name](d)
