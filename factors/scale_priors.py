r"""Priors on a standard deviation σ, as a factor on the precision τ = σ⁻² (a Gamma variable).

The prior p(σ) becomes, by the change of variables σ = τ^(−1/2) (|dσ/dτ| = ½ τ^(−3/2)),

.. math:: \log f(\tau) = \log p_\sigma(\tau^{-1/2}) + \log\tfrac12 - \tfrac32\log\tau .

The last term is conjugate to the Gamma; the first is not, and runs under NCVMP (Knowles & Minka 2011):
with q(τ) = Gamma(a, b), the message is the gradient of S = E_q[log f] with respect to the mean parameters
(E[τ], E[log τ]), i.e. the coefficients of the least-squares fit of log f by α τ + β log τ + const under q.
E_q and the message come from a quadrature kernel in log τ (:mod:`.kernels.scale_quadrature`), accurate to
1e-10 or better, so the evidence term is exact (not a bound).  Priors (``params["prior"]``):

* ``"half_t"``: half-Student-t with ``dof`` ν and ``scale`` s (half-Cauchy: ν = 1),
  log p(σ) = log 2 + log Γ((ν+1)/2) − log Γ(ν/2) − ½ log(νπ) − log s − (ν+1)/2 · log(1 + σ²/(ν s²));
* ``"half_normal"``: log p(σ) = ½ log(2/π) − log s − σ²/(2s²)  (E_q finite only for a > 1);
* ``"exponential"``: rate λ, log p(σ) = log λ − λσ  (E_q finite only for a > ½).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from distributions import Gamma

from .base import FactorType, Moments, same_stats
from .kernels.scale_quadrature import (
    EXPONENTIAL,
    HALF_NORMAL,
    HALF_T,
    a_trigamma_minus_one,
    expectations,
    log_minus_digamma,
)

SCALE_PRIOR = FactorType("ScalePrior", conjugate=False, out=Gamma)

_CODES = {"half_t": HALF_T, "half_normal": HALF_NORMAL, "exponential": EXPONENTIAL}
LOG_HALF = float(np.log(0.5))


def log_gamma_half_ratio(x) -> np.ndarray:
    r"""log Γ(x + ½) − log Γ(x), without the cancellation of two large log-gammas.

    For x < 20 by ``gammaln``; above, by the difference of the two Stirling series written so that nothing
    large cancels (absolute error ≲ 1e-15 for any x ≥ 20; the direct difference loses 4e-10 at x = 5e5):

    .. math:: \tfrac12\log x + \bigl(x\,\mathrm{log1p}(\tfrac1{2x}) - \tfrac12\bigr)
              + \sum_k c_k\bigl((x+\tfrac12)^{1-2k} - x^{1-2k}\bigr),\quad
              c = \tfrac1{12}, -\tfrac1{360}, \tfrac1{1260}, -\tfrac1{1680}.
    """
    x = np.asarray(x, float)
    big = x >= 20.0
    xb = np.where(big, x, 20.0)
    z = xb + 0.5
    series = 0.5 * np.log(xb) + (xb * np.log1p(0.5 / xb) - 0.5)
    for k, c in ((1, 1 / 12), (3, -1 / 360), (5, 1 / 1260), (7, -1 / 1680)):
        series = series + c * (z ** (-k) - xb ** (-k))
    xs = np.where(big, 1.0, x)
    return np.where(big, series, gammaln(xs + 0.5) - gammaln(xs))


def scale_prior_params(prior: str, scale=None, dof=None, rate=None) -> dict:
    """The factor's parameters for one prior: kernel code, kernel parameters (p0, p1), the log density's
    constant and a typical scale ``s0`` (for the first message)."""
    if prior == "half_t":
        s, nu = np.asarray(scale, float), np.asarray(dof, float)
        const = np.log(2.0) + log_gamma_half_ratio(0.5 * nu) - 0.5 * np.log(nu * np.pi) - np.log(s)
        return {"prior": prior, "p0": np.log(nu * s * s), "p1": 0.5 * (nu + 1.0), "const": const, "s0": s}
    if prior == "half_normal":
        s = np.asarray(scale, float)
        return {"prior": prior, "p0": 0.5 / (s * s), "p1": np.zeros_like(s), "const": 0.5 * np.log(2.0 / np.pi)
                - np.log(s), "s0": s}
    if prior == "exponential":
        lam = np.asarray(rate, float)
        return {"prior": prior, "p0": lam, "p1": np.zeros_like(lam), "const": np.log(lam), "s0": 1.0 / lam}
    raise ValueError(f"unknown scale prior {prior!r}; have {sorted(_CODES)}")


def gamma_from_stats(et: np.ndarray, elog: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Gamma(a, b) with E[τ] = ``et`` and E[log τ] = ``elog``: solves log a − ψ(a) = log E[τ] − E[log τ]
    by Newton's method from Minka's (2002) starting point; b = a / E[τ]."""
    et, elog = np.broadcast_arrays(np.asarray(et, float), np.asarray(elog, float))
    d = np.log(et) - elog
    # a very concentrated q (shape ≳ 1e14) loses log E[τ] − E[log τ] ≈ 1/(2a) to rounding: keep it at the
    # resolution of the two numbers (a point mass to working precision) instead of failing
    floor = 4e-16 * (1.0 + np.abs(elog) + np.abs(np.log(et)))
    d = np.where(np.isfinite(d) & (d <= floor) & (d > -64.0 * floor), floor, d)
    if np.any(~(d > 0)):
        raise ValueError(f"no Gamma has E[τ] = {et.ravel()[0]} and E[log τ] = {elog.ravel()[0]} "
                         "(Jensen requires log E[τ] > E[log τ])")
    a = (3.0 - d + np.sqrt((d - 3.0) ** 2 + 24.0 * d)) / (12.0 * d)
    for _ in range(50):
        step = a * (log_minus_digamma(a) - d) / a_trigamma_minus_one(a)
        new = np.where(a + step > 0, a + step, 0.5 * a)
        done = np.all(np.abs(new - a) <= 1e-14 * a)
        a = new
        if done:
            break
    return a, a / et


