"""ONNX Runtime's execution providers as providers: ``ort:<EP>[?key=value&...]``.

``ort:cpu``, ``ort:openvino``, ``ort:cuda`` ... name an execution provider (EP) of the
installed onnxruntime, with the EP's options in the query (``ort:openvino?device_type=CPU``).
Two kinds of EP are reached:

* provider-bridge and built-in EPs, the names ``onnxruntime.get_available_providers()``
  lists (CPU, CUDA, TensorRT, DirectML, CoreML, QNN, the OpenVINO of ``onnxruntime-openvino``);
* plugin EPs, registered from a library (``onnxruntime-ep-openvino``, ``onnxruntime-ep-webgpu``
  when installed, or any library given as ``ort:<name>?library=/path/to/lib.so``), used
  through the devices they offer (``onnxruntime.get_ep_devices()``).

An EP that the installed onnxruntime does not offer is still a provider (so that a plan
can name it), unavailable with the reason; without onnxruntime every ``ort:`` name raises
:class:`~hetero_explore.ir.errors.MissingDependencyError` naming the ``[ort]`` extra.

**Capability comes from ORT itself.** For the graph being planned, the loaded graph is
exported back to ONNX (its nodes under the IR's names, see :func:`export_nodes`) and
opened in a session with [EP, CPU], ORT's graph optimisations off (so that node names map
one to one) and ``session.record_ep_graph_assignment_info`` on; the nodes ORT assigns to
the EP are its claims (``get_provider_graph_assignment_info``), remembered per (graph
digest, EP, options). A node it leaves to the CPU EP is declined as "not claimed by
<EP>'s GetCapability" (ORT's EPs log no per-node reason). When ORT cannot create that
session (an EP that claims nodes and then fails to compile them), the graph is asked in
contiguous pieces of its topological order (halves, recursively); a single node whose
session fails with the EP but opens on the CPU EP alone was claimed and failed, and is
kept as claimed with the EP's message, which the plan shows as a blocker.

**Execution.** Each partition placed on an ``ort:`` provider runs as its own ONNX model
in a session with that EP alone (``session.disable_cpu_ep_fallback``), ORT's default graph
optimisations on, built once (at planning, where the plan checks that the EP compiles it)
and reused by every executor and run of the same partition. Boundary values are host
arrays: the plan's transfers into and out of the partition are host copies, counted with
their bytes, and the partition's time is its session's run. A partition the EP fails to
compile is an ``ep-compile`` blocker of the plan, naming the EP's message.

**Results** from an ORT EP are measurements, not proofs: ``measured`` is True on these
providers, and :mod:`hetero_explore.analysis.divergence` explains differences in ULP,
blamed on partitions and nodes.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

import numpy as np

from ..ir.errors import ArgumentValueError, KernelError, MissingDependencyError, ProviderUnavailableError
from ..ir.context import KernelContext
from .base import DeviceBuffer, DeviceId, ExecutionProvider, HostMemory, KernelMatch

PREFIX = "ort:"
#: short names of well-known EPs → ORT's EP names (any EP name, with or without the
#: ``ExecutionProvider`` suffix, is accepted too)
ALIASES = {
    "cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider",
    "trt": "TensorrtExecutionProvider", "openvino": "OpenVINOExecutionProvider",
    "directml": "DmlExecutionProvider", "dml": "DmlExecutionProvider", "coreml": "CoreMLExecutionProvider",
    "qnn": "QNNExecutionProvider", "nnapi": "NnapiExecutionProvider", "webgpu": "WebGpuExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider", "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider", "azure": "AzureExecutionProvider", "cann": "CANNExecutionProvider",
    "vitisai": "VitisAIExecutionProvider", "acl": "ACLExecutionProvider", "armnn": "ArmNNExecutionProvider",
    "nv_tensorrt_rtx": "NvTensorRTRTXExecutionProvider", "snpe": "SNPEExecutionProvider",
}
_SHORT = {}
for _k, _v in ALIASES.items():
    _SHORT.setdefault(_v, _k)

#: the device an EP computes on, for plans and transfer kinds (an EP's device from its
#: ``OrtEpDevice`` wins; ``device_type`` options of OpenVINO pick its device)
EP_DEVICES = {
    "CPUExecutionProvider": "cpu:0", "XnnpackExecutionProvider": "cpu:0", "AzureExecutionProvider": "cpu:0",
    "CUDAExecutionProvider": "cuda:0", "TensorrtExecutionProvider": "cuda:0",
    "NvTensorRTRTXExecutionProvider": "cuda:0", "ROCMExecutionProvider": "gpu:0",
    "MIGraphXExecutionProvider": "gpu:0", "DmlExecutionProvider": "dml:0", "CoreMLExecutionProvider": "ane:0",
    "NnapiExecutionProvider": "npu:0", "QNNExecutionProvider": "htp:0", "WebGpuExecutionProvider": "gpu:0",
    "OpenVINOExecutionProvider": "cpu:0", "CANNExecutionProvider": "npu:0", "VitisAIExecutionProvider": "npu:0",
}
_OV_DEVICES = {"CPU": "cpu:0", "GPU": "igpu:0", "NPU": "npu:0"}

#: plugin EP packages: EP name → (module, library-path function, registration name, install hint)
PLUGINS = {
    "OpenVINOExecutionProvider": ("onnxruntime_ep_openvino", "get_library_path", "OpenVINO",
                                  "pip install 'hetero_explore[openvino]' (onnxruntime-ep-openvino)"),
    "WebGpuExecutionProvider": ("onnxruntime_ep_webgpu", "get_library_path", "WebGPU",
                                "pip install onnxruntime-ep-webgpu"),
}
#: install hints of provider-bridge EPs (whole onnxruntime builds that replace the ``onnxruntime`` wheel)
BRIDGE_HINTS = {
    "CUDAExecutionProvider": "onnxruntime-gpu (replaces the onnxruntime wheel) and a CUDA GPU",
    "TensorrtExecutionProvider": "onnxruntime-gpu with TensorRT installed, and a CUDA GPU",
    "DmlExecutionProvider": "onnxruntime-directml on Windows",
    "CoreMLExecutionProvider": "onnxruntime on macOS",
    "QNNExecutionProvider": "onnxruntime-qnn on a Qualcomm device",
    "OpenVINOExecutionProvider": "onnxruntime-openvino (replaces the onnxruntime wheel)",
}
#: query keys that are session settings, not EP options
SESSION_KEYS = ("graph_optimization_level", "library")
_OPT_LEVELS = ("disable", "basic", "extended", "layout", "all")

#: sessions kept per provider (partition sessions, built at planning and reused by executors)
SESSION_CACHE_SIZE = 64
#: capability answers kept per process, one per (graph digest, EP, options)
CAPABILITY_CACHE_SIZE = 64


# -- onnxruntime and its EPs --------------------------------------------------------------------
def ort_module():
    """``onnxruntime``, or :class:`MissingDependencyError` naming the ``[ort]`` extra."""
    try:
        import onnxruntime
    except ImportError as e:
        raise MissingDependencyError(
            f"'ort:' providers run through ONNX Runtime, which is not installed ({e}); install it with "
            "pip install 'hetero_explore[ort]' (and 'hetero_explore[openvino]' for the OpenVINO EP)") from e
    return onnxruntime


_plugin_lock = threading.Lock()
#: registration name → None (registered) or the reason it failed
_registered: dict[str, str | None] = {}


def register_plugins() -> dict[str, str | None]:
    """Register the plugin EP libraries of the installed plugin packages with onnxruntime
    (once per process). Returns registration name → None, or why it failed / is missing."""
    ort = ort_module()
    with _plugin_lock:
        for ep, (mod, fn, reg, hint) in PLUGINS.items():
            if reg in _registered:
                continue
            try:
                import importlib
                m = importlib.import_module(mod)
                path = getattr(m, fn)()
            except ImportError:
                _registered[reg] = f"not installed ({hint})"
                continue
            except Exception as e:  # noqa: BLE001 - a broken plugin package is a reason, not a crash
                _registered[reg] = f"{mod} gave no library: {type(e).__name__}: {e}"
                continue
            try:
                ort.register_execution_provider_library(reg, str(path))
                _registered[reg] = None
            except Exception as e:  # noqa: BLE001
                _registered[reg] = f"registering {path} failed: {e}"
    return dict(_registered)


def register_library(name: str, path: str) -> None:
    """Register a plugin EP library (``ort:<name>?library=PATH``) once per process."""
    ort = ort_module()
    with _plugin_lock:
        if name in _registered and _registered[name] is None:
            return
        try:
            ort.register_execution_provider_library(name, str(path))
            _registered[name] = None
        except Exception as e:  # noqa: BLE001
            _registered[name] = f"registering {path} failed: {e}"
            raise ProviderUnavailableError(f"onnxruntime could not register the EP library {path!r}: {e}") from e


def _plugin_version(ep: str) -> str:
    mod = PLUGINS.get(ep, (None,))[0]
    if mod is None:
        return ""
    try:
        from importlib.metadata import version
        return version(mod.replace("_", "-"))
    except Exception:  # noqa: BLE001
        return ""


def ep_devices(ep: str) -> list:
    """The ``OrtEpDevice`` s that onnxruntime offers for EP ``ep`` (plugin EPs; the CPU EP too)."""
    ort = ort_module()
    register_plugins()
    return [d for d in ort.get_ep_devices() if d.ep_name == ep]


def canonical_ep(text: str) -> str:
    """ORT's EP name for a short or full name (``openvino`` → ``OpenVINOExecutionProvider``)."""
    key = text.strip()
    if key.lower() in ALIASES:
        return ALIASES[key.lower()]
    known = set(ALIASES.values()) | set(PLUGINS)
    try:
        ort = ort_module()
        known |= set(ort.get_available_providers()) | {d.ep_name for d in ort.get_ep_devices()}
    except MissingDependencyError:
        pass
    for name in known:
        if key.lower() in (name.lower(), name.lower().removesuffix("executionprovider")):
            return name
    return key  # an EP this table does not know: plugin EPs may register any name


