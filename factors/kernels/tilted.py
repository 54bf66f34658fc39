r"""Tilted upper bounds on ``E[log(1+eˣ)]`` (Saul & Jordan) and ``E[lse(x)]`` (Knowles & Minka 2011, eq. 12).

Logistic, ``x ~ N(m, v)``, any ``a``:

.. math:: \mathbb E[\log(1+e^x)] \le B(a) = \tfrac12 a^2 v + \log\big(1 + e^{m + (1-2a)v/2}\big),

minimised at ``a = σ(u)`` with ``u = m + (½ − a)v``, i.e. at the root of the increasing function
``h(u) = u − m + (v/2) tanh(u/2)`` (``h′ = 1 + vσ(u)σ(−u) ≥ 1``), bracketed by ``[m − v/2, m + v/2]``.
The root is found by Newton's method safeguarded by bisection (so it converges for any ``v``, where the
plain fixed point ``a ← σ(u)`` oscillates once ``v σ′ > 1``). At the optimum (envelope theorem)

.. math:: \partial_m B = a, \qquad \partial_v B = \tfrac12 a(1-a).

Softmax, ``x_k ~ N(m_k, v_k)`` independent, any ``a ∈ R^K``:

.. math:: \mathbb E[\operatorname{lse}(x)] \le F(a) = \tfrac12\sum_j a_j^2 v_j
          + \log \sum_k e^{m_k + (1-2a_k) v_k / 2},

convex in ``a``, minimised where ``a = softmax(u)``, ``u = m + (½ − a)⊙v`` (the fixed point of the paper,
which oscillates for large ``v``). Writing ``L = lse(u)``, each stationarity condition
``a_k = e^{u_k − L}`` is solved in closed form by the Lambert W function,
``a_k(L) = W(v_k e^{m_k + v_k/2 − L}) / v_k``, and ``L`` is the root of the decreasing scalar function
``Σ_k a_k(L) − 1`` on ``[max_k(m_k − v_k/2), lse(m + v/2)]``: a safeguarded 1-D Newton iteration, O(K) per
step, robust for any ``v`` (``W`` is evaluated in log space, ``log W(e^ℓ)``, so no overflow).
With ``p = softmax(u)`` at the returned ``a``, the exact partial derivatives (equal to the total ones at
the optimum) are

.. math:: \partial_{m_k} F = p_k, \qquad \partial_{v_k} F = \tfrac12 (a_k - p_k)^2 + \tfrac12 p_k (1 - p_k).

The value is always evaluated at the returned ``a``, so it is a valid upper bound even if the optimiser
stopped early.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._batch import broadcast_flat, broadcast_rows, restore
from .special import _log1pexp, _sigmoid


# ----------------------------------------------------------------------------------------------------------
# logistic
# ----------------------------------------------------------------------------------------------------------
@njit(cache=True)
def _tilted_u(m, v):
    """Root ``u`` of ``u − m + (v/2) tanh(u/2) = 0`` by safeguarded Newton."""
    if v == 0.0:
        return m
    lo = m - 0.5 * v
    hi = m + 0.5 * v
    # start from one fixed-point step at a = σ(m), clipped into the bracket
    u = m + (0.5 - _sigmoid(m)) * v
    if not (lo < u < hi):
        u = 0.5 * (lo + hi)
    for _ in range(200):
        f = u - m + 0.5 * v * math.tanh(0.5 * u)
        if f == 0.0:
            return u
        if f < 0.0:
            lo = u
        else:
            hi = u
        e = math.exp(-abs(u))
        dfdu = 1.0 + v * e / ((1.0 + e) * (1.0 + e))
        step = f / dfdu
        tol = 1e-15 * (1.0 + abs(u))
        if abs(step) <= tol:
            return u - step
        un = u - step
        if not (lo < un < hi):
            un = 0.5 * (lo + hi)
        if hi - lo <= tol:
            return un
        u = un
    return u


@njit(cache=True)
def _tilted_logistic_batch(m, v, val, dm, dv, aout):
    for i in range(m.size):
        mi = m[i]
        vi = v[i]
        if not (vi >= 0.0) or mi != mi:
            val[i] = math.nan
            dm[i] = math.nan
            dv[i] = math.nan
            aout[i] = math.nan
            continue
        u = _tilted_u(mi, vi)
        a = _sigmoid(u)
        e = mi + (0.5 - a) * vi  # exponent at this a (== u at the optimum)
        p = _sigmoid(e)
        q = _sigmoid(-e)
        val[i] = 0.5 * a * a * vi + _log1pexp(e)
        dm[i] = p
        dv[i] = 0.5 * (a - p) * (a - p) + 0.5 * p * q
        aout[i] = a


def tilted_logistic_bound(
    m: np.typing.ArrayLike, v: np.typing.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Saul–Jordan tilted upper bound on ``E[log(1+eˣ)]``, ``x ~ N(m, v)``, at the optimal ``a``.

    .. math:: B = \min_a \tfrac12 a^2 v + \log(1 + e^{m + (1-2a)v/2}), \qquad
              a^\star = \sigma(m + (1 - 2a^\star) v / 2).

    Parameters
    ----------
    m, v : array_like
        Mean and variance (``v ≥ 0``), broadcast together.

    Returns
    -------
    value, d_dm, d_dv, a : ndarray
        Bound, its derivatives (``a`` and ``½a(1−a)`` at the optimum) and the optimal ``a``. The NCVMP
        message of ``f = σ(x)^s(1−σ(x))^{1−s}`` is ``1/v_f = 2·d_dv``, ``m_f/v_f = m/v_f + s − d_dm``.
    """
    (mf, vf), shape = broadcast_flat(m, v)
    val, dm, dv, a = (np.empty_like(mf) for _ in range(4))
    _tilted_logistic_batch(mf, vf, val, dm, dv, a)
    return restore(val, shape), restore(dm, shape), restore(dv, shape), restore(a, shape)


