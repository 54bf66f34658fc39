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
from .kernels.gamma_log_trapezoid import gamma_log_nodes, gamma_regression_message
from .logistic import gradient_message
from .scale_priors import gamma_from_stats

NEGATIVE_BINOMIAL_LOG_GAMMA = FactorType("NegativeBinomialLogGamma", conjugate=False, out=Poisson,
                                         log_mean=Gaussian, dispersion=Gamma)

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
    t, w = gamma_log_nodes(a)
    phi = (a / b)[..., None] * np.exp(t)
    yy = y[..., None]
    k, k_m, k_v = logistic_expectations(ex[..., None] + le[..., None] - np.log(phi), var[..., None])
    h = gammaln(yy + phi) - gammaln(phi) - yy * np.log(phi) - (yy + phi) * k
    h1 = phi * (digamma(yy + phi) - digamma(phi) - k) - yy + (yy + phi) * k_m
    e_h = (h * w).sum(-1)
    alpha, beta = gamma_regression_message(h, h1, t, w, a, b)
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