def short_name(ep: str) -> str:
    return _SHORT.get(ep, ep.removesuffix("ExecutionProvider").lower() or ep)


@dataclass(frozen=True)
class Route:
    """How a session reaches an EP: ``bridge`` (a provider name for ``providers=``), ``plugin``
    (``SessionOptions.add_provider_for_devices`` with its devices), or ``none`` (unavailable)."""

    kind: str
    ep: str
    devices: tuple = ()
    reason: str = ""


def route(ep: str, library: str | None = None) -> Route:
    """How this process reaches ``ep`` (see :class:`Route`); ``none`` says why not."""
    ort = ort_module()
    if library:
        register_library(ep, library)
    if ep in ort.get_available_providers():
        return Route("bridge", ep)
    devs = ep_devices(ep)
    if devs:
        return Route("plugin", ep, tuple(devs))
    return Route("none", ep, reason=unavailable_reason(ep))


def unavailable_reason(ep: str) -> str:
    """Why ``ep`` cannot be used here, in the EP's and the machine's terms."""
    ort = ort_module()
    regs = register_plugins()
    have = ", ".join(ort.get_available_providers())
    if ep in PLUGINS:
        mod, _, reg, hint = PLUGINS[ep]
        state = regs.get(reg)
        if state is None:   # registered, yet no device
            cpus = [d.device for d in ort.get_ep_devices() if d.ep_name == "CPUExecutionProvider"]
            seen = ", ".join(f"{str(d.type).split('.')[-1]} ({d.vendor})" for d in cpus) or "none"
            why = (" the OpenVINO plugin offers Intel devices only" if ep == "OpenVINOExecutionProvider"
                   and not any("intel" in str(d.vendor).lower() for d in cpus) else "")
            return (f"{ep} is registered from {mod.replace('_', '-')} {_plugin_version(ep)}, but it offers no device "
                    f"on this machine (ORT's hardware devices: {seen});{why or ' it found none it supports'}")
        if ep in BRIDGE_HINTS and state.startswith("not installed"):
            return (f"{ep} is not in this onnxruntime {ort.__version__} (it has {have}); install "
                    f"{hint.removeprefix('pip install ')}, or {BRIDGE_HINTS[ep]}")
        return f"{ep}: the plugin is {state}"
    if ep in BRIDGE_HINTS:
        return f"{ep} is not in this onnxruntime {ort.__version__} (it has {have}); it needs {BRIDGE_HINTS[ep]}"
    return (f"onnxruntime {ort.__version__} offers no EP named {ep!r} (it has {have}; plugin devices: "
            f"{', '.join(sorted({d.ep_name for d in ort.get_ep_devices()})) or 'none'})")


