r"""Quadratic (Jaakkola–Jordan) bounds: the logistic JJ bound and Bouchard's softmax bound.

Jaakkola–Jordan: for every ``ξ``,

.. math:: \log(1 + e^z) \le \log(1 + e^\xi) + \frac{z - \xi}2 + \lambda(\xi)(z^2 - \xi^2), \qquad
          \lambda(\xi) = \frac{\tanh(\xi/2)}{4\xi}, \quad \lambda(0) = \tfrac18.

Under ``z ~ N(μ, v)`` the expectation is tightest at ``ξ² = μ² + v``, where it equals
``log(1+e^ξ) + (μ − ξ)/2 = ξ/2 + log(1 + e^{−ξ}) + μ/2``; for ``μ < 0`` the sum ``(ξ + μ)/2`` is formed as
``v / (2(ξ − μ))`` to avoid cancellation.

Bouchard (2007): ``lse(x) ≤ α + Σ_k log(1 + e^{x_k − α})`` for every ``α``; bounding each term by JJ with
``ξ_k² = (m_k − α)² + v_k`` gives a function ``B(α)`` which is convex (``B″ = 2Σ_k [λ_k + λ′(ξ_k)(m_k−α)²/ξ_k]
≥ 2Σ_k (ξλ)′ > 0``), with ``B′(α) = 1 − K/2 − 2Σ_k λ(ξ_k)(m_k − α)``; it is minimised by Newton's method
safeguarded by bisection on a bracket found by doubling.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._batch import broadcast_flat, broadcast_rows, restore
from .special import _log1pexp, _sigmoid


@njit(cache=True, inline="always")
def _jj_lambda(xi):
    """``λ(ξ) = tanh(ξ/2)/(4ξ)``; series ``(1/8)(1 − y²/3 + 2y⁴/15 − 17y⁶/315 + 62y⁸/2835)``, y = ξ/2, near 0."""
    x = abs(xi)
    if x < 0.1:
        y2 = 0.25 * x * x
        return 0.125 * (1.0 + y2 * (-1.0 / 3.0 + y2 * (2.0 / 15.0 + y2 * (-17.0 / 315.0 + y2 * 62.0 / 2835.0))))
    return math.tanh(0.5 * x) / (4.0 * x)


@njit(cache=True, inline="always")
def _jj_lambda_prime(xi):
    """``λ′(ξ)`` (ξ ≥ 0), by the series near 0."""
    x = abs(xi)
    if x < 0.1:
        y = 0.5 * x
        y2 = y * y
        # d/dξ of (1/8) T(y) = (1/16) T'(y)
        return (y * (-2.0 / 3.0 + y2 * (8.0 / 15.0 + y2 * (-102.0 / 315.0 + y2 * 496.0 / 2835.0)))) / 16.0
    t = math.tanh(0.5 * x)
    return (0.5 * x * (1.0 - t * t) - t) / (4.0 * x * x)


@njit(cache=True, inline="always")
def _jj_term(z, v):
    """JJ bound on ``E[log(1+e^{z})]`` for ``z ~ N(z, v)`` at the optimal ξ: (value, ∂/∂z, ∂/∂v, ξ)."""
    xi = math.sqrt(z * z + v)
    lam = _jj_lambda(xi)
    if z < 0.0:
        half_sum = 0.5 * v / (xi - z) if xi - z > 0.0 else 0.0  # (ξ + z)/2
        # ½ + 2λz = σ(−ξ) + ½ tanh(ξ/2) (ξ + z)/ξ, written without cancellation
        if xi > 0.0:
            dz = _sigmoid(-xi) + 0.5 * math.tanh(0.5 * xi) * (2.0 * half_sum) / xi
        else:
            dz = 0.5
    else:
        half_sum = 0.5 * (xi + z)
        dz = 0.5 + 2.0 * lam * z
    val = half_sum + _log1pexp(-xi)
    return val, dz, lam, xi


@njit(cache=True)
def _jj_logistic_batch(m, v, val, dm, dv, xiout):
    for i in range(m.size):
        if not (v[i] >= 0.0) or m[i] != m[i]:
            val[i] = math.nan
            dm[i] = math.nan
            dv[i] = math.nan
            xiout[i] = math.nan
            continue
        a, b, c, d = _jj_term(m[i], v[i])
        val[i] = a
        dm[i] = b
        dv[i] = c
        xiout[i] = d


@njit(cache=True)
def _jj_lambda_batch(x, out):
    for i in range(x.size):
        out[i] = _jj_lambda(x[i])


def jj_lambda(xi: np.typing.ArrayLike) -> np.ndarray:
    r"""Jaakkola–Jordan ``λ(ξ) = tanh(ξ/2) / (4ξ)``, with ``λ(0) = 1/8`` (even in ξ).

    Parameters
    ----------
    xi : array_like

    Returns
    -------
    ndarray
        Same shape as ``xi``; a Taylor series is used for ``|ξ| < 0.1``.
    """
    (x,), shape = broadcast_flat(xi)
    out = np.empty_like(x)
    _jj_lambda_batch(x, out)
    return restore(out, shape)


def jj_logistic_bound(
    m: np.typing.ArrayLike, v: np.typing.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Jaakkola–Jordan upper bound on ``E[log(1+eˣ)]``, ``x ~ N(m, v)``, at the optimal ``ξ = √(m² + v)``.

    .. math:: B = \log(1 + e^\xi) + \frac{m - \xi}{2}, \qquad
              \partial_m B = \tfrac12 + 2\lambda(\xi) m, \qquad \partial_v B = \lambda(\xi).

    Parameters
    ----------
    m, v : array_like
        Mean and variance (``v ≥ 0``), broadcast together.

    Returns
    -------
    value, d_dm, d_dv, xi : ndarray
        Of the broadcast shape. The conjugate VMP message of ``σ(x)^s(1−σ(x))^{1−s}`` is
        precision ``2λ(ξ) = 2·d_dv`` and precision·mean ``s − ½`` (``= m/v_f + s − d_dm``).
    """
    (mf, vf), shape = broadcast_flat(m, v)
    val, dm, dv, xi = (np.empty_like(mf) for _ in range(4))
    _jj_logistic_batch(mf, vf, val, dm, dv, xi)
    return restore(val, shape), restore(dm, shape), restore(dv, shape), restore(xi, shape)


