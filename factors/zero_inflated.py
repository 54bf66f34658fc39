"""Zero-inflated Poisson counts on a Gaussian log-rate x, with a constant zero probability p ∈ [0, 1] and an
exposure e > 0 (mean μ = e·eˣ):

    f(0) = p + (1 − p)e^(−μ),   f(y) = (1 − p) μʸ e^(−μ) / y!  for y > 0.

With q(x) = N(m, v):

* y > 0: S = log(1 − p) + y(m + log e) − e·exp(m + v/2) − log y!, closed-form, with ∂S/∂m = y − e·exp(m + v/2),
  ∂S/∂v = −½e·exp(m + v/2) (as ``PoissonLog``);
* y = 0: S = E[g(x)], g(x) = log(p + (1 − p) exp(−e·eˣ)), with ∂S/∂m = E[g′] and ∂S/∂v = ½E[g″] (Bonnet's and
  Price's identities), g′ = −μ(1 − p)e^(−μ)/f(0 | x), g″ = g′(1 − μ) − g′².  g falls from 0 to log p around
  x* = log(max(L, 1)) − log e, L = log((1 − p)/p), and has complex singularities about π/L from the real axis
  there, which Gauss–Hermite resolves only slowly once √v is not small against π/L.  So the expectations are
  taken by the trapezoid rule in t after x = x* + ½ sinh(t), over q's ±12 standard deviations (``_NODES``
  nodes): the substitution spreads the transition and compresses the tails, and the rule converges
  exponentially at any ratio of √v to the transition's width (exact to rounding for p ≥ 1e-10, v ≤ 100).
  Where p = 0 the closed form (the Poisson's).

The NCVMP message to x is the gradient of S in x's mean parameters (E[x], E[x²]); the evidence is exact.

``ZeroInflatedPoissonLogBeta`` takes a Beta zero probability p instead: the zeros' term is then Jensen's bound
over the two ways to make a zero, maximised (``_beta_terms``), conjugate in p; its evidence is a lower bound.
The observed counts carry the statistics (y, log y!); ``zero_prob`` and ``log_exposure`` are factor parameters.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from distributions import Beta, Gaussian, Poisson

from .base import FactorType, Moments
from .kernels import sinh_trapezoid_expectation
from .logistic import gradient_message

ZERO_INFLATED_POISSON_LOG = FactorType("ZeroInflatedPoissonLog", conjugate=False, out=Poisson, log_rate=Gaussian)

_NODES = 160
_WIDTH = 0.5  # the substitution's scale in x


def _log_p(p) -> tuple[np.ndarray, np.ndarray]:
    """(log p, log(1 − p)), −∞ at the ends without a warning."""
    p = np.asarray(p, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log(p), np.log1p(-p)


def zero_log_density(u: np.ndarray, p, le=0.0) -> tuple[np.ndarray, np.ndarray]:
    """g(u) = log f(0 | x = u) = log(p + (1 − p) exp(−e·eᵘ)) and g′(u)."""
    lp, lq = _log_p(p)
    with np.errstate(over="ignore"):
        r = np.exp(u + le)
    a = lq - r
    plain = np.isneginf(lp)  # p = 0: the Poisson's g = −μ, g′ = −μ
    with np.errstate(invalid="ignore"):
        g = np.where(plain, a, np.logaddexp(lp, a))
        return g, np.where(plain, -r, -r * np.exp(a - g))


def _zero_expectations(mean: np.ndarray, var: np.ndarray, p, le) -> tuple[np.ndarray, ...]:
    """(E[g], E[g′], ½E[g″]) for x ~ N(mean, var), by the sinh-substituted trapezoid rule (module docstring)."""
    p, le = np.asarray(p, float), np.asarray(le, float)
    with np.errstate(divide="ignore"):  # p = 0 (no transition: the caller's closed form) centres at L = 1
        big_l = np.where(p > 0.0, np.log1p(-p) - np.log(np.where(p > 0.0, p, 1.0)), 1.0)
    centre = np.log(np.clip(big_l, 1.0, None)) - le

    def g(x):
        val, d1 = zero_log_density(x, p[..., None], le[..., None])
        with np.errstate(over="ignore"):
            mu = np.exp(x + le[..., None])
        return val, d1, d1 * (1.0 - mu) - d1 * d1

    return sinh_trapezoid_expectation(g, mean, var, centre, _WIDTH, _NODES)


def _terms(m: Moments, p: dict):
    """(S, ∂S/∂m, ∂S/∂v) per row."""
    y, log_fact = m["out"]
    ex, ex2 = m["log_rate"]
    var = np.maximum(ex2 - ex * ex, 0.0)
    le = p.get("log_exposure", 0.0)
    pz = p["zero_prob"]
    _, lq = _log_p(pz)
    with np.errstate(over="ignore"):
        rate = np.exp(ex + 0.5 * var + le)
    pos = y > 0
    with np.errstate(invalid="ignore"):  # log(1 − p) = −∞ only where p = 1, refused for positive counts
        s_pos = np.where(pos, lq, 0.0) + y * (ex + le) - rate - log_fact
    # the quadrature only where it is needed: the zeros with p > 0 (elsewhere the Poisson's closed form)
    shape = np.broadcast_shapes(np.shape(y), np.shape(ex), np.shape(pz), np.shape(le))
    need = np.broadcast_to((y == 0) & (np.asarray(pz) > 0.0), shape)
    s_zero = np.broadcast_to(-rate, shape).copy()
    dm_zero = s_zero.copy()
    dv_zero = 0.5 * s_zero
    if need.any():
        pick = [np.broadcast_to(np.asarray(a, float), shape)[need] for a in (ex, var, pz, le)]
        s_zero[need], dm_zero[need], dv_zero[need] = _zero_expectations(*pick)
    return (np.where(pos, s_pos, s_zero), np.where(pos, y - rate, dm_zero),
            np.where(pos, -0.5 * rate, dv_zero))


@ZERO_INFLATED_POISSON_LOG.rule("log_rate", "ncvmp")
def zero_inflated_message(m: Moments, p: dict) -> tuple:
    _, dm, dv = _terms(m, p)
    return gradient_message(m["log_rate"][0], dm, dv)


@ZERO_INFLATED_POISSON_LOG.initial("log_rate")
def zero_inflated_first(m: Moments, p: dict) -> tuple:
    """NCVMP's first message: the Poisson's Newton step at x₀ = log((y + ½)/e) (precision y + ½), which does
    not change the fixed point and avoids the gradient message's overshoot from a broad prior."""
    y = m["out"][0]
    le = p.get("log_exposure", 0.0)
    shape = np.broadcast_shapes(y.shape, np.shape(le), m["log_rate"][0].shape)
    prec = np.broadcast_to(y + 0.5, shape)
    return (prec * (np.log(prec) - le) - 0.5, -0.5 * prec)