def ep_table():
    """One row per EP this onnxruntime knows of or this module names: the ``ort:`` name, ORT's EP
    name, how it is reached, whether it is available here and why not, its devices."""
    import pandas as pd
    ort = ort_module()
    register_plugins()
    names = list(dict.fromkeys(list(ort.get_available_providers()) + [d.ep_name for d in ort.get_ep_devices()]
                               + list(PLUGINS) + list(BRIDGE_HINTS)))
    rows = []
    for ep in names:
        r = route(ep)
        devs = ", ".join(f"{str(d.device.type).split('.')[-1]} ({d.device.vendor})" for d in r.devices)
        rows.append({"provider": PREFIX + short_name(ep), "ep": ep, "route": r.kind, "available": r.kind != "none",
                     "why_not": r.reason, "devices": devs})
    return pd.DataFrame(rows, columns=["provider", "ep", "route", "available", "why_not", "devices"])


def available_names() -> list[str]:
    """The ``ort:`` names of the EPs usable here (``ort:cpu`` first); [] without onnxruntime."""
    try:
        df = ep_table()
    except MissingDependencyError:
        return []
    names = [p for p, ok, ep in zip(df["provider"], df["available"], df["ep"]) if ok and ep != "AzureExecutionProvider"]
    return sorted(names, key=lambda n: (n != "ort:cpu", n))


# -- names -----------------------------------------------------------------------------------
def parse_name(text: str) -> tuple[str, dict, dict]:
    """``ort:<EP>[?k=v&...]`` → (ORT's EP name, EP options, session settings)."""
    if not text.lower().startswith(PREFIX):
        raise ArgumentValueError(f"{text!r} is not an ONNX Runtime provider name; write 'ort:<EP>' (e.g. 'ort:cpu')")
    body = text[len(PREFIX):]
    ep_text, _, query = body.partition("?")
    if not ep_text.strip():
        raise ArgumentValueError(f"{text!r} names no EP; write e.g. 'ort:cpu' or 'ort:openvino?device_type=CPU'")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as e:
        raise ArgumentValueError(f"cannot read the EP options of {text!r} ({e}); write key=value pairs joined "
                                 "by '&', e.g. 'ort:openvino?device_type=CPU&num_of_threads=2'") from None
    opts, session = {}, {}
    for k, v in pairs:
        (session if k in SESSION_KEYS else opts)[k] = v
    lvl = session.get("graph_optimization_level")
    if lvl is not None and lvl not in _OPT_LEVELS:
        raise ArgumentValueError(f"{text!r}: graph_optimization_level={lvl!r}; valid: {', '.join(_OPT_LEVELS)}")
    return canonical_ep(ep_text), opts, session