# ----------------------------------------------------------------------------------------------------------
# softmax
# ----------------------------------------------------------------------------------------------------------
@njit(cache=True)
def _tilted_objective(m, v, a, u, p):
    """Fill ``u = m + (½ − a)v`` and ``p = softmax(u)``; return ``F(a) = ½Σa²v + lse(u)``."""
    k = m.size
    mx = -math.inf
    quad = 0.0
    for j in range(k):
        u[j] = m[j] + (0.5 - a[j]) * v[j]
        quad += 0.5 * a[j] * a[j] * v[j]
        if u[j] > mx:
            mx = u[j]
    s = 0.0
    for j in range(k):
        p[j] = math.exp(u[j] - mx)
        s += p[j]
    for j in range(k):
        p[j] /= s
    return quad + mx + math.log(s)


@njit(cache=True, inline="always")
def _lw_start(ell):
    """A starting point above the root of ``e^y + y = ℓ``."""
    if ell < 0.0:
        return ell
    if ell < 1.0:
        return 0.0
    return math.log(ell)


@njit(cache=True)
def _log_lambert_w_exp(ell, y):
    """``log W(e^ℓ)`` (principal branch): the root of the convex increasing ``h(y) = e^y + y − ℓ``.

    Newton's method from the guess ``y``, with iterates capped at ``_lw_start(ℓ)`` (which lies above the
    root): from above, Newton on a convex increasing function decreases monotonically to the root, and
    from below one step lands above it, so the iteration converges from any start without overflow.
    """
    if ell < -700.0:
        return ell  # W(z) = z(1 − z + …) with z < 1e-304
    top = _lw_start(ell)
    y = min(y, top)
    for _ in range(60):
        ey = math.exp(y)
        dy = (ey + y - ell) / (ey + 1.0)
        y = min(y - dy, top)
        if abs(dy) <= 4e-16 * (1.0 + abs(y)):
            break
    return y


@njit(cache=True)
def _tilted_a_of_l(m, v, lv, lval, a, y, warm, dl):
    """Fill ``a_k(L) = W(v_k e^{m_k + v_k/2 − L}) / v_k`` (``e^{m_k − L}`` if ``v_k = 0``); return (Σa, dΣa/dL).

    ``y`` holds ``log W`` per component; with ``warm`` it is the previous value at ``L − dl`` and is
    advanced to first order before Newton polishing.
    """
    tot = 0.0
    der = 0.0
    for j in range(m.size):
        vj = v[j]
        if vj > 0.0:
            ell = lv[j] + m[j] + 0.5 * vj - lval
            if warm:
                y0 = y[j] - dl / (1.0 + math.exp(y[j]))
            else:
                y0 = _lw_start(ell)
            y[j] = _log_lambert_w_exp(ell, y0)
            a[j] = math.exp(y[j] - lv[j])
        else:
            a[j] = math.exp(m[j] - lval)
        tot += a[j]
        der -= a[j] / (1.0 + vj * a[j])
    return tot, der


