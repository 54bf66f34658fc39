r"""``exp`` of non-positive arguments and ``log1p`` on [0, 1] without calls to libm, so that LLVM
vectorises the loops that use them (numba has no vector math library here: a loop calling ``math.exp``
runs one element at a time).  The handlers' site kernels evaluate S draws × N points per objective
evaluation, and these two functions were most of their time.

``exp(y)``, ``y ≤ 0``: ``y = n ln 2 + r`` with ``n = round(y / ln 2)`` (Cody–Waite: ``ln 2`` in two parts,
the first exact when multiplied by ``|n| < 2¹¹``), ``|r| ≤ ½ ln 2``; ``eʳ`` by its Taylor polynomial of
degree 13 (truncation below 5e-18 relative) and ``2ⁿ`` assembled from its exponent bits.  Arguments below
``−708`` give 0 (the result would be subnormal).

``log1p(e)``, ``0 ≤ e ≤ 1``: ``2 atanh(z)`` with ``z = e / (2 + e) ≤ ⅓``, the odd series to ``z³¹``
(truncation below 2e-17 relative).

Both agree with libm to a few ulp (the tests check 1e-15 relative on dense grids).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_LN2_HI = 6.93147180369123816490e-01  # ln 2 rounded to 32 significant bits: n·_LN2_HI is exact for |n| < 2¹¹
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.0 / math.log(2.0)
EXP_MIN = -708.0


@njit(cache=True, inline="always")
def _exp_parts(y: float) -> tuple[float, int]:
    """(p, n) with exp(y) = p·2ⁿ, for EXP_MIN ≤ y ≤ 0."""
    n = math.floor(y * _INV_LN2 + 0.5)
    r = (y - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 / 6227020800.0  # 1/13!, then Horner down to 1/0!
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p, int(n)


@njit(cache=True)
def exp_nonpositive(y: np.ndarray, out: np.ndarray, work: np.ndarray) -> None:
    """``out[i] = exp(y[i])`` for 1-D ``y ≤ 0`` (``work``: an int64 buffer of the same size).  Two
    vectorisable loops: the polynomial and the exponent bits of 2ⁿ, then their product.  ``out`` must not
    be ``y``: in place, the loops do not vectorise (about 6× slower)."""
    two = work.view(np.float64)
    for i in range(y.size):
        yi = y[i]
        p, n = _exp_parts(max(yi, EXP_MIN))
        work[i] = (n + 1023) << 52
        out[i] = p if yi >= EXP_MIN else 0.0
    for i in range(y.size):
        out[i] *= two[i]


@njit(cache=True, inline="always")
def log1p_unit(e: float) -> float:
    """``log(1 + e)`` for ``0 ≤ e ≤ 1`` by ``2 atanh(e / (2 + e))``."""
    z = e / (2.0 + e)
    z2 = z * z
    q = 1.0 / 31.0
    q = q * z2 + 1.0 / 29.0
    q = q * z2 + 1.0 / 27.0
    q = q * z2 + 1.0 / 25.0
    q = q * z2 + 1.0 / 23.0
    q = q * z2 + 1.0 / 21.0
    q = q * z2 + 1.0 / 19.0
    q = q * z2 + 1.0 / 17.0
    q = q * z2 + 1.0 / 15.0
    q = q * z2 + 1.0 / 13.0
    q = q * z2 + 1.0 / 11.0
    q = q * z2 + 1.0 / 9.0
    q = q * z2 + 1.0 / 7.0
    q = q * z2 + 1.0 / 5.0
    q = q * z2 + 1.0 / 3.0
    q = q * z2 + 1.0
    return 2.0 * z * q
