r"""Closed-form bounds and approximations of ``E[lse(x)]``, ``x_k ~ N(m_k, v_k)`` independent.

All functions work over the last axis ``K`` and broadcast over leading axes; each returns the value and its
derivatives in ``m`` and ``v`` (what NCVMP needs: ``1/v_kf = −2c ∂/∂v_k``, ``m_kf/v_kf = m_k/v_kf + (d_k − 1)
− c ∂/∂m_k`` for the softmax factor with counts ``d``, ``c = d. − K``).

* log bound (Blei & Lafferty): ``log Σ_k e^{m_k + v_k/2}`` (Jensen on ``E[e^{x_k}]``);
* Böhning: ``lse(m) + ¼(1 − 1/K) Σ_k v_k`` (quadratic upper bound with curvature ``½(I − 11ᵀ/K)``);
* Taylor (second order at ``m``; **not a bound**): ``lse(m) + ½ Σ_k v_k s_k(1 − s_k)``, ``s = softmax(m)``;
* adaptive: per row, the smaller of Bouchard's quadratic bound and the tilted bound.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._batch import broadcast_rows
from .quadratic import bouchard_softmax_bound
from .tilted import tilted_softmax_bound


@njit(cache=True, inline="always")
def _softmax_into(x, p):
    """``p = softmax(x)``; returns ``lse(x)``."""
    k = x.size
    mx = -math.inf
    for j in range(k):
        if x[j] > mx:
            mx = x[j]
    s = 0.0
    for j in range(k):
        p[j] = math.exp(x[j] - mx)
        s += p[j]
    for j in range(k):
        p[j] /= s
    return mx + math.log(s)


@njit(cache=True, inline="always")
def _complement(p, j, tot):
    """``1 − p_j`` formed as ``Σ_{i≠j} p_i`` when ``p_j > ½`` (no cancellation)."""
    if p[j] > 0.5:
        return tot - p[j]
    return 1.0 - p[j]


@njit(cache=True)
def _row_bad(m, v):
    for j in range(m.size):
        if not (v[j] >= 0.0) or m[j] != m[j]:
            return True
    return False


@njit(cache=True)
def _log_bound_batch(m, v, val, dm, dv):
    n, k = m.shape
    x = np.empty(k)
    p = np.empty(k)
    for i in range(n):
        if _row_bad(m[i], v[i]):
            val[i] = math.nan
            dm[i, :] = math.nan
            dv[i, :] = math.nan
            continue
        for j in range(k):
            x[j] = m[i, j] + 0.5 * v[i, j]
        val[i] = _softmax_into(x, p)
        for j in range(k):
            dm[i, j] = p[j]
            dv[i, j] = 0.5 * p[j]


@njit(cache=True)
def _bohning_batch(m, v, val, dm, dv):
    n, k = m.shape
    p = np.empty(k)
    c = 0.25 * (1.0 - 1.0 / k)
    for i in range(n):
        if _row_bad(m[i], v[i]):
            val[i] = math.nan
            dm[i, :] = math.nan
            dv[i, :] = math.nan
            continue
        lse = _softmax_into(m[i], p)
        sv = 0.0
        for j in range(k):
            sv += v[i, j]
            dm[i, j] = p[j]
            dv[i, j] = c
        val[i] = lse + c * sv


@njit(cache=True)
def _taylor_batch(m, v, val, dm, dv):
    n, k = m.shape
    p = np.empty(k)
    for i in range(n):
        if _row_bad(m[i], v[i]):
            val[i] = math.nan
            dm[i, :] = math.nan
            dv[i, :] = math.nan
            continue
        lse = _softmax_into(m[i], p)
        tot = 0.0
        for j in range(k):
            tot += p[j]
        corr = 0.0
        sw = 0.0  # Σ_k v_k s_k (1 − 2 s_k)
        for j in range(k):
            q = _complement(p, j, tot)
            corr += 0.5 * v[i, j] * p[j] * q
            sw += v[i, j] * p[j] * (q - p[j])
            dv[i, j] = 0.5 * p[j] * q
        for j in range(k):
            q = _complement(p, j, tot)
            dm[i, j] = p[j] + 0.5 * p[j] * (v[i, j] * (q - p[j]) - sw)
        val[i] = lse + corr


def _run(kernel, m, v):
    (mf, vf), shape = broadcast_rows(m, v)
    n, k = mf.shape
    val = np.empty(n)
    dm = np.empty((n, k))
    dv = np.empty((n, k))
    if n:
        kernel(mf, vf, val, dm, dv)
    return val.reshape(shape[:-1]), dm.reshape(shape), dv.reshape(shape)


def log_softmax_bound(m: np.typing.ArrayLike, v: np.typing.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Blei–Lafferty "log" bound ``E[lse(x)] ≤ log Σ_k e^{m_k + v_k/2}``.

    .. math:: B = \operatorname{lse}(m + v/2), \qquad \partial_{m_k} B = p_k, \qquad \partial_{v_k} B = p_k/2,
              \qquad p = \operatorname{softmax}(m + v/2).

    Parameters
    ----------
    m, v : array_like, shape (..., K)

    Returns
    -------
    value : ndarray, shape (...)
    d_dm, d_dv : ndarray, shape (..., K)
    """
    return _run(_log_bound_batch, m, v)


