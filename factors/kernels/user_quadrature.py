"""Fused Gauss–Hermite sums of a compiled user log density (``fg.likelihood`` with a numba function).

For each row r and node g of the tensor grid, with L = log f(y_r, m_r + s_r ∘ z_g, c_r),

    out[r, 0] = Σ_g W[g, 0] L,   out[r, q] = Σ_g W[g, q] (L − L_centre)   (q ≥ 1),

in one parallel pass over blocks of rows (log f at a row's nodes kept in a small buffer), without the
(rows × nodes) arrays of the numpy path.  A non-finite L
records its node in ``bad[r]`` (−1 otherwise) and the caller reports it.  One kernel source per number of
Gaussian arguments k, constants c and whether y is passed, compiled once per log density (numba
specialises on the function passed in).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, vectorize

_KERNELS: dict[tuple[tuple[str, ...], bool], object] = {}

_TEMPLATE = '''
def kernel(f, Y, M, S, C, Z, W, centre, out, bad):
    R = M.shape[1]
    G = Z.shape[0]
    K = W.shape[1]
    B = 256
    for blk in prange((R + B - 1) // B):
        L = np.empty(G)  # one row's log f at the nodes, reused over the block's rows
        for r in range(blk * B, min(R, (blk + 1) * B)):
            bad[r] = -1
            for g in range(G):
                L[g] = f({args})
            for q in range(K):
                out[r, q] = 0.0
            L0 = L[centre]
            for g in range(G):
                if not math.isfinite(L[g]):
                    if bad[r] < 0:
                        bad[r] = g
                    continue
                out[r, 0] += W[g, 0] * L[g]
                d = L[g] - L0
                for q in range(1, K):
                    out[r, q] += W[g, q] * d
'''


def fused_kernel(spec: tuple[str, ...], observed: bool):
    """The compiled kernel for the log density's arguments after y in ``spec`` order: "g<j>" the j-th
    Gaussian argument, "c<i>" the i-th constant."""
    key = (spec, observed)
    fn = _KERNELS.get(key)
    if fn is None:
        def call(node: str) -> str:
            parts = ["Y[r]"] if observed else []
            for a in spec:
                j = int(a[1:])
                parts.append(f"M[{j}, r] + S[{j}, r] * Z[{node}, {j}]" if a[0] == "g" else f"C[{j}, r]")
            return ", ".join(parts)

        src = _TEMPLATE.format(args=call("g"))
        scope = {"prange": prange, "math": math, "np": np}
        exec(compile(src, f"<user quadrature kernel {spec} y={observed}>", "exec"), scope)  # noqa: S102
        fn = njit(parallel=True, cache=False)(scope["kernel"])
        _KERNELS[key] = fn
    return fn


_SCALAR: dict[object, object] = {}
_ARRAY: dict[object, object] = {}


def array_function(fn):
    """A log density callable on arrays: an ``@njit`` scalar function made a lazily compiled numba ufunc (once
    per function); anything else as it is."""
    if hasattr(fn, "py_func") and hasattr(fn, "compile") and not hasattr(fn, "_dispatcher"):
        got = _ARRAY.get(fn.py_func)
        if got is None:
            got = _ARRAY[fn.py_func] = vectorize(cache=False)(fn.py_func)
        return got
    return fn


def scalar_function(fn):
    """The numba-compiled scalar function behind a log density, or None: a ``@numba.vectorize`` ufunc's
    Python function compiled by ``njit`` (once per function), or an ``@njit`` function as given."""
    if hasattr(fn, "py_func") and hasattr(fn, "compile"):  # numba Dispatcher (@njit)
        return fn
    py = getattr(getattr(fn, "_dispatcher", None), "py_func", None)  # @vectorize: a ufunc or a DUFunc
    if py is None:
        return None
    got = _SCALAR.get(py)
    if got is None:
        got = _SCALAR[py] = njit(cache=False)(py)
    return got


def fused_sums(f, spec: tuple[str, ...], Y: np.ndarray | None, M: np.ndarray, S: np.ndarray, C: np.ndarray,
               Z: np.ndarray, W: np.ndarray, centre: int) -> tuple[np.ndarray, np.ndarray]:
    """(sums (R, 1 + 2k), first bad node per row (−1: none)); M, S (k, R) means and standard deviations,
    C (c, R) constants, Y (R,) the data or None."""
    R = M.shape[1]
    kernel = fused_kernel(spec, Y is not None)
    out = np.empty((R, W.shape[1]))
    bad = np.empty(R, dtype=np.int64)
    kernel(f, Y if Y is not None else np.empty(0), M, S, C, Z, W, centre, out, bad)
    return out, bad
