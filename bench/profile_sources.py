"""Build the capability profiles under ``hetero_explore/providers/profiles/`` from
their published sources.

    python bench/profile_sources.py --src DIR            # write the JSON profiles
    python bench/profile_sources.py --src DIR --check    # only compare with the files in the repo
    python bench/profile_sources.py --contrib bench/profile_sources_contrib.md [--check]
                                                  # the contrib rows of ort-cuda / directml

``DIR`` holds the source files named in ``SOURCES`` below (download each from its
``url`` at the recorded commit; for the pages of onnxruntime's gh-pages branch,
save the operator table itself, from its header row to its last row). Each
profile records the file's sha256, so a refresh shows what changed.

How each table is read (nothing a table does not state is claimed):

* ``ort_kernels`` (onnxruntime's ``docs/OperatorKernels.md``, generated from the
  kernels each EP registers): an op is claimed for the schema versions of its
  rows (``13+``, ``[6, 12]``, ``13``), with the types of the type constraint of
  its first input in that row (``T`` of ``*in* X:**T**``), or that input's fixed
  type. Only the ``ai.onnx`` and ``ai.onnx.ml`` domains are read here; the CUDA and
  DirectML tables' ``com.microsoft`` rows come from ``--contrib`` (a transcription of a later
  copy of the same file, ``bench/profile_sources_contrib.md``) into ``profiles/contrib/``.
* ``ep_notes`` (the ``|ai.onnx:Op|Note|`` tables of the CoreML, NNAPI and QNN
  EP docs): an op is claimed at every opset with any dtype — those tables state
  neither — under the conditions of its note. ``com.microsoft`` rows are left out.
* ``trt_matrix`` (onnx-tensorrt's ``docs/operators.md``): rows marked ``Y``,
  with their listed types, within the opset range the page states for the release.
* ``openvino_coverage`` (the "Support Coverage" table of onnxruntime's OpenVINO
  EP page): rows whose column for the chosen device says ``Yes``; an op listed
  twice with different answers is not claimed.

A note's conditions are checked where ``CONDITIONS`` below encodes them; each
encoded condition quotes the sentence of the note it enforces (the script fails
if that text is not in the note). Note fragments that no condition fully encodes
are kept as ``unchecked``: the provider accepts the node and says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "hetero_explore" / "providers" / "profiles"
ORT = "microsoft/onnxruntime"
ORT_SNAPSHOT = "0c2f0ba90da11ad53c63810e5f3e6fda4e295899"  # main, 2024-01-25, VERSION_NUMBER 1.18.0

SOURCES = {
    "ort-cuda": dict(
        ep="CUDAExecutionProvider", device="gpu:0", parser="ort_kernels", section="CUDAExecutionProvider",
        file="OperatorKernels.md", repository=ORT, path="docs/OperatorKernels.md", commit=ORT_SNAPSHOT,
        url=f"https://github.com/{ORT}/blob/{ORT_SNAPSHOT}/docs/OperatorKernels.md",
        version="onnxruntime main at 2024-01-25 (VERSION_NUMBER 1.18.0, after the 1.17 branch)",
        title="onnxruntime CUDA execution provider (kernels registered per opset and type)"),
    "directml": dict(
        ep="DmlExecutionProvider", device="dml:0", parser="ort_kernels", section="DmlExecutionProvider",
        file="OperatorKernels.md", repository=ORT, path="docs/OperatorKernels.md", commit=ORT_SNAPSHOT,
        url=f"https://github.com/{ORT}/blob/{ORT_SNAPSHOT}/docs/OperatorKernels.md",
        version="onnxruntime main at 2024-01-25 (VERSION_NUMBER 1.18.0, after the 1.17 branch)",
        title="onnxruntime DirectML execution provider (kernels registered per opset and type)"),
    "tensorrt": dict(
        ep="TensorrtExecutionProvider", device="gpu:0", parser="trt_matrix",
        file="trt_operators.md", repository="onnx/onnx-tensorrt", path="docs/operators.md",
        commit="96e781103cfc4adf4a6bb557e94bac8e693f6f4c",
        url="https://github.com/onnx/onnx-tensorrt/blob/96e781103cfc4adf4a6bb557e94bac8e693f6f4c/docs/operators.md",
        version="onnx-tensorrt release/10.1-GA (2024-06-17); the page describes TensorRT 10.0",
        title="TensorRT's ONNX parser (the TensorRT execution provider's op support)"),
    "coreml": dict(
        ep="CoreMLExecutionProvider", device="ane:0", parser="ep_notes",
        file="coreml_supported_ops.md", repository=ORT, path="tools/ci_build/github/apple/coreml_supported_ops.md",
        commit=ORT_SNAPSHOT,
        url=f"https://github.com/{ORT}/blob/{ORT_SNAPSHOT}/tools/ci_build/github/apple/coreml_supported_ops.md",
        version="onnxruntime main at 2024-01-25 (VERSION_NUMBER 1.18.0); NeuralNetwork model format (the EP's default)",
        title="onnxruntime CoreML execution provider, NeuralNetwork format"),
    "coreml-mlprogram": dict(
        ep="CoreMLExecutionProvider", device="ane:0", parser="ep_notes",
        file="coreml_supported_mlprogram_ops.md", repository=ORT,
        path="tools/ci_build/github/apple/coreml_supported_mlprogram_ops.md",
        commit="9969c9a116aaf0c7464582d8a99951e42b423b40",
        url=f"https://github.com/{ORT}/blob/9969c9a116aaf0c7464582d8a99951e42b423b40/"
            "tools/ci_build/github/apple/coreml_supported_mlprogram_ops.md",
        version="onnxruntime main at commit 9969c9a (ModelFormat=MLProgram, Core ML 5+)",
        title="onnxruntime CoreML execution provider, MLProgram format",
        copy="the whole file, copied by hand from a stored copy of that commit (no clone at hand)"),
    "nnapi": dict(
        ep="NnapiExecutionProvider", device="npu:0", parser="ep_notes",
        file="nnapi_supported_ops.md", repository=ORT, path="tools/ci_build/github/android/nnapi_supported_ops.md",
        commit=ORT_SNAPSHOT,
        url=f"https://github.com/{ORT}/blob/{ORT_SNAPSHOT}/tools/ci_build/github/android/nnapi_supported_ops.md",
        version="onnxruntime main at 2024-01-25 (VERSION_NUMBER 1.18.0)",
        title="onnxruntime NNAPI execution provider (Android)"),
    "qnn": dict(
        ep="QNNExecutionProvider", device="htp:0", parser="ep_notes",
        file="qnn_supported_ops.md", repository=ORT, path="docs/execution-providers/QNN-ExecutionProvider.md",
        branch="gh-pages", commit=None,
        url="https://onnxruntime.ai/docs/execution-providers/QNN-ExecutionProvider.html#supported-onnx-operators",
        version="onnxruntime docs (gh-pages) as read in 2026-12; the table cites ORT 1.18.0 and QAIRT SDK 2.48",
        title="onnxruntime QNN execution provider (Qualcomm)",
        copy="the 'Supported ONNX operators' table only, copied by hand from a stored copy of the page"),
    "openvino": dict(
        ep="OpenVINOExecutionProvider", device="igpu:0", parser="openvino_coverage", column="GPU",
        file="openvino_ep_support_coverage.md", repository=ORT,
        path="docs/execution-providers/OpenVINO-ExecutionProvider.md", branch="gh-pages",
        commit="2f66a5061e8e60ea6da50a5253c1cc391b301f54",
        url="https://onnxruntime.ai/docs/execution-providers/OpenVINO-ExecutionProvider.html#support-coverage",
        version="onnxruntime 1.16.0 with OpenVINO 2023.1 (OpenVINO EP v5.1); the table's GPU column (Intel GPUs)",
        title="onnxruntime OpenVINO execution provider on an Intel GPU",
        copy="the 'Support Coverage' table only, copied by hand from a stored copy of the page at that commit"),
}

# -- conditions encoded from the notes ------------------------------------------------
# kinds (checked by hetero_explore.providers.profiles):
#   input_rank   {input, ranks | min}        the input's rank is one of ranks (or >= min)
#   const_input  {inputs}                     each of these inputs, when present, is an initializer
#   attr_in      {attr, values}               the attribute (or its schema default) is one of values
#   attr_absent  {attrs}                      none of these attributes is set
#   attr_all_ones {attr}                      the attribute is unset, empty or all ones
#   input_dtype  {inputs | "all", dtypes}     those inputs have one of these dtypes
#   outputs_absent {outputs}                  these optional outputs are not used
#   const_or_attr {input, attr, value}        the input is an initializer, or attr == value
POOL2D = "Only 2D Pool is supported."
POOL2D_ML = "Only 2D Pool is supported currently."
_R = {"kind": "input_rank", "input": 0}
REDUCE_AXES = {op: [dict(kind="const_input", inputs=[1], text="`axes` must be an initializer")]
               for op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                          "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")}
CONDITIONS = {
    "coreml": {
        **{op: [dict(_R, ranks=[4], text=POOL2D)]
           for op in ("AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool")},
        "Conv": [dict(_R, ranks=[3, 4], text="Only 1D/2D Conv is supported."),
                 dict(kind="const_input", inputs=[1, 2], text="Weights and bias should be constant.")],
        "DepthToSpace": [dict(kind="attr_in", attr="mode", values=["DCR"],
                              text="Only DCR mode DepthToSpace is supported.")],
        "Gather": [dict(kind="input_rank", input=1, min=1, text="Input `indices` with scalar value is not supported.")],
        "Gemm": [dict(kind="const_input", inputs=[1], text="Input B should be constant.")],
        "MatMul": [dict(kind="const_input", inputs=[1], text="Input B should be constant.")],
        "Pad": [dict(kind="attr_in", attr="mode", values=["constant"], text="Only constant mode"),
                dict(kind="const_input", inputs=[1, 2], text="Input pads and constant_value should be constant."),
                dict(kind="const_input", inputs=[3], text="If provided, axes should be constant.")],
        "Pow": [dict(kind="input_dtype", inputs="all", dtypes=["float32"],
                     text="Only supports cases when both inputs are fp32.")],
        "PRelu": [dict(kind="const_input", inputs=[1], text="Input slope should be constant.")],
        "Shape": [dict(kind="attr_in", attr="start", values=[0],
                       text="Attribute `start` with non-default value is not supported."),
                  dict(kind="attr_absent", attrs=["end"], text="Attribute `end` is not supported.")],
        "Slice": [dict(kind="const_input", inputs=[1, 2, 3, 4],
                       text="Inputs `starts`, `ends`, `axes`, and `steps` should be constant.")],
        "Split": [dict(kind="const_input", inputs=[1], text="If provided, `splits` should be constant.")],
    },
    "coreml-mlprogram": {
        **{op: [dict(_R, ranks=[4], text=POOL2D_ML)]
           for op in ("AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool")},
        "Conv": [dict(_R, ranks=[3, 4], text="Only 1D/2D Conv is supported."),
                 dict(kind="const_input", inputs=[2], text="Bias if provided must be constant.")],
        "ConvTranspose": [dict(kind="const_input", inputs=[1, 2], text="Weight and bias must be constant."),
                          dict(kind="attr_in", attr="auto_pad", values=["NOTSET", "VALID"],
                               text="padding_type of SAME_UPPER/SAME_LOWER is not supported."),
                          dict(kind="attr_absent", attrs=["output_shape"], text="output_shape is not supported.")],
        "Gemm": [dict(kind="const_input", inputs=[1], text="Input B must be constant.")],
        "GridSample": [dict(_R, ranks=[4], text="4D input.")],
        "Pow": [dict(kind="input_dtype", inputs="all", dtypes=["float32"],
                     text="Only supports cases when both inputs are fp32.")],
        "Slice": [dict(kind="const_input", inputs=[1, 2, 3, 4],
                       text="starts/ends/axes/steps must be constant initializers.")],
        "Split": [dict(kind="const_input", inputs=[1], text="If provided, `splits` must be constant.")],
    },
    "nnapi": {
        **{op: [dict(_R, ranks=[4], text=POOL2D)]
           for op in ("AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool")},
        "Conv": [dict(_R, ranks=[4], text="Only 2D Conv is supported."),
                 dict(kind="const_input", inputs=[1, 2], text="Weights and bias should be constant.")],
        "DepthToSpace": [dict(kind="attr_in", attr="mode", values=["DCR"],
                              text="Only DCR mode DepthToSpace is supported.")],
        "DequantizeLinear": [dict(kind="const_input", inputs=[1, 2],
                                  text="All quantization scales and zero points should be constant.")],
        "QuantizeLinear": [dict(kind="const_input", inputs=[1, 2],
                                text="All quantization scales and zero points should be constant.")],
        "Gemm": [dict(kind="const_or_attr", input=1, attr="transB", value=1,
                      text="If input B is not constant, transB should be 1.")],
        "Pad": [dict(kind="attr_in", attr="mode", values=["constant"], text="Only constant mode Pad is supported."),
                dict(kind="const_input", inputs=[1, 2], text="Input pads and constant_value should be constant.")],
        "Resize": [dict(_R, ranks=[4], text="Only 2D Resize is supported.")],
        "Split": [dict(kind="const_input", inputs=[1], text="Input split should be constant if provided.")],
        "Squeeze": [dict(kind="const_input", inputs=[1], text="Input axes should be constant.")],
        "Unsqueeze": [dict(kind="const_input", inputs=[1], text="Input axes should be constant.")],
    },
    "qnn": {
        "IsInf": [dict(kind="input_dtype", inputs=[0], dtypes=["float32", "float16"],
                       text="float32 and float16 inputs only")],
        "LpNormalization": [dict(kind="attr_in", attr="p", values=[2], text="p == 2")],
        "LpPool": [dict(kind="attr_in", attr="p", values=[1, 2], text="p=1 or p=2 only")],
        "NonMaxSuppression": [dict(kind="attr_in", attr="center_point_box", values=[0],
                                   text="center_point_box must be 0 (diagonal corners)")],
        "OneHot": [dict(kind="const_input", inputs=[1, 2], text="depth and values must be constant initializers"),
                   dict(kind="input_dtype", inputs=[0], dtypes=["int32", "int64", "uint32"],
                        text="indices must be int32, int64, or uint32")],
        "Range": [dict(kind="const_input", inputs=[0, 1, 2],
                       text="All inputs (start, limit, delta) must be constant initializers")],
        "GRU": [dict(kind="attr_in", attr="layout", values=[0], text="layout=0 (batch-first) only")],
    },
    "tensorrt": {
        **REDUCE_AXES,
        "AveragePool": [dict(_R, ranks=[4, 5], text="2D or 3D Pooling only."),
                        dict(kind="attr_all_ones", attr="dilations", text="`dilations` must be empty or all ones")],
        "MaxPool": [dict(_R, ranks=[4, 5], text="2D or 3D pooling only."),
                    dict(kind="outputs_absent", outputs=[1], text="`Indices` output tensor unsupported."),
                    dict(kind="attr_all_ones", attr="dilations", text="`dilations` must be empty or all ones")],
        "LpPool": [dict(kind="attr_all_ones", attr="dilations", text="`dilations` must be empty or all ones")],
        "Constant": [dict(kind="attr_absent", attrs=["sparse_value", "value_string", "value_strings"],
                          text="`sparse_value`, `value_string`, and `value_strings` attributes are unsupported.")],
        "CumSum": [dict(kind="const_input", inputs=[1], text="`axis` must be an initializer")],
        "DeformConv": [dict(_R, ranks=[3, 4], text="`input` must have 1D or 2D spatial dimensions.")],
        "GridSample": [dict(_R, ranks=[4], text="Input must be 4D input.")],
        "LayerNormalization": [dict(kind="outputs_absent", outputs=[1, 2], text="Only the first output `Y` is supported.")],
        "LSTM": [dict(kind="attr_in", attr="input_forget", values=[0], text="`input_forget` attribute must be 0."),
                 dict(kind="attr_in", attr="layout", values=[0], text="`layout` attribute must be 0.")],
        "OneHot": [dict(kind="const_input", inputs=[1], text="`depth` must be a build-time constant")],
        "Pad": [dict(kind="const_input", inputs=[3], text="`axes` must be an initializer")],
        "Resize": [dict(kind="attr_in", attr="coordinate_transformation_mode",
                        values=["half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn", "asymmetric", "align_corners"],
                        text="Supported resize transformation modes: `half_pixel`, `pytorch_half_pixel`, "
                             "`tf_half_pixel_for_nn`, `asymmetric`, and `align_corners`."),
                   dict(kind="attr_in", attr="mode", values=["nearest", "linear"],
                        text="Supported resize modes: `nearest`, `linear`."),
                   dict(kind="attr_in", attr="nearest_mode",
                        values=["floor", "ceil", "round_prefer_floor", "round_prefer_ceil"],
                        text="Supported nearest modes: `floor`, `ceil`, `round_prefer_floor`, `round_prefer_ceil`."),
                   dict(kind="attr_in", attr="keep_aspect_ratio_policy", values=["stretch"],
                        text="Supported aspect ratio policy: `stretch`."),
                   dict(kind="attr_in", attr="antialias", values=[0], text="Antialiasing is not supported.")],
        "ScatterND": [dict(kind="attr_in", attr="reduction", values=["none"], text="`reduction` is not supported")],
        "Slice": [dict(kind="const_input", inputs=[3], text="`axes` must be an initializer")],
        "Squeeze": [dict(kind="const_input", inputs=[1], text="`axes` must be an initializer")],
        "TopK": [dict(kind="attr_in", attr="sorted", values=[1], text="`sorted` must be 1.")],
        "Unsqueeze": [dict(kind="const_input", inputs=[1], text="`axes` must be a constant tensor")],
    },
}

# -- dtype names -----------------------------------------------------------------------
ORT_TYPES = {"float": "float32", "double": "float64", "float16": "float16", "bfloat16": "bfloat16",
             "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
             "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool", "string": "object"}
TRT_TYPES = {"FP32": "float32", "FP16": "float16", "BF16": "bfloat16", "DOUBLE": "float64", "INT32": "int32",
             "INT64": "int64", "INT8": "int8", "INT4": "int4", "UINT8": "uint8", "BOOL": "bool", "FP8": "float8e4m3fn",
             "FP64": "float64", "STRING": "object"}
TRT_TYPOS = {"INF64": "INT64"}
#: op names the tables spell differently from onnx (each fix is recorded in the profile)
NAME_FIXES = {"Argmax": "ArgMax", "HardMax": "Hardmax", "LogSoftMax": "LogSoftmax"}


def _fragments(note: str) -> list[str]:
    parts = re.split(r"<br\s*/?>", note)
    return [p.strip() for p in parts if p.strip()]


def _sentences(fragment: str) -> list[str]:
    return [p.strip() for p in re.split(r"(?<=\.)\s+|;\s+", fragment) if p.strip()]


def _real_op(domain: str, op: str) -> bool:
    import onnx.defs
    return onnx.defs.has(op, domain)


def _schema_versions_in(domain: str, op: str, since: int, until: int | None) -> list[int]:
    """onnx's schema versions of ``op`` within ``since..until`` (its schema history)."""
    import onnx.defs
    out = set()
    top = until or (onnx.defs.onnx_opset_version() if domain == "" else 10)
    for n in range(since, top + 1):
        try:
            v = onnx.defs.get_schema(op, n, domain).since_version
        except Exception:
            continue
        if since <= v <= top:
            out.add(v)
    return sorted(out)