def provider_name(ep: str, options: dict | None = None, session: dict | None = None) -> str:
    q = dict(sorted((options or {}).items()))
    q.update(sorted((session or {}).items()))
    return PREFIX + short_name(ep) + (f"?{urlencode(q)}" if q else "")


# -- exporting nodes of a graph ----------------------------------------------------------------
def node_names(graph) -> list[str]:
    """Unique names for the graph's nodes, as exported: the IR's ``Node.name``, with ``__<id>``
    appended to a name that an earlier node already has (ONNX does not require unique names)."""
    seen: set = set()
    out = []
    for n in graph.nodes:
        name = n.name if n.name not in seen else f"{n.name}__{n.id}"
        seen.add(name)
        out.append(name)
    return out


def _value_info(graph, name):
    from onnx import helper
    v = graph.values.get(name)
    if v is None:
        return helper.make_value_info(name, __import__("onnx").TypeProto())
    if v.type_proto is not None and v.elem_type == 0:
        return helper.make_value_info(name, v.type_proto)
    shape = None if v.shape is None else [d if isinstance(d, (int, str)) else None for d in v.shape]
    return helper.make_tensor_value_info(name, v.elem_type, shape)


def export_nodes(graph, node_ids=None, outputs=None, *, name: str | None = None):
    """Nodes ``node_ids`` (default: all) of ``graph`` as a standalone ``onnx.ModelProto``: the
    values they read from outside (outer-scope reads of their subgraphs included) as inputs,
    the initializers they read, ``outputs`` (default: values used outside or graph outputs) as
    outputs, every node under its name of :func:`node_names`."""
    from onnx import NodeProto, helper

    ids = list(range(len(graph.nodes))) if node_ids is None else sorted(node_ids)
    names = node_names(graph)
    members = set(ids)
    produced: dict[str, None] = {}
    reads: dict[str, None] = {}
    for i in ids:
        n = graph.nodes[i]
        for x in n.inputs:
            if x and x not in produced:
                reads.setdefault(x, None)
        for o in n.outputs:
            if o:
                produced.setdefault(o, None)
    ins = [x for x in reads if x not in produced and not graph.is_constant(x)]
    inits = [graph.initializer_protos[x] for x in reads if x not in produced and graph.is_constant(x)]
    if outputs is None:
        gout = set(graph.outputs)
        outputs = [o for o in produced if o in gout or any(c not in members for c in graph.values[o].consumers)]
    outputs = list(outputs)
    protos = []
    for i in ids:
        p = NodeProto()
        p.CopyFrom(graph.nodes[i].proto)
        p.name = names[i]
        protos.append(p)
    inner = [o for o in produced if o not in set(outputs) and o in graph.values and graph.values[o].elem_type]
    g = helper.make_graph(protos, name or graph.name or "graph", [_value_info(graph, x) for x in ins],
                          [_value_info(graph, o) for o in outputs], initializer=inits,
                          value_info=[_value_info(graph, o) for o in inner])
    m = graph.model
    model = helper.make_model(g, opset_imports=list(m.opset_import), producer_name="hetero_explore")
    model.ir_version = m.ir_version
    model.functions.extend(m.functions)
    return model


_digests: dict[int, tuple] = {}
_digest_lock = threading.Lock()


def graph_digest(graph) -> tuple[str, bytes]:
    """(sha256 hex, serialized model) of the whole graph as :func:`export_nodes` writes it;
    computed once per graph object."""
    with _digest_lock:
        hit = _digests.get(id(graph))
        if hit is not None and hit[0]() is graph:
            return hit[1], hit[2]
    data = export_nodes(graph).SerializeToString(deterministic=True)
    h = hashlib.sha256(data).hexdigest()
    key = id(graph)
    with _digest_lock:
        _digests[key] = (weakref.ref(graph, lambda _r, k=key: _digests.pop(k, None)), h, data)
    return h, data


# -- sessions ---------------------------------------------------------------------------------
def _message(e: BaseException) -> str:
    """ORT's message without its ``[ONNXRuntimeError] : 1 : FAIL :`` prefix, on one line."""
    s = str(e)
    if "] :" in s and s.startswith("["):
        parts = s.split(" : ", 3)
        s = parts[-1] if len(parts) == 4 else s
    return " ".join(s.split())


