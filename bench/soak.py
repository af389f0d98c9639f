"""Soak: many runs of one model interleaved with failing runs; is memory flat?

    NUMBA_ENABLE_CUDASIM=1 python bench/soak.py              # 10,000 runs
    NUMBA_ENABLE_CUDASIM=1 python bench/soak.py --runs 2000

The model gathers rows of an input by an index input, then Relu (denied on
the gpu, so every run makes transfers) and MatMul, planned on gpu,cpu. Every
``--fail-every``-th run fails: alternately with bad feeds (an InputValidationError
before anything is allocated) and with an out-of-range index (an error midway,
after buffers were allocated on both providers). RSS and each provider's live
bytes are sampled every ``--sample`` runs; the verdict compares the samples after
warm-up with the last ones.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import hetero_explore as he  # noqa: E402


def model():
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.arange(16, dtype=np.float32).tolist())
    nodes = [helper.make_node("Gather", ["x", "i"], ["g"], axis=0), helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["y"])]
    g = helper.make_graph(nodes, "soak", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4]),
                                          helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], initializer=[w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def rss_bytes() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--fail-every", type=int, default=5)
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--rss-tolerance-mb", type=float, default=8.0)
    args = ap.parse_args(argv)
    g = he.load_model(model())
    provs = [he.mask(he.providers.virtual_gpu(), deny=["Relu"]), he.providers.cpu()]
    p = he.plan(g, provs)
    from hetero_explore.providers import unmask
    owners = {prov.name: unmask(prov) for prov in p.providers}  # a mask counts on what it wraps
    good = {"x": np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32),
            "i": np.array([1, 7], np.int64)}
    expect = he.execute(p, good).outputs["y"]
    bad_feed = {"x": good["x"].astype(np.float64), "i": good["i"]}
    bad_index = {"x": good["x"], "i": np.array([1, 8], np.int64)}
    samples = []  # (run, rss, {provider: live bytes})
    counts = {"ok": 0, "typed": 0, "other": 0, "wrong": 0}
    t0 = time.perf_counter()
    for k in range(args.runs):
        fail = args.fail_every and k % args.fail_every == args.fail_every - 1
        feeds = (bad_feed if (k // args.fail_every) % 2 else bad_index) if fail else good
        try:
            out = he.execute(p, feeds).outputs["y"]
            if fail or not np.array_equal(out, expect):
                counts["wrong"] += 1
            else:
                counts["ok"] += 1
        except he.HeteroExploreError:
            counts["typed" if fail else "wrong"] += 1
        except Exception as e:  # noqa: BLE001 - counted and shown
            counts["other"] += 1
            if counts["other"] <= 3:
                print(f"  run {k}: untyped {type(e).__name__}: {e}")
        if k % args.sample == 0 or k == args.runs - 1:
            gc.collect()
            samples.append((k, rss_bytes(), {n: int(getattr(o, "live_bytes", -1)) for n, o in owners.items()}))
    secs = time.perf_counter() - t0
    warm = samples[len(samples) // 10:]
    first, last = warm[:max(1, len(warm) // 10)], warm[-max(1, len(warm) // 10):]
    r0 = float(np.median([s[1] for s in first]))
    r1 = float(np.median([s[1] for s in last]))
    growth_mb = (r1 - r0) / 2 ** 20
    live = {n: sorted({s[2][n] for s in samples}) for n in owners}
    rss_flat = growth_mb <= args.rss_tolerance_mb
    live_flat = all(v == [0] for v in live.values())
    print(f"{args.runs} runs in {secs:.1f} s ({1e6 * secs / args.runs:.0f} µs/run): ok {counts['ok']}, failing as "
          f"expected (typed) {counts['typed']}, wrong {counts['wrong']}, untyped {counts['other']}")
    print(f"RSS after warm-up {r0 / 2 ** 20:.1f} MiB -> at the end {r1 / 2 ** 20:.1f} MiB ({growth_mb:+.2f} MiB; "
          f"min {min(s[1] for s in warm) / 2 ** 20:.1f}, max {max(s[1] for s in warm) / 2 ** 20:.1f}): "
          f"{'flat' if rss_flat else 'GROWING'}")
    print("live bytes between runs, per provider: " + ", ".join(f"{n}: {v}" for n, v in live.items())
          + f": {'flat (0)' if live_flat else 'NOT ZERO'}")
    ok = rss_flat and live_flat and counts["wrong"] == 0 and counts["other"] == 0
    print("verdict:", "both flat" if ok else "NOT flat / contract broken")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