# ----------------------------------------------------------------------------------------------------------
# Bouchard's softmax bound
# ----------------------------------------------------------------------------------------------------------
@njit(cache=True)
def _bouchard_grad(m, v, alpha):
    """``(B′(α), B″(α))`` of the Bouchard bound with optimal ξ."""
    k = m.size
    g = 1.0 - 0.5 * k
    h = 0.0
    for j in range(k):
        z = m[j] - alpha
        xi = math.sqrt(z * z + v[j])
        lam = _jj_lambda(xi)
        g -= 2.0 * lam * z
        if xi > 0.0:
            h += 2.0 * (lam + _jj_lambda_prime(xi) * z * z / xi)
        else:
            h += 2.0 * lam
    return g, h


@njit(cache=True)
def _bouchard_alpha(m, v):
    k = m.size
    mx = -math.inf
    for j in range(k):
        if m[j] > mx:
            mx = m[j]
    s = 0.0
    for j in range(k):
        s += math.exp(m[j] - mx)
    alpha = mx + math.log(s)
    # bracket by doubling
    width = 1.0
    lo = alpha - width
    g_lo, _ = _bouchard_grad(m, v, lo)
    it = 0
    while g_lo > 0.0 and it < 2000:
        width *= 2.0
        lo = alpha - width
        g_lo, _ = _bouchard_grad(m, v, lo)
        it += 1
    width = 1.0
    hi = alpha + width
    g_hi, _ = _bouchard_grad(m, v, hi)
    it = 0
    while g_hi < 0.0 and it < 2000:
        width *= 2.0
        hi = alpha + width
        g_hi, _ = _bouchard_grad(m, v, hi)
        it += 1
    if g_lo == 0.0:
        return lo
    if g_hi == 0.0:
        return hi
    alpha = 0.5 * (lo + hi)
    for _ in range(200):
        g, h = _bouchard_grad(m, v, alpha)
        if g == 0.0:
            return alpha
        if g < 0.0:
            lo = alpha
        else:
            hi = alpha
        tol = 1e-15 * (1.0 + abs(alpha))
        if h > 0.0 and abs(g / h) <= tol:
            return alpha - g / h
        an = alpha - g / h if h > 0.0 else 0.5 * (lo + hi)
        if not (lo < an < hi):
            an = 0.5 * (lo + hi)
        if hi - lo <= tol:
            return an
        alpha = an
    return alpha