@ZERO_INFLATED_POISSON_LOG.evidence(kind="exact")
def zero_inflated_evidence(m: Moments, p: dict) -> np.ndarray:
    return _terms(m, p)[0]


def zero_inflated_logpdf(y: np.ndarray, x: np.ndarray, p, log_exposure=0.0) -> np.ndarray:
    """log f(y | x) of the zero-inflated Poisson (vectorised; for pointwise log-likelihoods)."""
    _, lq = _log_p(p)
    g, _ = zero_log_density(x, p, log_exposure)
    with np.errstate(over="ignore", invalid="ignore"):
        pos = lq + y * (x + log_exposure) - np.exp(x + log_exposure) - gammaln(y + 1.0)
    return np.where(y > 0, pos, g)


def _rows(a, u: np.ndarray):
    a = np.asarray(a)
    if a.ndim and a.size == u.shape[-1] and a.shape[-1] != u.shape[-1]:
        return a.reshape(-1)
    return a


@ZERO_INFLATED_POISSON_LOG.point("log_rate")
def zero_inflated_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """log f at x = u and its first two derivatives (for y = 0: g′ as above, g″ = g′(1 − μ) − g′²)."""
    y = m["out"][0]
    pz = _rows(p["zero_prob"], u)
    le = _rows(p.get("log_exposure", 0.0), u)
    with np.errstate(over="ignore"):
        mu = np.exp(u + le)
    g, d = zero_log_density(u, pz, le)
    pos = y > 0
    d1 = np.where(pos, y - mu, d)
    d2 = np.where(pos, -mu, d * (1.0 - mu) - d * d)
    return zero_inflated_logpdf(y, u, pz, le), d1, d2