def session_options(*, optimize: str | None = "all", record: bool = False, alone: bool = False,
                    threads: int | None = None):
    ort = ort_module()
    so = ort.SessionOptions()
    levels = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    levels["layout"] = getattr(ort.GraphOptimizationLevel, "ORT_ENABLE_LAYOUT", levels["all"])
    so.graph_optimization_level = levels[optimize or "all"]
    so.log_severity_level = 4   # EPs' C++ logs stay off stderr; failures come back as exceptions
    if record:
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if alone:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if threads:
        so.intra_op_num_threads = threads
    return so


def open_session(model_bytes: bytes, r: Route, options: dict, *, cpu: bool = True, alone: bool = False,
                 record: bool = False, optimize: str = "all"):
    """An ``InferenceSession`` of ``model_bytes`` with EP ``r`` (then the CPU EP when ``cpu``; the EP
    alone with CPU fallback disabled when ``alone``)."""
    ort = ort_module()
    # the CPU EP is the fallback itself: "alone" is what it always is
    so = session_options(optimize=optimize, record=record, alone=alone and r.ep != "CPUExecutionProvider")
    if r.kind == "none":
        raise ProviderUnavailableError(r.reason)
    if r.ep == "CPUExecutionProvider":
        return ort.InferenceSession(model_bytes, so, providers=[("CPUExecutionProvider", dict(options))])
    if r.kind == "bridge":
        provs = [(r.ep, dict(options))] + (["CPUExecutionProvider"] if cpu and not alone else [])
        return ort.InferenceSession(model_bytes, so, providers=provs)
    so.add_provider_for_devices(list(r.devices), dict(options))
    return ort.InferenceSession(model_bytes, so)


def assignment(session) -> dict[str, list[str]]:
    """EP name → node names ORT assigned to it, in its order (``get_provider_graph_assignment_info``)."""
    out: dict[str, list[str]] = {}
    for sg in session.get_provider_graph_assignment_info():
        out.setdefault(sg.ep_name, []).extend(n.name for n in sg.get_nodes())
    return out


@dataclass
class Capability:
    """What ORT said about one graph for one EP."""

    claimed: dict
    """Node id → note ('' or the EP's compile failure when it claimed and then failed)."""
    declined: dict
    """Node id → reason."""
    pieces: int = 1
    """Sessions the answer took (more than one when the whole graph did not open)."""
    failure: str = ""
    """ORT's message when it could not create the whole graph's session with the EP (the claims
    are then per piece, and every decline says so)."""


_cap_cache: OrderedDict = OrderedDict()
_cap_lock = threading.Lock()


def _ask(graph, ids: list[int], r: Route, options: dict, names: list[str], cap: Capability) -> None:
    """Claims of EP ``r`` over nodes ``ids`` (a contiguous run of the topological order, hence
    convex), split in halves while ORT cannot open a session for them."""
    whole = len(ids) == len(graph.nodes)
    data = graph_digest(graph)[1] if whole else export_nodes(graph, ids).SerializeToString()
    ep = r.ep
    try:
        sess = open_session(data, r, options, record=True, optimize="disable")
    except Exception as e:  # noqa: BLE001 - ORT's refusal is the answer
        msg = _message(e)
        if whole:
            cap.failure = msg
        if len(ids) > 1:
            cap.pieces += 1
            half = len(ids) // 2
            _ask(graph, ids[:half], r, options, names, cap)
            _ask(graph, ids[half:], r, options, names, cap)
            return
        nid = ids[0]
        if ep == "CPUExecutionProvider":
            cap.declined[nid] = f"onnxruntime's CPU EP cannot run it: {msg}"
            return
        try:
            open_session(data, Route("bridge", "CPUExecutionProvider"), {}, optimize="disable")
        except Exception as e2:  # noqa: BLE001
            cap.declined[nid] = f"onnxruntime cannot run it on any EP here: {_message(e2)}"
            return
        cap.claimed[nid] = f"{ep} failed to compile it: {msg}"
        return
    got = assignment(sess)
    index = {names[i]: i for i in ids}
    mine = {index[n] for n in got.get(ep, []) if n in index}
    others = {index[n]: e for e, ns in got.items() if e != ep for n in ns if n in index}
    for i in ids:
        if i in mine:
            cap.claimed[i] = ""
        else:
            where = others.get(i)
            cap.declined[i] = (f"not claimed by {ep}'s GetCapability" +
                               (f" (ORT placed it on {where})" if where else ""))


def capability(graph, ep: str, options: dict, r: Route | None = None) -> Capability:
    """ORT's claims of ``ep`` (with ``options``) on ``graph``, cached per (digest, EP, options)."""
    r = r or route(ep)
    digest = graph_digest(graph)[0]
    key = (digest, ep, tuple(sorted(options.items())))
    with _cap_lock:
        hit = _cap_cache.get(key)
        if hit is not None:
            _cap_cache.move_to_end(key)
            return hit
    cap = Capability({}, {})
    if r.kind == "none":
        cap.declined = {n.id: r.reason for n in graph.nodes}
    elif graph.nodes:
        _ask(graph, list(range(len(graph.nodes))), r, options, node_names(graph), cap)
        if cap.failure:
            note = (f" (asked in {cap.pieces} pieces: ORT could not create the whole graph's session with "
                    f"{ep}: {cap.failure})")
            cap.declined = {i: why + note for i, why in cap.declined.items()}
    with _cap_lock:
        _cap_cache[key] = cap
        while len(_cap_cache) > CAPABILITY_CACHE_SIZE:
            _cap_cache.popitem(last=False)
    return cap