@njit(cache=True)
def _tilted_softmax_row(m, v, a, lv, y, warm_start):
    """Optimal ``a`` for one row, written into ``a`` (``lv``, ``y``: work buffers of size K).

    With ``warm_start``, ``a`` holds a previous solution (positive) on entry: Newton then starts from
    ``L = lse(m + (½ − a)v)`` and ``log W_k = log(a_k v_k)``, which after a small change of (m, v)
    are within a step or two of the root.

    The stationarity conditions ``a_k = e^{u_k − L}``, ``u_k = m_k + (½ − a_k)v_k`` with ``L = lse(u)`` give
    ``a_k = W(v_k e^{m_k + v_k/2 − L}) / v_k`` (Lambert W), and ``L`` is the root of the decreasing function
    ``Σ_k a_k(L) − 1``, bracketed by ``[max_k(m_k − v_k/2), lse(m + v/2)]``; safeguarded Newton in ``L``,
    stopped when ``|Σa − 1|`` is at rounding level or the step is negligible.
    """
    k = m.size
    lo = -math.inf
    mx = -math.inf
    for j in range(k):
        lv[j] = math.log(v[j]) if v[j] > 0.0 else -math.inf
        if m[j] - 0.5 * v[j] > lo:
            lo = m[j] - 0.5 * v[j]
        if m[j] + 0.5 * v[j] > mx:
            mx = m[j] + 0.5 * v[j]
    s = 0.0
    for j in range(k):
        s += math.exp(m[j] + 0.5 * v[j] - mx)
    hi = mx + math.log(s)
    if lo > hi:
        lo = hi
    lval = hi
    warm = False
    dl = 0.0
    if warm_start:
        mu = -math.inf
        for j in range(k):
            if not (a[j] > 0.0 and a[j] < math.inf):
                mu = math.nan
                break
            y[j] = m[j] + (0.5 - a[j]) * v[j]  # u_k, then log W_k below
            mu = max(mu, y[j])
        if mu == mu:
            s = 0.0
            for j in range(k):
                s += math.exp(y[j] - mu)
            l0 = mu + math.log(s)
            if lo <= l0 <= hi:
                lval = l0
                for j in range(k):
                    y[j] = math.log(a[j]) + lv[j]
                warm = True
    ftol = 2.0 * k * 2.220446049250313e-16
    for _ in range(200):
        tot, der = _tilted_a_of_l(m, v, lv, lval, a, y, warm, dl)
        warm = True
        f = tot - 1.0
        if abs(f) <= ftol:
            return
        if f > 0.0:
            lo = lval
        else:
            hi = lval
        ln = lval - f / der if der < 0.0 else 0.5 * (lo + hi)
        if not (lo <= ln <= hi):
            ln = 0.5 * (lo + hi)
            warm = False
        dl = ln - lval
        if abs(dl) <= 2e-16 * (1.0 + abs(lval)) or hi - lo <= 2e-16 * (1.0 + abs(lval)):
            _tilted_a_of_l(m, v, lv, ln, a, y, warm, dl)
            return
        lval = ln


_NEWTON_MAX_V = 1.0  # rows with every v_k below this try Newton in a first (see _tilted_softmax_row_newton)


@njit(cache=True)
def _tilted_softmax_row_newton(m, v, a, u, p, warm_start):
    """Optimal ``a`` for one row with small variances by Newton's method on r(a) = a − softmax(m + (½ − a)v).

    The Jacobian J = diag(1 + p_k v_k) − p (p ⊙ v)ᵀ is a diagonal matrix minus a rank-one term, so the step
    costs O(K) (Sherman–Morrison; the denominator 1 − Σ_k p_k² v_k / (1 + p_k v_k) exceeds 0 for any p).
    For max v < 2 the fixed-point map is a contraction and Newton from ``softmax(m)`` (or a previous
    optimum) converges quadratically in a few steps.  Returns False (``a`` then undefined) when it did not
    reach rounding level within 12 steps or left the simplex: the caller falls back to the Lambert-W solver.
    """
    k = m.size
    if not warm_start:
        mx = m[0]
        for j in range(1, k):
            mx = max(mx, m[j])
        s = 0.0
        for j in range(k):
            a[j] = math.exp(m[j] - mx)
            s += a[j]
        for j in range(k):
            a[j] /= s
    tol = 4.0 * k * 2.220446049250313e-16
    for _ in range(12):
        mx = -math.inf
        for j in range(k):
            if not (a[j] > 0.0 and a[j] < 1.0 + tol):
                return False
            u[j] = m[j] + (0.5 - a[j]) * v[j]
            mx = max(mx, u[j])
        s = 0.0
        for j in range(k):
            p[j] = math.exp(u[j] - mx)
            s += p[j]
        rmax = 0.0
        dr = 0.0  # Σ_k p_k v_k r_k / (1 + p_k v_k), then the Sherman–Morrison factor
        den = 1.0
        for j in range(k):
            p[j] /= s
            r = a[j] - p[j]
            rmax = max(rmax, abs(r))
            d = 1.0 + p[j] * v[j]
            dr += p[j] * v[j] * r / d
            den -= p[j] * p[j] * v[j] / d
        if rmax <= tol:
            return True
        c = dr / den
        for j in range(k):
            a[j] -= (a[j] - p[j] + p[j] * c) / (1.0 + p[j] * v[j])
    return False