# ------------------------------------------------------------------------------------ a Beta zero probability
ZERO_INFLATED_POISSON_LOG_BETA = FactorType("ZeroInflatedPoissonLogBeta", conjugate=False, out=Poisson,
                                            log_rate=Gaussian, zero_prob=Beta)


def _beta_terms(m: Moments, p: dict):
    """The bound's parts per row: (S, ∂S/∂m, ∂S/∂v, ∂S/∂E[log p], ∂S/∂E[log(1 − p)]).

    For a zero, Jensen's inequality with weights (r, 1 − r) on the two ways to make it,
    log(p + (1 − p)e^(−μ)) ≥ r log(p/r) + (1 − r)(log(1 − p) − μ − log(1 − r)), taken under q and maximised in r,
    gives S = logaddexp(A, B), A = E[log p], B = E[log(1 − p)] − e·exp(m + v/2), at r = σ(A − B); its gradients are
    the partial ones at that r (the envelope theorem).  A positive count has the exact E[log(1 − p)] + Poisson terms.
    """
    y, log_fact = m["out"]
    ex, ex2 = m["log_rate"]
    var = np.maximum(ex2 - ex * ex, 0.0)
    le = p.get("log_exposure", 0.0)
    e_lp, e_lq = m["zero_prob"]
    with np.errstate(over="ignore"):
        rate = np.exp(ex + 0.5 * var + le)
    pos = y > 0
    b = e_lq - rate
    s_zero = np.logaddexp(e_lp, b)
    r = np.exp(e_lp - s_zero)  # the weight of the structural zero
    value = np.where(pos, e_lq + y * (ex + le) - rate - log_fact, s_zero)
    w = np.where(pos, 1.0, 1.0 - r)  # the weight of the Poisson's −μ
    return (value, np.where(pos, y, 0.0) - w * rate, -0.5 * w * rate, np.where(pos, 0.0, r),
            np.where(pos, 1.0, 1.0 - r))


@ZERO_INFLATED_POISSON_LOG_BETA.rule("log_rate", "ncvmp")
def zero_inflated_beta_message(m: Moments, p: dict) -> tuple:
    _, dm, dv, _, _ = _beta_terms(m, p)
    return gradient_message(m["log_rate"][0], dm, dv)


@ZERO_INFLATED_POISSON_LOG_BETA.rule("zero_prob", "vmp")
def zero_inflated_to_zero_prob(m: Moments, p: dict) -> tuple:
    """To p in the Beta statistics (log p, log(1 − p)): (r, 1 − r) for a zero, (0, 1) for a positive count."""
    _, _, _, d_lp, d_lq = _beta_terms(m, p)
    return (d_lp, d_lq)


ZERO_INFLATED_POISSON_LOG_BETA.initial("log_rate")(zero_inflated_first)


@ZERO_INFLATED_POISSON_LOG_BETA.evidence(kind="bound")
def zero_inflated_beta_evidence(m: Moments, p: dict) -> np.ndarray:
    return _beta_terms(m, p)[0]


@ZERO_INFLATED_POISSON_LOG_BETA.point("log_rate")
def zero_inflated_beta_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """The bound at x = u, with r at its optimum for that u."""
    y = m["out"][0]
    e_lp, e_lq = m["zero_prob"]
    le = _rows(p.get("log_exposure", 0.0), u)
    with np.errstate(over="ignore"):
        mu = np.exp(u + le)
    s_zero = np.logaddexp(e_lp, e_lq - mu)
    r = np.exp(e_lp - s_zero)
    pos = y > 0
    w = np.where(pos, 1.0, 1.0 - r)
    val = np.where(pos, e_lq + y * (u + le) - mu - gammaln(y + 1.0), s_zero)
    d1 = np.where(pos, y, 0.0) - w * mu
    d2 = -w * mu + np.where(pos, 0.0, r * (1.0 - r) * mu * mu)  # r′ = r(1 − r)μ
    return val, d1, d2