# -- the provider -----------------------------------------------------------------------------
def _to_feed(buf):
    a = buf.data
    if isinstance(a, np.ndarray) and a.dtype == object and a.ndim == 0:
        return a[()]            # a sequence / map / optional: ORT takes the Python value
    return a


class OrtProvider(HostMemory, ExecutionProvider):
    """An ONNX Runtime EP as a provider (see the module docs). Create it with
    ``resolve("ort:openvino")`` or :func:`ort_provider`."""

    measured = True
    """Results are measured against a reference (ULP), not proven byte-identical."""
    arena_alignment = 0   # ORT lays out a partition's intermediates itself

    def __init__(self, ep: str, options: dict | None = None, session: dict | None = None, *,
                 name: str | None = None):
        super().__init__()
        ort_module()
        self.ep = ep
        self.options = dict(options or {})
        self.session_settings = dict(session or {})
        self.name = name or provider_name(ep, self.options, self.session_settings)
        self._route = None
        self._lock = threading.Lock()
        self._sessions: OrderedDict = OrderedDict()
        self.device = DeviceId.parse(self._device())

    def _device(self) -> str:
        if self.ep == "OpenVINOExecutionProvider":
            return _OV_DEVICES.get(str(self.options.get("device_type", "CPU")).split(".")[0].upper(), "cpu:0")
        r = self.route
        if r.kind == "plugin" and r.devices:
            t = str(r.devices[0].device.type).split(".")[-1].lower()
            return f"{t}:0"
        return EP_DEVICES.get(self.ep, "cpu:0")

    @property
    def route(self) -> Route:
        if self._route is None:
            self._route = route(self.ep, self.session_settings.get("library"))
        return self._route

    # -- capability --------------------------------------------------------------------
    def available(self) -> tuple[bool, str]:
        r = self.route
        return (r.kind != "none", r.reason)

    @property
    def can_execute(self) -> bool:
        return self.route.kind != "none"

    def capability_key(self):
        """EP, options and route: with the graph (the planner keeps answers per graph) they fix
        every answer."""
        return ("ort", self.ep, tuple(sorted(self.options.items())), self.route.kind)

    def capability(self, graph) -> Capability:
        return capability(graph, self.ep, self.options, self.route)

    def supports(self, ctx: KernelContext) -> KernelMatch:
        if ctx.graph is None:
            return KernelMatch.no(f"{self.ep} is asked about whole graphs; this node came without its graph")
        cap = self.capability(ctx.graph)
        nid = ctx.node.id
        if nid in cap.claimed:
            return KernelMatch.yes(cap.claimed[nid])
        return KernelMatch.no(cap.declined.get(nid, f"not claimed by {self.ep}'s GetCapability"))

    def support_df(self):
        import pandas as pd
        return pd.DataFrame([{"domain": "*", "op_type": "*", "since_opset": None, "until_opset": None,
                              "dtypes": "any", "bitwise_portable": False,
                              "note": f"{self.ep}: claims come from ORT's assignment of each graph"}],
                            columns=["domain", "op_type", "since_opset", "until_opset", "dtypes",
                                     "bitwise_portable", "note"])

    def get_kernel(self, ctx: KernelContext):
        raise KernelError(f"{self.name}: ORT runs whole partitions, not single kernels; node "
                          f"{ctx.node.name!r} ({ctx.node.op_type}) runs inside its partition's session")

    # -- partitions ----------------------------------------------------------------------
    def partition_session(self, graph, node_ids, outputs, *, partition: int | None = None):
        """(session, input names, output names) of the partition's model with this EP alone,
        built once per partition model (keyed by its bytes' digest) and reused."""
        m = export_nodes(graph, node_ids, outputs,
                         name=f"{graph.name}_partition{'' if partition is None else partition}")
        data = m.SerializeToString(deterministic=True)
        key = hashlib.sha256(data).hexdigest()
        with self._lock:
            hit = self._sessions.get(key)
            if hit is not None:
                self._sessions.move_to_end(key)
                if isinstance(hit, Exception):
                    raise hit
                return hit
        try:
            sess = open_session(data, self.route, self.options, alone=True,
                                optimize=self.session_settings.get("graph_optimization_level", "all"))
            hit = (sess, [i.name for i in m.graph.input], list(outputs))
        except ProviderUnavailableError:
            raise
        except Exception as e:  # noqa: BLE001
            hit = KernelError(f"{self.ep} failed to compile partition"
                              f"{'' if partition is None else f' {partition}'} ({len(list(node_ids))} node(s)) "
                              f"with CPU fallback disabled: {_message(e)}")
        with self._lock:
            self._sessions[key] = hit
            while len(self._sessions) > SESSION_CACHE_SIZE:
                self._sessions.popitem(last=False)
        if isinstance(hit, Exception):
            raise hit
        return hit

    def partition_blocker(self, graph, node_ids, outputs, *, partition: int | None = None) -> str | None:
        """Why this partition cannot run on the EP (its compile failure), or None. Builds and keeps
        its session, which the executor then reuses."""
        if self.route.kind == "none":
            return None     # the executor says the provider is unavailable
        try:
            self.partition_session(graph, node_ids, outputs, partition=partition)
        except KernelError as e:
            return str(e)
        return None

    def partition_runner(self, graph, node_ids, outputs, *, partition: int | None = None):
        sess, ins, outs = self.partition_session(graph, node_ids, outputs, partition=partition)
        return OrtPartitionRunner(self, graph, tuple(node_ids), sess, ins, outs, partition)

    def adopt(self, array: np.ndarray, ledger) -> DeviceBuffer:
        """A buffer of this provider holding ``array`` (ORT's fresh output), owned by ``ledger``."""
        buf = DeviceBuffer(self, array.shape, array.dtype, array)
        self._track_alloc(buf.nbytes, buf)
        return ledger.adopt(buf)

    def __repr__(self) -> str:
        return f"OrtProvider({self.name!r}, {self.ep}, {self.device})"


