"""The fast fuzz run: a few hundred hostile cases, each in a capped child process.

Every case must end ``ok`` (onnxruntime agrees), ``unverified`` (we answered and
onnxruntime refused a model that is not known to be invalid) or ``typed`` (a
HeteroExploreError with a message): never untyped, wrong, crash or hang. The
cases and the contract are in ``fuzz_harness.py``; ``bench/fuzz.py`` runs more.

Cases that fail today because of bugs other work is fixing are marked
``xfail(strict=True)`` one by one (verified failing for that reason), so that
they turn red, and must be unmarked, the moment the fix lands.
"""

from __future__ import annotations

import pytest

import fuzz_harness as F

CASES = F.cases(n_mutate=120, n_names_seeds=3, cuda=True, seed=0)
TIMEOUT = 90.0   # generous: a fresh worker may compile kernels (cold numba cache) on a loaded machine

#: case id -> reason, each verified failing on this branch for that reason
KNOWN: dict = {}


@pytest.fixture(scope="module")
def results():
    res = F.run_cases(CASES, workers=2, timeout=TIMEOUT)
    s = F.summarize(res)
    print("\nfuzz:", "  ".join(f"{c}: {s['counts'][c]}" for c in F.CATEGORIES))
    return {r.case.id: r for r in res}


def _param(c):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[c.id])] if c.id in KNOWN else []
    return pytest.param(c, id=c.id, marks=marks)


def test_case_ids_are_unique():
    assert len({c.id for c in CASES}) == len(CASES)
    assert set(KNOWN) <= {c.id for c in CASES}


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_fuzz_case_keeps_the_contract(results, case):
    r = results[case.id]
    assert r.category not in F.FAILURES, f"{r.category}: {r.detail}"
