r"""Exact Gaussian expectations for the logistic factor (the "quadrature" method of NCVMP).

For ``x ~ N(m, v)`` let

.. math:: S(m, v) = \mathbb E[\log(1 + e^x)], \qquad
          \partial_m S = \mathbb E[\sigma(x)], \qquad \partial_v S = \tfrac12 \mathbb E[\sigma(x)\sigma(-x)]

(Bonnet/Price: ``∂_m E[g] = E[g′]``, ``∂_v E[g] = ½E[g″]``). Two evaluation schemes are used, both accurate to
~1e-13 relative wherever the result is representable:

* ``v ≤ 0.01`` — the series E[g(x)] = Σ_k g^(2k)(m) v^k/(2^k k!) to v⁶, the derivatives of σ being
  polynomials in σ(1 − σ) and 1 − 2σ (one exp per point);
* ``v ≤ 0.6`` — Gauss–Hermite with 32 nodes on the integrands themselves (analytic in a strip); the poles of
  σ at ``x = ±iπ`` lie at distance ``π/√(2v) ≥ 2.8`` from the real axis in the Hermite variable, so the rule
  converges to machine precision.
* ``v > 0.6`` — an exact series. With ``m ≤ 0`` (use ``S(m) = m + S(−m)``, ``E[σ](m) = 1 − E[σ](−m)`` otherwise),
  write ``log(1+eˣ) = max(x, 0) + log(1 + e^{−|x|})`` and ``σ(x) = 1[x>0] − sign(x) σ(−|x|)``. Expanding in
  powers of ``e^{−|x|}`` gives alternating series in the half-line Laplace transforms

  .. math:: I_\pm(k) = \int_0^\infty e^{-kx} N(\pm x; m, v)\,dx
            = \tfrac12 e^{-m^2/2v} \operatorname{erfcx}\Big(\frac{kv \mp m}{\sqrt{2v}}\Big)
            \;\big(= e^{\mp km + k^2 v/2}\,\Phi(\tfrac{-kv \pm m}{\sqrt v}) \text{ when } kv \mp m < 0\big),

  .. math:: S = \sqrt v\,[\varphi(z) + z\Phi(z)] + \sum_{k\ge1} \frac{(-1)^{k+1}}{k}(I_+ + I_-), \quad
            \mathbb E[\sigma] = \Phi(z) - \sum_{k\ge1} (-1)^{k+1} (I_+ - I_-), \quad
            \mathbb E[\sigma\sigma'] = \sum_{k\ge1} (-1)^{k+1} k (I_+ + I_-),

  with ``z = m/√v``. The coefficient sequences are moments of measures on ``[0, 1]`` (in ``y = e^{−|x|}``; signed, of
  modest total variation, for ``E[σσ′]``),
  so the Cohen–Rodriguez Villegas–Zagier acceleration (Algorithm 1, Exp. Math. 9, 2000) sums them with
  relative error ``≲ 4·(3 + √8)^{−n}``; ``n = 22`` terms are used.

There is no branch that loses accuracy for huge ``|m|/√v`` or tiny ``v``: both schemes are exact limits.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._batch import broadcast_flat, restore
from .gauss_hermite import normal_rule
from .special import INV_SQRT_2PI, SQRT2, _erfcx, _log1pexp, _sigmoid

GH_NODES = 32
GH_MAX_VAR = 0.6
N_SERIES = 22
# Fewer nodes suffice when v is small (the poles recede as π/√(2v)): the largest v at which each
# rule matched the 32-node rule to 2e-14 on m ∈ [−40, 40] was 0.028, 0.11, 0.22 for 8, 12, 16 nodes;
# the tiers below keep a margin of about 20 %.
GH_TIERS = ((8, 0.022), (12, 0.085), (16, 0.17), (GH_NODES, GH_MAX_VAR))
# Below this v the series in v to v⁶ (``_logistic_taylor``, one exp per point) matched the 32-node rule
# to 2e-14 (up to v = 0.0125 on m ∈ [−40, 40] and |m| = 100, 700).  A posterior from N data points has
# v ~ D/N, so this serves large N, where the kernel would otherwise dominate an iteration.
TAYLOR_MAX_VAR = 0.010


def _cvz_weights(n: int) -> np.ndarray:
    """Weights ``c_k`` with ``Σ_{k<n} c_k a_k ≈ Σ_{k≥0} (−1)^k a_k`` (CVZ 2000, Algorithm 1)."""
    d = (3.0 + math.sqrt(8.0)) ** n
    d = 0.5 * (d + 1.0 / d)
    b, c = -1.0, -d
    out = np.empty(n)
    for k in range(n):
        c = b - c
        out[k] = c / d
        b = (k + n) * (k - n) * b / ((k + 0.5) * (k + 1.0))
    return out


_CVZ = _cvz_weights(N_SERIES)
_GH_Z = np.concatenate([normal_rule(n)[0] for n, _ in GH_TIERS])
_GH_W = np.concatenate([normal_rule(n)[1] for n, _ in GH_TIERS])
_GH_OFF = np.cumsum([0] + [n for n, _ in GH_TIERS]).astype(np.int64)
_GH_VMAX = np.array([vmax for _, vmax in GH_TIERS])


@njit(cache=True)
def _logistic_gh(m, v, z, w, lo=0, hi=-1):
    """Gauss–Hermite estimate of ``(E[log1pexp], E[σ], E[σσ′])`` sharing one ``exp`` per node, with
    the rule stored in ``z[lo:hi]``, ``w[lo:hi]`` (the whole arrays by default)."""
    s = math.sqrt(v)
    sp = 0.0
    sg = 0.0
    sd = 0.0
    if hi < 0:
        hi = z.size
    for i in range(lo, hi):
        x = m + s * z[i]
        e = math.exp(-abs(x))
        r = 1.0 / (1.0 + e)
        if x > 0.0:
            sp += w[i] * (x + math.log1p(e))
            sg += w[i] * r
        else:
            sp += w[i] * math.log1p(e)
            sg += w[i] * (e * r)
        sd += w[i] * (e * r * r)
    return sp, sg, sd


@njit(cache=True)
def _pos_part_mean(z):
    """``φ(z) + zΦ(z)`` (so that ``E[max(x,0)] = √v (φ(z) + zΦ(z))``) for ``z ≤ 0``, without cancellation."""
    x = -z
    if x < 30.0:
        return math.exp(-0.5 * x * x) * (INV_SQRT_2PI - x * 0.5 * _erfcx(x / SQRT2))
    # asymptotic: φ(x) Σ_j (−1)^j (2j+1)!! / x^{2j+2}
    ix2 = 1.0 / (x * x)
    term = ix2
    acc = 0.0
    for j in range(12):
        acc += term
        term *= -(2.0 * j + 3.0) * ix2
    return INV_SQRT_2PI * math.exp(-0.5 * x * x) * acc


@njit(cache=True)
def _logistic_series(m, v, cw):
    """Exact-series evaluation of ``(E[log1pexp], E[σ], E[σσ′])`` for ``x ~ N(m, v)`` (see module docs)."""
    flip = m > 0.0
    if flip:
        m = -m
    s = math.sqrt(v)
    alpha = s / SQRT2
    beta = -m / (s * SQRT2)  # ≥ 0
    g = 0.5 * math.exp(-beta * beta)
    p_plus = 0.0
    p_minus = 0.0
    rem = 0.0
    dd = 0.0
    for j in range(cw.size):
        k = j + 1.0
        ip = g * _erfcx(k * alpha + beta)
        zm = k * alpha - beta
        if zm >= 0.0:
            im = g * _erfcx(zm)
        else:
            im = math.exp(k * (m + 0.5 * k * v)) * 0.5 * math.erfc(zm)
        c = cw[j]
        p_plus += c * ip
        p_minus += c * im
        rem += c * (ip + im) / k
        dd += c * k * (ip + im)
    z = m / s
    pos = 0.5 * math.erfc(-z / SQRT2)  # Φ(z), z ≤ 0
    val = s * _pos_part_mean(z) + rem
    esig = (pos - p_plus) + p_minus
    if flip:
        return val - m, 1.0 - esig, dd
    return val, esig, dd


@njit(cache=True)
def _logistic_taylor(m, v):
    r"""``(E[log1pexp], E[σ], E[σσ′])`` by the heat-kernel series E[g(x)] = Σ_k g^(2k)(m) (v/2)^k/k!, k ≤ 6.

    g = log1pexp has g′ = σ, so every term is a derivative of σ, a polynomial in p = σ(1 − σ) and
    t = 1 − 2σ: σ′ = p and d(pᵃtᵇ)/dx = a pᵃtᵇ⁺¹ − 2b pᵃ⁺¹tᵇ⁻¹ (p′ = pt, t′ = −2p), so
    σ⁽ⁿ⁾ = t^[n even] Σ_a c_{n,a} pᵃ u^(⌊(n+1)/2⌋−a) with u = t² and integer c (written out below, nested
    in p; the test suite regenerates them from the recurrence).  One exp per point."""
    e = math.exp(-abs(m))
    r = 1.0 / (1.0 + e)
    sig = r if m > 0.0 else e * r
    p = e * r * r
    t = (1.0 - e) * r if m < 0.0 else -(1.0 - e) * r
    u = t * t
    u2 = u * u
    u3 = u2 * u
    u4 = u2 * u2
    u5 = u4 * u
    u6 = u3 * u3
    d2 = p * t
    d3 = p * (u - 2.0 * p)
    d4 = d2 * (u - 8.0 * p)
    d5 = p * (u2 + p * (-22.0 * u + 16.0 * p))
    d6 = d2 * (u2 + p * (-52.0 * u + 136.0 * p))
    d7 = p * (u3 + p * (-114.0 * u2 + p * (720.0 * u - 272.0 * p)))
    d8 = d2 * (u3 + p * (-240.0 * u2 + p * (3072.0 * u - 3968.0 * p)))
    d9 = p * (u4 + p * (-494.0 * u3 + p * (11616.0 * u2 + p * (-34304.0 * u + 7936.0 * p))))
    d10 = d2 * (u4 + p * (-1004.0 * u3 + p * (40776.0 * u2 + p * (-230144.0 * u + 176896.0 * p))))
    d11 = p * (u5 + p * (-2026.0 * u4 + p * (136384.0 * u3 + p * (-1328336.0 * u2
                                                               + p * (2265344.0 * u - 353792.0 * p)))))
    d12 = d2 * (u5 + p * (-4072.0 * u4 + p * (441568.0 * u3 + p * (-6949952.0 * u2
                                                                + p * (21953408.0 * u - 11184128.0 * p)))))
    d13 = p * (u6 + p * (-8166.0 * u5 + p * (1398000.0 * u4 + p * (-33981760.0 * u3 + p * (
        179266560.0 * u2 + p * (-198825216.0 * u + 22368256.0 * p))))))
    c1 = 0.5 * v
    c2 = c1 * c1 / 2.0
    c3 = c2 * c1 / 3.0
    c4 = c3 * c1 / 4.0
    c5 = c4 * c1 / 5.0
    c6 = c5 * c1 / 6.0
    val = max(m, 0.0) + math.log1p(e) + c1 * p + c2 * d3 + c3 * d5 + c4 * d7 + c5 * d9 + c6 * d11
    esig = sig + c1 * d2 + c2 * d4 + c3 * d6 + c4 * d8 + c5 * d10 + c6 * d12
    edsig = p + c1 * d3 + c2 * d5 + c3 * d7 + c4 * d9 + c5 * d11 + c6 * d13
    return val, esig, edsig


@njit(cache=True)
def _logistic_expect(m, v, z, w, cw):
    """Dispatch: point value for ``v = 0``, Gauss–Hermite for small ``v``, series otherwise."""
    if not (v >= 0.0) or m != m:
        return math.nan, math.nan, math.nan
    if v == 0.0:
        e = math.exp(-abs(m))
        return _log1pexp(m), _sigmoid(m), e / ((1.0 + e) * (1.0 + e))
    if v <= TAYLOR_MAX_VAR:
        return _logistic_taylor(m, v)
    if v <= GH_MAX_VAR:
        t = 0
        while v > _GH_VMAX[t]:
            t += 1
        return _logistic_gh(m, v, z, w, _GH_OFF[t], _GH_OFF[t + 1])
    return _logistic_series(m, v, cw)


@njit(cache=True, parallel=True)
def _logistic_expectations_batch(m, v, z, w, cw, val, dm, dv):
    for i in prange(m.size):
        a, b, c = _logistic_expect(m[i], v[i], z, w, cw)
        val[i] = a
        dm[i] = b
        dv[i] = 0.5 * c


@njit(cache=True, parallel=True)
def _logistic_message_batch(m, v, s, z, w, cw, prec, hmean, elog):
    for i in prange(m.size):
        a, b, c = _logistic_expect(m[i], v[i], z, w, cw)
        prec[i] = c
        hmean[i] = m[i] * c + s[i] - b
        elog[i] = s[i] * m[i] - a


def logistic_expectations(m: np.typing.ArrayLike, v: np.typing.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Gaussian expectation of the softplus and its derivatives, ``x ~ N(m, v)``.

    .. math:: S = \mathbb E[\log(1+e^x)], \qquad \frac{\partial S}{\partial m} = \mathbb E[\sigma(x)],
              \qquad \frac{\partial S}{\partial v} = \tfrac12\,\mathbb E[\sigma(x)\,\sigma(-x)].

    Parameters
    ----------
    m, v : array_like
        Mean and variance (``v ≥ 0``; ``v = 0`` gives point values), broadcast together.

    Returns
    -------
    value, d_dm, d_dv : ndarray
        ``S``, ``E[σ(x)]`` and ``½E[σ(x)σ(−x)]``, of the broadcast shape. Relative accuracy ~1e-13 for
        ``|m| ≤ 1e3``, ``1e-8 ≤ v ≤ 1e6`` wherever the value is a normal double; NaN for ``v < 0`` or NaN input.

    Notes
    -----
    Gauss–Hermite (32 nodes) for ``v ≤ 0.6``, an exact CVZ-accelerated series otherwise; see the module
    docstring.
    """
    (mf, vf), shape = broadcast_flat(m, v)
    val = np.empty_like(mf)
    dm = np.empty_like(mf)
    dv = np.empty_like(mf)
    _logistic_expectations_batch(mf, vf, _GH_Z, _GH_W, _CVZ, val, dm, dv)
    return restore(val, shape), restore(dm, shape), restore(dv, shape)


