"""The BLAS and thread-pool policy of a run's sweeps.

Numba's parallel kernels and BLAS's threads take turns within a sweep; OpenBLAS's idle threads spin and
hold the cores the kernels need (a sweep of the N = 1e4 logistic model: 8 ms with both pools, 5 ms with
one-thread BLAS).  The large passes over X then run their row ranges on threads of their own
(``factors.data_products.row_threads``), which sleep between passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from functools import cache

import numba
from threadpoolctl import ThreadpoolController

from factors.data_products import row_threads

from .compiled import Compiled


@cache
def _blas_pools() -> ThreadpoolController:
    """The loaded BLAS thread pools, found once (a scan of the loaded libraries takes about 1 ms)."""
    return ThreadpoolController()


def _one_thread_blas():
    return _blas_pools().limit(limits=1, user_api="blas")


@contextmanager
def sweep_threads(c: Compiled) -> Iterator[None]:
    """One-thread BLAS and the shared row threads around the sweeps of a model with message-passing kernels
    (an unclaimed non-conjugate factor) or a handler; nothing otherwise."""
    kernels = any(not f.node.ftype.conjugate and f.claimed_by is None for f in c.factors)
    # a handler's optimiser makes many small products (draws × D by D × N, gradients, D × D factors) that threaded
    # BLAS runs slower than one thread (MVI on a 3000-row logistic regression: benchmarks/handler_blas_threads.py)
    kernels = kernels or bool(c.handlers)
    with _one_thread_blas() if kernels else nullcontext(), row_threads() if kernels else nullcontext():
        yield


@contextmanager
def chunk_threads(c: Compiled, threads: int | None) -> Iterator[None]:
    """The policy of ``sweep_threads`` for one chunk of a sharded run, whose kernels get ``threads`` threads (the
    cores of its Dask worker, or its share of this process's when the chunks run side by side here): numba's
    parallel kernels and the row passes use that many, BLAS one.  Without it several chunks' kernels each take
    every core of the machine and, with BLAS's spinning threads, a sweep costs several times the work it does."""
    n = max(1, min(int(threads or numba.config.NUMBA_NUM_THREADS), numba.config.NUMBA_NUM_THREADS))
    old = numba.get_num_threads()
    numba.set_num_threads(n)  # for this thread only
    try:
        with _one_thread_blas(), row_threads(n):
            yield
    finally:
        numba.set_num_threads(old)


__all__ = ["chunk_threads", "sweep_threads"]
