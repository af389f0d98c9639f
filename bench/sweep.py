"""Sweep throughput: models per second for 1 and 2 Dask workers, and the in-process loop.

    python bench/sweep.py [--models 24] [--execute] [--workers 1,2]

Generates a directory of models with ``hetero_explore.data.models`` (MLPs, CNNs, transformers,
chains with different seeds and sizes), then sweeps them on ``gpu,cpu`` and ``cpu`` with and
without a Relu deny mask: first in-process (``client="in-process"``: the same task function
in a plain loop), then on a ``LocalCluster`` of N worker processes for each N. Cluster
figures are given with and without the cluster's start-up (worker processes importing the
package and warming numba's cache); the steady-state rate is what a long sweep sees.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_models(d: Path, n: int) -> list[str]:
    import onnx
    from hetero_explore.data import models
    makers = [lambda s: models.mlp("tiny", seed=s), lambda s: models.cnn("tiny", seed=s),
              lambda s: models.transformer("tiny", seed=s), lambda s: models.chain("tiny", seed=s)]
    out = []
    for i in range(n):
        p = d / f"m{i:03d}.onnx"
        onnx.save(makers[i % len(makers)](i), str(p))
        out.append(str(p))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=24)
    ap.add_argument("--execute", action="store_true")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    import hetero_explore as he
    from hetero_explore.analysis.fleet import IN_PROCESS, _warm_worker
    kw = dict(providers=["gpu,cpu", "cpu"], masks=[{}, {"gpu": ["Relu"]}], execute=args.execute)
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_models(Path(tmp), args.models)
        he.sweep(paths[:1], client=IN_PROCESS, **kw)            # warm this process, as a worker warms
        t = time.perf_counter()
        df = he.sweep(paths, client=IN_PROCESS, **kw)
        base = time.perf_counter() - t
        rows = len(df)
        print(f"{args.models} models x 2 provider lists x 2 masks = {rows} rows; execute={args.execute}; "
              f"{os.cpu_count()} cores")
        print(f"{'mode':<22}{'wall s':>9}{'models/s':>10}{'rows/s':>9}{'steady rows/s':>15}")
        print(f"{'in-process loop':<22}{base:>9.2f}{args.models / base:>10.2f}{rows / base:>9.1f}{rows / base:>15.1f}")
        from distributed import Client, LocalCluster
        for n in (int(x) for x in args.workers.split(",")):
            t0 = time.perf_counter()
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                   silence_logs=40)
            client = Client(cluster)
            try:
                client.run(_warm_worker)
                t1 = time.perf_counter()
                df2 = he.sweep(paths, client=client, **kw)
                t2 = time.perf_counter()
            finally:
                client.close()
                cluster.close()
            assert (df2["partitions"].fillna(-1) == df["partitions"].fillna(-1)).all()
            wall, steady = t2 - t0, t2 - t1
            print(f"{f'dask, {n} worker(s)':<22}{wall:>9.2f}{args.models / wall:>10.2f}{rows / wall:>9.1f}"
                  f"{rows / steady:>15.1f}")


if __name__ == "__main__":
    main()
