"""What every CPU fast path shares: its numba options and when it runs threaded."""

from __future__ import annotations

#: njit options of the fast paths: no fastmath (no contraction, no reassociation); a float32
#: division by zero gives IEEE inf/NaN (error_model="numpy"); the GIL released while they run
JIT = dict(cache=True, error_model="numpy", nogil=True)
#: njit options of the threaded paths: ``prange`` over independent output blocks (planes, batches);
#: each output element is still computed by one iteration with one fixed sequence, so the results
#: are the same bits for any ``numba.set_num_threads``
PAR = dict(JIT, parallel=True)
#: multiply-adds below which a kernel stays on the calling thread (a parallel region costs a
#: thread wake-up, and far more on a machine whose cores are all busy)
PAR_WORK = 1 << 18
