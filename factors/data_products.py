"""Products of observed inputs X with per-row weights: the passes over X that a sweep makes.

For large N reading X from memory is most of the cost of a product, so each function reads X once,
over row blocks small enough to stay in cache, and computes everything it needs from a block while
the block is there (XᵀX with Xᵀy; Xᵀdiag(e)X with Xᵀh; X·E[w] with the rows' x_nᵀE[wwᵀ]x_n).

Within ``row_threads(n)`` (the engine's non-conjugate sweeps, where BLAS runs on one thread so that
its idle threads do not spin on the cores numba's kernels need) the row ranges of the large passes
run on n threads of a pool that sleeps between passes: BLAS and numpy release the GIL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache

import numpy as np

_ROWS = 8192  # rows per block: 8192 × D doubles stays in L2 for the D of regression problems
_threads = 1  # row ranges per pass (set by row_threads)


@contextmanager
def row_threads(n: int | None = None) -> Iterator[None]:
    """Run the large passes over X on ``n`` threads (default: one per core) inside the block."""
    global _threads
    old, _threads = _threads, max(1, n or _usable_cores())
    try:
        yield
    finally:
        _threads = old


def _usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


@cache
def _pool(n: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=n, thread_name_prefix="fgvmp-rows")


_MIN_WORK = 1 << 19  # rows × columns per range below which a thread's dispatch costs more than it saves


def _ranges(N: int, width: int) -> list[tuple[int, int]]:
    """Contiguous row ranges, one per thread when the pass (N rows of ``width`` columns of work each) is
    large enough for threads to gain."""
    parts = max(1, min(_threads, N * width // _MIN_WORK))
    cuts = np.linspace(0, N, parts + 1).astype(int)
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _over_rows(fn: Callable[[int, int], object], N: int, width: int) -> list:
    """``fn(start, stop)`` on each of ``_ranges(N, width)``, on the pool's threads when there are several."""
    r = _ranges(N, width)
    if len(r) == 1:
        return [fn(*r[0])]
    return list(_pool(len(r)).map(fn, *zip(*r, strict=True)))


def is_lazy(a: object) -> bool:
    """Whether ``a`` is a ``dask.array`` (checked without importing dask): its products are reductions over
    its chunks, computed by dask, never by the blocked loops below."""
    return type(a).__module__.startswith("dask.array") and hasattr(a, "chunks")


def gram(X: np.ndarray, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(XᵀX, Xᵀy) in one blocked pass over the rows of X (Xᵀy is None without y).

    A dask X (or y) gives XᵀX = Σ_c X_cᵀX_c and Xᵀy = Σ_c X_cᵀy_c over its chunks c, computed by dask in one
    pass that reads each chunk once (no chunk is gathered into this process); the results are numpy arrays.
    """
    if is_lazy(X) or is_lazy(y):
        return _lazy_gram(X, y)
    N, D = X.shape
    if N <= _ROWS:
        return X.T @ X, (None if y is None else X.T @ y)
    G = np.zeros((D, D))
    b = None if y is None else np.zeros(D)
    for s in range(0, N, _ROWS):
        Xc = X[s:s + _ROWS]
        G += Xc.T @ Xc
        if b is not None:
            b += Xc.T @ y[s:s + _ROWS]
    return G, b


def computed(*values: object) -> tuple:
    """The values with every dask array among them computed, all in one ``dask.compute`` (so that reductions
    of the same chunks share one pass over them) into numpy arrays; other values pass through unchanged."""
    lazy = [i for i, v in enumerate(values) if is_lazy(v)]
    if not lazy:
        return values
    import dask

    out = list(values)
    for i, v in zip(lazy, dask.compute(*(values[i] for i in lazy)), strict=True):
        out[i] = np.asarray(v)
    return tuple(out)


def _lazy_gram(X, y, squares=False):
    """(XᵀX, Xᵀy) of dask X and y (and yᵀy with ``squares``) by one ``dask.compute``."""
    import dask.array as da

    X = da.asarray(X)
    if y is None:
        return computed(X.T @ X)[0], None
    y = da.asarray(y).rechunk((X.chunks[0],))
    G, b, yty = computed(X.T @ X, X.T @ y, y @ y) if squares else (*computed(X.T @ X, X.T @ y), None)
    return (G, b, float(yty)) if squares else (G, b)


def cached_gram(params: dict, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """XᵀX (and Xᵀy for a given y) of an inner product's X, cached in its parameters (with y, yᵀy too: see
    ``cached_yty``; for dask data the three come from one pass over the chunks)."""
    cache = params.setdefault("products", {})
    X2 = params["X"].reshape(-1, params["X"].shape[-1])
    if y is not None:
        key = ("xty", id(y))
        if key not in cache:
            if is_lazy(X2) or is_lazy(y):
                G, b, yty = _lazy_gram(X2, y, squares=True)
            else:
                (G, b), yty = gram(X2, y), float(y @ y)
            cache["xtx"], cache[key], cache[("yty", id(y))] = G, b, yty
        return cache["xtx"], cache[key]
    if "xtx" not in cache:
        cache["xtx"] = gram(X2)[0]
    return cache["xtx"], None


def cached_yty(params: dict, y: np.ndarray) -> float:
    """yᵀy of the outputs y of an inner product's rows, cached with its XᵀX and Xᵀy by ``cached_gram``."""
    cached_gram(params, y)
    return params["products"][("yty", id(y))]