def bohning_softmax_bound(m: np.typing.ArrayLike, v: np.typing.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Böhning's quadratic bound expanded at ``ψ = m``: ``E[lse(x)] ≤ lse(m) + ¼(1 − 1/K) Σ_k v_k``.

    .. math:: \partial_{m_k} B = \operatorname{softmax}(m)_k, \qquad \partial_{v_k} B = \tfrac14 (1 - 1/K).

    (``∂/∂m`` is the derivative with the expansion point tied to ``m``; at fixed ``ψ = m`` the bound's
    gradient in ``m`` has the same value.)

    Parameters
    ----------
    m, v : array_like, shape (..., K)

    Returns
    -------
    value : ndarray, shape (...)
    d_dm, d_dv : ndarray, shape (..., K)
    """
    return _run(_bohning_batch, m, v)


def taylor_softmax_approx(m: np.typing.ArrayLike, v: np.typing.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Second-order Taylor approximation (not a bound) ``E[lse(x)] ≈ lse(m) + ½Σ_k v_k s_k(1 − s_k)``.

    With ``s = softmax(m)`` and ``w = Σ_k v_k s_k(1 − 2s_k)``:

    .. math:: \partial_{v_k} T = \tfrac12 s_k(1 - s_k), \qquad
              \partial_{m_j} T = s_j + \tfrac12 s_j\big[v_j (1 - 2 s_j) - w\big].

    Parameters
    ----------
    m, v : array_like, shape (..., K)

    Returns
    -------
    value : ndarray, shape (...)
    d_dm, d_dv : ndarray, shape (..., K)
        Exact derivatives of the approximation. Note that the message in docs/maths.md §5 (precision·mean
        ``(d_k − 1) − c s_k + c s_k(1 − s_k) m_k``) uses ``∂/∂m = s`` (expansion point held fixed), which
        differs from ``d_dm`` by the curvature term.
    """
    return _run(_taylor_batch, m, v)


def adaptive_softmax_bound(
    m: np.typing.ArrayLike, v: np.typing.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Per row, the tighter (smaller) of Bouchard's quadratic bound and the tilted bound on ``E[lse(x)]``.

    Parameters
    ----------
    m, v : array_like, shape (..., K), K ≥ 2

    Returns
    -------
    value : ndarray, shape (...)
    d_dm, d_dv : ndarray, shape (..., K)
        Value and derivatives of the chosen bound.
    used_tilted : ndarray of bool, shape (...)
        True where the tilted bound was the tighter one.
    """
    tv, tdm, tdv, _ = tilted_softmax_bound(m, v)
    qv, qdm, qdv, _, _ = bouchard_softmax_bound(m, v)
    use_t = ~(qv < tv)
    sel = use_t[..., None]
    return np.where(use_t, tv, qv), np.where(sel, tdm, qdm), np.where(sel, tdv, qdv), use_t
