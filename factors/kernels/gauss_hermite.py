r"""Gauss–Hermite rules for expectations under a univariate Gaussian.

With the probabilists' rule ``(z_i, w_i)`` (``Σ w_i = 1``, exact for polynomials of degree ``2n − 1``
against the standard normal density),

.. math:: \mathbb E_{N(m, v)}[g(x)] \approx \sum_i w_i\, g(m + \sqrt v\, z_i).

The derivatives with respect to the mean and the variance follow from Stein's identities on the same
nodes (so they are the exact derivatives of the quadrature value):

.. math:: \partial_m \mathbb E[g] = \mathbb E[g(x)\, z]/\sqrt v, \qquad
          \partial_v \mathbb E[g] = \mathbb E[g(x)\,(z^2 - 1)]/(2v), \qquad z = (x - m)/\sqrt v.

The node count must make the error negligible for the variances in use: a function analytic in a strip
of half-width ``d`` around the real axis (in x) is integrated with error ~ ``exp(−c d √(n/v))``. For the
logistic family the kernels in :mod:`.logistic` switch to an exact series above ``v ≈ 0.6``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=32)
def _rule(n: int) -> tuple[np.ndarray, np.ndarray]:
    t, w = np.polynomial.hermite.hermgauss(n)
    z = np.ascontiguousarray(t * math.sqrt(2.0))
    w = np.ascontiguousarray(w / math.sqrt(math.pi))
    z.setflags(write=False)
    w.setflags(write=False)
    return z, w


def normal_rule(n: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Hermite nodes and weights for the standard normal density.

    Parameters
    ----------
    n : int, default 32
        Number of nodes.

    Returns
    -------
    z, w : ndarray, shape (n,)
        Nodes and weights (read-only) with ``Σ w_i = 1`` and ``Σ w_i z_i^{2j}`` equal to the normal moments
        ``(2j − 1)!!`` for ``2j ≤ 2n − 1``; ``E[g(x)] ≈ Σ_i w_i g(m + √v z_i)`` for ``x ~ N(m, v)``.
    """
    if int(n) < 1:
        raise ValueError(f"normal_rule: n must be a positive integer, got {n!r}")
    return _rule(int(n))


def gaussian_expectation(
    g: Callable[[np.ndarray], np.ndarray],
    m: np.typing.ArrayLike,
    v: np.typing.ArrayLike,
    n: int = 32,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Gauss–Hermite expectation of a vectorised function and its derivatives in ``(m, v)``.

    .. math:: E(m, v) = \sum_i w_i\, g(m + \sqrt v z_i), \quad
              \partial_m E = \sum_i w_i\, g_i z_i / \sqrt v, \quad
              \partial_v E = \sum_i w_i\, g_i (z_i^2 - 1) / (2v).

    Parameters
    ----------
    g : callable
        Vectorised numpy function of ``x`` (called once on an array of shape ``broadcast + (n,)``).
    m, v : array_like
        Mean and variance (``v > 0``) of the Gaussian, broadcast together.
    n : int, default 32
        Number of nodes.

    Returns
    -------
    value, d_dm, d_dv : ndarray
        Arrays of the broadcast shape of ``m`` and ``v``.

    Notes
    -----
    A generic (numpy, not numba) helper for site potentials without a dedicated kernel; it is accurate
    only when ``g`` is smooth on the scale ``√v``.
    """
    z, w = normal_rule(n)
    m, v = np.broadcast_arrays(np.asarray(m, dtype=np.float64), np.asarray(v, dtype=np.float64))
    s = np.sqrt(v)[..., None]
    gx = np.asarray(g(m[..., None] + s * z), dtype=np.float64)
    value = gx @ w
    d_dm = (gx * z) @ w / s[..., 0]
    d_dv = (gx * (z * z - 1.0)) @ w / (2.0 * v)
    return value, d_dm, d_dv