def projected_moments(X: np.ndarray, mean: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X·E[w_k], x_nᵀE[w_k w_kᵀ]x_n) for K weight vectors: ``mean`` (K, D), ``second`` (K, D, D) →
    two (N, K) arrays, from one product X·[E[w_1] … E[w_K] | E[w_1w_1ᵀ] … E[w_Kw_Kᵀ]] per row block."""
    N, D = X.shape
    K = mean.shape[0]
    M = np.concatenate([mean.T, second.transpose(1, 0, 2).reshape(D, K * D)], axis=1)
    m, s = np.empty((N, K)), np.empty((N, K))

    def rows(a: int, b: int) -> None:
        # one buffer per range: a fresh large temporary per block costs page faults that serialise threads
        P = np.empty((min(_ROWS, b - a), M.shape[1]))
        for c in range(a, b, _ROWS):
            Xc = X[c:min(b, c + _ROWS)]
            Pc = np.matmul(Xc, M, out=P[:len(Xc)])
            m[c:c + len(Xc)] = Pc[:, :K]
            np.einsum("nkd,nd->nk", Pc[:, K:].reshape(len(Xc), K, D), Xc, out=s[c:c + len(Xc)])

    _over_rows(rows, N, M.shape[1])
    return m, s


def weighted_grams(X: np.ndarray, E: np.ndarray, H: np.ndarray | None = None
                   ) -> tuple[np.ndarray | None, np.ndarray]:
    """(Hᵀ X, [Xᵀdiag(E[:, k])X]_k): the message a weight vector per column k of (H, E) (N, K) gets from
    the rows, in one pass over the row blocks of X (without H, only the Gram matrices; Hᵀ X is None).

    A column of E that is ≤ 0 (the precision part of a log-concave factor's message) gives −BᵀB with
    B = diag(√−e)X: a symmetric rank-k update (BLAS syrk) at half the flops of a general product.
    The products are ``np.dot`` into small outputs and the scaled block reuses one buffer: in our
    measurements ``@`` and fresh large temporaries did not run in parallel on two threads.
    """
    N, D = X.shape
    K = E.shape[1]
    neg = np.all(E <= 0.0, axis=0)
    R = np.sqrt(np.where(neg, -E, 0.0))

    def rows(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        lin, acc = np.zeros((K, D)), np.zeros((K, D, D))
        B = np.empty((min(_ROWS, b - a), D))
        for c in range(a, b, _ROWS):
            sl = slice(c, min(b, c + _ROWS))
            Xc = X[sl]
            Bc = B[:len(Xc)]
            if H is not None:
                lin += np.dot(H[sl].T, Xc)
            for k in range(K):
                if neg[k]:  # numpy computes BᵀB by syrk
                    np.multiply(R[sl, k, None], Xc, out=Bc)
                    acc[k] -= np.dot(Bc.T, Bc)
                else:
                    np.multiply(E[sl, k, None], Xc, out=Bc)
                    acc[k] += np.dot(Xc.T, Bc)
        return lin, acc

    parts = _over_rows(rows, N, K * D)
    return (None if H is None else sum(p[0] for p in parts)), sum(p[1] for p in parts)
