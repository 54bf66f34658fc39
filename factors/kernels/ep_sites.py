r"""Numba kernels of expectation propagation (EP) for sites on a Gaussian linear form d = Σ_t s_t + c.

A site f(d) with cavity d ~ N(μ, v) has the tilted distribution p̂(d) ∝ f(d) N(d; μ, v), with normaliser
Z = ∫ f(d) N(d; μ, v) dd, mean and variance (``tilted``).  The kinds of site (``SITE_*`` codes):

* ``SITE_GAUSS``: f(d) = N(d; 0, 1/a) (a Gaussian factor with known precision a on d = out − mean):
  Z = N(0; μ, v + 1/a), mean μ/(1 + av), variance v/(1 + av).
* ``SITE_STEP``: f(d) = Φ(a·d/√c) for c > 0 (a probit with noise variance c) or 1[a·d > 0] for c = 0
  (``fg.is_positive``), a = ±1.  With s² = v + c and z = aμ/s,
  Z = Φ(z),  mean = μ + a·v·r/s,  variance = v − v²·r(z + r)/s²,  r = φ(z)/Φ(z),
  with log Φ and r from the scaled complementary error function for z < 0 (no underflow at large |z|:
  r = √(2/π)/erfcx(−z/√2), log Φ(z) = log(½ erfcx(−z/√2)) − z²/2).
* ``SITE_LOGISTIC``: f(d) = σ(d)^a σ(−d)^(1−a), a ∈ {0, 1}: the trapezoid rule with 200 nodes in t, d = sinh(t),
  over μ ± 12√v, on the log scale.  The substitution spaces the nodes ~|d|·Δt apart: finely where the sigmoid
  bends (|d| ≲ 1), ∝ √v over a wide cavity's bulk, ∝ √v/200 over a narrow cavity far out; the integrand is
  analytic in t, so the error falls exponentially with the node count, at any ratio of √v to the sigmoid's
  width (to ~1e-10 from v = 1e-6 to 1e6).  Gauss–Hermite nodes, spaced ∝ √v, would miss the sigmoid's bend
  once the cavity is wide.

A site's message on d is the projection of p̂ divided by the cavity: precision λ = 1/v̂ − 1/v, linear
coefficient h = m̂/v̂ − μ/v.  Its message to a term s_t of d, the other terms r = d − s_t integrated over their
cavities N(μ_r, v_r), is the Gaussian convolution g_t(s) = ∫ g(s + r) N(r; μ_r, v_r) dr:
λ_t = λ/(1 + λ v_r),  h_t = (h − λ μ_r)/(1 + λ v_r)  (λ_t = h_t = 0 when v_r = ∞).

``sequential_site`` visits the rows (factor instances) in order and updates q after each (the touched elements
of mean-field scalar Gaussians, and a rank-one update of a full-covariance q(w) for a term x_nᵀw).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .special import _erfcx, _log1pexp

SITE_GAUSS, SITE_STEP, SITE_LOGISTIC = 0, 1, 2
_LOG_2PI = math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_N_SINH = 200  # nodes of the logistic site's rule


@njit(cache=True)
def log_ndtr_ratio(z: float) -> tuple[float, float]:
    """(log Φ(z), φ(z)/Φ(z)), both without underflow at large |z|."""
    if z < 0.0:
        e = _erfcx(-z / _SQRT2)
        return math.log(0.5 * e) - 0.5 * z * z, _SQRT_2_OVER_PI / e
    tail = 0.5 * math.erfc(z / _SQRT2)  # 1 − Φ(z)
    return math.log1p(-tail), math.exp(-0.5 * z * z - 0.5 * _LOG_2PI) / (1.0 - tail)


@njit(cache=True)
def tilted(code: int, mu: float, v: float, a: float, c: float) -> tuple[float, float, float]:
    """(log Z, mean, variance) of the tilted distribution f(d)N(d; μ, v) of a site (module docstring)."""
    if code == SITE_GAUSS:
        s2 = v + 1.0 / a
        return -0.5 * (_LOG_2PI + math.log(s2)) - 0.5 * mu * mu / s2, mu / (1.0 + a * v), v / (1.0 + a * v)
    if code == SITE_STEP:
        s2 = v + c
        s = math.sqrt(s2)
        z = a * mu / s
        lz, r = log_ndtr_ratio(z)
        return lz, mu + a * v * r / s, v - v * v * r * (z + r) / s2
    # logistic: the trapezoid rule in t, d = sinh(t), over μ ± 12√v, on the log scale
    sd = math.sqrt(v)
    t0 = math.asinh(mu - 12.0 * sd)
    dt = (math.asinh(mu + 12.0 * sd) - t0) / (_N_SINH - 1)
    sign = 1.0 if a > 0.5 else -1.0
    top = -math.inf
    for k in range(_N_SINH):
        t = t0 + k * dt
        x = math.sinh(t)
        lf = -0.5 * (x - mu) * (x - mu) / v - _log1pexp(-sign * x) + math.log(math.cosh(t))
        if lf > top:
            top = lf
    z0 = 0.0
    m1 = 0.0
    for k in range(_N_SINH):
        t = t0 + k * dt
        x = math.sinh(t)
        e = math.exp(-0.5 * (x - mu) * (x - mu) / v - _log1pexp(-sign * x) + math.log(math.cosh(t)) - top)
        if k == 0 or k == _N_SINH - 1:
            e *= 0.5
        z0 += e
        m1 += e * x
    mean = m1 / z0
    m2 = 0.0
    for k in range(_N_SINH):
        t = t0 + k * dt
        x = math.sinh(t)
        e = math.exp(-0.5 * (x - mu) * (x - mu) / v - _log1pexp(-sign * x) + math.log(math.cosh(t)) - top)
        if k == 0 or k == _N_SINH - 1:
            e *= 0.5
        m2 += e * (x - mean) * (x - mean)
    return top + math.log(z0 * dt) - 0.5 * (_LOG_2PI + math.log(v)), mean, m2 / z0


@njit(cache=True)
def tilted_batch(code: int, mu: np.ndarray, v: np.ndarray, a: np.ndarray, c: float):
    """``tilted`` over 1-d arrays of cavity means, variances and site constants a."""
    n = mu.shape[0]
    lz, mean, var = np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        lz[i], mean[i], var[i] = tilted(code, mu[i], v[i], a[i], c)
    return lz, mean, var


@njit(cache=True)
def sequential_site(code, idx, coef, off, a, c, h_site, lam_site, q_lin, q_prec, X, hv, lv, mu, sigma, damping):
    """One sequential EP pass over the instances of a site on d_n = Σ_t coef[n, t]·x[idx[n, t]] + x_nᵀw + off_n.

    Scalar terms: mean-field scalar Gaussians with natural parameters (q_lin, q_prec) (linear coefficient,
    precision); ``h_site[n, t]``, ``lam_site[n, t]`` the message of row n to its term t, in s = coef·x.  The
    weight-vector term (when X has rows; else X is (n, 0)): q(w) = N(mu, sigma) and the row's message (hv[n],
    lv[n]) in s = x_nᵀw, q updated by a rank-one update.  Every array is updated in place.  A Gaussian site
    (``SITE_GAUSS``) is its own message on d (h = 0, λ = a); any other site's is found by moment matching.
    Returns (largest change of a message parameter, rows skipped because a cavity or an update was improper).
    """
    n, nt = idx.shape
    d = X.shape[1]
    vec = d > 0
    skipped = 0
    change = 0.0
    mc = np.empty(nt + 1)
    vc = np.empty(nt + 1)
    newh = np.empty(nt + 1)
    newl = np.empty(nt + 1)
    sx = np.empty(d)
    for i in range(n):
        bad = False
        md = off[i]
        vd = 0.0
        nflat = 0
        for t in range(nt):
            k = coef[i, t]
            g = idx[i, t]
            if k == 0.0:  # an absent term
                vc[t], mc[t] = 0.0, 0.0
                continue
            ps = q_prec[g] / (k * k) - lam_site[i, t]  # cavity of s = k·x
            if ps < 0.0:
                bad = True
                break
            if ps == 0.0:
                vc[t], mc[t] = math.inf, 0.0
                nflat += 1
            else:
                vc[t] = 1.0 / ps
                mc[t] = (q_lin[g] / k - h_site[i, t]) * vc[t]
                vd += vc[t]
            md += mc[t]
        vq = 1.0
        mq = 0.0
        if vec and not bad:
            x = X[i]
            for j in range(d):
                acc = 0.0
                for k2 in range(d):
                    acc += sigma[j, k2] * x[k2]
                sx[j] = acc
            vq = 0.0
            mq = 0.0
            for j in range(d):
                vq += x[j] * sx[j]
                mq += x[j] * mu[j]
            pc = 1.0 / vq - lv[i]
            if not (pc > 0.0):
                bad = True
            else:
                vc[nt] = 1.0 / pc
                mc[nt] = (mq / vq - hv[i]) * vc[nt]
                vd += vc[nt]
                md += mc[nt]
        if bad:
            skipped += 1
            continue
        if code == SITE_GAUSS:
            hd, ld = 0.0, a[i]
        else:
            if nflat > 0:
                continue  # a flat cavity: the site waits for its neighbours' other messages
            _, mt, vt = tilted(code, md, vd, a[i], c)
            if not (vt > 0.0) or not math.isfinite(mt):
                skipped += 1
                continue
            ld = 1.0 / vt - 1.0 / vd
            hd = mt / vt - md / vd
        nterms = nt + 1 if vec else nt
        for t in range(nterms):
            if t < nt and coef[i, t] == 0.0:
                newh[t], newl[t] = 0.0, 0.0
                continue
            old_h = h_site[i, t] if t < nt else hv[i]
            old_l = lam_site[i, t] if t < nt else lv[i]
            flat_t = 1 if math.isinf(vc[t]) else 0
            if nflat - flat_t > 0:
                newh[t], newl[t] = 0.0, 0.0  # the other terms are flat: so is their convolution
            else:
                vr = vd - (0.0 if flat_t else vc[t])
                if nterms == 1:
                    vr = 0.0
                mr = md - mc[t]
                den = 1.0 + ld * vr
                newl[t] = ld / den
                newh[t] = (hd - ld * mr) / den
            newl[t] = (1.0 - damping) * newl[t] + damping * old_l
            newh[t] = (1.0 - damping) * newh[t] + damping * old_h
            if t < nt:
                k = coef[i, t]
                if not (q_prec[idx[i, t]] + k * k * (newl[t] - old_l) > 0.0):
                    bad = True
            elif not (1.0 + (newl[t] - old_l) * vq > 0.0):
                bad = True
        if bad:
            skipped += 1
            continue
        for t in range(nterms):
            old_h = h_site[i, t] if t < nt else hv[i]
            old_l = lam_site[i, t] if t < nt else lv[i]
            dl = newl[t] - old_l
            dh = newh[t] - old_h
            change = max(change, abs(dl) / (1.0 + abs(newl[t])), abs(dh) / (1.0 + abs(newh[t])))
            if t < nt:
                k = coef[i, t]
                g = idx[i, t]
                q_prec[g] += k * k * dl
                q_lin[g] += k * dh
                lam_site[i, t] = newl[t]
                h_site[i, t] = newh[t]
            else:
                hv[i], lv[i] = newh[t], newl[t]
                den = 1.0 + dl * vq
                kk = dl / den
                step = (dh - dl * mq) / den
                for j in range(d):
                    mu[j] += sx[j] * step
                for j in range(d):
                    for k2 in range(d):
                        sigma[j, k2] -= kk * sx[j] * sx[k2]
    return change, skipped
