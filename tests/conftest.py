import os

# The CUDA simulator must be chosen before numba is first imported.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