class OrtProgram:
    """What :meth:`OrtPartitionRunner.bind` gives the executor: nothing to hold (ORT keeps the
    partition's initializers and its memory inside the session)."""

    __slots__ = ("runner",)

    def __init__(self, runner):
        self.runner = runner


class OrtPartitionRunner:
    """Runs one partition through its ORT session: the executor's view of a partition
    (``provider``, ``arena_size``, ``steps``, ``bind``, ``run``) as the node runner has it."""

    arena_size = 0
    steps: tuple = ()

    def __init__(self, provider: OrtProvider, graph, node_ids, session, inputs, outputs, partition):
        self.provider = provider
        self.graph = graph
        self.node_ids = node_ids
        self.session = session
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.partition = partition
        self.dynamic_nodes: list = []

    def bind(self, arena, fixed=None, record: bool = True) -> OrtProgram:
        return OrtProgram(self)

    def run(self, env, ledger, record=None, shapes=None, program=None) -> dict:
        from ..ir.errors import ExecutionError
        feeds = {}
        for name in self.inputs:
            buf = env.get(name)
            if buf is None:
                raise ExecutionError(f"partition {self.partition} on {self.provider.name!r}: input {name!r} was "
                                     "not given to the partition")
            feeds[name] = _to_feed(buf)
        try:
            got = self.session.run(list(self.outputs), feeds)
        except Exception as e:  # noqa: BLE001
            raise ExecutionError(f"partition {self.partition} on {self.provider.name!r} ({self.provider.ep}): "
                                 f"onnxruntime failed: {_message(e)}") from e
        vals = self.graph.values
        out = {}
        for name, a in zip(self.outputs, got):
            if not isinstance(a, np.ndarray):    # a sequence / map / optional
                h = np.empty((), object)
                h[()] = a
                a = h
            elif not a.flags.c_contiguous:
                a = np.array(a, order="C")   # (np.ascontiguousarray would make a 0-d output 1-d)
            out[name] = self.provider.adopt(a, ledger)
            v = vals.get(name)
            if shapes is not None and v is not None and (v.shape is None or not v.is_static):
                shapes[name] = (tuple(a.shape), a.dtype)
            if record is not None:
                record[name] = np.array(a, copy=True)
        return out


def ort_provider(ep: str, options: dict | None = None, **session) -> OrtProvider:
    """``ort_provider("openvino", {"device_type": "CPU"})``: the EP as a provider (``session``:
    ``graph_optimization_level``, ``library``)."""
    return OrtProvider(canonical_ep(ep), options, session)


def resolve_name(text: str) -> OrtProvider:
    """The provider for an ``ort:`` name (the registry's prefix resolver)."""
    ort_module()
    ep, opts, session = parse_name(text)
    return OrtProvider(ep, opts, session)


# -- ORT's device selection policies ------------------------------------------------------------
def device_policies() -> tuple[str, ...]:
    """Names of ``onnxruntime.OrtExecutionProviderDevicePolicy`` (``PREFER_NPU``, ...)."""
    return tuple(ort_module().OrtExecutionProviderDevicePolicy.__members__)


def is_device_policy(name) -> bool:
    if not isinstance(name, str):
        return False
    key = name.strip().upper().removeprefix("ORT:")
    try:
        return key in device_policies()
    except MissingDependencyError:
        return key in ("DEFAULT", "PREFER_CPU", "PREFER_NPU", "PREFER_GPU", "MAX_PERFORMANCE", "MAX_EFFICIENCY",
                       "MIN_OVERALL_POWER")


