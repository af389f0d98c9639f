import os

# The CUDA simulator must be chosen before numba is first imported.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` first (otherwise in collection order): under pytest-xdist
    (test.sh) a long test collected late would start near the end and keep one worker busy
    after the others ran out of work; started first, the short tests fill in around them."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
