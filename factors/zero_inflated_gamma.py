"""Zero-inflated Poisson counts with a Gamma rate λ (``rate=``), exposure e, mean μ = e·λ, and a zero probability p:

* ``ZeroInflatedPoisson`` (constant p ∈ [0, 1]): for y > 0, S = log(1 − p) + y(E[log λ] + log e) − e·E[λ] − log y!,
  conjugate in λ (message (−e, y) to (λ, log λ)); for y = 0, S = E[g(λ)], g = log(p + (1 − p)e^(−eλ)), by the
  trapezoid rule in log λ (``kernels.gamma_log_trapezoid``, exact to rounding), its message to λ the regression
  of g on λ's statistics; where p = 0 the closed form −e·E[λ], message (−e, 0).  Exact evidence.
* ``ZeroInflatedPoissonBeta`` (Beta p): for a zero, Jensen's bound over the two ways to make it, maximised,
  S = logaddexp(E[log p], E[log(1 − p)] − e·E[λ]) at r = σ(E[log p] − E[log(1 − p)] + e·E[λ]); its gradients
  (r, 1 − r) to p's statistics (log p, log(1 − p)) and (−e(1 − r), 0) to λ's, conjugate in both.  Evidence:
  a lower bound.
"""

from __future__ import annotations

import numpy as np

from distributions import Beta, Gamma, Poisson

from .base import FactorType, Moments
from .kernels.gamma_log_trapezoid import gamma_log_nodes, gamma_regression_message
from .scale_priors import gamma_from_stats
from .zero_inflated import _log_p, zero_log_density

ZERO_INFLATED_POISSON = FactorType("ZeroInflatedPoisson", conjugate=False, out=Poisson, rate=Gamma)
ZERO_INFLATED_POISSON_BETA = FactorType("ZeroInflatedPoissonBeta", out=Poisson, rate=Gamma, zero_prob=Beta)

_STEP = 0.05  # the zeros' g has complex singularities about π/log((1 − p)/p) from the real axis in log λ


def _terms(m: Moments, p: dict):
    """(S, α, β) per row: E[log f] and its gradient in (E[λ], E[log λ])."""
    y, log_fact = m["out"]
    e_lam, e_loglam = m["rate"]
    le = np.asarray(p.get("log_exposure", 0.0), float)
    pz = np.asarray(p["zero_prob"], float)
    _, lq = _log_p(pz)
    e = np.exp(le)
    pos = y > 0
    with np.errstate(invalid="ignore"):  # log(1 − p) = −∞ only where p = 1, refused for positive counts
        s_pos = np.where(pos, lq, 0.0) + y * (e_loglam + le) - e * e_lam - log_fact
    a, b = gamma_from_stats(e_lam, e_loglam)
    shape = np.broadcast_shapes(np.shape(y), np.shape(a), np.shape(pz), np.shape(le))
    a, b, pzb, leb = (np.broadcast_to(z, shape) for z in (a, b, pz, le))
    t, w = gamma_log_nodes(a, _STEP)
    u = np.log(a / b)[..., None] + t  # log λ at the nodes
    g, d = zero_log_density(u, pzb[..., None], leb[..., None])
    alpha, beta = gamma_regression_message(g, d, t, w, a, b)
    plain = pzb == 0.0
    s_zero = np.where(plain, -e * e_lam, (g * w).sum(-1))
    alpha = np.where(plain, -e, alpha)
    beta = np.where(plain, 0.0, beta)
    return np.where(pos, s_pos, s_zero), np.where(pos, -e, alpha), np.where(pos, y, beta)


@ZERO_INFLATED_POISSON.rule("rate", "ncvmp")
def zero_inflated_to_rate(m: Moments, p: dict) -> tuple:
    _, alpha, beta = _terms(m, p)
    return (alpha, beta)


@ZERO_INFLATED_POISSON.evidence(kind="exact")
def zero_inflated_rate_evidence(m: Moments, p: dict) -> np.ndarray:
    return _terms(m, p)[0]


def _beta_terms(m: Moments, p: dict):
    """(S, to λ: (∂/∂E[λ], ∂/∂E[log λ]), to p: (∂/∂E[log p], ∂/∂E[log(1 − p)])) per row."""
    y, log_fact = m["out"]
    e_lam, e_loglam = m["rate"]
    e_lp, e_lq = m["zero_prob"]
    le = p.get("log_exposure", 0.0)
    e = np.exp(le)
    pos = y > 0
    s_zero = np.logaddexp(e_lp, e_lq - e * e_lam)
    r = np.exp(e_lp - s_zero)
    value = np.where(pos, e_lq + y * (e_loglam + le) - e * e_lam - log_fact, s_zero)
    return (value, (-e * np.where(pos, 1.0, 1.0 - r), np.where(pos, y, 0.0)),
            (np.where(pos, 0.0, r), np.where(pos, 1.0, 1.0 - r)))


@ZERO_INFLATED_POISSON_BETA.rule("rate", "vmp")
def zero_inflated_beta_to_rate(m: Moments, p: dict) -> tuple:
    return _beta_terms(m, p)[1]


@ZERO_INFLATED_POISSON_BETA.rule("zero_prob", "vmp")
def zero_inflated_beta_to_zero_prob(m: Moments, p: dict) -> tuple:
    return _beta_terms(m, p)[2]


@ZERO_INFLATED_POISSON_BETA.evidence(kind="bound")
def zero_inflated_beta_rate_evidence(m: Moments, p: dict) -> np.ndarray:
    return _beta_terms(m, p)[0]