def _dom(d: str) -> str:
    return "" if d in ("", "ai.onnx") else d


def parse_ort_kernels(text: str, section: str, fixes: list) -> list[dict]:
    m = re.search(rf"^## Operators implemented by {section}$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if m is None:
        raise SystemExit(f"section {section} not found")
    entries: dict = {}
    domain, cur, first_inputs = None, None, []
    for line in m.group(1).splitlines():
        if not line.startswith("|") or line.startswith("|--") or line.startswith("| Op Name"):
            continue
        dm = re.match(r"\|\*\*Operator Domain:\*\* \*([^*]+)\*", line)
        if dm:
            domain = dm.group(1)
            continue
        cells = line.split("|")[1:-1]
        if len(cells) < 4:
            continue
        name, params, ver, types = cells[0], cells[1], cells[2], cells[3]
        if name:
            cur = name
            # the first input of each alternative signature: "*in* X:**T**"
            first_inputs = []
            for alt in params.split("<br><br>or<br><br>"):
                fm = re.search(r"\*in\* [^:]+:\*\*([^*]+)\*\*", alt)
                if fm:
                    first_inputs.append(fm.group(1))
        if domain not in ("ai.onnx", "ai.onnx.ml"):
            continue
        vm = re.fullmatch(r"\s*(?:\[(\d+), (\d+)\]|(\d+)\+|(\d+))\s*", ver)
        if vm is None:
            raise SystemExit(f"{section} {cur}: cannot read opset cell {ver!r}")
        if vm.group(1):
            since, until = int(vm.group(1)), int(vm.group(2))
        elif vm.group(3):
            since, until = int(vm.group(3)), None
        else:
            since = until = int(vm.group(4))
        constraints = {}
        for part in re.split(r"<br/>", types):
            cm = re.match(r"\s*\*\*([^*]+)\*\* = (.*)", part)
            if cm:
                constraints[cm.group(1)] = re.findall(r"(?<!seq\()tensor\(([a-z0-9]+)\)", cm.group(2))
        dtypes = None
        for c in first_inputs:
            if c in constraints:
                dtypes = constraints[c]
                break
            fm = re.fullmatch(r"tensor\(([a-z0-9]+)\)", c)
            if fm:
                dtypes = [fm.group(1)]
                break
        if dtypes is not None:
            dtypes = sorted({ORT_TYPES.get(t, t) for t in dtypes})
        key = (domain, cur)
        e = entries.setdefault(key, {"op": cur, "domain": _dom(domain), "versions": [], "note": "",
                                     "conditions": [], "unchecked": []})
        e["versions"].append({"since": since, "until": until, "dtypes": dtypes})
    for e in entries.values():
        e["versions"].sort(key=lambda v: v["since"])
        if any(v["dtypes"] is None for v in e["versions"]):
            fixes.append(f"{e['op']}: the type of its first input is not stated for some rows; "
                         "those rows claim any dtype")
    return list(entries.values())


def parse_ep_notes(text: str, fixes: list) -> list[dict]:
    out = []
    for line in text.splitlines():
        m = re.match(r"\|(ai\.onnx|com\.microsoft)[:.]([A-Za-z0-9_]+)\|(.*)\|\s*$", line)
        if not m:
            continue
        dom, op, note = m.group(1), m.group(2), m.group(3)
        if f"{dom}.{op}" in line and f"{dom}:{op}" not in line:
            fixes.append(f"'{dom}.{op}' read as '{dom}:{op}'")
        if dom == "com.microsoft":
            continue
        if op in NAME_FIXES:
            fixes.append(f"{op} read as {NAME_FIXES[op]}")
            op = NAME_FIXES[op]
        out.append({"op": op, "domain": "", "versions": [{"since": None, "until": None, "dtypes": None}],
                    "note": note, "conditions": [], "unchecked": []})
    return out


def parse_trt_matrix(text: str, fixes: list) -> tuple[list[dict], list[int]]:
    rm = re.search(r"inclusive range of opset (\d+) to opset (\d+)", text)
    if rm is None:
        raise SystemExit("tensorrt: the page's opset range sentence was not found")
    opsets = [int(rm.group(1)), int(rm.group(2))]
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")[1:]]
        if len(cells) < 2 or cells[1] not in ("Y", "N"):
            continue
        op, sup = cells[0], cells[1]
        if sup != "Y":
            continue
        types = []
        for t in (cells[2] if len(cells) > 2 else "").split(","):
            t = t.strip()
            if not t:
                continue
            if t in TRT_TYPOS:
                fixes.append(f"{op}: type {t} read as {TRT_TYPOS[t]}")
                t = TRT_TYPOS[t]
            if t not in TRT_TYPES:
                raise SystemExit(f"tensorrt: unknown type {t!r} for {op}")
            types.append(TRT_TYPES[t])
        note = cells[3] if len(cells) > 3 else ""
        out.append({"op": op, "domain": "", "versions": [{"since": None, "until": None,
                                                           "dtypes": sorted(set(types)) or None}],
                    "note": note, "conditions": [], "unchecked": []})
    return out, opsets


def parse_openvino(text: str, column: str, fixes: list) -> list[dict]:
    lines = [l for l in text.splitlines() if l.startswith("|")]
    header = [c.strip().strip("*") for c in lines[0].split("|")[1:-1]]
    col = header.index(column)
    answers: dict = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        answers.setdefault(cells[0], []).append(cells[col])
    out = []
    for op, ans in answers.items():
        if len(set(ans)) > 1:
            fixes.append(f"{op} is listed {len(ans)} times with different {column} answers ({', '.join(ans)}): "
                         "not claimed")
            continue
        if ans[0] != "Yes":
            continue
        if op in NAME_FIXES:
            fixes.append(f"{op} read as {NAME_FIXES[op]}")
            op = NAME_FIXES[op]
        out.append({"op": op, "domain": "", "versions": [{"since": None, "until": None, "dtypes": None}],
                    "note": "", "conditions": [], "unchecked": []})
    return out


def build(name: str, src_dir: Path) -> dict:
    s = SOURCES[name]
    raw = (src_dir / s["file"]).read_bytes()
    text = raw.decode("utf-8")
    fixes: list[str] = []
    model_opsets = None
    if s["parser"] == "ort_kernels":
        ops = parse_ort_kernels(text, s["section"], fixes)
    elif s["parser"] == "ep_notes":
        ops = parse_ep_notes(text, fixes)
    elif s["parser"] == "trt_matrix":
        ops, model_opsets = parse_trt_matrix(text, fixes)
    else:
        ops = parse_openvino(text, s["column"], fixes)
    kept = []
    for e in ops:
        if not _real_op(e["domain"], e["op"]):
            fixes.append(f"{e['op']} ({e['domain'] or 'ai.onnx'}) is not an op onnx defines: left out")
            continue
        rows = []
        for v in e["versions"]:
            if v["since"] is not None and not _schema_versions_in(e["domain"], e["op"], v["since"], v["until"]):
                fixes.append(f"{e['op']} row {v['since']}-{v['until'] or ''}: onnx has no schema version of "
                             "the op there; row left out")
                continue
            rows.append(v)
        if not rows:
            continue
        e["versions"] = rows
        kept.append(e)
    conds = CONDITIONS.get(name, {})
    by_op = {e["op"]: e for e in kept if e["domain"] == ""}
    for op, cs in conds.items():
        if op not in by_op:
            raise SystemExit(f"{name}: a condition names {op}, which the table does not claim")
        e = by_op[op]
        for c in cs:
            if c["text"] not in e["note"].replace("<br />", "<br/>"):
                raise SystemExit(f"{name}: {op}: condition text {c['text']!r} is not in the note {e['note']!r}")
        e["conditions"] = cs
    for e in kept:
        texts = {c["text"].rstrip(".").strip() for c in e["conditions"]}
        # the sentences of the note (split at <br/>, ". " and "; ") that no encoded condition states
        e["unchecked"] = [s for f in _fragments(e["note"]) for s in _sentences(f)
                          if s.rstrip(".").strip() not in texts]
    kept.sort(key=lambda e: (e["domain"], e["op"]))
    how = {
        "ort_kernels": "kernel rows of the EP's section: opset ranges are schema versions; dtypes are those of "
                       "the type constraint of the op's first input in that row",
        "ep_notes": "every ai.onnx row of the EP's |Operator|Note| table; the table states no opsets or dtypes, "
                    "so none are restricted; the note's conditions are checked where encoded",
        "trt_matrix": "rows marked Y, with their Supported Types, within the opset range the page states; "
                      "restrictions checked where encoded",
        "openvino_coverage": f"rows whose {s.get('column')} column says Yes; the table states no opsets, dtypes "
                             "or conditions",
    }[s["parser"]]
    return {
        "name": name,
        "title": s["title"],
        "execution_provider": s["ep"],
        "device": s["device"],
        "version": s["version"],
        "source": {k: s.get(k) for k in ("repository", "path", "branch", "commit", "url")}
                  | {"sha256": hashlib.sha256(raw).hexdigest(), "file": s["file"],
                     "file_is": s.get("copy", "the file at that commit, as git shows it")},
        "derived": f"bench/profile_sources.py ({s['parser']}): {how}. Conditions encoded from the notes are "
                   "listed under each op with the note's text they enforce; fragments of a note that no "
                   "condition encodes are listed as unchecked (accepted, with the note in the answer).",
        "model_opsets": model_opsets,
        "reading_notes": fixes,
        "ops": kept,
    }


# -- onnxruntime's contrib kernels (com.microsoft), transcribed --------------------------------
CONTRIB_COMMIT = "001d12d2623fd411ce0f83d05abb5e82304a3389"
#: transcription section -> (profile name, domain)
CONTRIB_SECTIONS = {"CUDAExecutionProvider com.microsoft": ("ort-cuda", "com.microsoft"),
                    "CUDAExecutionProvider ai.onnx": ("ort-cuda", ""),
                    "DmlExecutionProvider com.microsoft": ("directml", "com.microsoft")}


def build_contrib(path: Path) -> dict:
    """``{profile name: contrib profile}`` from ``bench/profile_sources_contrib.md`` (the
    com.microsoft rows of onnxruntime's OperatorKernels.md, transcribed; see that file)."""
    text = path.read_text(encoding="utf-8")
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    out: dict = {}
    section = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if section not in CONTRIB_SECTIONS or len(cells) != 4 or cells[0] in ("op", "---"):
            continue
        name, domain = CONTRIB_SECTIONS[section]
        op, _first, ver, types = cells
        vm = re.fullmatch(r"(\d+)\+", ver)
        if vm is None:
            raise SystemExit(f"{section} {op}: cannot read the versions {ver!r}")
        dtypes = None if types == "not stated" else sorted(
            {ORT_TYPES.get(t.strip(), t.strip()) for t in types.split(",")})
        prof = out.setdefault(name, {
            "name": name, "execution_provider": SOURCES[name]["ep"],
            "source": {"repository": ORT, "path": "docs/OperatorKernels.md", "commit": CONTRIB_COMMIT,
                       "url": f"https://github.com/{ORT}/blob/{CONTRIB_COMMIT}/docs/OperatorKernels.md",
                       "file": path.name, "sha256": sha,
                       "copy": "the com.microsoft rows (and CUDA's default-domain SimplifiedLayerNormalization) "
                               "of the CUDA and DirectML sections, transcribed from a stored copy of that commit "
                               "into bench/profile_sources_contrib.md"},
            "version": f"onnxruntime main at commit {CONTRIB_COMMIT[:7]} (later than the ai.onnx rows' source)",
            "ops": []})
        prof["ops"].append({"op": op, "domain": domain,
                            "versions": [{"since": int(vm.group(1)), "until": None, "dtypes": dtypes}],
                            "note": "", "conditions": [], "unchecked": []})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, help="folder holding the source files")
    ap.add_argument("--contrib", type=Path, help="the contrib transcription (bench/profile_sources_contrib.md)")
    ap.add_argument("--only", nargs="*", help="profile names to build (default: all)")
    ap.add_argument("--check", action="store_true", help="compare with the files in the repo, write nothing")
    args = ap.parse_args(argv)
    if (args.src is None) == (args.contrib is None):
        ap.error("give --src DIR (the profiles) or --contrib FILE (their contrib rows)")
    changed = 0
    if args.contrib is not None:
        for name, prof in build_contrib(args.contrib).items():
            text = json.dumps(prof, indent=1, ensure_ascii=False) + "\n"
            path = OUT / "contrib" / f"{name}.json"
            old = path.read_text(encoding="utf-8") if path.exists() else None
            changed += old != text
            print(f"{name:18s} {len(prof['ops']):4d} contrib rows: {'same' if old == text else 'changed'}")
            if not args.check:
                path.parent.mkdir(exist_ok=True)
                path.write_text(text, encoding="utf-8")
        return 1 if (args.check and changed) else 0
    for name in args.only or SOURCES:
        prof = build(name, args.src)
        text = json.dumps(prof, indent=1, ensure_ascii=False) + "\n"
        path = OUT / f"{name}.json"
        old = path.read_text(encoding="utf-8") if path.exists() else None
        n_cond = sum(len(e["conditions"]) for e in prof["ops"])
        status = "same" if old == text else "changed"
        changed += old != text
        print(f"{name:18s} {len(prof['ops']):4d} ops, {n_cond:3d} conditions checked, "
              f"{sum(len(e['unchecked']) for e in prof['ops']):3d} unchecked notes, "
              f"{len(prof['reading_notes'])} reading notes: {status}")
        if not args.check:
            path.write_text(text, encoding="utf-8")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
