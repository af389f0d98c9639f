"""onnxruntime as an oracle in a process of its own: a model that crashes onnxruntime (it does:
InstanceNormalization over a 0-sized dim followed by Hardmax or TopK ends in SIGSEGV in 1.32)
must not take the fuzzer's worker, and the model under test, down with it.

:func:`run` sends the model and feeds to a child process (a plain subprocess, so that the
fuzzer's pool workers, daemonic processes, may start it; started once, and again after a crash)
and returns onnxruntime's outputs, or None when onnxruntime refused the model, failed, crashed
or overran ``timeout`` seconds (``last_failure`` says which)."""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys

_STATE: dict = {"proc": None}
last_failure = ""


def _send(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(struct.pack("<Q", len(data)) + data)
    f.flush()


def _recv(f):
    head = f.read(8)
    if len(head) < 8:
        raise EOFError
    (n,) = struct.unpack("<Q", head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)


def _main() -> None:
    """The child: run models until stdin closes."""
    import onnxruntime as ort
    ort.set_default_logger_severity(4)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            data, feeds = _recv(inp)
        except EOFError:
            return
        try:
            so = ort.SessionOptions()
            so.log_severity_level = 4
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
            names = [o.name for o in sess.get_outputs()]
            want = {i.name for i in sess.get_inputs()}
            res = sess.run(None, {k: v for k, v in feeds.items() if k in want})
            _send(out, ("ok", dict(zip(names, res))))
        except Exception as e:  # refused or failed: no oracle for this model
            _send(out, ("error", f"{type(e).__name__}: {str(e)[:300]}"))


def _start():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here] + [p for p in sys.path if p]))
    _STATE["proc"] = subprocess.Popen([sys.executable, "-c", "from support.ortserver import _main; _main()"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      env=env)


def _stop():
    p = _STATE["proc"]
    if p is not None:
        p.kill()
        p.wait(5)
    _STATE["proc"] = None


def run(model_bytes: bytes, feeds: dict, timeout: float = 120.0):
    """onnxruntime's outputs (name -> array), or None (see the module docs)."""
    global last_failure
    p = _STATE["proc"]
    if p is None or p.poll() is not None:
        _stop()
        _start()
        p = _STATE["proc"]
    try:
        _send(p.stdin, (model_bytes, feeds))
        ready, _, _ = select.select([p.stdout], [], [], timeout)
        if not ready:
            last_failure = f"onnxruntime overran {timeout:.0f} s"
            _stop()
            return None
        kind, payload = _recv(p.stdout)
    except (EOFError, OSError, BrokenPipeError):
        code = p.poll()
        last_failure = f"onnxruntime crashed (exit code {code})"
        _stop()
        return None
    if kind == "ok":
        last_failure = ""
        return payload
    last_failure = payload
    return None