@njit(cache=True, parallel=True)
def _tilted_softmax_batch(m, v, val, dm, dv, aout, warm_start):
    n, k = m.shape
    chunk = 256  # rows per task: work buffers allocated once per chunk
    for c in prange((n + chunk - 1) // chunk):
        u = np.empty(k)
        p = np.empty(k)
        lv = np.empty(k)
        y = np.empty(k)
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            bad = False
            for j in range(k):
                if not (v[i, j] >= 0.0) or m[i, j] != m[i, j]:
                    bad = True
            if bad:
                val[i] = math.nan
                for j in range(k):
                    dm[i, j] = math.nan
                    dv[i, j] = math.nan
                    aout[i, j] = math.nan
                continue
            a = aout[i]
            small = True
            for j in range(k):
                small = small and v[i, j] < _NEWTON_MAX_V
                y[j] = a[j]  # a previous optimum, kept for the fallback
            if not (small and _tilted_softmax_row_newton(m[i], v[i], a, u, p, warm_start)):
                for j in range(k):
                    a[j] = y[j]
                _tilted_softmax_row(m[i], v[i], a, lv, y, warm_start)
            f = _tilted_objective(m[i], v[i], a, u, p)
            val[i] = f
            tot = 0.0
            for j in range(k):
                tot += p[j]
            for j in range(k):
                dm[i, j] = p[j]
                comp = tot - p[j] if p[j] > 0.5 else 1.0 - p[j]
                dv[i, j] = 0.5 * (a[j] - p[j]) * (a[j] - p[j]) + 0.5 * p[j] * comp


def tilted_softmax_bound(
    m: np.typing.ArrayLike, v: np.typing.ArrayLike, a0: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Multivariate tilted upper bound on ``E[lse(x)]``, ``x_k ~ N(m_k, v_k)`` (Knowles & Minka eq. 12).

    .. math:: B = \min_a \tfrac12 \sum_j a_j^2 v_j + \log\sum_k e^{m_k + (1-2a_k) v_k/2},
              \qquad a^\star = \operatorname{softmax}(m + \tfrac12 (1 - 2a^\star)\odot v).

    Parameters
    ----------
    m, v : array_like, shape (..., K)
        Means and variances (``v ≥ 0``) over the last axis; leading axes are batch axes and broadcast.
    a0 : ndarray, shape (..., K), optional
        A previous optimum (e.g. of the last NCVMP sweep) to start from; the result does not depend
        on it beyond rounding, only the number of Newton steps does.

    Returns
    -------
    value : ndarray, shape (...)
    d_dm, d_dv, a : ndarray, shape (..., K)
        ``∂B/∂m_k = a_k``, ``∂B/∂v_k = ½a_k(1−a_k)`` at the optimum (computed as exact partials at the
        returned ``a``) and the optimal ``a``. ``a = 0`` would recover the log bound, so ``B ≤`` log bound.
        NCVMP message for counts ``d`` (``c = d. − K``): ``1/v_kf = 2c·d_dv_k``,
        ``m_kf/v_kf = m_k/v_kf + (d_k − 1) − c·d_dm_k``.
    """
    (mf, vf), shape = broadcast_rows(m, v)
    n, k = mf.shape
    val = np.empty(n)
    dm, dv = np.empty((n, k)), np.empty((n, k))
    warm = a0 is not None and np.shape(a0) == shape
    a = np.array(np.reshape(a0, (n, k)), dtype=np.float64) if warm else np.empty((n, k))
    if n:
        _tilted_softmax_batch(mf, vf, val, dm, dv, a, warm)
    return val.reshape(shape[:-1]), dm.reshape(shape), dv.reshape(shape), a.reshape(shape)
