"""One read of an array of inputs: the first entry that is not finite or beyond a magnitude.

The build-time checks of the inputs (``factorgraph.graph.checks``) ask of every constant array whether all its
entries are finite and within ±``limit``.  In numpy that is ``np.isfinite`` and ``np.abs(x) > limit``: two
temporary arrays and four passes over an input matrix that may hold 10⁷ entries, several times the cost of
its Gram matrix.  The kernel reads it once and stops at the first bad entry.  It is built (compiled, or loaded
from numba's cache) on its first call, so that ``import factorgraph`` does not start numba's code generator.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

_BUILT: dict[str, Any] = {}


def _first_bad(flat: np.ndarray, limit: float) -> int:
    for i in range(flat.size):
        if not abs(flat[i]) <= limit:  # NaN compares false: caught too
            return i
    return -1


def first_out_of_range(arr: np.ndarray, limit: float) -> int:
    """The flat index (in the order of ``np.ravel(arr, order="K")``) of the first entry x of the float array
    ``arr`` with not |x| ≤ ``limit`` (NaN, ±inf or too large), or −1 if there is none."""
    kernel = _BUILT.get("first_bad")
    if kernel is None:
        kernel = _BUILT["first_bad"] = njit(cache=True, nogil=True)(_first_bad)
    flat = np.ravel(np.asarray(arr, dtype=np.float64), order="K")
    return int(kernel(flat, float(limit)))


__all__ = ["first_out_of_range"]
