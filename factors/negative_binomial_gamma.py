r"""Negative binomial (NB2) counts with a Gaussian log-mean x and a random dispersion φ with a Gamma q(φ) = Gam(a, b)
(``NegativeBinomialLogGamma``).  Per row, with c(φ) = log e − log φ and K, K_m, K_v the logistic expectations
E[softplus], E[σ], ½E[σσ′] of x + c(φ) under q(x) = N(m, v) (exact kernels),

.. math:: S = E_φ[h(φ)] − \log y! + y(m + \log e),\qquad
          h(φ) = \log Γ(y + φ) − \log Γ(φ) − y\log φ − (y + φ) K(m + c(φ), v),

an expectation over φ taken in log space: with u = log φ = log(a/b) + t, q's density in t is
∝ exp(−a(eᵗ − 1 − t)), integrated by the trapezoid rule over where it exceeds e^(−60) of its peak, in steps of
``_STEP`` of q's width (the integrand is analytic, so the rule is exact to rounding, 1e-13 against
``scipy.integrate.quad`` for shapes a from 0.5 up; the evidence is labelled exact).

Messages: to x, the NCVMP gradient with ∂S/∂m = y − E_φ[(y + φ)K_m], ∂S/∂v = −E_φ[(y + φ)K_v]; to φ, in the
Gamma statistics (φ, log φ), the gradient of S in (E[φ], E[log φ]), written as the regression of h on the
statistics (Knowles & Minka 2011; as ``factors.scale_priors``): with R = log φ − E[log φ] − (b/a)(φ − a/b)
(uncorrelated with φ), h′ = dh/du = φ(ψ(y + φ) − ψ(φ) − K) − y + (y + φ)K_m and Var R = ψ′(a) − 1/a,

.. math:: β = \mathrm{Cov}(h, R)/\mathrm{Var}\,R,\qquad α = (b/a)(E[h′] − β),

the message (α, β) (Stein's identity gives Cov(h, φ) = E[h′]/b).
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

from distributions import Gamma, Gaussian, Poisson

from .base import FactorType, Moments, same_stats
from .kernels import logistic_expectations
from .kernels.scale_quadrature import a_trigamma_minus_one, log_minus_digamma
from .logistic import gradient_message
from .scale_priors import gamma_from_stats

NEGATIVE_BINOMIAL_LOG_GAMMA = FactorType("NegativeBinomialLogGamma", conjugate=False, out=Poisson,
                                         log_mean=Gaussian, dispersion=Gamma)

_STEP = 0.3
_MAX_NODES = 4000
_LEVEL = 60.0


def _edge(a: np.ndarray, sign: float) -> np.ndarray:
    """The t of sign ``sign`` where a(eᵗ − 1 − t) = ``_LEVEL`` (q's density e^(−60) of its peak), by Newton's
    method from the large-a (quadratic) and small-a (linear or logarithmic) asymptotes."""
    if sign > 0:
        t = np.maximum(np.sqrt(2.0 * _LEVEL / a), np.log1p(_LEVEL / a) + 1.0)
    else:
        t = -np.minimum(np.sqrt(2.0 * _LEVEL / a), 1.0 + _LEVEL / a)
    for _ in range(30):
        f = a * (np.expm1(t) - t) - _LEVEL
        t = t - f / (a * np.expm1(t))
    return t


def _nodes(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoid nodes t (…, n) in t = log φ − log(a/b) and normalised weights of q's density there."""
    lo, hi = _edge(a, -1.0)[..., None], _edge(a, 1.0)[..., None]
    a = a[..., None]
    # a step of 0.3 of q's width in t (1/√a, at most 1): h varies on scales of order one in t and q's density
    # (analytic, but growing off the real axis) must be resolved; the widest row sets the number of nodes
    n = int(np.clip(np.ceil(np.max((hi - lo) / (_STEP * np.minimum(1.0, 1.0 / np.sqrt(a))), initial=1.0)), 32,
                    _MAX_NODES))
    t = lo + (hi - lo) * np.linspace(0.0, 1.0, n)
    logw = -a * (np.expm1(t) - t)
    w = np.exp(logw - logw.max(-1, keepdims=True))
    w[..., 0] *= 0.5
    w[..., -1] *= 0.5
    return t, w / w.sum(-1, keepdims=True)


def _terms(m: Moments, p: dict):
    """(S, ∂S/∂m, ∂S/∂v, α, β) per row, cached while the edges' statistics are the same arrays."""
    state = p.get("state")
    key = (m["log_mean"], m["dispersion"], m["out"])
    if state is not None:
        hit = state.get("terms")
        if hit is not None and all(same_stats(x, y) for x, y in zip(hit[0], key, strict=True)):
            return hit[1]
    y, log_fact = m["out"]
    ex, ex2 = m["log_mean"]
    var = np.maximum(ex2 - ex * ex, 0.0)
    le = p.get("log_exposure", 0.0)
    a, b = gamma_from_stats(*m["dispersion"])
    shape = np.broadcast_shapes(np.shape(y), np.shape(ex), np.shape(a), np.shape(le))
    y, ex, var, a, b, le = (np.broadcast_to(np.asarray(z, float), shape) for z in (y, ex, var, a, b, le))
    t, w = _nodes(a)
    phi = (a / b)[..., None] * np.exp(t)
    yy = y[..., None]
    k, k_m, k_v = logistic_expectations(ex[..., None] + le[..., None] - np.log(phi), var[..., None])
    h = gammaln(yy + phi) - gammaln(phi) - yy * np.log(phi) - (yy + phi) * k
    h1 = phi * (digamma(yy + phi) - digamma(phi) - k) - yy + (yy + phi) * k_m
    e_h = (h * w).sum(-1)
    r = t + log_minus_digamma(a)[..., None] - np.expm1(t)  # R in t
    cov = ((h - e_h[..., None]) * r * w).sum(-1)
    beta = cov * a / a_trigamma_minus_one(a)
    alpha = (b / a) * ((h1 * w).sum(-1) - beta)
    value = e_h - log_fact + y * (ex + le)
    dm = y - ((yy + phi) * k_m * w).sum(-1)
    dv = -((yy + phi) * k_v * w).sum(-1)
    out = (value, dm, dv, alpha, beta)
    if state is not None:
        state["terms"] = (key, out)
    return out


@NEGATIVE_BINOMIAL_LOG_GAMMA.rule("log_mean", "ncvmp")
def negative_binomial_gamma_to_log_mean(m: Moments, p: dict) -> tuple:
    _, dm, dv, _, _ = _terms(m, p)
    return gradient_message(m["log_mean"][0], dm, dv)


@NEGATIVE_BINOMIAL_LOG_GAMMA.rule("dispersion", "ncvmp")
def negative_binomial_gamma_to_dispersion(m: Moments, p: dict) -> tuple:
    _, _, _, alpha, beta = _terms(m, p)
    return (alpha, beta)


@NEGATIVE_BINOMIAL_LOG_GAMMA.evidence(kind="exact")
def negative_binomial_gamma_evidence(m: Moments, p: dict) -> np.ndarray:
    return _terms(m, p)[0]


@NEGATIVE_BINOMIAL_LOG_GAMMA.initial("dispersion")
def negative_binomial_gamma_first(m: Moments, p: dict) -> tuple:
    """NCVMP's first message to φ: none (zero natural parameters).  At the starting q of the log-mean (its
    prior's, broad) the gradient in φ's statistics can be far from its value near the fit and make q(φ)
    improper; q(φ) keeps its prior until the log-mean has had its first update.  The fixed point is unchanged."""
    shape = np.shape(m["dispersion"][0])
    return (np.zeros(shape), np.zeros(shape))
