"""Compile the kernels ahead of time into numba's on-disk cache.

``hetero-explore warmup`` (run by ``setup.sh``) executes the bundled demo model and
small instances of the generated model families on the CPU provider (and on the
CUDA provider when a GPU is present), which compiles every kernel signature they
launch; later processes load those kernels from the cache instead of compiling
them. The cache is keyed on the kernel sources (see ``kernels/target.py``),
so a warm-up never serves stale kernels after an edit: it is simply redone.
"""

from __future__ import annotations

import time
from typing import Callable


def _jobs():
    from ..data import demo, models
    return [
        ("demo", lambda: (demo.demo_model(), {"input_shapes": demo.demo_input_shapes()})),
        ("mlp", lambda: (models.mlp("tiny"), {})),
        ("cnn", lambda: (models.cnn("tiny"), {})),
        ("transformer", lambda: (models.transformer("tiny"), {})),
        ("chain", lambda: (models.chain("tiny"), {})),
        ("resnet18-like", lambda: (models.resnet18_like(image=32, width=8), {})),
    ]


def warmup(progress: Callable[[str], None] | None = None, providers=("cpu",)) -> dict:
    """Run every warm-up model on each provider; returns {job: seconds}."""
    from ..execution.executor import execute_reference
    from ..execution.inputs import random_inputs
    from ..load.loader import load_model
    from ..providers import resolve
    say = progress or (lambda s: None)
    jobs = _jobs()
    out = {}
    for k, (name, make) in enumerate(jobs, 1):
        for pname in providers:
            p = resolve(pname)
            if not p.available()[0]:
                continue
            t = time.perf_counter()
            model, kw = make()
            g = load_model(model, **kw)
            execute_reference(g, p, random_inputs(g, seed=0))
            out[f"{name}@{pname}"] = time.perf_counter() - t
            say(f"compiling kernels ({k}/{len(jobs)}): {name} on {pname} {out[f'{name}@{pname}']:.1f} s")
    return out
