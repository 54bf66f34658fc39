"""Data-only products of observed inputs, computed once per model.

Both XᵀX and Xᵀy read all of X from memory, and for large N that reading is the whole cost, so
they are accumulated together over row blocks small enough to stay in cache: one pass over X.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dsyrk

_ROWS = 8192  # rows per block: 8192 × D doubles stays in L2 for the D of regression problems


def gram(X: np.ndarray, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(XᵀX, Xᵀy) in one blocked pass over the rows of X (Xᵀy is None without y)."""
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


def cached_gram(params: dict, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """XᵀX (and Xᵀy for a given y) of an inner product's X, cached in its parameters."""
    cache = params.setdefault("products", {})
    X2 = params["X"].reshape(-1, params["X"].shape[-1])
    if y is not None:
        key = ("xty", id(y))
        if key not in cache:
            G, b = gram(X2, y)
            cache["xtx"], cache[key] = G, b
        return cache["xtx"], cache[key]
    if "xtx" not in cache:
        cache["xtx"] = gram(X2)[0]
    return cache["xtx"], None


def weighted_gram(X: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Xᵀdiag(e)X.  When e ≤ 0 (the precision part of a log-concave factor's message) it is −BᵀB with
    B = diag(√−e)X, symmetric rank-k updates (BLAS syrk) at half the flops of a general product, over
    row blocks so that each scaled block is still in cache when syrk reads it."""
    if not np.all(e <= 0.0):
        return X.T @ (e[:, None] * X)
    r = np.sqrt(-e)
    upper = np.zeros((X.shape[1],) * 2, order="F")
    for s in range(0, X.shape[0], _ROWS):
        B = r[s:s + _ROWS, None] * X[s:s + _ROWS]
        # B.T is Fortran-ordered: accumulate the upper triangle of −BᵀB in place
        upper = dsyrk(-1.0, B.T, beta=1.0, c=upper, trans=0, overwrite_c=1)
    return np.triu(upper) + np.triu(upper, 1).T