def logistic_quadrature_message(
    m: np.typing.ArrayLike, v: np.typing.ArrayLike, s: np.typing.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""NCVMP message of the logistic factor ``f(s, x) = σ(x)^s (1−σ(x))^{1−s}`` to ``x`` (exact expectation).

    With ``S_f(m, v) = E[log f] = s m − E[log(1+eˣ)]`` for ``q(x) = N(m, v)`` (Knowles & Minka 2011, eq. 7):

    .. math:: \frac{1}{v_f} = -2\frac{\partial S_f}{\partial v} = \mathbb E[\sigma(x)\sigma(-x)], \qquad
              \frac{m_f}{v_f} = \frac{m}{v_f} + \frac{\partial S_f}{\partial m}
                              = \frac{m}{v_f} + s - \mathbb E[\sigma(x)].

    Parameters
    ----------
    m, v : array_like
        Current posterior mean and variance of ``x`` (the NCVMP message is evaluated at ``q``, not at the
        cavity).
    s : array_like
        Observed label in {0, 1} (any real value is accepted: the formula is linear in ``s``).

    Returns
    -------
    precision, precision_mean, expected_log_factor : ndarray
        ``1/v_f`` (always > 0 for finite input), ``m_f/v_f``, and ``S_f = E_q[log f]`` (the exact evidence
        contribution of the factor), all of the broadcast shape.
    """
    (mf, vf, sf), shape = broadcast_flat(m, v, s)
    prec = np.empty_like(mf)
    hmean = np.empty_like(mf)
    elog = np.empty_like(mf)
    _logistic_message_batch(mf, vf, sf, _GH_Z, _GH_W, _CVZ, prec, hmean, elog)
    return restore(prec, shape), restore(hmean, shape), restore(elog, shape)