@njit(cache=True)
def _bouchard_batch(m, v, val, dm, dv, alpha_out, xi_out):
    n, k = m.shape
    for i in range(n):
        bad = False
        for j in range(k):
            if not (v[i, j] >= 0.0) or m[i, j] != m[i, j]:
                bad = True
        if bad:
            val[i] = math.nan
            alpha_out[i] = math.nan
            for j in range(k):
                dm[i, j] = math.nan
                dv[i, j] = math.nan
                xi_out[i, j] = math.nan
            continue
        alpha = _bouchard_alpha(m[i], v[i])
        tot = alpha
        for j in range(k):
            a, b, c, d = _jj_term(m[i, j] - alpha, v[i, j])
            tot += a
            dm[i, j] = b
            dv[i, j] = c
            xi_out[i, j] = d
        val[i] = tot
        alpha_out[i] = alpha


def bouchard_softmax_bound(
    m: np.typing.ArrayLike, v: np.typing.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Bouchard's quadratic upper bound on ``E[lse(x)]``, ``x_k ~ N(m_k, v_k)``, at optimal ``α`` and ``ξ``.

    .. math:: B = \min_\alpha\; \alpha + \sum_k \Big[\log(1 + e^{\xi_k}) + \frac{m_k - \alpha - \xi_k}2\Big],
              \qquad \xi_k^2 = (m_k - \alpha)^2 + v_k,

    .. math:: \partial_{m_k} B = \tfrac12 + 2\lambda(\xi_k)(m_k - \alpha), \qquad \partial_{v_k} B = \lambda(\xi_k).

    Parameters
    ----------
    m, v : array_like, shape (..., K)
        Means and variances (``v ≥ 0``) over the last axis, ``K ≥ 2``; leading axes broadcast.

    Returns
    -------
    value : ndarray, shape (...)
    d_dm, d_dv : ndarray, shape (..., K)
    alpha : ndarray, shape (...)
    xi : ndarray, shape (..., K)
        The conjugate message for counts ``d`` (``c = d. − K``) is precision ``2c·d_dv_k`` and
        precision·mean ``(d_k − 1) − c(½ − 2λ(ξ_k)α)``.

    Raises
    ------
    ValueError
        If ``K < 2`` (the bound's optimum is then at ``α → −∞``).
    """
    (mf, vf), shape = broadcast_rows(m, v)
    n, k = mf.shape
    if k < 2:
        raise ValueError(f"bouchard_softmax_bound: needs K >= 2 classes on the last axis, got K = {k}")
    val = np.empty(n)
    alpha = np.empty(n)
    dm, dv, xi = (np.empty((n, k)) for _ in range(3))
    if n:
        _bouchard_batch(mf, vf, val, dm, dv, alpha, xi)
    lead = shape[:-1]
    return val.reshape(lead), dm.reshape(shape), dv.reshape(shape), alpha.reshape(lead), xi.reshape(shape)
