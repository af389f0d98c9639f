import os

# The CUDA simulator must be chosen before numba is first imported.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` first (otherwise in collection order): under pytest-xdist
    (test.sh) a long test collected late would start near the end and keep one worker busy
    after the others ran out of work; started first, the short tests fill in around them."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _simulator_choice_kept():
    """A test that changes ``NUMBA_ENABLE_CUDASIM`` for good changes what every later test in
    its worker finds (the CUDA provider reads it): put it back and fail the test that did."""
    before = os.environ.get("NUMBA_ENABLE_CUDASIM")
    yield
    after = os.environ.get("NUMBA_ENABLE_CUDASIM")
    if after != before:
        if before is None:
            os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
        else:
            os.environ["NUMBA_ENABLE_CUDASIM"] = before
        pytest.fail(f"the test left NUMBA_ENABLE_CUDASIM={after!r} (it was {before!r}); use monkeypatch or a copy "
                    "of os.environ")