@dataclass(frozen=True)
class PolicyChoice:
    """What ORT's device selection policy chose for a model on this machine."""

    policy: str
    providers: tuple
    """``ort:`` provider names in ORT's order."""
    seen: tuple
    """The EP devices ORT offered: ``EP on TYPE (vendor)``."""
    note: str
    """One line: the devices seen, and why these were chosen."""


def policy_choice(model_bytes: bytes, policy: str) -> PolicyChoice:
    """The EP devices ORT's ``policy`` picks for ``model_bytes`` here, in its order: a session is
    created with ``SessionOptions.set_provider_selection_policy`` and dropped."""
    ort = ort_module()
    key = policy.strip().upper().removeprefix("ORT:")
    members = ort.OrtExecutionProviderDevicePolicy.__members__
    if key not in members:
        raise ArgumentValueError(f"unknown ORT device policy {policy!r}; valid: {', '.join(members)}")
    register_plugins()
    devs = ort.get_ep_devices()
    seen = tuple(f"{d.ep_name} on {str(d.device.type).split('.')[-1]} ({d.device.vendor})" for d in devs)
    so = session_options(optimize="disable")
    so.set_provider_selection_policy(members[key])
    try:
        sess = ort.InferenceSession(model_bytes, so)
    except Exception as e:  # noqa: BLE001
        raise ProviderUnavailableError(f"ORT's {key} policy could not create a session: {_message(e)}") from e
    chosen = [p for p in sess.get_providers()]
    del sess
    names = tuple(PREFIX + short_name(p) for p in chosen)
    bridge = [p for p in ort.get_available_providers() if p not in {d.ep_name for d in devs}
              and p not in ("AzureExecutionProvider",)]
    note = (f"ORT's {key} policy saw {len(devs)} EP device(s) ({'; '.join(seen) or 'none'}) and chose "
            f"{', '.join(chosen)} in that order"
            + (f"; provider-bridge EPs ({', '.join(bridge)}) are not devices, so no policy picks them"
               if bridge else ""))
    return PolicyChoice(key, names, seen, note)


__all__ = ["OrtProvider", "OrtPartitionRunner", "ort_provider", "resolve_name", "parse_name", "provider_name",
           "export_nodes", "node_names", "graph_digest", "capability", "Capability", "route", "Route", "ep_table",
           "available_names", "ep_devices", "register_plugins", "register_library", "policy_choice",
           "PolicyChoice", "device_policies", "is_device_policy", "assignment", "open_session", "PREFIX"]


# -- what a real session did ----------------------------------------------------------------------
class AssignedProvider(OrtProvider):
    """An ORT EP that claims exactly the nodes a real ORT session assigned to it on one graph
    (see :func:`hetero_explore.planner.ortplan.plan_from_ort`); it executes as its EP does."""

    def __init__(self, ep: str, options: dict | None, session: dict | None, graph, names: set, placed: dict):
        super().__init__(ep, options, session)
        self._graph = weakref.ref(graph)
        self._names = frozenset(names)
        #: node name → the EP ORT assigned it to (every node of the graph)
        self._placed = dict(placed)

    def capability_key(self):
        return None     # the answers hold for one assignment of one graph

    def supports(self, ctx: KernelContext) -> KernelMatch:
        graph = ctx.graph
        if graph is None or self._graph() is not graph:
            return KernelMatch.no(f"{self.name} holds ORT's assignment of another graph")
        name = node_names(graph)[ctx.node.id]
        if name in self._names:
            return KernelMatch.yes()
        where = self._placed.get(name)
        return KernelMatch.no(f"the ORT session assigned it to {where}" if where else
                              "the ORT session assigned it to no EP")


def session_assignment(graph, providers) -> tuple[list, dict[str, list[str]]]:
    """(the ``OrtProvider`` s, EP name → node names) of one ORT session over ``graph`` with
    ``providers`` (``ort:`` names or providers, in priority order; ORT's graph optimisations off
    so that node names stay the IR's)."""
    ort = ort_module()
    provs = [p if isinstance(p, OrtProvider) else resolve_name(p if str(p).lower().startswith(PREFIX)
                                                              else PREFIX + str(p)) for p in providers]
    so = session_options(optimize="disable", record=True)
    for p in provs:
        r = p.route
        if r.kind == "none":
            raise ProviderUnavailableError(f"{p.name}: {r.reason}")
        if r.kind == "plugin":
            so.add_provider_for_devices(list(r.devices), dict(p.options))
        else:
            so.add_provider(p.ep, {k: str(v) for k, v in p.options.items()})
    try:
        sess = ort.InferenceSession(graph_digest(graph)[1], so)
    except Exception as e:  # noqa: BLE001
        raise ProviderUnavailableError(f"ORT could not create the session with {', '.join(p.ep for p in provs)}: "
                                       f"{_message(e)}") from e
    return provs, assignment(sess)