def scale_prior_terms(p: dict, a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E_q[log p_σ(τ^(−1/2))], α, β) under q(τ) = Gamma(a, b): the prior's expected log density (so
    E_q[log f] = that + log ½ − 3/2 E_q[log τ]) and the message (α, β) to (τ, log τ), the Jacobian's −3/2
    included in β."""
    code = _CODES[p["prior"]]
    eg, egu, cov = expectations(code, a, b, p["p0"], p["p1"])
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    with np.errstate(invalid="ignore"):
        beta = cov * a / a_trigamma_minus_one(a)
        alpha = (b / a) * (egu - beta)
    return eg + p["const"], alpha, beta - 1.5


def _terms(m: Moments, p: dict) -> tuple:
    stats = m["out"]
    hit = p["state"].get("terms")
    if hit is not None and same_stats(hit[0], stats):
        return hit[1]
    a, b = gamma_from_stats(*stats)
    out = scale_prior_terms(p, a, b)
    p["state"]["terms"] = (stats, out)
    return out


@SCALE_PRIOR.rule("out", "ncvmp")
def scale_prior_message(m: Moments, p: dict) -> tuple:
    _, alpha, beta = _terms(m, p)
    return (alpha, beta)


@SCALE_PRIOR.evidence(kind="exact")
def scale_prior_evidence(m: Moments, p: dict) -> np.ndarray:
    """E_q[log f] = E_q[log p_σ(τ^(−1/2))] + log ½ − 3/2 E_q[log τ]."""
    value, _, _ = _terms(m, p)
    return value + LOG_HALF - 1.5 * m["out"][1]


@SCALE_PRIOR.initial("out")
def scale_prior_first(m: Moments, p: dict) -> tuple:
    """The first message (before q(τ) exists): Gamma(2, 2s₀²), i.e. E[τ] = s₀⁻² at the prior's scale s₀."""
    s0 = np.asarray(p["s0"], float)
    shape = np.broadcast_shapes(s0.shape, np.shape(p["p0"]))
    return (np.broadcast_to(-2.0 * s0 * s0, shape), np.full(shape, 1.0))
